"""A stored cell is reused only if its record is valid, at its place, and was computed from the data this run would
use; every other case is computed again and the reason logged (docs/guide/store.md, "A stored cell is reused only
if")."""

from __future__ import annotations

import shutil

import pytest

import harness
from conftest import REPO
from harness.store import Store, read_record
from store_toys import SMOKE, ToyPairs, only_record, toy_run, write_toy_data


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


def test_record_at_the_wrong_place_is_not_used(tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    moved = path.parent.parent / "seed-43" / path.name
    moved.parent.mkdir()
    shutil.copy(path, moved)
    with pytest.raises(harness.HarnessError, match="stored at the wrong place"):
        read_record(moved)


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
