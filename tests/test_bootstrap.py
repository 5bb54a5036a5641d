"""Bootstrap intervals and paired significance over test examples: coverage, null calibration,
agreement with plain resampling loops, the store's side file, leaderboard marks and ``harness compare``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import average_precision_score, f1_score

import harness.testing as ht
from harness.evaluation.bootstrap import (
    ExampleDataError,
    ExampleScores,
    bootstrap_indices,
    bootstrap_interval,
    example_side_file,
    mean_examples,
    percentile_interval,
)
from harness.evaluation.pairs import PairSet, correlation_scores, pair_examples
from harness.evaluation.ranking import rerank_metrics
from harness.evaluation.significance import agrees_with_paper, column_marks, holm, paired_test
from harness.leaderboard import collect_tables, render_csv, render_latex, render_markdown
from harness.leaderboard.stats import annotate, attach_statistics, compare_cells, compare_rows, paper_agreement
from harness.metrics import spearman
from harness.store import Store, read_examples


def _correlated(rng, n, rho):
    gold = rng.normal(size=n)
    return gold, rho * gold + np.sqrt(1 - rho**2) * rng.normal(size=n)


def test_spearman_interval_covers_the_true_correlation_at_the_nominal_rate():
    rng = np.random.default_rng(7)
    rho = 0.6
    true_spearman = 100 * 6 / np.pi * np.arcsin(rho / 2)  # bivariate normal: Spearman's rho from Pearson's
    covered, trials = 0, 150
    for trial in range(trials):
        gold, predicted = _correlated(rng, 150, rho)
        low, high = bootstrap_interval(
            ExampleScores("spearman", {"predicted": predicted, "gold": gold}), resamples=400, seed=trial
        )
        covered += low <= true_spearman <= high
    assert 0.89 <= covered / trials <= 0.99  # nominal 0.95; binomial sd ~0.018 at 150 trials


def test_paired_test_p_values_are_uniform_under_the_null():
    rng = np.random.default_rng(11)
    p_values = []
    for trial in range(200):
        gold = rng.normal(size=120)
        a = ExampleScores("spearman", {"predicted": gold + rng.normal(size=120), "gold": gold})
        b = ExampleScores("spearman", {"predicted": gold + rng.normal(size=120), "gold": gold})
        p_values.append(paired_test([a], [b], resamples=300, seed=trial).p_value)
    p_values = np.array(p_values)
    assert 0.01 <= np.mean(p_values < 0.05) <= 0.10
    assert stats.kstest(p_values, "uniform").pvalue > 0.01
    # and it has power: a clearly better model is significant
    gold = rng.normal(size=300)
    better = ExampleScores("spearman", {"predicted": gold + 0.3 * rng.normal(size=300), "gold": gold})
    worse = ExampleScores("spearman", {"predicted": gold + 1.5 * rng.normal(size=300), "gold": gold})
    result = paired_test([better], [worse])
    assert result.p_value < 0.01 and result.low > 0 and agrees_with_paper(result, 2.0) == "agrees"
    assert agrees_with_paper(result, -1.0) == "opposite"


def test_retrieval_interval_equals_a_direct_resampling_loop():
    rng = np.random.default_rng(3)
    queries = []
    for _ in range(40):
        candidates = [f"c{i}" for i in range(12)]
        gold = set(rng.choice(candidates, size=rng.integers(1, 4), replace=False).tolist())
        queries.append((gold, candidates, rng.normal(size=12)))
    ranked = [
        rerank_metrics(gold, [candidates[i] for i in np.argsort(-scores, kind="stable")])
        for gold, candidates, scores in queries
    ]
    data = ExampleScores("mean", {"values": [metrics["map"] for metrics in ranked]})
    assert data.value() == pytest.approx(100 * np.mean([m["map"] for m in ranked]))
    indices = bootstrap_indices(data, 500, seed=5)
    loop = []
    for row in indices:  # the metric recomputed from the resampled queries, one resample at a time
        chosen = [queries[i] for i in row]
        loop.append(
            100
            * np.mean([rerank_metrics(g, [c[i] for i in np.argsort(-s, kind="stable")])["map"] for g, c, s in chosen])
        )
    assert np.allclose(data.resampled(indices), loop)
    assert bootstrap_interval(data, 500, seed=5) == pytest.approx(percentile_interval(np.array(loop)))


def test_statistics_reproduce_the_task_scores():
    rng = np.random.default_rng(0)
    sets = [PairSet(f"s{k}", ["a"] * n, ["b"] * n, rng.integers(0, 6, n).astype(float)) for k, n in enumerate((30, 50))]
    predictions = [p.gold + rng.normal(size=len(p)) for p in sets]
    scores = correlation_scores(sets, predictions)
    assert pair_examples(sets, predictions, "all").value() == pytest.approx(scores["spearman_all"])
    assert pair_examples(sets, predictions, "mean").value() == pytest.approx(scores["spearman_mean"])
    # stratified: every resample keeps each set's size, and per-set Spearman matches a loop
    data = pair_examples(sets, predictions, "mean")
    indices = bootstrap_indices(data, 3)
    assert (data.groups[indices][:, :30] == 0).all() and (data.groups[indices][:, 30:] == 1).all()
    loop = [
        100
        * np.mean(
            [
                spearman(
                    data.arrays["predicted"][row[data.groups[row] == k]],
                    data.arrays["gold"][row[data.groups[row] == k]],
                )
                for k in (0, 1)
            ]
        )
        for row in indices
    ]
    assert np.allclose(data.resampled(indices), loop)
    gold = rng.integers(0, 7, 400)
    predicted = np.where(rng.random(400) < 0.6, gold, rng.integers(0, 9, 400))
    f1 = ExampleScores("f1_macro", {"predicted": predicted, "gold": gold})
    assert f1.value() == pytest.approx(100 * f1_score(gold, predicted, average="macro", zero_division=0))
    indices = bootstrap_indices(f1, 4)
    assert np.allclose(
        f1.resampled(indices),
        [100 * f1_score(gold[r], predicted[r], average="macro", zero_division=0) for r in indices],
    )
    scores = np.round(rng.normal(size=300), 1)  # ties: thresholds at distinct scores, as scikit-learn
    positive = (scores + rng.normal(size=300) > 0.5).astype(int)
    ap = ExampleScores("average_precision", {"predicted": scores, "gold": positive})
    indices = bootstrap_indices(ap, 4)
    assert np.allclose(ap.resampled(indices), [100 * average_precision_score(positive[r], scores[r]) for r in indices])
    with pytest.raises(ExampleDataError, match="needs arrays"):
        ExampleScores("spearman", {"values": [1.0, 2.0]})
    assert example_side_file(f1, f1.value() + 1.0, "t") == (None, None)  # does not reproduce the score: not stored


def test_holm():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5]


def _record(model, seed, task, data, family="fam"):
    record = {
        "status": "ok",
        "model": {
            "name": model,
            "label": model,
            "train_on": None,
            "backbone": "tiny",
            "profile": "quick",
            "hash": f"{model}-hash",
        },
        "model_key": f"{model}-key",
        "seed": seed,
        "task": {"name": task, "key": task, "label": task, "family": family, "version": "1", "main_score": "spearman"},
        "hardware": "cpu",
        "dataset_checksum": "0" * 64,
    }
    if isinstance(data, ExampleScores):
        description, content = example_side_file(data, data.value(), task)
        record.update(main_score=data.value(), scores={"spearman": data.value()}, examples=description)
        return record, content
    record.update(main_score=data, scores={"spearman": data})
    return record, None


def test_a_row_without_data_is_never_passed_over_by_a_mark():
    """Bold means "significantly better than the runner-up"; a row without per-example data that scores above the
    best compared row, or sits between it and the next, keeps the column unmarked or unbolded."""
    rng = np.random.default_rng(3)
    replicates = {"a": 80 + rng.normal(size=500) * 0.1, "b": 70 + rng.normal(size=500) * 0.1}
    clear = column_marks({"a": 80.0, "b": 70.0}, replicates)
    assert clear.best == "a" and clear.best_significant
    above = column_marks({"old": 85.0, "a": 80.0, "b": 70.0}, replicates)
    assert above.best is None and not above.best_significant and not above.tied
    between = column_marks({"a": 80.0, "old": 79.9, "b": 70.0}, replicates)
    assert between.best == "a" and not between.best_significant and "old" not in between.p_values


def test_side_file_leaderboard_marks_and_old_records(tmp_path):
    rng = np.random.default_rng(1)
    gold = rng.normal(size=400)
    store = Store(tmp_path)
    noise = {"strong": 0.3, "close": 0.31, "weak": 2.0}
    for model, level in noise.items():
        for seed in (1, 2):
            data = ExampleScores("spearman", {"predicted": gold + level * rng.normal(size=400), "gold": gold})
            store.write(f"{model}-key", seed, "t1", *_record(model, seed, "t1", data))
            store.write(f"{model}-key", seed, "t2", *_record(model, seed, "t2", data))
    store.write("old-key", 1, "t1", *_record("old", 1, "t1", 50.0))  # stored before per-example data
    store.write("old-key", 2, "t1", *_record("old", 2, "t1", 51.0))
    tables = collect_tables(store)  # old has only t1: a section of its own
    for section in tables:
        attach_statistics(section)
    table = next(section for section in tables if any(row.label == "strong" for row in section.rows))
    old_table = next(section for section in tables if any(row.label == "old" for row in section.rows))
    rows = {row.label: row for section in tables for row in section.rows}
    strong, close, weak = (table.cell_text(rows[name], "t1") for name in ("strong", "close", "weak"))
    assert "[" in strong and not strong.startswith("**")  # strong vs close: a tie, so no bold
    assert close.endswith("≈") != strong.endswith("≈") and "≈" not in weak  # the runner-up is tied with the best
    assert old_table.cell_text(rows["old"], "t1") == "50.50 ± 0.71"  # no interval; the notes say why
    markdown = render_markdown(tables)
    assert "95% bootstrap interval" in markdown and "No interval in 2 cell(s) (columns: t1, average)" in markdown
    assert "ci_low" in render_csv(table).splitlines()[0]
    assert compare_rows(table, "strong-key", "weak-key", "t1").p_value < 0.05
    # the building blocks a paper-table view calls: per column, or an average over member columns
    assert paper_agreement([rows["strong"].cells["t1"]], [rows["weak"].cells["t1"]], 80.0, 70.0) == "agrees"
    assert paper_agreement([rows["weak"].cells["t1"]], [rows["strong"].cells["t1"]], 80.0, 70.0) == "opposite"
    assert paper_agreement([rows["old"].cells["t1"]], [rows["weak"].cells["t1"]], 80.0, 70.0) is None
    both = compare_cells([rows["strong"].cells[c] for c in ("t1", "t2")], [rows["weak"].cells[c] for c in ("t1", "t2")])
    assert both.difference == pytest.approx(rows["strong"].average(["t1", "t2"]) - rows["weak"].average(["t1", "t2"]))
    assert annotate(rows["weak"], "t1", rows["weak"].cells["t1"]).startswith(" [")
    # the strong row alone against weak and old: bold (significant), LaTeX gets \textbf
    store_b = Store(tmp_path / "b")
    for model in ("strong", "weak"):
        for seed in (1, 2):
            record = json.loads(store.record_path(f"{model}-key", seed, "t1").read_text())
            content = (tmp_path / f"{model}-key" / f"seed-{seed}" / "t1.examples.npz").read_bytes()
            store_b.write(f"{model}-key", seed, "t1", record, examples=content)
    (table_b,) = collect_tables(store_b)
    attach_statistics(table_b)
    assert table_b.cell_text([r for r in table_b.rows if r.label == "strong"][0], "t1").startswith("**")
    assert "\\textbf{" in render_latex(table_b)
    # a side file changed after it was written is not used
    path = tmp_path / "b" / "weak-key" / "seed-1" / "t1.examples.npz"
    path.write_bytes(path.read_bytes() + b"x")
    record = dict(
        json.loads(store_b.record_path("weak-key", 1, "t1").read_text()),
        _path=str(store_b.record_path("weak-key", 1, "t1")),
    )
    assert read_examples(record)[1].endswith("does not match the sha256 its record names")


def test_run_keeps_examples_and_compare(tmp_path):
    run = ht.run_harness(
        "run",
        "--models",
        "testing-embedder,testing-embedder:dim=8",
        "--tasks",
        "stsb",
        "--profile",
        "quick",
        "--results",
        tmp_path,
        "--no-progress",
        plugins=["harness.testing"],
    )
    assert run.exit_code == 0, run.stderr
    assert list(tmp_path.glob("*/seed-42/stsb.examples.npz"))
    compared = ht.run_harness(
        "compare",
        "testing-embedder",
        "testing-embedder:dim=8",
        "--tasks",
        "stsb",
        "--profile",
        "quick",
        "--results",
        tmp_path,
        "--json",
        plugins=["harness.testing"],
    )
    assert compared.exit_code == 0, compared.stderr
    (task,) = json.loads(compared.stdout)["tasks"]
    assert task["task"] == "stsb" and 0 < task["p_value"] <= 1 and task["interval"][0] <= task["difference"]
    table = ht.run_harness(
        "compare",
        "testing-embedder",
        "testing-embedder:dim=8",
        "--tasks",
        "sickr",
        "--profile",
        "quick",
        "--results",
        tmp_path,
        plugins=["harness.testing"],
    )
    assert table.exit_code == 0 and "no test" in table.stdout and "has no record" in table.stdout
    rescore = ht.run_harness(
        "rescore",
        "--models",
        "testing-embedder",
        "--tasks",
        "stsb",
        "--profile",
        "quick",
        "--results",
        tmp_path,
        "--no-progress",
        plugins=["harness.testing"],
    )
    assert rescore.exit_code == 0 and "1 cells computed" in rescore.stdout
    published = ht.run_harness(
        "publish", "--results", tmp_path, "--to", tmp_path / "pub", "--all", plugins=["harness.testing"]
    )
    assert published.exit_code == 0, published.stderr
    assert len(list((tmp_path / "pub").glob("*/seed-42/stsb.examples.npz"))) == 2
    board = ht.run_harness("leaderboard", "--results", tmp_path / "pub", "--output", tmp_path / "boards")
    assert board.exit_code == 0 and "95% bootstrap interval" in (tmp_path / "boards" / "senteval.md").read_text()


def test_rescore_never_trains(tmp_path):
    refused = ht.run_harness(
        "rescore",
        "--models",
        "testing-trainable",
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        tmp_path,
        "--no-progress",
        plugins=["harness.testing"],
    )
    assert refused.exit_code == 2 and "cannot rescore 1 trained model(s)" in refused.stderr
    assert not list(tmp_path.glob("*/seed-42/*.json"))  # nothing stored, nothing trained
    trained = ht.run_harness(
        "run",
        "--models",
        "testing-trainable",
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        tmp_path,
        "--no-progress",
        plugins=["harness.testing"],
    )
    assert trained.exit_code == 0, trained.stderr
    rescored = ht.run_harness(
        "rescore",
        "--models",
        "testing-trainable",
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        tmp_path,
        "--no-progress",
        plugins=["harness.testing"],
    )
    assert rescored.exit_code == 0 and "loading checkpoint" in rescored.stdout + rescored.stderr
    assert "training testing-trainable" not in rescored.stdout + rescored.stderr


def test_ranked_hits_are_kept_in_the_side_file_without_changing_the_examples_identity():
    from harness.blocks import ranked_hits

    hits = ranked_hits([["d3", "d1", "d2"], ["d2", "d9"]], [{"d1"}, {"x", "y"}], k=2)
    assert hits.top.tolist() == [["d3", "d1"], ["d2", "d9"]] and hits.gold_rank.tolist() == [2, 0]
    assert hits.gold.tolist() == [["d1", ""], ["x", "y"]] and hits.depth == 3 and hits.top.dtype.kind == "U"
    with_hits = mean_examples([0.5, 0.0], ids=["q1", "q2"], hits=hits)
    read = ExampleScores.from_npz(with_hits.to_npz(), with_hits.describe())  # allow_pickle=False
    assert read.hits.top.tolist() == hits.top.tolist() and read.hits.depth == 3
    assert read.identity() == mean_examples([0.5, 0.0], ids=["q1", "q2"]).identity()
    assert ranked_hits([[3, 1]], [[1]]).top.dtype.kind == "i"  # integer ids stay integers, padded with -1
    with pytest.raises(ExampleDataError, match="ranked hits of 2 queries for 1 examples"):
        mean_examples([0.5], hits=hits)
