"""What the record checksum is for: it detects accidents (a damaged file, a hand edit), and with HARNESS_STORE_KEY
records are also signed, so an edit resealed with a recomputed checksum is refused too (docs/guide/store.md, "What
the record checksum is for")."""

from __future__ import annotations

import json

import pytest

from harness.record import seal_record
from harness.registry import build_registry
from harness.store import Store, read_record
from store_toys import ToyPlugin, toy_run, write_toy_data


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
