"""Measured train/test overlap (harness.contamination): the bundled STS figures, what a trained cell's
record says, the unseen subset as its own cell, the leaderboard marks and the derivation for older records."""

from __future__ import annotations

import csv
import io
import json

import pytest

from harness.contamination import EvaluatedTexts, TextSet, measure, normalise, pair_key, seen_text
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.profiles import get_profile
from harness.run.config import RunConfig
from harness.run.driver import Run

# Exact-match pairs of the bundled STS12-16 test sets also in STS-B train, either order.
ISSUE_FIGURES = {
    "sts12": (1002, 3108),
    "sts13": (597, 1500),
    "sts14": (1861, 3750),
    "sts15": (1102, 3000),
    "sts16": (197, 1186),
}


def test_normalisation_and_either_order():
    assert normalise("  A\u00a0man\tis  PLAYING ") == "a man is playing"
    assert pair_key("B b", "a") == pair_key("a ", "b  B")
    seen = TextSet()
    seen.add_pairs([("A man plays.", "Someone plays.")])
    counts = measure(seen, EvaluatedTexts(pairs=(("someone plays.", "a man  plays."), ("a man plays.", "x"))))
    assert counts["test_pairs_seen"] == 1 and counts["test_pairs"] == 2
    assert counts["test_sentences_seen"] == 2 and counts["test_sentences"] == 3
    assert seen_text({"contamination": counts}) == "50% of test pairs seen in training"


def test_bundled_sts_overlap_with_stsb_train_reproduces_the_issue(registry):
    from harness.plugin_api import EvalContext

    ctx = EvalContext(profile=get_profile("quick"), device="cpu", seed=42, batch_size=8)
    seen = TextSet()
    assert seen.add(registry.task("stsb").factory({}, None).training_data("scored_pairs", ctx).train)
    for name, (pairs_seen, pairs) in ISSUE_FIGURES.items():
        counts = measure(seen, registry.task(name).factory({}, None).evaluated_texts(ctx))
        assert (counts["test_pairs_seen"], counts["test_pairs"]) == (pairs_seen, pairs), name


def _run(registry, tiny_bert, tmp_path, models, tasks):
    config = RunConfig(
        models=models,
        tasks=tasks,
        profile="smoke",
        backbone=tiny_bert,
        device="cpu",
        results_dir=tmp_path / "results",
        progress=False,
    )
    runner = Run(registry, config, log=lambda message: None)
    return runner, runner.run(LocalExecutor(), runner.plan())


def _record(runner, outcome) -> dict:
    return json.loads(runner.store.record_path(outcome.spec.key, outcome.seed, outcome.task.key).read_text())


@pytest.fixture(scope="module")
def trained_run(tiny_bert, tmp_path_factory):
    """be trained on all of STS-B train (smoke: 8 steps), scored on STS12 and its unseen subset; the untrained be."""
    from harness.registry import build_registry

    registry = build_registry()
    tmp_path = tmp_path_factory.mktemp("contamination")
    models = [ModelEntry("be", train_on="stsb", budget={"max_train_examples": None}), ModelEntry("be")]
    return tmp_path, *_run(registry, tiny_bert, tmp_path, models, ["sts12", "sts12:unseen=true"])


def test_a_trained_cell_records_its_overlap_and_scores_the_unseen_subset(trained_run, registry):
    from harness.plugin_api import EvalContext

    _, runner, outcomes = trained_run
    records = {(o.spec.train_on, o.task.label): _record(runner, o) for o in outcomes}
    assert all(o.status == "ok" for o in outcomes)
    full, unseen = records[("stsb", "sts12")], records[("stsb", "sts12:unseen=True")]
    measured = full["contamination"]
    # Counted independently: the smoke cut of STS12 against every STS-B train pair.
    ctx = EvalContext(profile=get_profile("smoke"), device="cpu", seed=42, batch_size=8)
    train = registry.task("stsb").factory({}, None).training_data("scored_pairs", ctx).train
    train_pairs = {
        frozenset((" ".join(a.split()).lower(), " ".join(b.split()).lower())) for a, b in zip(train.first, train.second)
    }
    test = registry.task("sts12").factory({}, None).evaluated_texts(ctx).pairs
    expected = sum(
        frozenset((" ".join(a.split()).lower(), " ".join(b.split()).lower())) in train_pairs for a, b in test
    )
    assert measured["test_pairs"] == len(test) and measured["test_pairs_seen"] == expected > 0
    assert measured["training_data"] == [
        {"source": "stsb", "kind": "scored_pairs", "max_train_examples": None, "train_examples": len(train)}
    ]
    assert measured["how"] == "recorded"
    # The unseen subset is its own cell (task key), scored on the pairs left, and says how many it dropped.
    assert unseen["task"]["key"] != full["task"]["key"] and unseen["task"]["options"]["unseen"] is True
    assert unseen["details"]["unseen"] == {"pairs_dropped_as_seen": expected, "pairs_scored": len(test) - expected}
    assert sum(unseen["details"]["pairs"].values()) == len(test) - expected
    assert unseen["main_score"] != full["main_score"]
    # The untrained model trained on nothing the harness knows of: no measurement, and unseen scores every pair.
    assert "contamination" not in records[(None, "sts12")]
    assert records[(None, "sts12:unseen=True")]["details"]["unseen"]["pairs_dropped_as_seen"] == 0


def test_marks_in_every_leaderboard_format_and_in_compare(trained_run):
    from harness.compare import seen_notes
    from harness.leaderboard.html import render_html
    from harness.leaderboard.tables import collect_tables
    from harness.leaderboard.text import render_csv, render_latex, render_markdown

    _, runner, outcomes = trained_run
    full = next(o for o in outcomes if o.spec.train_on == "stsb" and o.task.label == "sts12")
    measured = _record(runner, full)["contamination"]
    share = f"{measured['test_pairs_seen'] / measured['test_pairs']:.0%}"
    tables = collect_tables(runner.store, include_samples=True)  # smoke records are on an evaluation sample
    markdown = render_markdown(tables)
    trained_line = next(line for line in markdown.splitlines() if "[train: stsb]" in line and line.startswith("|"))
    untrained_line = next(
        line for line in markdown.splitlines() if line.startswith("| ") and "| be " in line and "[train" not in line
    )
    assert f"†{share}" in trained_line and "†" not in untrained_line
    assert "†N%: N% of the cell's test pairs were in the row's training data" in markdown
    assert f"†{share[:-1]}\\%" in render_latex(tables) and f"†{share}" in render_html(tables)  # LaTeX escapes %
    rows = list(csv.DictReader(io.StringIO(render_csv(tables))))
    trained_csv = next(row for row in rows if row["train_on"] == "stsb")
    assert next(row for row in rows if not row["train_on"])["sts12_seen_pairs"] == ""  # untrained: not measured
    assert float(trained_csv["sts12_seen_pairs"]) == pytest.approx(
        measured["test_pairs_seen"] / measured["test_pairs"], abs=1e-4
    )
    assert seen_notes(runner.registry, runner.store, {"A": full.spec}, ["sts12"], [42]) == [
        f"A on sts12: {share} of test pairs seen in training (seed 42)"
    ]


def test_older_records_get_the_overlap_derived_from_their_spec_and_the_data(trained_run, run_cli, tmp_path):
    """`harness contamination --write` measures a record that lacks it from the record's own spec, seed and budget
    and the data now, and says so ('derived from the record'); the counts equal the run's own measurement."""
    import shutil

    from harness.store import Store, examples_path

    source_dir, runner, outcomes = trained_run
    root = tmp_path / "old"
    shutil.copytree(source_dir / "results", root, ignore=shutil.ignore_patterns("checkpoints", "cache", "locks"))
    store = Store(root)
    full = next(o for o in outcomes if o.spec.train_on == "stsb" and o.task.label == "sts12")
    path = store.record_path(full.spec.key, 42, full.task.key)
    record = json.loads(path.read_text())
    measured = record.pop("contamination")
    store.write(full.spec.key, 42, full.task.key, record, examples_path(path).read_bytes())  # as stored before
    code, out, _ = run_cli("contamination", "--results", root)
    assert (
        code == 0
        and "lack the measurement; --write stores it" in out
        and "contamination" not in json.loads(path.read_text())
    )
    code, out, _ = run_cli("contamination", "--results", root, "--write")
    assert code == 0 and "wrote the measurement into" in out
    derived = json.loads(path.read_text())["contamination"]
    assert derived["how"] == "derived from the record" and derived["source_checksum_matches"] is True
    for key in ("test_pairs", "test_pairs_seen", "test_sentences", "test_sentences_seen", "training_pairs"):
        assert derived[key] == measured[key], key
    assert store.lookup(full.spec.key, 42, full.task.key)[0] is not None  # sealed again: it verifies
    assert examples_path(path).is_file()  # its per-example side file kept
    assert f"{measured['test_pairs_seen']}/{measured['test_pairs']}" in out


def test_a_recipe_records_its_teachers_data_and_the_pairs_it_made(tiny_bert, tmp_path):
    """Augmented SBERT: the teacher trained inside the recipe's training and the student's silver and gold pairs
    are part of what the student's cells are measured against."""
    from harness.registry import build_registry

    registry = build_registry()
    runner, outcomes = _run(
        registry, tiny_bert, tmp_path, [ModelEntry("augsbert:teacher=be", train_on="stsb")], ["sts12"]
    )
    (outcome,) = outcomes
    assert outcome.status == "ok", outcome.message
    measured = _record(runner, outcome)["contamination"]
    sources = [source["source"] for source in measured["training_data"]]
    assert sources.count("stsb") >= 2  # the recipe's own source and its teacher's (trained inside it)
    (made,) = measured["made"]
    assert made["what"].startswith("augsbert student pairs") and made["pairs"] > 0
    provenance = json.loads((runner.store.checkpoint_dir(outcome.spec.key, 42) / "training.json").read_text())
    assert provenance["training_data"]["made"][0]["pairs"][0]  # texts inline: they exist only in this run
