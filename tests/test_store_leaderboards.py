"""Leaderboards read the store without trusting it: an invalid or damaged record is reported, shown invalid and never
ranked (the command exits non-zero), and a record's task family never writes outside the output folder
(docs/guide/store.md, "Leaderboards never write outside their output folder")."""

from __future__ import annotations

import json
import os

import pytest

from harness.record import seal_record
from harness.store import Store
from store_toys import toy_run, write_toy_data


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
