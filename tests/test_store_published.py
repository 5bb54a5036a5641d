"""Published records are kept apart from the working store: the committed records are valid and rebuild the
committed leaderboards byte-identical; `publish` copies only verified records computed on the whole evaluation data,
refuses the rest, and takes the cell lock a run takes when it publishes in place."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from harness.registry import build_registry
from harness.store import Store, read_record
from store_toys import ToyPlugin, toy_run, write_toy_data


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
    monkeypatch.setenv("HARNESS_EXTRA_PLUGINS", "store_toys")  # the CLI's registry gets the toy plugins
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


def test_publishing_in_place_takes_the_cell_lock_and_keeps_a_record_a_run_replaced(tmp_path, monkeypatch):
    """A record rewriter is a write like any other. Publishing a store in place holds the cell lock a run
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
