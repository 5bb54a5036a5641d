"""Stored results as data: harness.load_results (long form, filters, wide view, damaged records, exported MTEB
folders), `harness results`, the cost a record stores, `harness leaderboard --cost` and `harness plot cost`."""

from __future__ import annotations

import csv
import io
import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

import harness
from conftest import REPO
from harness.results import COLUMNS, COST_COLUMNS
from store_toys import toy_run, write_toy_data


@pytest.fixture(scope="module")
def tiny_store(tmp_path_factory) -> Path:
    """A store of one untrained toy model on one toy task, seeds 1 and 2 (records written by this harness: they
    carry cost)."""
    root = tmp_path_factory.mktemp("tiny")
    write_toy_data(root / "data")
    toy_run(root, seeds=[1, 2])
    return root / "results"


def test_load_results_gives_one_row_per_cell_and_seed_with_its_cost(tiny_store):
    loaded = harness.load_results(tiny_store)
    frame = loaded.frame
    assert loaded.errors == [] and list(frame.columns) == list(COLUMNS)
    assert sorted(frame["seed"]) == [1, 2] and set(frame["task"]) == {"toy-pairs"}
    assert set(frame["status"]) == {"ok"} and frame["score"].notna().all()
    row = frame.iloc[0]
    assert row["source"] == "harness" and row["family"] == "toy" and row["model"] == "toy-embedder"
    assert row["spec"] == "toy-embedder" and row["train_on"] is None and row["profile"] == "smoke"
    assert Path(row["path"]).is_file() and row["store"] == str(tiny_store)
    assert row["runtime"] == "torch" and row["device"] == "cpu" and row["hardware"].startswith("cpu (")
    # what the cell cost: measured, and untrained means no training time
    assert row["training_seconds"] == 0.0 and row["evaluation_seconds"] > 0 and row["peak_rss_bytes"] > 10 * 2**20
    assert row["peak_gpu_bytes"] is None
    record = json.loads(Path(row["path"]).read_text())
    assert set(record["cost"]) == {*COST_COLUMNS, "device", "runtime"}
    assert record["cost"]["evaluation_seconds"] == row["evaluation_seconds"]


def test_wide_aggregates_seeds_as_the_leaderboard_does(tiny_store):
    loaded = harness.load_results(tiny_store)
    scores = sorted(loaded.frame["score"])
    mean = loaded.wide()
    assert list(mean.columns) == ["toy-pairs", "average"]
    assert mean.loc[("toy-embedder", loaded.frame["model_key"][0]), "toy-pairs"] == pytest.approx(sum(scores) / 2)
    assert mean["average"].iloc[0] == pytest.approx(sum(scores) / 2)
    assert loaded.wide("n")["toy-pairs"].iloc[0] == 2
    assert loaded.wide("std")["toy-pairs"].iloc[0] == pytest.approx(abs(scores[0] - scores[1]) / 2**0.5)
    # a row that misses a seed of a column has no average (the leaderboard ranks only complete rows)
    assert harness.load_results(tiny_store).frame.pipe(lambda f: f[f["seed"] == 1]).shape[0] == 1
    with pytest.raises(harness.InvalidOptionError, match="allowed values: mean, std, n"):
        loaded.wide("median")


def test_wide_equals_the_committed_leaderboard_of_a_family():
    loaded = harness.load_results(REPO / "published", families="senteval")
    wide = loaded.wide()
    with open(REPO / "leaderboards" / "senteval.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows
    by_key = {key: values for (_, key), values in wide.iterrows()}
    tasks = [c for c in wide.columns if c != "average"]
    for row in rows:
        values = by_key[row["model_key"]]
        for task in tasks:
            expected = row[f"{task}_mean"]
            assert (f"{values[task]:.4f}" if values[task] == values[task] else "") == expected, (row["model"], task)
        assert (f"{values['average']:.4f}" if values["average"] == values["average"] else "") == row["average"]
    # intervals, when asked for, are the leaderboard's (one seed: the cell's own bootstrap interval)
    be = next(row for row in rows if row["model"] == "be")
    sts12 = harness.load_results(REPO / "published", models=be["model_key"], tasks="sts12", intervals=True).frame
    assert f"{sts12['interval_low'][0]:.4f}" == be["sts12_ci_low"]
    assert f"{sts12['interval_high'][0]:.4f}" == be["sts12_ci_high"]


def test_filters_and_a_name_that_matches_nothing(tiny_store):
    assert len(harness.load_results(tiny_store, models="toy-embedder", tasks=["toy-pairs"], profile="smoke")) == 2
    assert len(harness.load_results(tiny_store, families="toy")) == 2
    with pytest.raises(harness.ResultsError, match="Did you mean: toy-embedder"):
        harness.load_results(tiny_store, models="toy-embeder")
    with pytest.raises(harness.ResultsError, match="no result store"):
        harness.load_results(tiny_store / "nowhere")


def test_a_damaged_record_is_reported_never_dropped_silently(tiny_store, tmp_path, caplog, run_cli):
    import shutil

    store = tmp_path / "store"
    shutil.copytree(tiny_store, store)
    damaged = sorted(store.glob("*/seed-1/*.json"))[0]
    record = json.loads(damaged.read_text())
    record["main_score"] = 99.0  # edited by hand, not sealed again
    damaged.write_text(json.dumps(record))
    with caplog.at_level(logging.WARNING, logger="harness.results"):
        loaded = harness.load_results(store)
    assert len(loaded) == 1 and [p.path for p in loaded.errors] == [damaged]
    assert "does not match its checksum" in loaded.errors[0].reason
    assert str(damaged) in caplog.text and "does not match its checksum" in caplog.text
    with pytest.raises(harness.ResultsError, match="1 result file"):
        harness.load_results(store, strict=True)
    code, out, err = run_cli("results", "--results", store, "--format", "csv")
    assert code == 1 and len(out.splitlines()) == 2  # the header and the record that verifies
    assert f"error: not loaded: {damaged}: content does not match its checksum" in err


def test_results_command_formats_filters_where_and_sort(run_cli, tiny_store, tmp_path):
    code, out, err = run_cli("results", "--results", tiny_store, "--format", "csv", "--sort=-score")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [float(r["score"]) for r in rows] == sorted((float(r["score"]) for r in rows), reverse=True)
    code, out, _ = run_cli(
        "results", "--results", tiny_store, "--format", "json", "--where", "seed in [2] and score > -100"
    )
    assert [item["seed"] for item in json.loads(out)] == [2]
    code, out, _ = run_cli("results", "--results", tiny_store, "--where", "not (seed == 2) and train_on == None")
    assert code == 0 and "| toy-embedder" in out and "1 row(s)" in out
    code, out, _ = run_cli("results", "--results", tiny_store, "--wide", "--stat", "n", "--format", "csv")
    assert code == 0 and next(csv.DictReader(io.StringIO(out)))["toy-pairs"] == "2"
    code, _, err = run_cli("results", "--results", tiny_store, "--where", "scor > 1")
    assert code == 2 and err.count("\n") == 1 and "no column 'scor'. Did you mean: score" in err
    code, _, err = run_cli("results", "--results", tiny_store, "--where", "__import__('os').system('x')")
    assert code == 2 and "is not" in err and err.count("\n") == 1
    # each of these was once a traceback (or, for a list, a silent row-by-row comparison); now one line, exit 2
    for expression, says in (
        ("score > -'a'", "is not allowed"),
        ("task == ['stsb']", "a list is compared only with `in`"),
        ("score > [1,2]", "a list is compared only with `in`"),
        ("score > 'a'", "compares a number with a text"),
        ("task == 3", "compares a number with a text"),
        ("not " * 5000 + "score > 1", "more than the 2000 allowed"),
        ("not " * 45 + "score > 1", "nested more than 40 levels deep"),
    ):
        code, _, err = run_cli("results", "--results", tiny_store, "--where", expression)
        assert code == 2 and says in err and err.count("\n") == 1, (expression, err)
    code, out, _ = run_cli("results", "--results", tiny_store, "--where", "not " * 30 + "score > -1e9")
    assert code == 0 and "2 row(s)" in out  # nesting within the bound still works
    code, _, err = run_cli("results", "--results", tiny_store, "--output", tmp_path)  # once named its temporary
    example = tmp_path / "results.md"
    assert (
        code == 2
        and err == f"error: --output {tmp_path} is a folder; name the file to write, e.g. --output {example}\n"
    )
    code, _, err = run_cli("results", "--results", tiny_store, "--sort", "sed")
    assert code == 2 and "Did you mean: seed" in err
    target = tmp_path / "rows.parquet"
    code, out, err = run_cli("results", "--results", tiny_store, "--format", "parquet", "--output", target)
    assert code == 0, err
    import pandas as pd

    assert len(pd.read_parquet(target)) == 2 and list(pd.read_parquet(target).columns) == list(COLUMNS)


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(run_cli, tiny_store, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now fails
    code, _, err = run_cli("results", "--results", tiny_store, "--format", "parquet", "--output", tmp_path / "x")
    assert code == 2 and err == "error: --format parquet needs pyarrow: pip install 'sentence-harness[data]'\n"


def test_results_command_over_the_published_records(run_cli):
    code, out, err = run_cli("results", "--published", "--families", "senteval", "--wide", "--format", "csv")
    assert code == 0, err
    wide = {row["model_key"]: row for row in csv.DictReader(io.StringIO(out))}
    with open(REPO / "leaderboards" / "senteval.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            assert float(wide[row["model_key"]]["sts12"]) == pytest.approx(float(row["sts12_mean"]), abs=5e-5)
    # most published records predate cost measurement: their cost columns are empty; those re-run since carry it
    code, out, _ = run_cli(
        "results", "--published", "--format", "csv", "--columns", "model_key,task,seed,evaluation_seconds,eval_seconds"
    )
    rows = list(csv.DictReader(io.StringIO(out)))
    with_cost = {
        (path.parents[1].name, path.stem, path.parent.name.removeprefix("seed-"))
        for path in (REPO / "published").glob("*/seed-*/*.json")
        if path.name != "training.json" and json.loads(path.read_text()).get("cost")
    }
    assert rows and any(r["eval_seconds"] for r in rows)
    assert {(r["model_key"], r["task"], r["seed"]) for r in rows if r["evaluation_seconds"] != ""} == with_cost


def _mteb_folder(root: Path, score: float = 0.75) -> Path:
    """The layout `harness export-results --format mteb` writes: results/<model>/<revision>/<Task>.json."""
    folder = root / "results" / "harness__be-seed-42" / "0123456789ab"
    folder.mkdir(parents=True)
    result = {
        "task_name": "STS12",
        "dataset_revision": "a0d554a64d88156834ff5ae9920b964011b16384",
        "mteb_version": "2.0.0",
        "evaluation_time": 1.5,
        "scores": {"test": [{"cosine_spearman": score, "cosine_pearson": 0.7, "main_score": score}]},
    }
    (folder / "STS12.json").write_text(json.dumps(result))
    (folder / "model_meta.json").write_text(json.dumps({"name": "harness/be-seed-42", "revision": "0123456789ab"}))
    manifest = [{"file": "results/harness__be-seed-42/0123456789ab/STS12.json", "model": "be", "seed": 42}]
    (root / "harness_export.json").write_text(json.dumps(manifest))
    return root


def test_an_mteb_results_folder_meets_the_store_in_one_frame(tiny_store, tmp_path, registry):
    from harness.components import register_core_components

    folder = _mteb_folder(tmp_path / "mteb")
    broken = folder / "results" / "harness__be-seed-42" / "0123456789ab" / "STS13.json"
    broken.write_text("{not json")
    loaded = harness.load_results(tiny_store, exported={"mteb": folder}, registry=register_core_components(registry))
    frame = loaded.frame
    assert sorted(frame["source"]) == ["harness", "harness", "mteb"]
    mteb = frame[frame["source"] == "mteb"].iloc[0]
    assert (mteb["model"], mteb["task"], mteb["seed"], mteb["metric"]) == ("be", "STS12", 42, "cosine_spearman")
    assert mteb["score"] == pytest.approx(75.0) and mteb["family"] == "mteb"
    assert [p.path for p in loaded.errors] == [broken] and "not an MTEB task result" in loaded.errors[0].reason
    assert set(loaded.wide().columns) == {"toy-pairs", "STS12", "average toy", "average mteb"}


def test_leaderboard_cost_columns_are_opt_in_and_name_the_machine(run_cli, tiny_store, tmp_path):
    code, _, err = run_cli("leaderboard", "--results", tiny_store, "--output", tmp_path / "plain", "--include-samples")
    assert code == 0, err
    code, _, err = run_cli(
        "leaderboard", "--results", tiny_store, "--output", tmp_path / "cost", "--include-samples", "--cost"
    )
    assert code == 0, err
    plain, cost = (tmp_path / "plain" / "toy.md").read_text(), (tmp_path / "cost" / "toy.md").read_text()
    assert "train s" not in plain and "| train s " in cost and "Cost columns (--cost)" in cost
    line = next(line for line in cost.splitlines() if line.startswith("| 1 "))
    assert "| 0.0 " in line and "| cpu (" in line  # untrained: no training time; the machine that measured it
    header = next(csv.reader(io.StringIO((tmp_path / "cost" / "toy.csv").read_text())))
    assert header[-7:] == [
        "cost_training_seconds",
        "cost_evaluation_seconds",
        "cost_items_per_second",
        "cost_peak_rss_mib",
        "cost_peak_gpu_mib",
        "cost_parameters_millions",
        "cost_measured_on",
    ]
    assert "cost_training_seconds" not in (tmp_path / "plain" / "toy.csv").read_text()
    code, _, err = run_cli(
        "leaderboard",
        "--results",
        tiny_store,
        "--output",
        tmp_path / "html",
        "--include-samples",
        "--cost",
        "--formats",
        "html",
    )
    assert code == 0, err
    page = (tmp_path / "html" / "toy.html").read_text()
    assert "<th>peak RSS MiB</th>" in page and "Cost columns (--cost)" in page


def test_plot_cost_draws_a_pareto_view_and_refuses_a_store_without_cost(run_cli, tiny_store, tmp_path):
    from harness.leaderboard.cost_plot import pareto_front

    # (cost, quality): the cheapest, the best, and one both dearer and worse than another
    assert pareto_front([(1.0, 70.0), (5.0, 80.0), (6.0, 75.0), (0.5, 60.0)]) == [3, 0, 1]
    code, out, err = run_cli("plot", "cost", "--results", tiny_store, "--output", tmp_path / "png")
    assert code == 0, err
    png = tmp_path / "png" / "cost-toy.png"
    assert out.strip() == f"wrote {png}" and png.read_bytes()[:4] == b"\x89PNG"
    # a store whose records predate cost measurement (a published row that was never re-run)
    no_cost = tmp_path / "no-cost"
    shutil.copytree(REPO / "published" / "cbe-dd3354f57000", no_cost / "cbe-dd3354f57000")
    code, _, err = run_cli("plot", "cost", "--results", no_cost, "--output", tmp_path / "none")
    assert code == 2 and "published/, have none" in err


def test_the_results_example_runs_on_the_published_records():
    import subprocess

    script = REPO / "examples" / "results_as_data.py"
    done = subprocess.run([sys.executable, script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "senteval, mean over seeds" in done.stdout and "0 not loaded" in done.stdout
    cbe = next(line for line in done.stdout.splitlines() if line.startswith("cbe [train: stsb]"))
    assert cbe.split()[-1] == "81.19"  # leaderboards/senteval.md's average of that row
    assert "mean and std across seeds" in done.stdout
    # the cost line counts the SentEval records that carry a cost (those run since harness measures it)
    from harness.store import Store

    senteval = [
        record
        for record in Store(REPO / "published").records()
        if record["task"]["family"] == "senteval" and record["status"] == "ok"
    ]
    costed = sum(bool(record.get("cost")) for record in senteval)
    assert f"records with cost: {costed} of {len(senteval)};" in done.stdout


def test_cost_meter_counts_parameters_once_and_reads_the_gpu_peak_of_its_evaluation(monkeypatch):
    import torch

    from harness.contamination import EvaluatedTexts
    from harness.run.cost import CostMeter

    class Wrapper:  # plugins wrap their torch modules: one level down is looked at, a shared tensor counted once
        def __init__(self):
            self.encoder = torch.nn.Linear(4, 3)  # 15 parameters
            self.head = torch.nn.Linear(3, 1, bias=False).to(torch.float64)  # 3 parameters
            self.tied = self.encoder

    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: 123456)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    meter = CostMeter("cuda:0")
    assert calls == ["reset"]  # the peak is this evaluation's, not the training's before it
    meter.stop()
    texts = EvaluatedTexts(pairs=(("a", "b"), ("c", "d")))
    cost = meter.record(
        model=Wrapper(),
        runtime="torch",
        training_report={"wall_seconds": 12.5},
        trained=True,
        texts=texts,
        examples=None,
    )
    # CUDA evaluates under autocast: the cost says the dtype its matrix products ran in, not the weights'
    assert (cost["parameters"], cost["precision"], cost["peak_gpu_bytes"]) == (18, "bfloat16 autocast", 123456)
    assert (cost["items"], cost["item_unit"], cost["training_seconds"]) == (2, "pairs", 12.5)
    on_cpu = CostMeter("cpu").record(
        model=object(), runtime="onnx", training_report=None, trained=True, texts=None, examples={"count": 7}
    )
    assert on_cpu["peak_gpu_bytes"] is None and on_cpu["parameters"] is None
    assert on_cpu["training_seconds"] is None  # trained, but its report does not say: unknown, never 0
    assert (on_cpu["items"], on_cpu["item_unit"], on_cpu["runtime"]) == (7, "examples", "onnx")


def test_the_results_guides_count_of_published_records_with_side_files_is_the_stores():
    """docs/guide/results.md counts the records of published/ with and without a per-example side file (every
    count in the docs that describes published/ is checked): the sentence must match the store."""
    import re

    from harness.store import Store

    records = list(Store(REPO / "published").records())
    with_side_file = sum(bool(record.get("examples")) for record in records)
    text = " ".join((REPO / "docs" / "guide" / "results.md").read_text(encoding="utf-8").split())
    found = re.search(r"in `published/`, (\d+) of the (\d+) records; the other (\d+) have one", text)
    assert found, "docs/guide/results.md no longer states the published/ side-file count"
    assert tuple(map(int, found.groups())) == (len(records) - with_side_file, len(records), with_side_file), (
        f"docs/guide/results.md: write '{len(records) - with_side_file} of the {len(records)} records; the other "
        f"{with_side_file} have one'"
    )
