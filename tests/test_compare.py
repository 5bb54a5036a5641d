"""`harness compare` and the results site apply one task-version rule: records of a task computed by other versions
of it are not compared (another version may score other data or another way); both say so in the same words.
`--train-on-a` / `--train-on-b` give each side its own training source (`none`: untrained)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import harness.testing as ht
from harness.compare import other_task_versions
from harness.record import seal_record

MODELS = ("testing-embedder", "testing-embedder:dim=8")


def _compare(store: Path, *extra: str):
    return ht.run_harness(
        *("compare", *MODELS, "--tasks", "stsb", "--profile", "smoke", "--results", store, *extra),
        plugins=["harness.testing"],
    )


def _set_task_version(store: Path, label: str, version: str) -> None:
    """Rewrite (and re-seal) one model's stsb record as an earlier version of the task would have written it."""
    for path in store.glob("*/seed-*/stsb.json"):
        record = json.loads(path.read_text())
        if record["model"]["label"] == label:
            record["task"]["version"] = version
            path.write_text(json.dumps(seal_record(record)))


def test_other_task_versions_names_each_side_or_nothing():
    same = other_task_versions("A", [("stsb", "1"), ("stsb", "1")], "B", [("stsb", "1")])
    assert same == ""
    assert other_task_versions("A", [("stsb", "1")], "B", [("stsb", "2"), ("stsb", "1")]) == (
        "different task versions: A stsb version 1, B stsb version 1, stsb version 2"
    )


def test_compare_gives_no_difference_across_task_versions(tmp_path):
    store = tmp_path / "store"
    run = ht.run_harness(
        *("run", "--models", ",".join(MODELS), "--tasks", "stsb", "--profile", "smoke"),
        *("--results", store, "--no-progress"),
        plugins=["harness.testing"],
    )
    assert run.exit_code == 0, run.stderr
    before = _compare(store, "--json")
    assert before.exit_code == 0 and json.loads(before.stdout)["tasks"][0]["difference"] is not None

    _set_task_version(store, MODELS[1], "0-older")
    reason = f"different task versions: {MODELS[0]} stsb version 1, {MODELS[1]} stsb version 0-older"
    as_json = _compare(store, "--json")
    assert as_json.exit_code == 0, as_json.stderr  # an untested task is no error
    assert json.loads(as_json.stdout)["tasks"] == [{"task": "stsb", "result": None, "reason": reason}]
    as_table = _compare(store)
    assert as_table.exit_code == 0, as_table.stderr
    (row,) = [line for line in as_table.stdout.splitlines() if line.startswith("| stsb")]
    assert f"no test: {reason}" in row and "+" not in row.split("no test")[0]  # no difference, no interval

    site = tmp_path / "site"
    # smoke records are on an evaluation sample: the site shows them with --include-samples
    built = ht.run_harness("site", "--to", site, "--results", store, "--include-samples", plugins=["harness.testing"])
    assert built.exit_code == 0, built.stderr
    (pair,) = [json.loads(path.read_text()) for path in site.glob("data/compare/*/0-1.json")]
    # the site's row A is the table's higher-ranked row: either model, in the same words
    flipped = f"different task versions: {MODELS[1]} stsb version 0-older, {MODELS[0]} stsb version 1"
    (task,) = pair["tasks"]
    assert task["result"] is None and task["reason"] in (reason, flipped)


def test_each_side_may_have_its_own_training_source(tmp_path):
    from harness import HarnessError
    from harness.compare import UNTRAINED, side_source
    from harness.registry import default_registry

    registry = default_registry()
    assert side_source(registry, "be", "stsb", None, "--train-on-b") == "stsb"  # --train-on for both sides
    assert side_source(registry, "be", "stsb", UNTRAINED, "--train-on-b") is None  # this side untrained
    assert side_source(registry, "be", None, "sickr", "--train-on-a") == "sickr"
    with pytest.raises(
        HarnessError, match=r"--train-on-a none: 'ce' cannot be evaluated untrained; .*--train-on-a stsb"
    ):
        side_source(registry, "ce", None, "none", "--train-on-a")
    # a source that is no task (a path) or names several was taken as a source and exited 0
    with pytest.raises(HarnessError, match=r"^--train-on-a: unknown task '../../etc'. Known tasks: "):
        side_source(registry, "be", None, "../../etc", "--train-on-a")
    with pytest.raises(HarnessError, match=r"^--train-on 'senteval' names 7 tasks; a training source is one task"):
        side_source(registry, "be", "senteval", None, "--train-on-b")
    assert side_source(registry, "be", "self", None, "--train-on-b") == "self"

    store = tmp_path / "store"
    for extra in ((), ("--train-on", "stsb")):
        run = ht.run_harness(
            *("run", "--models", "testing-trainable", "--tasks", "stsb", "--profile", "smoke", "--results", store),
            *("--no-progress", *extra),
            plugins=["harness.testing"],
        )
        assert run.exit_code == 0, run.stderr
    mixed = ht.run_harness(
        *("compare", "testing-trainable", "testing-trainable", "--tasks", "stsb", "--profile", "smoke"),
        *("--results", store, "--json", "--train-on-a", "stsb", "--train-on-b", "none"),
        plugins=["harness.testing"],
    )
    assert mixed.exit_code == 0, mixed.stderr
    answer = json.loads(mixed.stdout)
    assert answer["a"]["model_key"] != answer["b"]["model_key"]  # the trained and the untrained spec
    assert answer["tasks"][0]["difference"] is not None
    as_table = ht.run_harness(
        *("compare", "testing-trainable", "testing-trainable", "--tasks", "stsb", "--profile", "smoke"),
        *("--results", store, "--train-on-a", "stsb", "--train-on-b", "none"),
        plugins=["harness.testing"],
    )
    assert as_table.stdout.startswith("A = testing-trainable [train: stsb] (testing-trainable-")
    assert ", B = testing-trainable [train: none] (testing-trainable-" in as_table.stdout.splitlines()[0]
    # without a source per side the untrained spec is compared with itself: refused
    same = ht.run_harness(
        *("compare", "testing-trainable", "testing-trainable", "--tasks", "stsb", "--profile", "smoke"),
        *("--results", store),
        plugins=["harness.testing"],
    )
    assert same.exit_code == 2 and "are the same model spec" in same.stderr
