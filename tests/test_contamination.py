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

# Pairs of the bundled STS12-16 and SICK-R test sets also in STS-B train, either order, punctuation, case and
# whitespace ignored (rule 2; rule 1 found 1002 for STS12 and 0 for SICK-R).
ISSUE_FIGURES = {
    "sickr": (55, 4927),
    "sts12": (1003, 3108),
    "sts13": (597, 1500),
    "sts14": (1861, 3750),
    "sts15": (1102, 3000),
    "sts16": (197, 1186),
}


def test_normalisation_and_either_order():
    assert normalise("  A\u00a0man\tis  PLAYING ") == "amanisplaying"
    # SICK's raw sentence is STS-B's tokenised one; rule 1 kept the space and the full stop apart
    assert normalise("A man is playing a piano") == normalise("a man is playing a piano .")
    assert normalise("He doesn't") == normalise("he does n't") != normalise("he does")
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
        if name == "sickr":  # 363 of SICK-R's 5,006 distinct test sentences (7.3%)
            assert (counts["test_sentences_seen"], counts["test_sentences"]) == (363, 5006)


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

    def letters(text):  # rule 2, counted here without the module: lower-case letters and digits only
        return "".join(character for character in text.lower() if character.isalnum())

    train_pairs = {frozenset((letters(a), letters(b))) for a, b in zip(train.first, train.second)}
    test = registry.task("sts12").factory({}, None).evaluated_texts(ctx).pairs
    expected = sum(frozenset((letters(a), letters(b))) in train_pairs for a, b in test)
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
    store, full, path, side_file = _old_store(trained_run, tmp_path)
    root = store.root
    measured = json.loads(path.read_text())["contamination"]
    _restore(store, full, path, side_file)  # as stored before
    code, out, _ = run_cli("contamination", "--results", root)
    assert (
        code == 0
        and "lack the measurement under matching rule 2; --write stores it" in out
        and "contamination" not in json.loads(path.read_text())
    )
    code, out, _ = run_cli("contamination", "--results", root, "--write")
    assert code == 0 and "wrote the measurement into" in out
    derived = json.loads(path.read_text())["contamination"]
    assert derived["how"] == "derived from the record" and derived["source_checksum_matches"] is True
    for key in ("test_pairs", "test_pairs_seen", "test_sentences", "test_sentences_seen", "training_pairs"):
        assert derived[key] == measured[key], key
    assert store.lookup(full.spec.key, 42, full.task.key)[0] is not None  # sealed again: it verifies
    assert side_file.is_file()  # its per-example side file kept
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


def _old_store(trained_run, tmp_path):
    """A copy of the trained run's store whose STS12 record lacks its measurement (as stored before harness 0.3)."""
    import shutil

    from harness.store import Store, examples_path

    source_dir, _, outcomes = trained_run
    root = tmp_path / "old"
    shutil.copytree(source_dir / "results", root, ignore=shutil.ignore_patterns("checkpoints", "cache", "locks"))
    store = Store(root)
    full = next(o for o in outcomes if o.spec.train_on == "stsb" and o.task.label == "sts12")
    path = store.record_path(full.spec.key, 42, full.task.key)
    return store, full, path, examples_path(path)


def _restore(store, full, path, side_file, **changes):
    record = json.loads(path.read_text())
    record.pop("contamination", None)
    record.update(changes)
    store.write(full.spec.key, 42, full.task.key, record, side_file.read_bytes())
    return record


def test_rewriting_measures_against_the_data_the_record_names(trained_run, run_cli, tmp_path):
    """A record computed on `--data-dir D` is measured against D, refused in one line where D is not there
    or its dataset checksum differs (before: measured against the bundled data and rewritten)."""
    store, full, path, side_file = _old_store(trained_run, tmp_path)
    _restore(store, full, path, side_file, data_dir=str(tmp_path / "gone"))
    code, out, _ = run_cli("contamination", "--results", store.root, "--write")
    assert code == 0 and "which is not there; pass --data-dir" in out and "not written: 1 record(s)" in out
    assert "contamination" not in json.loads(path.read_text())
    # data that is there but is not the data the record was computed on
    original = _restore(store, full, path, side_file, data_dir=None, dataset_checksum="0" * 64)
    code, out, _ = run_cli("contamination", "--results", store.root, "--write")
    assert code == 0 and "dataset checksum (000000000000...) differs from the bundled and downloaded data" in out
    assert "contamination" not in json.loads(path.read_text()) and original["dataset_checksum"] == "0" * 64
    # the data the record was computed on: measured and written
    computed_on = json.loads((trained_run[0] / "results" / path.relative_to(store.root)).read_text())
    _restore(store, full, path, side_file, dataset_checksum=computed_on["dataset_checksum"])
    code, out, _ = run_cli("contamination", "--results", store.root, "--write")
    assert code == 0 and json.loads(path.read_text())["contamination"]["test_pairs_seen"] > 0


def test_rewriting_a_signed_record_needs_the_store_key(trained_run, run_cli, tmp_path, monkeypatch):
    """A signed record is re-sealed with HARNESS_STORE_KEY; without the key it is refused in one line and
    nothing is written (before: stored unsigned, then refused by every reader with the key)."""
    store, full, path, side_file = _old_store(trained_run, tmp_path)
    monkeypatch.setenv("HARNESS_STORE_KEY", "secret")
    _restore(store, full, path, side_file)
    assert "signature" in json.loads(path.read_text())
    monkeypatch.delenv("HARNESS_STORE_KEY")
    code, _, err = run_cli("contamination", "--results", store.root, "--write")
    assert code == 2 and "is signed; set HARNESS_STORE_KEY to the store's key to rewrite it" in err
    assert len(err.strip().splitlines()) == 1 and "contamination" not in json.loads(path.read_text())
    monkeypatch.setenv("HARNESS_STORE_KEY", "secret")
    code, _, _ = run_cli("contamination", "--results", store.root, "--write")
    assert code == 0
    record, problem = store.lookup(full.spec.key, 42, full.task.key)
    assert problem is None and record["contamination"]["test_pairs_seen"] > 0  # signed again with the key


def test_rewriting_takes_the_cell_lock_and_rereads_the_record(trained_run, registry, tmp_path):
    """`contamination --write` takes the cell lock a run takes (held elsewhere: it waits; here with no
    wait, a LockTimeoutError), and a record a run replaced between measuring and writing is measured again (before:
    'refusing to store ...examples.npz: the record does not name its sha256' and the rest left unwritten)."""
    import hashlib
    import threading

    from harness.locks import LockTimeoutError
    from harness.run.overlap import OverlapDeriver

    store, full, path, side_file = _old_store(trained_run, tmp_path)
    _restore(store, full, path, side_file)
    deriver = OverlapDeriver(registry, store, lock_timeout=0)
    (item,) = [found for found in deriver.records() if found.path == path]
    held, release = threading.Event(), threading.Event()

    def hold():  # another process's run holding the cells of this model and seed
        with store.cells_lock(full.spec.key, 42, "a run"):
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    try:
        with pytest.raises(LockTimeoutError):
            deriver.write(item)
    finally:
        release.set()
        holder.join()
    assert "contamination" not in json.loads(path.read_text())
    # a run --overwrite stores a new record and side file after the measurement
    new_examples = side_file.read_bytes() + b"\0"
    record = json.loads(path.read_text())
    record["examples"] = {**record["examples"], "sha256": hashlib.sha256(new_examples).hexdigest()}
    record["created_at"] = "2030-01-01T00:00:00+00:00"
    store.write(full.spec.key, 42, full.task.key, record, new_examples)
    written = deriver.write(item)
    stored = json.loads(path.read_text())
    assert stored["created_at"] == "2030-01-01T00:00:00+00:00" and stored["contamination"] == written.contamination
    assert side_file.read_bytes() == new_examples and store.lookup(full.spec.key, 42, full.task.key)[1] is None


def test_a_measurement_under_the_older_rule_is_measured_again(trained_run, run_cli, tmp_path):
    """Measurements record their matching rule (normalisation_version); one made under rule 1 (punctuation
    and whitespace kept) counts as lacking, and `contamination --write` measures it again under rule 2."""
    store, full, path, side_file = _old_store(trained_run, tmp_path)
    current = json.loads(path.read_text())["contamination"]
    assert current["normalisation_version"] == 2 and "letters and digits only" in current["normalisation"]
    older = {key: value for key, value in current.items() if key != "normalisation_version"}
    older["normalisation"], older["test_pairs_seen"] = "NFKC, whitespace runs collapsed, case-folded", 0
    _restore(store, full, path, side_file, contamination=older)
    code, out, _ = run_cli("contamination", "--results", store.root)
    assert (
        code == 0 and "1 record(s) lack the measurement under matching rule 2 (1 measured under an older rule)" in out
    )
    code, out, _ = run_cli("contamination", "--results", store.root, "--write")
    measured = json.loads(path.read_text())["contamination"]
    assert code == 0 and measured["normalisation_version"] == 2
    assert measured["test_pairs_seen"] == current["test_pairs_seen"] and measured["how"] == "derived from the record"


def test_a_record_computed_on_another_data_dir_is_measured_against_it(tiny_bert, tmp_path, run_cli):
    """A run with `--data-dir D` recorded its overlap with D's test set; `contamination --write
    --recompute` measured the bundled set instead (4/200 became 0/200). Now it measures D again (the same counts)."""
    import shutil
    from pathlib import Path

    import harness
    from harness.plugin_api import EvalContext
    from harness.registry import build_registry

    registry = build_registry()
    ctx = EvalContext(profile=get_profile("smoke"), device="cpu", seed=42, batch_size=8)
    train = registry.task("stsb").factory({}, None).training_data("scored_pairs", ctx).train
    data = tmp_path / "D" / "sts12"
    shutil.copytree(Path(harness.__file__).parents[1] / "tasks" / "data" / "sts12", data)
    # in D, every test pair of STS12 (the tokenised copy the task reads) is an STS-B train pair
    for path in sorted((data / "senteval_tokenized").glob("STS.input.*.txt")):
        lines = path.read_text().splitlines()
        path.write_text("".join(f"{train.first[i]}\t{train.second[i]}\n" for i in range(len(lines))))
    config = RunConfig(
        models=[ModelEntry("be", train_on="stsb", budget={"max_train_examples": None})],
        tasks=["sts12"],
        profile="smoke",
        backbone=tiny_bert,
        device="cpu",
        results_dir=tmp_path / "results",
        data_dir=tmp_path / "D",
        progress=False,
    )
    runner = Run(registry, config, log=lambda message: None)
    (outcome,) = runner.run(LocalExecutor(), runner.plan())
    assert outcome.status == "ok", outcome.message
    path = runner.store.record_path(outcome.spec.key, 42, outcome.task.key)
    record = json.loads(path.read_text())
    recorded = record.pop("contamination")
    assert record["data_dir"] == str(tmp_path / "D") and recorded["test_pairs_seen"] == recorded["test_pairs"]
    runner.store.write(
        outcome.spec.key, 42, outcome.task.key, record, path.with_name("sts12.examples.npz").read_bytes()
    )
    code, out, _ = run_cli("contamination", "--results", tmp_path / "results", "--write", "--recompute")
    derived = json.loads(path.read_text())["contamination"]
    assert code == 0 and derived["how"] == "derived from the record"
    assert (derived["test_pairs_seen"], derived["test_pairs"]) == (recorded["test_pairs_seen"], recorded["test_pairs"])
