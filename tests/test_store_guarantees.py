"""What the store guarantees (docs/guide/store.md), one group of tests per guarantee:
broken results are failures, stale data and damaged files are recomputed, bad input is refused before computing;
and (the sections at the end) one per later guarantee: backbone contents, checkpoint identity, cache
entries, numeric ranges, one-line machine errors, smaller ones, and what the record checksum is for.

Most tests run the runner on a toy task (pairs in a CSV under a data dir) with toy embedders, which takes
milliseconds; the tests that need real training use the tiny BERT fixture and the smoke profile."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import harness
from conftest import REPO
from harness.checkpoints import build_checkpoint, checkpoint_problem
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.record import seal_record
from harness.registry import build_registry
from harness.run.config import RunConfig
from harness.run.driver import Run
from harness.store import Store, read_record

SMOKE = ("--profile", "smoke", "--no-progress")
TOY_ROWS = [
    ("a man plays a guitar", "a man is playing guitar", 4.8),
    ("a woman slices an onion", "a person cuts an onion", 4.0),
    ("the cat sits on the mat", "a dog runs in a field", 0.4),
    ("stocks fell sharply today", "the market dropped today", 3.6),
    ("a child rides a horse", "a kid is on a horse", 4.2),
    ("the weather is sunny", "scientists found a frog", 0.0),
]


# -- toy plugins -------------------------------------------------------------------------------------------------------
class ToyPairs(harness.Task):
    """A third-party style task: ``<data dir>/toy/pairs.csv`` with ``first<TAB>second<TAB>score`` lines."""

    metadata = harness.TaskMetadata(
        name="toy-pairs",
        family="toy",
        description="toy pair similarity",
        main_score="spearman",
        metric="Spearman x100",
        reference="tests",
        dataset="toy",
        dataset_source="tests",
        license="none",
    )

    def path(self) -> Path:
        return harness.resolve_dataset_dir("toy", None, data_dir=self.data_dir) / "pairs.csv"

    def load(self):
        first, second, gold = [], [], []
        for number, line in enumerate(harness.read_text_lines(self.path()), start=1):
            fields = line.split("\t")
            if len(fields) != 3:
                raise harness.data_error(self.path(), number, "expected first<TAB>second<TAB>score.")
            first.append(fields[0])
            second.append(fields[1])
            gold.append(float(fields[2]))
        return first, second, gold

    def check_data(self) -> str:
        self.load()
        return harness.files_checksum([self.path()])

    def evaluate(self, model, ctx):
        first, second, gold = self.load()
        predicted = harness.as_pair_scorer(model).score(first, second)
        return harness.EvalResult(
            {"spearman": 100 * harness.spearman(predicted, gold)}, harness.files_checksum([self.path()])
        )


class NaNTask(ToyPairs):
    metadata = harness.TaskMetadata(
        name="toy-nan",
        family="toy",
        description="returns a NaN score",
        main_score="spearman",
        metric="Spearman x100",
        reference="tests",
        dataset="toy",
        dataset_source="tests",
        license="none",
    )

    def evaluate(self, model, ctx):
        return harness.EvalResult({"spearman": float("nan")}, harness.files_checksum([self.path()]))


class IncompatibleAtEvaluationTask(ToyPairs):
    metadata = harness.TaskMetadata(
        name="toy-incompatible",
        family="toy",
        description="finds out at evaluation that the model cannot run it",
        main_score="spearman",
        metric="Spearman x100",
        reference="tests",
        dataset="toy",
        dataset_source="tests",
        license="none",
    )

    def evaluate(self, model, ctx):
        raise harness.IncompatibleError("toy-incompatible needs a first-stage retriever this model lacks.")


class WordHashEmbedder:
    """A deterministic bag-of-hashed-words embedder."""

    def __init__(self, ctx=None):
        self.ctx = ctx

    def encode(self, texts):
        vectors = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        return vectors


class ConstantEmbedder(WordHashEmbedder):
    def encode(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32)


SEEN_CONTEXTS: list = []


class ToyPlugin:
    @harness.hookimpl
    def register_models(self, register):
        def remember(ctx):
            SEEN_CONTEXTS.append(ctx)
            return WordHashEmbedder(ctx)

        register(harness.ModelPlugin("toy-embedder", "hashed words", remember, ("embedder",)))
        register(harness.ModelPlugin("toy-constant", "one vector for every text", ConstantEmbedder, ("embedder",)))

    @harness.hookimpl
    def register_tasks(self, register):
        register(ToyPairs)
        register(NaNTask)
        register(IncompatibleAtEvaluationTask)


# The same plugin as a module, for the CLI (HARNESS_EXTRA_PLUGINS=test_store_guarantees).
@harness.hookimpl
def register_models(register):
    ToyPlugin().register_models(register)


@harness.hookimpl
def register_tasks(register):
    ToyPlugin().register_tasks(register)


def write_toy_data(data_dir: Path, rows=TOY_ROWS) -> Path:
    path = data_dir / "toy" / "pairs.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows))
    return path


def toy_run(tmp_path: Path, models=("toy-embedder",), tasks=("toy-pairs",), **config):
    registry = build_registry(extra_plugins=[ToyPlugin()])
    config.setdefault("results_dir", tmp_path / "results")
    config.setdefault("data_dir", tmp_path / "data")
    config.setdefault("profile", "smoke")
    run_config = RunConfig(
        models=[ModelEntry(m) for m in models], tasks=list(tasks), progress=False, device="cpu", **config
    )
    messages: list[str] = []
    runner = Run(registry, run_config, log=messages.append)
    return runner.run(LocalExecutor()), messages


def only_record(results: Path) -> dict:
    (path,) = sorted(results.glob("*/seed-*/*.json"))
    return json.loads(path.read_text())


# -- 1. broken results are failures, never scores ----------------------------------------------------------------------
def test_correlations_refuse_input_they_are_undefined_for():
    from harness.metrics import ConstantPredictionError, ScoreError, pearson, spearman

    assert spearman([1, 2, 3], [1, 2, 4]) == pytest.approx(1.0)
    with pytest.raises(ConstantPredictionError, match="same score"):
        spearman([0.5, 0.5, 0.5], [1, 2, 3])
    with pytest.raises(ScoreError, match="predicted scores are NaN or infinite"):
        pearson([0.1, float("nan"), 0.3], [1, 2, 3])
    with pytest.raises(ScoreError, match="gold scores are NaN"):
        spearman([0.1, 0.2, 0.3], [1, float("nan"), 3])
    with pytest.raises(ScoreError, match="at least 2 scored pairs, got 0"):
        spearman([], [])


def test_constant_predictions_are_a_failed_cell_with_the_reason(tmp_path):
    write_toy_data(tmp_path / "data")
    outcomes, _ = toy_run(tmp_path, models=("toy-constant",))
    assert [o.status for o in outcomes] == ["failed"]
    record = only_record(tmp_path / "results")
    assert record["status"] == "failed" and "same score" in record["message"] and "main_score" not in record


def test_nan_score_from_a_task_is_a_failed_cell(tmp_path):
    write_toy_data(tmp_path / "data")
    outcomes, _ = toy_run(tmp_path, tasks=("toy-nan",))
    assert outcomes[0].status == "failed" and "non-finite scores (spearman=nan)" in outcomes[0].message
    assert only_record(tmp_path / "results")["status"] == "failed"


def test_a_task_that_finds_the_model_incompatible_fails_its_cell_not_the_run(tmp_path):
    write_toy_data(tmp_path / "data")
    outcomes, _ = toy_run(tmp_path, tasks=("toy-incompatible", "toy-pairs"))
    assert [o.status for o in outcomes] == ["failed", "ok"]
    assert "needs a first-stage retriever" in outcomes[0].message


def test_nan_gold_score_in_a_users_file_is_a_failed_cell(tmp_path):
    rows = list(TOY_ROWS)
    rows[2] = (rows[2][0], rows[2][1], "nan")
    write_toy_data(tmp_path / "data", rows)
    outcomes, _ = toy_run(tmp_path)
    assert outcomes[0].status == "failed" and "1 of 6 gold scores are NaN" in outcomes[0].message


def test_diverging_training_stops_and_is_stored_as_failed(run_cli, tmp_path, tiny_bert):
    from harness.leaderboard import collect_tables

    results = tmp_path / "results"
    code, out, err = run_cli(
        "run",
        "--models",
        "be:lr=1e6",
        "--tasks",
        "stsb",
        "--train-on",
        "stsb",
        *SMOKE,
        "--backbone",
        tiny_bert,
        "--results",
        results,
    )
    assert code == 1, err
    assert "Traceback" not in err and "training loss became nan at step" in err and "Lower the learning rate" in err
    assert "0 cells computed" in out and "1 failed" in out
    record = only_record(results)
    assert record["status"] == "failed" and "training loss became nan" in record["message"]
    assert not (results / "checkpoints").exists() or not list((results / "checkpoints").rglob("*.safetensors"))
    (table,) = collect_tables(Store(results), include_samples=True)  # a smoke record: computed on a sample
    (row,) = table.rows
    assert table.cell_text(row, "stsb") == "failed" and table.ranked()[0][0] is None  # never ranked


# -- 2. a changed dataset recomputes the cell --------------------------------------------------------------------------
def test_changed_dataset_recomputes_the_cell_and_store_only_refuses(tmp_path):
    data_file = write_toy_data(tmp_path / "data")
    first, _ = toy_run(tmp_path)
    again, _ = toy_run(tmp_path)
    assert [o.status for o in first] == ["ok"] and [o.status for o in again] == ["cached"]
    data_file.write_text(data_file.read_text().replace("\t4.8\n", "\t0.1\n"))  # a third-party CSV edited
    with pytest.raises(harness.HarnessError, match=r"--store-only: 1 of 1 cells .*the dataset changed"):
        toy_run(tmp_path, store_only=True)
    recomputed, messages = toy_run(tmp_path)
    assert [o.status for o in recomputed] == ["ok"] and recomputed[0].main_score != first[0].main_score
    assert any("recomputing the stored result: the dataset changed" in m for m in messages)
    assert only_record(tmp_path / "results")["dataset_checksum"] == harness.files_checksum([data_file])


def test_another_data_dir_with_other_stsb_data_is_not_answered_from_the_store(run_cli, tmp_path, tiny_bert):
    data_dir = tmp_path / "data"
    shutil.copytree(REPO / "tasks" / "data" / "stsb", data_dir / "stsb")
    common = (
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb",
        *SMOKE,
        "--backbone",
        tiny_bert,
        "--results",
        tmp_path / "results",
    )
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed" in out, err
    test_file = data_dir / "stsb" / "senteval_tokenized" / "sts-test.csv"
    lines = test_file.read_text().splitlines()
    test_file.write_text("\n".join(lines[: len(lines) // 2]) + "\n")  # a different STS-B test set
    code, out, err = run_cli(*common, "--data-dir", data_dir)
    assert code == 0 and "1 cells computed, 0 from the store" in out and "the dataset changed" in out, err


# -- 3. checkpoints are verified ----------------------------------------------------------------------------------------
def test_checkpoint_files_are_checksummed_and_verified(tmp_path):
    directory = tmp_path / "ckpt" / "seed-1"

    def save(folder: Path):
        (folder / "model.safetensors").write_bytes(bytes(range(256)) * 40)
        (folder / "sub").mkdir()
        (folder / "sub" / "config.json").write_text("{}")

    build_checkpoint(directory, save)
    assert checkpoint_problem(directory) is None
    manifest = json.loads((directory / "COMPLETE").read_text())
    assert set(manifest["files"]) == {"model.safetensors", "sub/config.json"}
    weights = directory / "model.safetensors"
    original = weights.read_bytes()
    weights.write_bytes(original[:1000])
    assert "has 1000 bytes" in checkpoint_problem(directory)
    weights.write_bytes(original[:500] + b"\x00" * 10 + original[510:])  # same size, bytes overwritten
    assert "does not match the sha256" in checkpoint_problem(directory)
    (directory / "COMPLETE").write_text("ok\n")  # a harness 0.1 checkpoint
    assert "without file checksums" in checkpoint_problem(directory)


def test_damaged_checkpoint_is_retrained_not_loaded(run_cli, tmp_path, tiny_bert):
    results = tmp_path / "results"
    common = ("run", "--models", "be", "--train-on", "stsb", *SMOKE, "--backbone", tiny_bert, "--results", results)
    code, out, err = run_cli(*common, "--tasks", "stsb")
    assert code == 0, err
    (weights,) = (results / "checkpoints").rglob("model.safetensors")
    weights.write_bytes(weights.read_bytes()[:4096])  # truncated: used to be a SafetensorError on every re-run
    code, out, err = run_cli(*common, "--tasks", "stsb,sickr")
    assert code == 0 and "Traceback" not in err, err
    assert "model.safetensors has 4096 bytes" in err and "training it again" in err
    assert "training be on stsb" in out and "1 cells computed, 1 from the store" in out
    assert re.search(r"records in .*; [0-9.]+ (s|min [0-9]+ s) in all", out)
    size = weights.stat().st_size
    with open(weights, "r+b") as handle:  # same size, bytes overwritten: used to load silently
        handle.seek(size - 64)
        handle.write(b"\x7f" * 64)
    code, out, err = run_cli(*common, "--tasks", "stsb,sickr,sts12")
    assert code == 0 and "does not match the sha256" in err and "training be on stsb" in out, err
    assert checkpoint_problem(weights.parent) is None


# -- 4. odd records are reported with their path and recomputed ---------------------------------------------------------
ODD_RECORDS = {
    "random bytes": bytes(range(128, 256)) * 3,
    "a list": b"[]",
    "schema only": b'{"schema": 1, "status": "ok"}',
    "current schema without fields": b'{"schema": 2, "status": "ok"}',
}


@pytest.mark.parametrize("content", list(ODD_RECORDS.values()), ids=list(ODD_RECORDS))
def test_odd_record_is_reported_with_its_path_and_recomputed(tmp_path, content):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    path.write_bytes(content)
    store = Store(tmp_path / "results")
    assert list(store.records()) == [] and store.skipped[0][0] == path
    outcomes, _ = toy_run(tmp_path)
    assert [o.status for o in outcomes] == ["ok"]
    assert read_record(path)["status"] == "ok"


def test_hand_edited_score_is_detected_and_recomputed(tmp_path, caplog):
    write_toy_data(tmp_path / "data")
    (computed,), _ = toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    record = json.loads(path.read_text())
    record["main_score"] = record["scores"]["spearman"] = 99.9
    path.write_text(json.dumps(record, indent=2))
    with caplog.at_level("WARNING"):
        (outcome,), _ = toy_run(tmp_path)
    assert outcome.status == "ok" and outcome.main_score == pytest.approx(computed.main_score)
    assert f"record {path} is invalid (content does not match its checksum" in caplog.text


def test_record_at_the_wrong_place_is_not_used(tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    moved = path.parent.parent / "seed-43" / path.name
    moved.parent.mkdir()
    shutil.copy(path, moved)
    with pytest.raises(harness.HarnessError, match="stored at the wrong place"):
        read_record(moved)


# -- 5. leftovers of killed runs are cleaned, those of live processes kept ----------------------------------------------
def test_stale_temporaries_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    from harness.files import STALE_AFTER_SECONDS, temporary_prefix

    store = Store(tmp_path / "results")
    folder = store.root / "be-123" / "seed-42"
    folder.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead_prefix = temporary_prefix("stsb.json").replace(f".{os.getpid()}.", f".{dead.pid}.")
        live_prefix = temporary_prefix("stsb.json").replace(f".{os.getpid()}.", f".{live.pid}.")
        dead_record = folder / f"{dead_prefix}abc.tmp"
        live_record = folder / f"{live_prefix}abc.tmp"
        checkpoint_parent = store.root / "checkpoints" / "be-123"
        dead_checkpoint = checkpoint_parent / temporary_prefix("seed-42").replace(f".{os.getpid()}.", f".{dead.pid}.")
        old_legacy = checkpoint_parent / ".seed-43.k2j4h5g6"  # harness 0.1: no owner in the name
        young_legacy = folder / ".sts12.json.a1b2c3d4.tmp"
        for path in (dead_checkpoint, old_legacy):
            path.mkdir(parents=True)
            (path / "model.safetensors").write_bytes(b"x" * 1000)
        for path in (dead_record, live_record, young_legacy):
            path.write_text("{}")
        old = time.time() - STALE_AFTER_SECONDS - 60
        os.utime(old_legacy, (old, old))
        os.utime(old_legacy / "model.safetensors", (old, old))
        removed = {path for path, _ in store.clean_stale_temporaries()}
        assert removed == {dead_record, dead_checkpoint, old_legacy}
        assert live_record.exists() and young_legacy.exists()
    finally:
        live.kill()
        live.wait()


def test_a_run_cleans_leftovers_before_it_starts(tmp_path):
    from harness.files import temporary_prefix

    write_toy_data(tmp_path / "data")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = (
        tmp_path
        / "results"
        / "checkpoints"
        / "x"
        / (temporary_prefix("seed-42").replace(f".{os.getpid()}.", f".{dead.pid}.") + "q1w2e3r4")
    )
    leftover.mkdir(parents=True)
    _, messages = toy_run(tmp_path)
    assert not leftover.exists() and any("which is no longer running" in m for m in messages)


def test_temporary_names_carry_host_and_process(tmp_path):
    from harness.files import _OWNED_TEMP, atomic_write_json

    seen = []
    real_replace = os.replace

    def spy(source, target):
        seen.append(Path(source).name)
        return real_replace(source, target)

    import harness.files as files_module

    original = files_module.os.replace
    files_module.os.replace = spy
    try:
        atomic_write_json(tmp_path / "r.json", {"a": 1})
    finally:
        files_module.os.replace = original
    match = _OWNED_TEMP.search(seen[0])
    assert match and int(match.group("pid")) == os.getpid()


# -- 6. the store and the output folder are checked before computing ----------------------------------------------------
def test_a_file_given_as_results_is_refused_before_anything_runs(run_cli, tmp_path):
    not_a_folder = tmp_path / "results.txt"
    not_a_folder.write_text("notes")
    started = time.monotonic()
    code, out, err = run_cli(
        "run", "--models", "be", "--tasks", "stsb", "--train-on", "stsb", *SMOKE, "--results", not_a_folder
    )
    assert code == 2 and "is a file, not a folder" in err and "Traceback" not in err
    assert "training" not in out and time.monotonic() - started < 30


def test_a_read_only_store_is_refused_before_anything_runs(run_cli, tmp_path):
    if os.geteuid() == 0:  # root writes through file modes; /proc refuses even root
        read_only = Path("/proc/harness-results")
    else:
        read_only = tmp_path / "read-only"
        read_only.mkdir()
        read_only.chmod(0o555)
    code, out, err = run_cli("run", "--models", "be", "--tasks", "stsb", *SMOKE, "--results", read_only)
    assert code == 2 and "is not writable" in err and "Traceback" not in err, err
    assert "cells computed" not in out


def test_leaderboard_output_that_is_a_file_is_one_clear_error(run_cli, tmp_path):
    output = tmp_path / "board.md"
    output.write_text("mine")
    code, _, err = run_cli("leaderboard", "--output", output)
    assert code == 2 and "is a file, not a folder" in err and "Traceback" not in err
    assert output.read_text() == "mine"


# -- 7. data edge cases: clear errors, checked for every cell in the plan, the rest still runs ---------------------------
def _sts_data(tmp_path: Path) -> Path:
    data_dir = tmp_path / "data"
    for name in ("stsb", "sts12"):
        shutil.copytree(REPO / "tasks" / "data" / name, data_dir / name)
    return data_dir


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "the data file is empty"),
        (b"\n \n", "the data file is empty"),
        (b"genre\tfile\x00\x01\x02\xff", ":1: not a text file"),
        (b"a\tb\n" + b"\xff\xfe broken", ":2: not valid UTF-8 text"),
    ],
)
def test_empty_or_binary_data_file_is_named_by_validate(run_cli, tmp_path, content, message):
    data_dir = _sts_data(tmp_path)
    test_file = data_dir / "stsb" / "senteval_tokenized" / "sts-test.csv"
    test_file.write_bytes(content)
    code, out, err = run_cli("validate", "--models", "be", "--tasks", "stsb,sts12", "--data-dir", data_dir)
    assert code == 2 and "Traceback" not in err, err
    assert f"{test_file}" in err and message in err
    assert "task sts12: data ok" in out


def test_malformed_data_fails_its_cells_and_the_rest_of_the_matrix_runs(run_cli, tmp_path, tiny_bert):
    data_dir = _sts_data(tmp_path)
    (data_dir / "stsb" / "senteval_tokenized" / "sts-test.csv").write_bytes(b"")
    results = tmp_path / "results"
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb,sickr",
        *SMOKE,
        "--backbone",
        tiny_bert,
        "--data-dir",
        data_dir,
        "--results",
        results,
    )
    assert code == 1 and "Traceback" not in err
    assert "1 cells computed" in out and "1 failed" in out and "the data file is empty" in err
    statuses = {p.stem: json.loads(p.read_text())["status"] for p in results.glob("*/seed-*/*.json")}
    assert statuses == {"stsb": "failed", "sickr": "ok"}


def test_read_text_lines_names_file_and_line(tmp_path):
    from harness.data import read_text_lines

    path = tmp_path / "x.txt"
    path.write_bytes("first\nsecond\nthird \xe9\n".encode("latin-1"))
    with pytest.raises(harness.DataFileError, match=rf"{path}:3: not valid UTF-8"):
        read_text_lines(path)
    path.write_text("")
    assert read_text_lines(path, allow_empty=True) == []


# -- 8. leaderboard: skipped records are warned about, paths stay inside the output folder ------------------------------
def test_leaderboard_reports_invalid_records(run_cli, tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    damaged = tmp_path / "results" / "toy-embedder-0123456789ab" / "seed-42" / "toy-nan.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(b"\x00\xff")
    code, out, err = run_cli(
        "leaderboard", "--results", tmp_path / "results", "--output", tmp_path / "boards", "--include-samples"
    )  # toy_run's records are smoke-profile samples
    assert code == 1  # a damaged record is an error, not a warning
    assert f"invalid record {damaged}: not UTF-8 text" in err and "1 invalid record(s)" in err
    assert err.count(str(damaged)) == 1  # one line naming the file
    assert (tmp_path / "boards" / "toy.md").is_file()


def test_a_crafted_family_cannot_write_outside_the_output_folder(tmp_path):
    from harness.leaderboard import table_path, write_leaderboards
    from harness.store_files import StoreError

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    record = json.loads(path.read_text())
    record["task"]["family"] = "../../escaped"
    path.write_text(json.dumps(seal_record(record)))  # even with a valid checksum
    store = Store(tmp_path / "results")
    written = write_leaderboards(store, tmp_path / "out" / "boards")
    assert "task.family '../../escaped'" in store.skipped[0][1]
    # The refused record is shown as invalid in its cell, inside the output folder only.
    assert all(p.parent == tmp_path / "out" / "boards" for p in written)
    assert not list(tmp_path.rglob("escaped*"))
    with pytest.raises(StoreError, match="outside"):
        table_path(tmp_path / "out", "../x", "md")


# -- 9. CLI and matrix values that used to fail late or pass silently ---------------------------------------------------
@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--seeds", "4294967296"], "outside 0..4294967295"),
        (["--seeds", "-1"], "outside 0..4294967295"),
        (["--batch-size", "-3"], "--batch-size must be a positive integer"),
        (["--batch-size", "0"], "--batch-size must be a positive integer"),
    ],
)
def test_bad_run_values_are_refused_up_front(run_cli, tmp_path, extra, expected):
    code, _, err = run_cli("run", "--models", "be", "--tasks", "stsb", *SMOKE, "--results", tmp_path / "r", *extra)
    assert code == 2 and expected in err and "Traceback" not in err


def test_non_finite_option_is_refused_at_plan_time(run_cli, tmp_path):
    code, _, err = run_cli("validate", "--models", "be:lr=nan", "--tasks", "stsb", "--train-on", "stsb")
    assert code == 2 and "option 'lr' of model" in err and "is nan; give a finite number" in err


@pytest.mark.parametrize(
    "matrix, expected",
    [
        ("models: [be]\ntasks: [stsb]\ntrain_on: 5\n", "train_on must be a text"),
        ("models: be\ntasks: [stsb]\n", "models must be a list"),
        ("models: [{model: be, train_on: 5}]\ntasks: [stsb]\n", "models entry 1: train_on must be a text"),
        ("models: [be]\ntasks: [stsb]\nseeds: [true]\n", "seed True is not an integer"),
        ("models: [be]\ntasks: [stsb]\nseeds: []\n", "seeds is empty"),
        ("models: [be]\ntasks: [stsb]\nseeds: 42\n", "seeds must be a list"),
        ("models: [be]\ntasks: [stsb]\nseeds: [4294967296]\n", "outside 0..4294967295"),
    ],
)
def test_bad_matrix_values_are_one_clear_error(run_cli, tmp_path, matrix, expected):
    path = tmp_path / "m.yaml"
    path.write_text(matrix)
    code, _, err = run_cli("validate", "--matrix", path)
    assert code == 2 and str(path) in err and expected in err and "Traceback" not in err, err


def test_batch_size_reaches_the_model_context(tmp_path):
    write_toy_data(tmp_path / "data")
    SEEN_CONTEXTS.clear()
    toy_run(tmp_path, batch_size=7)
    assert SEEN_CONTEXTS and {ctx.eval_batch_size for ctx in SEEN_CONTEXTS} == {7}


def test_zero_cells_is_an_error(tmp_path):
    write_toy_data(tmp_path / "data")
    with pytest.raises(harness.HarnessError, match="seeds is empty|--seeds is empty"):
        toy_run(tmp_path, seeds=[])


# -- 10. a data dir that does not exist is refused ----------------------------------------------------------------------
def test_missing_data_dir_is_refused(run_cli, tmp_path, monkeypatch):
    missing = tmp_path / "no-such-data"
    code, _, err = run_cli(
        "run", "--models", "be", "--tasks", "stsb", *SMOKE, "--results", tmp_path / "r", "--data-dir", missing
    )
    assert code == 2 and f"--data-dir {missing} does not exist" in err
    monkeypatch.setenv("HARNESS_DATA_DIR", str(missing))
    code, _, err = run_cli("validate", "--models", "be", "--tasks", "stsb")
    assert code == 2 and f"HARNESS_DATA_DIR {missing} does not exist" in err


# -- 11. downloads: see tests/test_download.py (black-holed server, connection timeout, progress lines) ----------------


# -- 12. published records are kept apart from the working store --------------------------------------------------------
def test_published_records_are_valid_and_rebuild_the_committed_leaderboards_byte_identical(tmp_path, registry):
    from harness.leaderboard import stale_models, write_leaderboards

    store = Store(REPO / "published")
    records = list(store.records())
    assert len(records) >= 30 and store.skipped == []  # every committed record must be readable
    assert all(record.get("published") for record in records)
    # as `harness leaderboard` writes them: rows trained under an older default marked (§)
    written = write_leaderboards(
        store,
        tmp_path,
        ("md", "csv"),
        registry.families(),
        family_baselines=registry.family_baselines(),
        stale=stale_models(store, registry),
    )
    assert {p.name for p in written} == {p.name for p in (REPO / "leaderboards").glob("*.md")} | {
        p.name for p in (REPO / "leaderboards").glob("*.csv")
    }
    for path in written:
        assert path.read_bytes() == (REPO / "leaderboards" / path.name).read_bytes(), path.name


def test_working_store_is_not_tracked_and_the_defaults_keep_them_apart():
    from harness.cli.common import DEFAULT_PUBLISHED, DEFAULT_RESULTS
    from harness.cli.common import read_store_and_output as _read_store_and_output

    ignored = subprocess.run(["git", "check-ignore", "-q", f"{DEFAULT_RESULTS}/be-x/seed-42/stsb.json"], cwd=REPO)
    published = subprocess.run(["git", "check-ignore", "-q", f"{DEFAULT_PUBLISHED}/be-x/seed-42/stsb.json"], cwd=REPO)
    assert ignored.returncode == 0 and published.returncode == 1
    assert _read_store_and_output(None, None) == (Path("published"), Path("leaderboards"))
    assert _read_store_and_output(Path("results"), None) == (Path("results"), Path("results/leaderboards"))
    makefile = (REPO / "Makefile").read_text()
    (main_job,) = [
        line for line in makefile.splitlines() if "harness run --models be,ce,cbe --tasks senteval,useb" in line
    ]
    assert "--results" not in main_job  # the working store, default


def test_publish_copies_verified_records_and_refuses_bad_ones(run_cli, tmp_path, monkeypatch):
    from harness.registry import default_registry

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path, tasks=("toy-pairs", "toy-nan"), profile="quick")  # smoke records are samples
    monkeypatch.setenv("HARNESS_EXTRA_PLUGINS", "test_store_guarantees")  # the CLI's registry gets the toy plugins
    default_registry.cache_clear()
    try:
        working, published = tmp_path / "results", tmp_path / "published"
        common = ("publish", "--results", working, "--to", published, "--data-dir", tmp_path / "data")
        code, _, err = run_cli(*common, "--all")
        assert code == 2 and "toy-nan.json: the cell failed" in err and not published.exists()
        code, out, err = run_cli(*common, "--tasks", "toy-pairs")
        assert code == 0 and "published 1 record(s)" in out, err
        (record,) = Store(published).records()
        assert record["published"]["at"] and record["status"] == "ok"
        code, out, _ = run_cli(*common, "--tasks", "toy-pairs")
        assert code == 0 and "1 already published" in out
        (path,) = working.glob("*/seed-*/toy-pairs.json")
        edited = json.loads(path.read_text())
        edited["main_score"] = 99.0
        path.write_text(json.dumps(edited))
        code, _, err = run_cli(*common, "--tasks", "toy-pairs", "--overwrite")
        assert code == 2 and "changed after it was written" in err
        assert read_record(next(published.glob("*/seed-*/toy-pairs.json")))["main_score"] != 99.0
    finally:
        default_registry.cache_clear()


def test_publish_refuses_a_record_whose_data_changed(tmp_path):
    from harness.publish import PublishError, Selection, publish

    data_file = write_toy_data(tmp_path / "data")
    toy_run(tmp_path, profile="quick")
    data_file.write_text(data_file.read_text().replace("\t4.8\n", "\t0.1\n"))
    registry = build_registry(extra_plugins=[ToyPlugin()])
    with pytest.raises(PublishError, match="stale"):
        publish(
            Store(tmp_path / "results"),
            Store(tmp_path / "published"),
            Selection(),
            registry=registry,
            data_dir=tmp_path / "data",
        )


# == what the current inputs would not produce is never served ===========================
# -- 26.1 a local --backbone is identified by its files ------------------------------------------------------------------
def test_a_local_backbone_replaced_by_another_model_is_recomputed(run_cli, tmp_path, tiny_bert, tiny_roberta):
    backbone, results = tmp_path / "my", tmp_path / "results"
    shutil.copytree(tiny_bert, backbone)
    common = ("run", "--models", "be", "--tasks", "stsb", *SMOKE, "--backbone", backbone, "--results", results)
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed" in out, err
    code, out, _ = run_cli(*common)
    assert "0 cells computed, 1 from the store" in out
    shutil.rmtree(backbone)
    shutil.copytree(tiny_roberta, backbone)  # same path, another model: used to be served the first one's score
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed, 0 from the store" in out, err
    assert len({r["model"]["backbone_content"] for r in Store(results).records()}) == 2


def test_backbone_checksums_are_cached_by_size_and_mtime(tmp_path, tiny_bert, monkeypatch):
    import harness.fingerprint as fingerprint

    backbone, cache = tmp_path / "my", tmp_path / "cache"
    shutil.copytree(tiny_bert, backbone)
    first = fingerprint.folder_fingerprint(backbone, cache)
    hashed: list[Path] = []
    real_sha256 = fingerprint._sha256
    monkeypatch.setattr(fingerprint, "_sha256", lambda path: hashed.append(path) or real_sha256(path))
    monkeypatch.setattr(fingerprint, "_memo", {})  # a new process: only the cache file is left
    assert fingerprint.folder_fingerprint(backbone, cache) == first and hashed == []
    (backbone / "config.json").write_text((backbone / "config.json").read_text().replace("32", "33", 1))
    assert fingerprint.folder_fingerprint(backbone, cache) != first and [p.name for p in hashed] == ["config.json"]


DEFAULTS_CHANGED_BY_DESIGN = {"paser": "paser:top_k=1,synonyms=0"}  # PaSeR table 1's setting became the default


def test_published_records_keep_their_keys(registry):
    """The bundled backbone and hub ids are identified by name as before: every published spec re-resolves to the
    hash (and so the key) it was published under."""
    from harness.profiles import get_profile
    from harness.spec import resolve_model_spec

    records = list(Store(REPO / "published").records())
    assert records
    for record in records:
        model = record["model"]
        # A default changed to the paper's headline setting: the old label now names another spec, and
        # the old model is named explicitly.
        spec = resolve_model_spec(
            registry,
            model["label"],
            get_profile(model["profile"]),
            model["backbone"],
            model["train_on"],
            model.get("budget") or {},
        )
        if spec.key != record["model_key"] and model["label"] in DEFAULTS_CHANGED_BY_DESIGN:
            renamed = resolve_model_spec(
                registry,
                DEFAULTS_CHANGED_BY_DESIGN[model["label"]],
                get_profile(model["profile"]),
                model["backbone"],
                model["train_on"],
                model.get("budget") or {},
            )
            # the old default under its explicit name; a later default (PaSeR's synonym_views) keeps the
            # label's own spec, checked below
            spec = renamed if renamed.key == record["model_key"] else spec
        assert spec.backbone_content is None, model["label"]
        plugin = registry.spec_plugin(spec.name)
        # An option whose default changed meaning for some settings (Option.hash_when, e.g. augsbert's mlm_masking
        # for the topic recipes) gives those specs new keys by design; every other spec keeps its key.
        changed = [
            key
            for key, option in plugin.options.items()
            if option.hash_when is not None and option.hash_when(spec.options)
        ]
        # A record published after such a change (PaSeR's re-run default) has the new key; one before it the old.
        assert spec.key == record["model_key"] or changed, model["label"]


# -- 26.2 a checkpoint names the spec, seed and training data it was made of ---------------------------------------------
def test_a_checkpoint_copied_over_another_seed_is_retrained_not_loaded(run_cli, tmp_path, tiny_bert):
    results = tmp_path / "results"
    common = ("run", "--models", "be", "--train-on", "stsb", *SMOKE, "--backbone", tiny_bert, "--results", results)
    code, out, err = run_cli(*common, "--tasks", "stsb", "--seeds", "42,43")
    assert code == 0, err
    (seed_42,) = (results / "checkpoints").glob("be-*/seed-42")
    shutil.rmtree(seed_42)
    shutil.copytree(seed_42.parent / "seed-43", seed_42)  # a consistent checkpoint, of the wrong seed
    assert checkpoint_problem(seed_42) is None
    code, out, err = run_cli(*common, "--tasks", "stsb,sickr", "--seeds", "42")
    assert code == 0 and "trained with seed 43, not 42" in err and "training be on stsb" in out, err
    assert json.loads((seed_42 / "training.json").read_text())["seed"] == 42


# -- 26.3 cache entries offered to plugins are checksummed ---------------------------------------------------------------
def test_edited_or_damaged_teacher_scores_are_recomputed_not_used(tmp_path, caplog):
    import torch

    from harness.cache import ArtifactCache
    from harness.plugins.augmented_sbert import cached_teacher_scores
    from harness.profiles import get_profile

    class Teacher:
        def __init__(self):
            self.network = torch.nn.Linear(2, 1)
            self.calls = 0

        def score(self, first, second):
            self.calls += 1
            return np.arange(len(first), dtype=np.float64)

    class Context:
        cache = ArtifactCache(tmp_path / "cache")
        profile = get_profile("smoke")
        logger = __import__("logging").getLogger("test")

    teacher, first, second = Teacher(), ["a", "b", "c"], ["d", "e", "f"]
    expected = cached_teacher_scores(Context, teacher, "ce", first, second)
    (path,) = (tmp_path / "cache").glob("teacher-scores-*.npy")
    assert list(cached_teacher_scores(Context, teacher, "ce", first, second)) == [0, 1, 2] and teacher.calls == 1
    edited = np.load(path)
    edited[0] = 99.0
    np.save(path, edited)  # a valid .npy with other scores: used to become silver labels
    with caplog.at_level("WARNING"):
        assert list(cached_teacher_scores(Context, teacher, "ce", first, second)) == list(expected)
    assert teacher.calls == 2 and "does not match its checksum" in caplog.text
    path.write_bytes(b"\x93NUMPY garbage")  # damaged: used to crash every later run
    assert list(cached_teacher_scores(Context, teacher, "ce", first, second)) == list(expected)
    assert teacher.calls == 3 and list(np.load(path)) == list(expected)


def test_the_mlm_cache_of_a_local_backbone_folder_is_named_by_its_files_not_its_path(tmp_path, tiny_bert):
    """Replacing the files of ``--backbone ./my`` gives the recipe another domain-adapted MLM copy, not the one trained
    from the old weights (the same rule for the recipe's cache)."""
    from harness.plugins.augmented_sbert import mlm_directory
    from harness.profiles import get_profile
    from harness.spec import backbone_content

    folder = Path(shutil.copytree(tiny_bert, tmp_path / "my"))
    registry = build_registry()

    def mlm_folder() -> Path:
        context = harness.ModelContext(
            options={"mlm_lr": 5e-5},
            backbone=str(folder),
            profile=get_profile("smoke"),
            device="cpu",
            seed=42,
            cache_dir=tmp_path / "cache",
            backbone_content=backbone_content(registry, str(folder)),
        )
        return mlm_directory(context, ["a b", "c d"], ["e f", "g h"])

    before = mlm_folder()
    assert mlm_folder() == before
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes() + b" ")  # other files at the same path
    assert mlm_folder() != before


def test_cached_bytes_recomputes_entries_without_a_checksum_or_that_fail_their_check(tmp_path):
    from harness.files import cached_bytes

    path = tmp_path / "cache" / "entry.bin"
    assert cached_bytes(path, lambda: b"one") == (b"one", False)
    assert cached_bytes(path, lambda: b"two") == (b"one", True)
    path.with_name("entry.bin.sha256").unlink()  # an entry of an older harness, without a checksum
    assert cached_bytes(path, lambda: b"two") == (b"two", False)
    assert cached_bytes(path, lambda: b"three", check=lambda content: content == b"three") == (b"three", False)


# -- 26.5 numeric ranges are checked at plan time -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "extra, expected",
    [
        (("--models", "be:lr=-1"), "option 'lr' of model 'be' is -1.0; it must lie in (0, inf)"),
        (("--models", "be:lr=inf"), "option 'lr' of model 'be' is inf; give a finite number"),
        (("--models", "be", "--set", "learning_rate=inf"), "learning_rate must be a finite number"),
        (
            ("--models", "augsbert:teacher=ce,top_k=0"),
            "option 'top_k' of recipe 'augsbert' is 0; it must lie in [1, inf)",
        ),
    ],
)
def test_out_of_range_options_are_refused_by_validate(run_cli, extra, expected):
    code, _, err = run_cli("validate", *extra, "--tasks", "stsb", "--train-on", "stsb")
    assert code == 2 and expected in err and "Traceback" not in err, err


def test_a_matrix_with_an_out_of_range_option_runs_nothing(run_cli, tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("models: [be, 'be:lr=-1']\ntasks: [stsb]\ntrain_on: stsb\nprofile: smoke\n")
    code, out, err = run_cli("run", "--matrix", matrix, "--results", tmp_path / "results", "--no-progress")
    assert code == 2 and "must lie in (0, inf)" in err and not (tmp_path / "results" / "checkpoints").exists()


# -- 26.6 one line, never a traceback or a hang --------------------------------------------------------------------------
def _trained_be(run_cli, tmp_path, tiny_bert, *extra):
    results = tmp_path / "results"
    common = (
        "run",
        "--models",
        "be",
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        *SMOKE,
        "--backbone",
        tiny_bert,
        "--results",
        results,
    )
    code, out, err = run_cli(*common, *extra)
    assert code == 0, err
    return results, common


# OSError(EROFS): what a read-only mount answers (it is not a PermissionError)
@pytest.mark.parametrize("refusal", [PermissionError, OSError], ids=["permission", "read-only-mount"])
def test_export_from_a_store_it_cannot_write_loads_the_checkpoint(run_cli, tmp_path, tiny_bert, monkeypatch, refusal):
    import errno

    import harness.locks as locks

    results, _ = _trained_be(run_cli, tmp_path, tiny_bert)
    real_open = os.open

    def read_only_locks(path, flags, *args, **kwargs):  # the store is read-only: no lock file can be created
        if str(path).endswith(".lock"):
            raise refusal(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(locks.os, "open", read_only_locks)
    code, out, err = run_cli(
        "export",
        "--models",
        "be",
        "--train-on",
        "stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        results,
        "--to",
        tmp_path / "exported",
    )
    assert code == 0 and "Traceback" not in err and (tmp_path / "exported" / "README.md").is_file(), err


@pytest.mark.parametrize(
    "error, expected",
    [
        (28, "No space left on device; free some space and run the same command again"),
        (13, "Permission denied; make it writable (or choose another folder)"),
    ],
)
def test_a_full_disk_or_an_unwritable_sub_folder_is_one_line_and_resumes(
    run_cli, tmp_path, monkeypatch, error, expected
):
    import harness.files as files_module

    write_toy_data(tmp_path / "data")
    monkeypatch.setenv("HARNESS_EXTRA_PLUGINS", "test_store_guarantees")
    from harness.registry import default_registry

    default_registry.cache_clear()
    real_fsync = os.fsync

    def failing_fsync(descriptor):
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(files_module.os, "fsync", failing_fsync)
    common = (
        "run",
        "--models",
        "toy-embedder",
        "--tasks",
        "toy-pairs",
        *SMOKE,
        "--data-dir",
        tmp_path / "data",
        "--results",
        tmp_path / "results",
    )
    try:
        code, _, err = run_cli(*common)
        assert code == 2 and expected in err and "Traceback" not in err, err
        assert not list((tmp_path / "results").rglob("*.json")) or all(
            p.parts[-3] == "cache" for p in (tmp_path / "results").rglob("*.json")
        )
        monkeypatch.setattr(files_module.os, "fsync", real_fsync)
        code, out, err = run_cli(*common)
        assert code == 0 and "1 cells computed" in out, err
    finally:
        default_registry.cache_clear()


def test_a_record_path_that_is_a_folder_is_one_line(tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    path.unlink()
    path.mkdir()
    assert "not a regular file (a folder)" in Store(tmp_path / "results").lookup(path.parts[-3], 42, "toy-pairs")[1]
    with pytest.raises(harness.HarnessError, match="a folder has its name; remove or rename that folder"):
        toy_run(tmp_path)


def test_a_record_path_that_is_a_fifo_is_recomputed_without_hanging(tmp_path):
    import threading

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    path.unlink()
    os.mkfifo(path)
    finished: list = []
    worker = threading.Thread(target=lambda: finished.append(toy_run(tmp_path)[0]), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # unblock the reader so the test process can end
        with open(path, "w"):
            pass
        pytest.fail("reading a FIFO record blocked the run")
    assert [o.status for o in finished[0]] == ["ok"] and read_record(path)["status"] == "ok"


def test_a_symlinked_checkpoint_folder_is_refused_before_training(run_cli, tmp_path, tiny_bert):
    results, common = _trained_be(run_cli, tmp_path, tiny_bert)
    (checkpoint,) = (results / "checkpoints").glob("be-*/seed-42")
    elsewhere = tmp_path / "elsewhere"
    shutil.move(checkpoint, elsewhere)
    checkpoint.symlink_to(elsewhere)
    code, out, err = run_cli(*common, "--overwrite")
    assert code == 2 and "is a symbolic link" in err and "Traceback" not in err, err
    assert "training be on stsb" not in out


def test_st_with_pickle_only_weights_is_refused_in_one_line(run_cli, tmp_path, tiny_bert):
    import torch
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "pickled-st"
    SentenceTransformer(tiny_bert, device="cpu").save(str(folder))
    (weights,) = folder.rglob("model.safetensors")
    torch.save(load_file(weights), weights.with_name("pytorch_model.bin"))
    weights.unlink()
    code, _, err = run_cli(
        "run", "--models", "st", "--tasks", "stsb", *SMOKE, "--backbone", folder, "--results", tmp_path / "results"
    )
    assert code == 2 and "safetensors weights (pickled weights are never loaded)" in err and "Traceback" not in err


# -- 26.7 smaller ones ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("found_at", ["plan", "evaluation"])
def test_malformed_data_keeps_a_good_stored_result_and_reports_the_problem(tmp_path, caplog, monkeypatch, found_at):
    data_file = write_toy_data(tmp_path / "data")
    (computed,), _ = toy_run(tmp_path)
    data_file.write_text(data_file.read_text() + "a line without tabs\n")
    if found_at == "evaluation":  # a task whose plan-time check does not parse the file
        monkeypatch.setattr(ToyPairs, "check_data", lambda self: harness.files_checksum([self.path()]))
    with caplog.at_level("ERROR"):
        (outcome,), _ = toy_run(tmp_path)
    assert outcome.status == "failed" and "expected first<TAB>second<TAB>score" in outcome.message
    assert "stored ok result (computed from the data as it was) is kept" in caplog.text
    record = only_record(tmp_path / "results")
    assert record["status"] == "ok" and record["main_score"] == computed.main_score


def test_temporaries_of_another_pid_namespace_are_kept_while_young(tmp_path):
    """Containers sharing a store may share a host name but not process ids: a temporary named by another PID
    namespace (or by harness 0.2, which did not name it) is removed only when old, whatever its pid says here."""
    from harness.files import STALE_AFTER_SECONDS, _host_tag, temporary_prefix

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "results" / "be-1" / "seed-42"
    folder.mkdir(parents=True)
    other_space = folder / f".stsb.json.harness-tmp.{_host_tag()}.n0badcafe.{dead.pid}.abc.tmp"
    unnamed_space = folder / f".sts12.json.harness-tmp.{_host_tag()}.{dead.pid}.abc.tmp"
    same_space = folder / (temporary_prefix("sickr.json").replace(f".{os.getpid()}.", f".{dead.pid}.") + "abc.tmp")
    for path in (other_space, unnamed_space, same_space):
        path.write_text("{}")
    store = Store(tmp_path / "results")
    assert {path for path, _ in store.clean_stale_temporaries()} == {same_space}
    old = time.time() - STALE_AFTER_SECONDS - 60
    for path in (other_space, unnamed_space):
        os.utime(path, (old, old))
    assert {path for path, _ in store.clean_stale_temporaries()} == {other_space, unnamed_space}


def test_checkpoint_files_get_the_mode_of_records(tmp_path):
    def save(folder: Path):
        handle = os.open(folder / "model.safetensors", os.O_WRONLY | os.O_CREAT, 0o600)  # as mkstemp-based writers do
        os.write(handle, b"weights")
        os.close(handle)

    directory = build_checkpoint(tmp_path / "ckpt" / "seed-42", save)
    umask = os.umask(0)
    os.umask(umask)
    assert (directory / "model.safetensors").stat().st_mode & 0o777 == 0o666 & ~umask
    assert (directory / "COMPLETE").stat().st_mode & 0o777 == 0o666 & ~umask
    assert checkpoint_problem(directory) is None


@pytest.mark.parametrize(
    "argv, expected",
    [
        (("run", "--models", "be", "--tasks", "stsb", "--seeds", ""), "--seeds needs at least one integer"),
        (
            ("validate", "--models", "be:pooling=cls,pooling=mean", "--tasks", "stsb"),
            "option 'pooling' is given twice in 'be:pooling=cls,pooling=mean' ('cls' and 'mean'); give it once",
        ),
    ],
)
def test_empty_seeds_and_repeated_options_are_refused(run_cli, tmp_path, argv, expected):
    code, out, err = run_cli(*argv, "--results", tmp_path / "r") if argv[0] == "run" else run_cli(*argv)
    assert code == 2 and expected in err and "cells computed" not in out, err


def test_export_results_does_not_overwrite_an_earlier_export_silently(run_cli, tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    target = tmp_path / "exported"
    target.mkdir()
    (target / "harness_export.json").write_text("[]")
    common = (
        "export-results",
        "--format",
        "mteb",
        "--to",
        target,
        "--results",
        tmp_path / "results",
        "--include-samples",
    )  # toy_run's records are smoke-profile samples
    code, _, err = run_cli(*common)
    assert code == 2 and "already holds files" in err and "--overwrite" in err
    assert (target / "harness_export.json").read_text() == "[]"
    code, _, err = run_cli(*common, "--overwrite")
    assert code == 0, err


def test_nan_training_labels_are_a_data_problem_not_a_learning_rate(run_cli, tmp_path):
    data_dir = _sts_data(tmp_path)
    train = data_dir / "stsb" / "senteval_tokenized" / "sts-train.csv"
    rows = [line.split("\t") for line in train.read_text().splitlines()]
    for row in rows[::3]:  # enough of them for the profile's subsample of the train split to meet some
        row[4] = "nan"
    train.write_text("".join("\t".join(row) + "\n" for row in rows))
    code, out, err = run_cli(
        "validate", "--models", "be", "--tasks", "sts12", "--train-on", "stsb", "--data-dir", data_dir
    )
    assert code == 2 and "train labels are NaN or infinite" in err and "the learning rate is not the cause" in err, err


def test_a_lost_ray_node_is_reported_in_one_line_of_its_own(caplog):
    from harness.executors.ray_cluster import RayExecutor

    class FakeRay:
        nodes_now = [
            {"NodeID": "aaaaaaaa11", "NodeManagerHostname": "gpu-1", "Alive": True},
            {"NodeID": "bbbbbbbb22", "NodeManagerHostname": "gpu-2", "Alive": True},
        ]

        def nodes(self):
            return self.nodes_now

    executor, ray = RayExecutor(max_retries=3), FakeRay()
    executor._report_lost_nodes(ray)
    ray.nodes_now = [ray.nodes_now[0], {**ray.nodes_now[1], "Alive": False}]
    executor._nodes_checked_at = 0.0
    with caplog.at_level("ERROR"):
        executor._report_lost_nodes(ray)
    assert (
        "Ray node gpu-2 (bbbbbbbb) was lost: its running tasks are retried on the other nodes (up to 3 times)"
        in caplog.text
        and "gpu-1" not in caplog.text
    )


# -- 26.8 the checksum detects accidents; HARNESS_STORE_KEY signs records against tampering -----------------------------
def test_a_store_key_signs_records_and_a_resealed_edit_is_refused_by_leaderboard_and_publish(
    run_cli, tmp_path, monkeypatch
):
    from harness.publish import PublishError, Selection, publish
    from harness.record import InvalidRecordError

    monkeypatch.setenv("HARNESS_STORE_KEY", "a secret of the lab")
    write_toy_data(tmp_path / "data")
    (computed,), _ = toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    assert read_record(path)["signature"]
    edited = json.loads(path.read_text())
    edited["main_score"] = edited["scores"]["spearman"] = 99.0
    monkeypatch.delenv("HARNESS_STORE_KEY")
    path.write_text(json.dumps(seal_record(edited)))  # re-sealed by someone without the key: the checksum passes
    assert read_record(path)["main_score"] == 99.0  # without a key the checksum detects accidents only
    monkeypatch.setenv("HARNESS_STORE_KEY", "a secret of the lab")
    with pytest.raises(InvalidRecordError, match="not signed, and HARNESS_STORE_KEY is set"):
        read_record(path)
    code, _, err = run_cli("leaderboard", "--results", tmp_path / "results", "--output", tmp_path / "boards")
    assert "not signed, and HARNESS_STORE_KEY is set" in err
    assert "99.00" not in "".join(p.read_text() for p in (tmp_path / "boards").glob("*.md"))
    registry = build_registry(extra_plugins=[ToyPlugin()])
    with pytest.raises(PublishError, match="not signed"):
        publish(
            Store(tmp_path / "results"),
            Store(tmp_path / "published"),
            Selection(),
            registry=registry,
            data_dir=tmp_path / "data",
        )
    monkeypatch.setenv("HARNESS_STORE_KEY", "another key")
    (outcome,), _ = toy_run(tmp_path)  # the run recomputes it rather than serving it
    assert outcome.status == "ok" and outcome.main_score == pytest.approx(computed.main_score)


# == one damaged record never silently changes a leaderboard's ranking =================
def test_a_damaged_record_is_shown_invalid_not_ranked_and_the_leaderboard_exits_non_zero(run_cli, tmp_path):
    from harness.leaderboard import collect_tables

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path, seeds=[42, 43], profile="quick")  # full evaluations (smoke records would be left out)
    results = tmp_path / "results"
    (damaged,) = results.glob("toy-embedder-*/seed-43/toy-pairs.json")
    damaged.write_bytes(os.urandom(512))  # a published record replaced by random bytes
    (table,) = collect_tables(Store(results))
    (row,) = table.rows
    assert table.cell_text(row, "toy-pairs") == "invalid" and table.ranked()[0][0] is None  # not ranked as complete
    assert list(row.cells["toy-pairs"].values) == [42] and 43 in row.cells["toy-pairs"].invalid_seeds
    code, _, err = run_cli("leaderboard", "--results", results, "--output", tmp_path / "boards")
    assert code != 0 and err.count(str(damaged)) == 1, err
    markdown = (tmp_path / "boards" / "toy.md").read_text()
    assert "| invalid " in markdown and "`invalid` = the record does not verify" in markdown


# == end of: a damaged record ==================================================================================================


# == records computed on an evaluation sample are never published =====================
def test_publish_refuses_records_computed_on_a_sample(tmp_path):
    from harness.publish import PublishError, Selection, publish

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)  # the smoke profile: max_eval_examples=200
    registry = build_registry(extra_plugins=[ToyPlugin()])
    with pytest.raises(PublishError, match=r"computed on a sample of the evaluation data \(max_eval_examples=200"):
        publish(
            Store(tmp_path / "results"),
            Store(tmp_path / "published"),
            Selection(),
            registry=registry,
            data_dir=tmp_path / "data",
        )
    assert not (tmp_path / "published").exists()


def test_a_failed_cell_shows_failed_in_the_run_summary_not_a_dash(tmp_path):
    from harness.run.driver import summary_rows

    write_toy_data(tmp_path / "data")
    outcomes, _ = toy_run(tmp_path, models=("toy-constant", "toy-embedder"))
    _, rows = summary_rows(outcomes)
    assert [row[1] for row in rows][0] == "failed" and rows[1][1] not in ("failed", "-")  # "-" means not run


# == end of: sample records ==================================================================================================


def test_run_summary_says_how_long_the_whole_run_took():
    from harness.cli.run import wall_time_text

    assert wall_time_text(41.26) == "41.3 s" and wall_time_text(725.4) == "12 min 5 s"


# ======================================================================================================================
# Wrong scores, identities and cache entries: NaN vectors, path options, cache entries tied to what they
# were made from, the runtime in a cell's key, NaN gold data, batch-probe verdicts, backbone checksums, --set twice.
# ======================================================================================================================
class NaNRowEmbedder(WordHashEmbedder):
    """Hashed words, but NaN for every text that mentions an onion (not a batch-probe text: the probe passes)."""

    def encode(self, texts):
        vectors = super().encode(texts)
        vectors[[row for row, text in enumerate(texts) if "onion" in text]] = np.nan
        return vectors


class NaNEmbedder(WordHashEmbedder):
    def encode(self, texts):
        return np.full((len(texts), 8), np.nan, dtype=np.float32)


class NaNPlugin:
    @harness.hookimpl
    def register_models(self, register):
        register(harness.ModelPlugin("toy-nan-row", "NaN for onions", NaNRowEmbedder, ("embedder",)))
        register(harness.ModelPlugin("toy-all-nan", "NaN for everything", NaNEmbedder, ("embedder",)))


def nan_run(tmp_path: Path, model: str):
    registry = build_registry(extra_plugins=[ToyPlugin(), NaNPlugin()])
    config = RunConfig(
        models=[ModelEntry(model)],
        tasks=["toy-pairs"],
        progress=False,
        device="cpu",
        results_dir=tmp_path / "results",
        data_dir=tmp_path / "data",
        profile="smoke",
    )
    return Run(registry, config, log=lambda _: None).run(LocalExecutor())


def test_40_1_a_nan_vector_fails_its_cell_instead_of_becoming_a_similarity_of_0(tmp_path):
    write_toy_data(tmp_path / "data")
    (outcome,) = nan_run(tmp_path, "toy-nan-row")
    assert outcome.status == "failed", outcome
    assert "returned 1 of 6 vectors with NaN or infinite values" in outcome.message
    assert only_record(tmp_path / "results")["status"] == "failed"


def test_40_1_every_similarity_path_refuses_nan_vectors():
    from harness.evaluation.maxsim import maxsim_pairs
    from harness.evaluation.search import cosine_top_k
    from harness.metrics import NonFiniteVectorsError

    good, bad = np.ones((2, 4)), np.array([[1.0, 0, 0, 0], [np.nan, 0, 0, 0]])
    assert harness.cosine_rows(np.zeros((1, 4)), np.ones((1, 4))).tolist() == [0.0]  # a zero vector stays 0
    for compute in (
        lambda: harness.cosine_rows(good, bad),
        lambda: harness.maxsim(bad, good),
        lambda: cosine_top_k(good, bad, 1),
        lambda: maxsim_pairs([good, bad], [good, good]),
        lambda: maxsim_pairs([good, bad], [good, good], engine="sparse"),
    ):
        with pytest.raises(NonFiniteVectorsError, match=r"1 of \d vectors with NaN"):
            compute()


def test_40_18_nan_vectors_are_reported_as_nan_not_as_dropout_or_a_collapse(tmp_path):
    write_toy_data(tmp_path / "data")
    (outcome,) = nan_run(tmp_path, "toy-all-nan")
    assert outcome.status == "failed" and "NaN or infinite values" in outcome.message, outcome.message
    assert "dropout" not in outcome.message and "collapsed" not in outcome.message
    assert not list((tmp_path / "results" / "cache").glob("batch-probe/*"))  # not the plugin's verdict: not cached


def test_40_9_a_nan_gold_score_keeps_a_good_stored_result(tmp_path, caplog):
    data_file = write_toy_data(tmp_path / "data")
    (computed,), _ = toy_run(tmp_path)
    data_file.write_text(data_file.read_text().replace("\t4.8\n", "\tnan\n"))
    with caplog.at_level("ERROR"):
        (outcome,), _ = toy_run(tmp_path)
    assert outcome.status == "failed" and "gold scores are NaN" in outcome.message
    assert "stored ok result (computed from the data as it was) is kept" in caplog.text
    record = only_record(tmp_path / "results")
    assert record["status"] == "ok" and record["main_score"] == computed.main_score


def test_40_3_a_cache_entry_copied_over_another_with_its_checksum_is_recomputed(tmp_path, caplog):
    from harness.files import cached_bytes

    first, second = tmp_path / "cache" / "entry-a.bin", tmp_path / "cache" / "entry-b.bin"
    assert cached_bytes(first, lambda: b"made from a", made_from={"key": "a"}) == (b"made from a", False)
    assert cached_bytes(second, lambda: b"made from b", made_from={"key": "b"}) == (b"made from b", False)
    for suffix in ("", ".sha256"):  # entry a and its side file copied over entry b
        shutil.copy(f"{first}{suffix}", f"{second}{suffix}")
    with caplog.at_level("WARNING"):
        assert cached_bytes(second, lambda: b"made from b", made_from={"key": "b"}) == (b"made from b", False)
    assert "made from something other than what its name asks for" in caplog.text
    assert cached_bytes(second, lambda: b"unused", made_from={"key": "b"}) == (b"made from b", True)
    # without made_from an entry is tied to its own file name
    third = tmp_path / "cache" / "entry-c.bin"
    cached_bytes(third, lambda: b"c")
    for suffix in ("", ".sha256"):
        shutil.copy(f"{third}{suffix}", f"{first}{suffix}")
    assert cached_bytes(first, lambda: b"made from a", made_from={"key": "a"}) == (b"made from a", False)


def test_40_3_an_onnx_export_copied_over_another_is_exported_again(tmp_path, tiny_bert):
    pytest.importorskip("onnxruntime")
    import torch
    from transformers import AutoModel

    from harness.nn.onnx_runtime import export_key, onnx_transformer

    models = [AutoModel.from_pretrained(tiny_bert).eval() for _ in range(2)]
    with torch.no_grad():
        for parameter in models[1].parameters():
            parameter.add_(0.05)
    cache = tmp_path / "cache"
    paths = []
    for model in models:
        onnx_transformer(model, cache)
        paths.append(cache / "onnx" / f"{export_key(model)}.onnx")
    for suffix in ("", ".sha256"):  # model 0's export and side file over model 1's
        shutil.copy(f"{paths[0]}{suffix}", f"{paths[1]}{suffix}")
    features = {"input_ids": torch.tensor([[2, 5, 7, 3]]), "attention_mask": torch.ones(1, 4, dtype=torch.long)}
    if "token_type_ids" in onnx_transformer(models[1], cache).input_names:
        features["token_type_ids"] = torch.zeros(1, 4, dtype=torch.long)
    with torch.no_grad():
        expected = models[1](**features).last_hidden_state.numpy()
    actual = onnx_transformer(models[1], cache).token_states(features).numpy()
    np.testing.assert_allclose(actual, expected, atol=1e-4)


def test_40_3_teacher_scores_of_other_pairs_copied_over_an_entry_are_scored_again(tmp_path):
    import torch

    from harness.cache import ArtifactCache
    from harness.plugins.augmented_sbert import cached_teacher_scores
    from harness.profiles import get_profile

    class Teacher:
        def __init__(self):
            self.network = torch.nn.Linear(2, 1)

        def score(self, first, second):
            return np.array([len(a) + len(b) for a, b in zip(first, second)], dtype=np.float64)

    class Context:
        cache = ArtifactCache(tmp_path / "cache")
        profile = get_profile("smoke")
        logger = __import__("logging").getLogger("test")

    teacher = Teacher()
    cached_teacher_scores(Context, teacher, "ce", ["a", "bb"], ["c", "d"])
    (path_a,) = (tmp_path / "cache").glob("teacher-scores-*.npy")
    expected = cached_teacher_scores(Context, teacher, "ce", ["eee", "f"], ["g", "h"])
    (path_b,) = set((tmp_path / "cache").glob("teacher-scores-*.npy")) - {path_a}
    for suffix in ("", ".sha256"):
        shutil.copy(f"{path_a}{suffix}", f"{path_b}{suffix}")
    assert list(cached_teacher_scores(Context, teacher, "ce", ["eee", "f"], ["g", "h"])) == list(expected) == [4, 2]


def test_40_12_a_damaged_batch_probe_verdict_is_probed_again_not_a_crash(tmp_path, monkeypatch):
    import harness.run.jobs as runner_module

    monkeypatch.setattr(runner_module.importlib_metadata, "version", lambda package: "1.0")
    write_toy_data(tmp_path / "data")
    assert [o.status for o in nan_run(tmp_path, "toy-nan-row")] == ["failed"]  # probed (it passes), verdict kept
    (verdict,) = (tmp_path / "results" / "cache" / "batch-probe").glob("*.json")
    assert json.loads(verdict.read_text())["problem"] is None
    real, probes = runner_module.batch_dependence, []
    monkeypatch.setattr(runner_module, "batch_dependence", lambda model: probes.append(1) or real(model))
    for damaged in ('{"problem": nu', '{"problem": "made up: fails every cell"}'):
        verdict.write_text(damaged)  # truncated, then edited without its checksum
        probes.clear()
        (outcome,) = nan_run(tmp_path, "toy-nan-row")
        assert probes == [1] and "NaN" in outcome.message and "made up" not in outcome.message
        assert json.loads(verdict.read_text())["problem"] is None


def test_40_19_a_wrong_sha_in_the_backbone_checksum_cache_is_not_trusted(tmp_path, tiny_bert, monkeypatch):
    import harness.fingerprint as fingerprint

    backbone, cache = tmp_path / "my", tmp_path / "cache"
    shutil.copytree(tiny_bert, backbone)
    first = fingerprint.folder_fingerprint(backbone, cache)
    cache_file = cache / fingerprint.CACHE_FILE
    content = json.loads(cache_file.read_text())
    for entries in content.values():
        for entry in entries.values():
            entry[-1] = "0" * 64  # a made-up sha for every file
    cache_file.write_text(json.dumps(content))
    monkeypatch.setattr(fingerprint, "_memo", {})
    assert fingerprint.folder_fingerprint(backbone, cache) == first
    # a file replaced by one of the same size with its old modification time (cp -p, rsync -a) is hashed again
    weights = backbone / "model.safetensors"
    stamp = weights.stat()
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    monkeypatch.setattr(fingerprint, "_memo", {})
    assert fingerprint.folder_fingerprint(backbone, cache) != first


def test_40_20_a_set_key_given_twice_is_refused_in_one_line(run_cli, tmp_path):
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb",
        "--train-on",
        "stsb",
        "--set",
        "epochs=1",
        "--set",
        "epochs=2",
        *SMOKE,
        "--results",
        tmp_path / "r",
    )
    assert code == 2 and "--set epochs is given twice ('1' and '2'); give it once." in err and "Traceback" not in err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("*.json"))


def test_40_20_records_name_their_plugin_version_which_the_leaderboard_reads(tmp_path):
    from harness.leaderboard.tables import _identity

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    registered_in_code = only_record(tmp_path / "results")
    assert "model_version" in registered_in_code and registered_in_code["model_version"] is None
    from harness.run.evaluate import build_record

    registry = build_registry()

    class PlanStub:
        profile = harness.get_profile("smoke")
        device, runtime, data_dir_text, log_to = "cpu", "torch", None, ()

    spec = harness.resolve_model_spec(registry, "be", PlanStub.profile)
    (task_spec,) = harness.resolve_task_specs(registry, "stsb")
    record = build_record(registry, PlanStub, spec, 42, task_spec, "cpu", "ok")
    assert record["model_version"] == harness.__version__ == _identity(record)["plugin version"]


def save_sentence_transformer(backbone: str, folder: Path) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    transformer = Transformer(backbone, max_seq_length=48)
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension())], device="cpu").save(
        str(folder)
    )


def test_40_2_st_model_folder_replaced_at_the_same_path_is_recomputed(run_cli, tmp_path, tiny_bert, tiny_roberta):
    folder, results = tmp_path / "my-st", tmp_path / "results"
    save_sentence_transformer(tiny_bert, folder)
    common = ("run", "--models", f"st:model={folder}", "--tasks", "stsb", *SMOKE, "--results", results)
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed" in out, err
    shutil.rmtree(folder)
    save_sentence_transformer(tiny_roberta, folder)  # same path, another model: used to be served the first's score
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed, 0 from the store" in out, err
    records = list(Store(results).records())
    assert len({r["model"]["option_contents"]["model"] for r in records}) == 2
    code, out, err = run_cli(*common)
    assert code == 0 and "0 cells computed, 1 from the store" in out, err


def test_40_2_a_task_data_path_given_as_an_option_is_identified_by_its_content(tmp_path):
    from harness.fingerprint import stable_hash
    from harness.spec import resolve_task_specs

    class FileOptionTask(ToyPairs):
        """A task whose data file is an option (``toy-file:file=PATH``), declared a path option."""

        metadata = harness.TaskMetadata(
            name="toy-file",
            family="toy",
            description="pairs from the file its option names",
            main_score="spearman",
            metric="Spearman x100",
            reference="tests",
            dataset="toy",
            dataset_source="tests",
            license="none",
        )
        options = {"file": harness.Option("", "the pairs file", path=True), "note": harness.Option("")}

    class Plugin:
        @harness.hookimpl
        def register_tasks(self, register):
            register(FileOptionTask)

    registry = build_registry(extra_plugins=[Plugin()])
    data_file = write_toy_data(tmp_path / "data")

    def key(text: str) -> str:
        (spec,) = resolve_task_specs(registry, text)
        return spec.key

    before = key(f"toy-file:file={data_file}")
    assert key(f"toy-file:file={data_file}") == before and key("toy-file:note=x") != before
    data_file.write_text(data_file.read_text().replace("\t4.8\n", "\t0.1\n"))  # same path, other data
    assert key(f"toy-file:file={data_file}") != before
    assert key("toy-file:note=x") == f"toy-file-{stable_hash({'file': '', 'note': 'x'}, 8)}"  # unchanged


def test_40_4_the_runtime_is_part_of_a_cells_key(run_cli, tmp_path, tiny_bert):
    pytest.importorskip("onnxruntime")
    from harness.leaderboard import collect_tables

    results = tmp_path / "results"
    common = ("run", "--models", "be", "--tasks", "stsb", *SMOKE, "--backbone", tiny_bert, "--results", results)
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed" in out, err
    code, out, err = run_cli(*common, "--runtime", "onnx")  # used to be answered by the torch record
    assert code == 0 and "1 cells computed, 0 from the store" in out, err
    (folder,) = results.glob("be-*/seed-42")
    torch_path, onnx_path = folder / "stsb.json", folder / "stsb@onnx.json"
    assert "runtime" not in read_record(torch_path) and read_record(onnx_path)["runtime"] == "onnx"
    (table,) = collect_tables(Store(results), include_samples=True)
    assert sorted(row.label for row in table.rows) == ["be", "be [runtime: onnx]"]
    # an onnx record at the torch name (as harness wrote it before) is valid, but answers no torch run
    os.replace(onnx_path, torch_path)
    code, out, err = run_cli(*common)
    assert code == 0 and "1 cells computed, 0 from the store" in out and "computed under --runtime onnx" in out, err
    assert "runtime" not in read_record(torch_path)


def test_40_3_a_cache_folder_copied_over_another_is_built_again(tmp_path, caplog):
    from harness.cache import ArtifactCache

    cache = ArtifactCache(tmp_path / "cache")
    first, second = cache.folder("domain-mlm", {"pairs": "a"}), cache.folder("domain-mlm", {"pairs": "b"})
    (first / "seed-42").mkdir()
    (first / "seed-42" / "weights").write_text("trained on a")
    assert cache.folder("domain-mlm", {"pairs": "a"}) == first and (first / "seed-42" / "weights").exists()
    shutil.rmtree(second)
    shutil.copytree(first, second)  # folder a, with what it names, over folder b
    with caplog.at_level("WARNING"):
        assert cache.folder("domain-mlm", {"pairs": "b"}) == second
    assert "made from something other than what its name asks for" in caplog.text
    assert not (second / "seed-42").exists() and json.loads((second / "MADE_FROM.json").read_text()) == {"pairs": "b"}


# == files — one safe open, outputs inside their folder, OS errors in one line ===========
# Every file the store reads or locks goes through harness.store_files.open_store_file
# (regular files whose real path lies inside the store; a lock never created or truncated through a link); every
# output name built from data through harness.store_files.path_inside.
def _finishes(function, seconds: float = 30.0):
    """``function()``'s result; fails (instead of hanging the suite) when it blocks, as reading a FIFO does."""
    import threading

    outcome: dict = {}

    def target():
        try:
            outcome["value"] = function()
        except BaseException as exc:  # noqa: BLE001  re-raised below, in the test's thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still blocked after {seconds:g} s (a FIFO opened for reading?)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


class PerExampleToy(ToyPairs):
    """toy-pairs that keeps per-example data (a side file beside its record)."""

    metadata = harness.TaskMetadata(
        name="toy-examples",
        family="toy",
        description="toy pairs with per-example data",
        main_score="spearman",
        metric="Spearman x100",
        reference="tests",
        dataset="toy",
        dataset_source="tests",
        license="none",
    )

    def evaluate(self, model, ctx):
        from harness.blocks import ExampleScores

        first, second, gold = self.load()
        predicted = harness.as_pair_scorer(model).score(first, second)
        return harness.EvalResult(
            {"spearman": 100 * harness.spearman(predicted, gold)},
            harness.files_checksum([self.path()]),
            examples=ExampleScores("spearman", {"predicted": np.asarray(predicted), "gold": np.asarray(gold)}),
        )


class FewRowsEmbedder(WordHashEmbedder):
    def encode(self, texts):  # the batch probe (4 texts) passes; an evaluation gets one row too few
        return super().encode(texts)[:-1] if len(texts) > 8 else super().encode(texts)


class RaisingEmbedder(WordHashEmbedder):
    def encode(self, texts):
        if len(texts) > 8:
            raise RuntimeError("the plugin's server went away")
        return super().encode(texts)


class ObjectEmbedder(WordHashEmbedder):
    def encode(self, texts):
        vectors = super().encode(texts)
        return np.array([[*row, "x"] for row in vectors], dtype=object) if len(texts) > 8 else vectors


class OffsetEmbedder(WordHashEmbedder):
    def encode(self, texts):
        return super().encode(texts) + 0.5


class FileToyPlugin:
    @harness.hookimpl
    def register_models(self, register):
        register(harness.ModelPlugin("toy-offset", "hashed words plus a constant", OffsetEmbedder, ("embedder",)))
        register(harness.ModelPlugin("toy-few-rows", "one row too few", FewRowsEmbedder, ("embedder",)))
        register(harness.ModelPlugin("toy-raises", "raises in encode", RaisingEmbedder, ("embedder",)))
        register(harness.ModelPlugin("toy-objects", "object arrays", ObjectEmbedder, ("embedder",)))

    @harness.hookimpl
    def register_tasks(self, register):
        register(PerExampleToy)


def file_toy_run(tmp_path: Path, models=("toy-embedder",), tasks=("toy-examples",), **config):
    registry = build_registry(extra_plugins=[ToyPlugin(), FileToyPlugin()])
    config.setdefault("results_dir", tmp_path / "results")
    config.setdefault("data_dir", tmp_path / "data")
    config.setdefault("profile", "smoke")
    run_config = RunConfig(
        models=[ModelEntry(m) for m in models], tasks=list(tasks), progress=False, device="cpu", **config
    )
    messages: list[str] = []
    return Run(registry, run_config, log=messages.append).run(LocalExecutor()), messages


# -- 40.5 a lock file that is a link is refused, its target never truncated ---------------------------------------------
def test_a_symlinked_cells_lock_is_refused_and_the_file_it_points_to_kept(tmp_path):
    write_toy_data(tmp_path / "data")
    file_toy_run(tmp_path)
    (lock,) = (tmp_path / "results" / "locks").glob("*/seed-*.lock")
    outside = tmp_path / "precious.txt"
    outside.write_text("a user's file\n")
    lock.unlink()
    lock.symlink_to(outside)
    with pytest.raises(harness.StoreError, match="is a symbolic link"):
        file_toy_run(tmp_path, overwrite=True)
    assert outside.read_text() == "a user's file\n"


def test_a_checkpoint_lock_that_is_a_link_or_in_a_linked_folder_is_refused(tmp_path):
    from harness.locks import StoreLock
    from harness.store_files import UnsafeFileError

    store = Store(tmp_path / "store")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "seed-1.lock").write_text("kept\n")
    lock_path = store.checkpoint_dir("be-1", 1).with_name("seed-1.lock")
    lock_path.parent.mkdir(parents=True)
    lock_path.symlink_to(outside / "seed-1.lock")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        store.checkpoint_lock("be-1", 1).acquire()
    (store.root / "locks").mkdir()
    (store.root / "locks" / "be-1").symlink_to(outside, target_is_directory=True)  # a linked folder out of the store
    with pytest.raises(UnsafeFileError, match="outside"):
        store.cells_lock("be-1", 1).acquire()
    assert (outside / "seed-1.lock").read_text() == "kept\n" and sorted(p.name for p in outside.iterdir()) == [
        "seed-1.lock"
    ]
    with StoreLock(tmp_path / "plain.lock"):  # an ordinary lock still works
        pass


# -- 40.6 export-results writes only inside --to -------------------------------------------------------------------------
def _mteb_result(task_name: str) -> dict:
    return {
        "task_name": task_name,
        "dataset_revision": "x",
        "mteb_version": "2.0.0",
        "evaluation_time": 1.0,
        "scores": {"test": [{"main_score": 0.5, "hf_subset": "default", "languages": ["eng-Latn"]}]},
    }


def _store_with_mteb_record(tmp_path: Path, task_name: str) -> Path:
    """A store whose one (toy) record carries an mteb task result named ``task_name``; returns the store."""
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    record = read_record(path)
    record["details"] = {"mteb_task_result": _mteb_result(task_name)}
    path.write_text(json.dumps(seal_record(record)))
    return tmp_path / "results"


def test_export_results_never_writes_outside_its_folder_whatever_a_record_names(run_cli, tmp_path):
    _store_with_mteb_record(tmp_path, "../../../../escaped/PWNED")
    (tmp_path / "escaped").mkdir()
    code, out, err = run_cli(
        "export-results",
        "--format",
        "mteb",
        "--results",
        tmp_path / "results",
        "--to",
        tmp_path / "out" / "deep",
        "--include-samples",
    )
    assert list((tmp_path / "escaped").iterdir()) == [] and "Traceback" not in err
    assert "not a plain file name" in err
    from harness.store_files import path_inside

    with pytest.raises(harness.StoreError, match="not a plain file name"):
        path_inside(tmp_path, "..", "x")
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "out" / "link").symlink_to(tmp_path / "escaped", target_is_directory=True)
    with pytest.raises(harness.StoreError, match="resolves outside"):
        path_inside(tmp_path / "out", "link", "x.json")
    assert path_inside(tmp_path / "out", "deep", "x.json") == tmp_path / "out" / "deep" / "x.json"


# -- 40.7 publish never copies a file from outside the store ------------------------------------------------------------
def test_publish_refuses_an_artifact_that_links_out_of_the_store_and_writes_nothing(tmp_path):
    from harness.publish import PublishError, Selection, publish

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path, profile="quick")  # a full evaluation: publishable
    source = Store(tmp_path / "results")
    (record,) = source.records()
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET\n")
    artifacts = source.artifact_dir(record["model_key"], record["seed"])
    artifacts.mkdir(parents=True)
    (artifacts / "pairs.txt").write_text("kept pairs\n")
    (artifacts / "stolen.txt").symlink_to(secret)
    registry = build_registry(extra_plugins=[ToyPlugin()])
    target = Store(tmp_path / "published")
    with pytest.raises(PublishError, match=r"stolen.txt: an artifact that is a link to .*secret.txt, outside"):
        publish(source, target, Selection(), registry=registry, data_dir=tmp_path / "data")
    assert not target.root.exists() or not [p for p in target.root.rglob("*") if p.is_file()]
    (artifacts / "stolen.txt").unlink()
    publish(source, target, Selection(), registry=registry, data_dir=tmp_path / "data")
    assert (target.artifact_dir(record["model_key"], record["seed"]) / "pairs.txt").read_text() == "kept pairs\n"


# -- 40.8 a record that links out of the store is never served ----------------------------------------------------------
def test_a_record_that_links_out_of_the_store_is_invalid_and_recomputed(tmp_path, caplog):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    outside = tmp_path / "outside.json"
    path.rename(outside)
    path.symlink_to(outside)
    store = Store(tmp_path / "results")
    assert list(store.records()) == [] and "outside" in store.skipped[0][1]
    outcomes, messages = toy_run(tmp_path)
    assert [o.status for o in outcomes] == ["ok"] and not path.is_symlink()
    assert "is invalid (a link to" in caplog.text
    (inside,) = (tmp_path / "results").glob("*/seed-*/*.json")  # a link that stays inside the store is followed
    moved = inside.with_name("elsewhere.txt")
    inside.rename(moved)
    inside.symlink_to(moved)
    assert [r["status"] for r in Store(tmp_path / "results").records()] == ["ok"]


def test_a_record_folder_that_links_out_of_the_store_is_never_written_to(tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (record_path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    elsewhere = tmp_path / "elsewhere"
    record_path.parent.rename(elsewhere)
    record_path.parent.symlink_to(elsewhere, target_is_directory=True)
    before = (elsewhere / record_path.name).read_bytes()
    with pytest.raises(harness.StoreError, match="its folder is a link to .*outside the store"):
        toy_run(tmp_path, overwrite=True)
    assert (elsewhere / record_path.name).read_bytes() == before and sorted(p.name for p in elsewhere.iterdir()) == [
        record_path.name
    ]


def test_a_checkpoint_file_that_links_out_of_the_checkpoint_or_is_a_fifo_is_never_read(tmp_path):
    directory = tmp_path / "store" / "checkpoints" / "be-1" / "seed-1"
    build_checkpoint(directory, lambda folder: (folder / "model.safetensors").write_bytes(b"weights" * 100))
    weights = directory / "model.safetensors"
    outside = tmp_path / "same-bytes-elsewhere"
    outside.write_bytes(weights.read_bytes())
    weights.unlink()
    weights.symlink_to(outside)  # same content, but from outside the store
    assert "model.safetensors is a link to" in checkpoint_problem(directory)
    weights.unlink()
    os.mkfifo(weights)
    # named for what it is (issue 50's probes: a FIFO training.json was reported as "missing")
    assert _finishes(lambda: checkpoint_problem(directory)) == "model.safetensors is a FIFO, not a regular file"
    weights.unlink()
    assert checkpoint_problem(directory) == "model.safetensors is missing"


# -- 40.10 FIFOs are never opened for reading: no hang ------------------------------------------------------------------
def test_fifos_in_place_of_store_files_are_refused_without_hanging(tmp_path):
    from harness.files import cached_bytes
    from harness.fingerprint import CACHE_FILE, folder_fingerprint
    from harness.store import read_examples
    from harness.store_files import UnsafeFileError, read_store_bytes

    write_toy_data(tmp_path / "data")
    file_toy_run(tmp_path)
    (record_path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    side_file = record_path.with_name(record_path.stem + ".examples.npz")
    side_file.unlink()
    os.mkfifo(side_file)  # leaderboard and compare read it
    record = {**read_record(record_path), "_path": str(record_path)}
    content, problem = _finishes(lambda: read_examples(record))
    assert content is None and "not a regular file (a FIFO)" in problem
    cache = tmp_path / "results" / "cache"
    cache.mkdir(exist_ok=True)
    os.mkfifo(cache / "onnx-like.bin")  # run --runtime onnx reads its exported graph like this
    content, cached = _finishes(lambda: cached_bytes(cache / "onnx-like.bin", lambda: b"graph"))
    assert (content, cached) == (b"graph", False) and (cache / "onnx-like.bin").read_bytes() == b"graph"
    backbone = tmp_path / "backbone"
    backbone.mkdir()
    (backbone / "config.json").write_text("{}")
    os.mkfifo(cache / CACHE_FILE)  # run reads the backbone checksums first
    assert len(_finishes(lambda: folder_fingerprint(backbone, cache))) == 64
    os.mkfifo(tmp_path / "device")
    with pytest.raises(UnsafeFileError, match="a FIFO"):
        _finishes(lambda: read_store_bytes(tmp_path / "device"))
    with pytest.raises(harness.DataFileError, match="a FIFO"):  # a task's data file: a data problem, no hang
        _finishes(lambda: harness.files_checksum([tmp_path / "device"]))


# -- 40.11 a full disk while a checkpoint is saved is an OSError (one line), not a library's traceback --------------------
def test_a_full_disk_inside_safetensors_is_one_line(tmp_path):
    from safetensors import SafetensorError

    from harness.store_files import os_error_line

    def save(folder: Path):
        (folder / "model.safetensors").write_bytes(b"partial")
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    with pytest.raises(OSError) as raised:
        build_checkpoint(tmp_path / "ckpt" / "seed-1", save)
    assert raised.value.errno == 28
    assert os_error_line(raised.value).endswith(
        "No space left on device; free some space and run the same command again (finished cells are stored)."
    )
    assert not (tmp_path / "ckpt" / "seed-1").exists() and list((tmp_path / "ckpt").iterdir()) == [
        tmp_path / "ckpt" / "seed-1.lock"
    ]  # the half-written temporary folder is gone


# -- 40.13 matrix values that used to be tracebacks ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "matrix, expected",
    [
        ("models: [{model: be, train_on: stsb, epochs: .nan}]\ntasks: [stsb]\n", "epochs must be a finite number"),
        (
            "models: [{model: be, train_on: stsb, max_steps: 1.0e+400}]\ntasks: [stsb]\n",
            "max_steps must be a finite number",
        ),
        ("budget: {learning_rate: -.inf}\nmodels: [be]\ntasks: [stsb]\n", "learning_rate must be a finite number"),
        ("tasks: [stsb]\nmodels: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
)
def test_non_finite_or_deeply_nested_matrix_values_are_one_line(run_cli, tmp_path, matrix, expected):
    path = tmp_path / "matrix.yaml"
    path.write_text(matrix)
    code, out, err = run_cli("run", "--matrix", path, "--results", tmp_path / "results")
    assert code == 2 and expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


# -- 40.14 a misbehaving plugin fails its own cells; the rest of the matrix runs ----------------------------------------
def test_a_plugin_with_wrong_rows_objects_or_an_exception_fails_its_cell_only(tmp_path):
    write_toy_data(tmp_path / "data")
    outcomes, _ = file_toy_run(
        tmp_path, models=("toy-few-rows", "toy-raises", "toy-objects", "toy-embedder"), tasks=("toy-pairs",)
    )
    by_model = {o.spec.name: o for o in outcomes}
    assert [by_model[m].status for m in ("toy-few-rows", "toy-raises", "toy-objects", "toy-embedder")] == [
        "failed",
        "failed",
        "failed",
        "ok",
    ]
    assert "returned an array of shape (11, 64) for 12 texts" in by_model["toy-few-rows"].message
    assert (
        "raised RuntimeError: the plugin's server went away at test_store_guarantees.py"
        in by_model["toy-raises"].message
        and "a bug in the model or task plugin" in by_model["toy-raises"].message
    )
    assert "returned an array of object values, not numbers" in by_model["toy-objects"].message
    assert all("\n" not in o.message for o in outcomes)


def test_checked_vectors_accepts_numbers_and_names_what_is_wrong():
    from harness import ModelOutputError, checked_vectors

    assert checked_vectors([[1, 2], [3, 4]], 2).dtype == np.float64
    with pytest.raises(ModelOutputError, match=r"shape \(3,\) for 3 texts"):
        checked_vectors([1.0, 2.0, 3.0], 3)
    with pytest.raises(ModelOutputError, match="not an array of numbers"):
        checked_vectors([[1.0], "ab"], 2)


# -- 40.15 a read-only mount (EROFS) is a store that cannot be written, like EACCES: the "read-only-mount" case of
# test_export_from_a_store_it_cannot_write_loads_the_checkpoint above.


# -- 40.16 a missing or damaged per-example file is named, and run recomputes its cell ----------------------------------
def test_a_missing_or_damaged_side_file_is_recomputed_by_run_and_named_by_leaderboard_and_compare(run_cli, tmp_path):
    write_toy_data(tmp_path / "data")
    file_toy_run(tmp_path)
    results = tmp_path / "results"
    (side_file,) = results.glob("*/seed-*/*.examples.npz")
    good = side_file.read_bytes()
    side_file.write_bytes(b"damaged")
    code, out, err = run_cli("leaderboard", "--results", results, "--include-samples")
    assert code == 1 and "does not match the sha256 its record names" in err, err
    assert (
        "1 per-example file(s) missing or damaged" in err
        and "stored before harness kept it" not in (results / "leaderboards" / "toy.md").read_text()
    )
    side_file.unlink()
    code, out, err = run_cli("leaderboard", "--results", results, "--include-samples")
    assert code == 1 and f"{side_file} is missing" in err
    outcomes, messages = file_toy_run(tmp_path)
    assert [o.status for o in outcomes] == ["ok"] and side_file.read_bytes() == good
    assert any(f"{side_file} is missing" in m for m in messages)
    assert run_cli("leaderboard", "--results", results, "--include-samples")[0] == 0


def test_compare_names_a_damaged_side_file_and_exits_non_zero(run_cli, tmp_path, monkeypatch):
    from harness.compare import compare

    write_toy_data(tmp_path / "data")
    file_toy_run(tmp_path, models=("toy-embedder", "toy-offset"))
    registry = build_registry(extra_plugins=[ToyPlugin(), FileToyPlugin()])
    store = Store(tmp_path / "results")
    for side_file in store.root.glob("*/seed-*/*.examples.npz"):
        side_file.write_bytes(b"damaged")
    _, _, (comparison,) = compare(
        registry, store, "toy-embedder", "toy-offset", ["toy-examples"], [42], profile="smoke"
    )
    assert comparison.result is None and comparison.damaged >= 1 and "recomputes the cell" in comparison.reason


# -- 40.17 leftovers of killed writers are removed from every output folder; exports are atomic -------------------------
def _dead_writer_temporary(folder: Path, name: str) -> Path:
    from harness.files import temporary_prefix

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(finished.stdout)
    prefix = temporary_prefix(name).replace(f".{os.getpid()}.", f".{dead}.")
    folder.mkdir(parents=True, exist_ok=True)
    leftover = folder / f"{prefix}abcd1234.tmp"
    leftover.write_text("half a file")
    return leftover


def test_leaderboard_and_publish_remove_the_temporaries_of_killed_writers(run_cli, tmp_path):
    from harness.publish import Selection, publish

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path, profile="quick")
    registry = build_registry(extra_plugins=[ToyPlugin()])
    published = Store(tmp_path / "published")
    publish(Store(tmp_path / "results"), published, Selection(), registry=registry, data_dir=tmp_path / "data")
    (record_path,) = published.record_files()
    in_published = _dead_writer_temporary(record_path.parent, record_path.name)
    in_boards = _dead_writer_temporary(tmp_path / "boards", "toy.md")
    publish(Store(tmp_path / "results"), published, Selection(), registry=registry, data_dir=tmp_path / "data")
    code, _, err = run_cli("leaderboard", "--results", published.root, "--output", tmp_path / "boards")
    assert code == 0, err
    assert not in_published.exists() and not in_boards.exists()


def test_export_results_writes_each_file_atomically(run_cli, tmp_path, monkeypatch):
    import errno

    import harness.files as files

    _store_with_mteb_record(tmp_path, "STS12")
    out = tmp_path / "out"
    code, _, err = run_cli(
        "export-results", "--format", "mteb", "--results", tmp_path / "results", "--to", out, "--include-samples"
    )
    assert code == 0, err
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert any(p.name == "model_meta.json" for p in before)

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)  # every file of the next export fails at its flush
    code, _, err = run_cli(
        "export-results",
        "--format",
        "mteb",
        "--results",
        tmp_path / "results",
        "--to",
        out,
        "--include-samples",
        "--overwrite",
    )
    assert code == 2 and "No space left on device; free some space" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # nothing half-written, no leftovers


# == end of: files =========================================================================================


def test_publishing_in_place_takes_the_cell_lock_and_keeps_a_record_a_run_replaced(tmp_path, monkeypatch):
    """Issue 50: a record rewriter is a write like any other. Publishing a store in place holds the cell lock a run
    takes, and a record a run replaced after publish read it is left as the run wrote it (before: overwritten with
    the stale content, so the new side file no longer matched its record)."""
    import harness.publish as publishing
    from harness.publish import Selection, publish
    from harness.store import examples_path

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path, profile="quick")
    registry = build_registry(extra_plugins=[ToyPlugin()])
    store = Store(tmp_path / "results")
    (path,) = store.record_files()
    record = json.loads(path.read_text())
    key, seed = record["model_key"], record["seed"]
    lock_seen = []
    original = Store.cells_lock

    def watched(self, model_key, seed, purpose=""):
        lock_seen.append((model_key, seed, purpose))
        return original(self, model_key, seed, purpose)

    monkeypatch.setattr(Store, "cells_lock", watched)
    prepare = publishing.prepare_output_dir

    def a_run_rewrites_the_cell(*args, **kwargs):  # between publish reading the record and writing it
        replaced = {**record, "created_at": "2030-01-01T00:00:00+00:00"}
        side_file = examples_path(path)
        store.write(key, seed, record["task"]["key"], replaced, side_file.read_bytes() if side_file.exists() else None)
        return prepare(*args, **kwargs)

    monkeypatch.setattr(publishing, "prepare_output_dir", a_run_rewrites_the_cell)
    result = publish(store, store, Selection(), registry=registry, data_dir=tmp_path / "data")
    stored = json.loads(path.read_text())
    assert stored["created_at"] == "2030-01-01T00:00:00+00:00" and "published" not in stored
    assert result.written == [] and "replaced by a run while it was published" in result.warnings[-1]
    assert (key, seed, "harness publish") in lock_seen
    monkeypatch.setattr(publishing, "prepare_output_dir", prepare)
    result = publish(store, store, Selection(), registry=registry, data_dir=tmp_path / "data")
    assert result.written == [path] and json.loads(path.read_text())["published"]
