"""``--runtime onnx-int8``: ONNX Runtime's dynamic int8 quantisation of the export, with cells, leaderboard rows and
embedding-cache entries of its own, and ``harness compare --runtime-b`` showing its quality drop and speed-up."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

import harness.testing as ht  # noqa: E402
from harness.nn.encoder import SentenceEncoder  # noqa: E402

TEXTS = ["a man is playing a guitar.", "a woman slices an onion.", "the sky is blue today."]


def test_int8_export_is_quantised_cached_and_close_to_float(tiny_bert, tmp_path):
    encoder = SentenceEncoder.from_backbone(tiny_bert).eval()
    expected = encoder.encode(TEXTS)
    encoder.use_runtime("onnx-int8", tmp_path)
    quantised = encoder.encode(TEXTS)
    assert not np.array_equal(quantised, expected)  # really quantised, not the float graph
    np.testing.assert_allclose(quantised, expected, atol=0.05)
    names = sorted(path.name for path in (tmp_path / "onnx").glob("*.onnx"))
    assert len(names) == 2 and names[0].endswith("-int8.onnx")  # beside the float export it is made from
    float_export, int8_export = (tmp_path / "onnx" / names[1]), (tmp_path / "onnx" / names[0])
    assert int8_export.stat().st_size < float_export.stat().st_size
    encoder.use_runtime("onnx-int8", tmp_path)  # read from the cache: the same session, the same vectors
    assert encoder.encode(TEXTS).tobytes() == quantised.tobytes()
    encoder.use_runtime("onnx", tmp_path)  # the float runtime never gets the quantised export
    np.testing.assert_allclose(encoder.encode(TEXTS), expected, atol=1e-4)


def _run(tiny_bert, results, *extra):
    return ht.run_harness(
        "run", "--models", "be", "--backbone", tiny_bert, "--tasks", "stsb", "--profile", "smoke",
        "--results", results, "--no-progress", *extra,
    )  # fmt: skip


def test_int8_cells_rows_and_compare(tiny_bert, tmp_path):
    """Its own cell (``stsb@onnx-int8.json``) beside torch's, a leaderboard row that says so, and a comparison with
    the torch cells that shows the quality drop and the speed-up."""
    results = tmp_path / "store"
    assert _run(tiny_bert, results).exit_code == 0
    int8 = _run(tiny_bert, results, "--runtime", "onnx-int8")
    assert int8.exit_code == 0 and "1 cells computed, 0 from the store" in int8.stdout, int8.stderr
    names = sorted(path.name for path in results.glob("*/seed-*/*.json"))
    assert names == ["stsb.json", "stsb@onnx-int8.json"]
    torch_record, int8_record = (json.loads(path.read_text()) for path in sorted(results.glob("*/seed-*/*.json")))
    assert int8_record["runtime"] == "onnx-int8" and "runtime" not in torch_record
    assert int8_record["environment"]["packages"]["onnxruntime"]
    assert int8_record["scores"] != torch_record["scores"]
    assert abs(int8_record["main_score"] - torch_record["main_score"]) < 5
    # its embedding-cache entries are its own: the namespace names the runtime
    assert int8_record["timings"]["embedding_cache"]["hits"] == 0

    board = ht.run_harness("leaderboard", "--results", results, "--output", tmp_path / "boards", "--include-samples")
    assert board.exit_code == 0, board.stderr
    text = "\n".join(path.read_text() for path in (tmp_path / "boards").glob("*.md"))
    assert "[runtime: onnx-int8]" in text
    # each runtime's row has its own interval and marks (rows of one model key are told apart by their runtime)
    rows = {
        cells[2]: cells
        for cells in ([cell.strip() for cell in line.split("|")] for line in text.splitlines())
        if len(cells) > 6 and cells[2] in ("be", "be [runtime: onnx-int8]")
    }
    # the task column by its header (backbone and profile are columns only where rows differ in them)
    header = next([cell.strip() for cell in line.split("|")] for line in text.splitlines() if line.startswith("| rank"))
    stsb = header.index("stsb")
    assert rows["be"][stsb].startswith(f"{torch_record['main_score']:.2f} [")
    assert rows["be [runtime: onnx-int8]"][stsb].startswith(f"{int8_record['main_score']:.2f} [")
    assert rows["be"][stsb].split("[")[1] != rows["be [runtime: onnx-int8]"][stsb].split("[")[1]

    compared = ht.run_harness(
        "compare", "be", "be", "--runtime-b", "onnx-int8", "--tasks", "stsb", "--profile", "smoke",
        "--backbone", tiny_bert, "--results", results, "--resamples", "100",
    )  # fmt: skip
    assert compared.exit_code == 0, compared.stderr
    assert "B = be [runtime: onnx-int8]" in compared.stdout and "speed-up B/A (eval time)" in compared.stdout
    row = next(line for line in compared.stdout.splitlines() if line.startswith("| stsb"))
    assert row.rstrip(" |").endswith("x")
    same = ht.run_harness(
        "compare", "be", "be", "--tasks", "stsb", "--profile", "smoke", "--backbone", tiny_bert, "--results", results
    )
    assert same.exit_code != 0 and "--runtime-a" in same.stderr
