"""The typed record (harness.record.CellRecord), the checkpoint base (harness.checkpoints.CheckpointedModule) and
the published records read through them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from harness.checkpoints import CheckpointedModule, build_checkpoint, checkpoint_problem
from harness.record import CellRecord, InvalidRecordError
from harness.status import CellStatus
from harness.store import NON_RECORD_FOLDERS, Store, read_cell_record

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = REPO / "published"


def _published_files() -> list[Path]:
    return [
        path
        for path in sorted(PUBLISHED.glob("*/seed-*/*.json"))
        if path.parts[-3] not in NON_RECORD_FOLDERS and not path.name.startswith(".")
    ]


def test_every_published_record_reads_through_cell_record_unchanged(monkeypatch):
    """Every record under published/ keeps its key and scores through CellRecord and writes back byte for byte."""
    monkeypatch.delenv("HARNESS_STORE_KEY", raising=False)
    files = _published_files()
    assert len(files) > 100  # the published set is committed with the repository
    changed = []
    for path in files:
        raw = path.read_text(encoding="utf-8")
        payload = json.loads(raw)
        record = read_cell_record(path)
        assert (record.model_key, record.seed, record.task_key) == (
            payload["model_key"],
            payload["seed"],
            payload["task"]["key"],
        )
        assert dict(record.scores) == payload.get("scores", {}) and record.main_score == payload.get("main_score")
        assert record.checksum == payload["checksum"]
        if record.to_json() != raw or record.to_dict() != payload:
            changed.append(str(path.relative_to(REPO)))
    assert not changed, f"{len(changed)} published records do not round-trip: {changed[:5]}"


def _content(**changes) -> dict:
    record = {
        "status": "ok",
        "model_key": "m-key",
        "seed": 1,
        "model": {"name": "m", "label": "m", "backbone": "b", "profile": "smoke", "hash": "h" * 8},
        "task": {"name": "t", "key": "t", "label": "T", "family": "fam", "version": "1"},
        "main_score": 50.0,
        "scores": {"spearman": 50.0},
        "dataset_checksum": "d" * 64,
        "details": {"pairs": [1, 2]},
    }
    record.update(changes)
    return record


def test_a_sealed_record_is_frozen_and_round_trips(tmp_path):
    record = CellRecord.seal(_content())
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = "failed"
    with pytest.raises(TypeError):
        record.model["hash"] = "other"  # nested objects are read-only too
    copy = record.to_dict()
    copy["details"]["pairs"].append(3)  # a copy: the record itself is unchanged
    assert record.get("details")["pairs"] == (1, 2)
    assert CellRecord.from_json(record.to_json()) == record
    path = Store(tmp_path).write("m-key", 1, "t", record)
    assert path.read_text(encoding="utf-8") == record.to_json()
    assert read_cell_record(path) == record
    published = record.replace(published={"by": "test"})
    assert published.checksum != record.checksum and published.get("published") == {"by": "test"}


def test_a_stored_status_is_read_once_into_a_cell_status_and_written_as_its_word(tmp_path):
    """The store is where a status word becomes a CellStatus: every reader gets the member (sets of members work
    without any word in them), and the file keeps the word, byte for byte."""
    store = Store(tmp_path)
    path = store.write("m-key", 1, "t", CellRecord.seal(_content(status="missing", message="no data")))
    assert json.loads(path.read_text(encoding="utf-8"))["status"] == "missing"
    (listed,) = store.records()
    looked_up, _ = store.lookup("m-key", 1, "t")
    for record in (read_cell_record(path).to_dict(), listed, looked_up):
        assert record["status"] is CellStatus.MISSING
        assert record["status"] in {CellStatus.MISSING, CellStatus.FAILED}
    assert read_cell_record(path).status is CellStatus.MISSING
    assert read_cell_record(path).to_json() == path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"status": "done"}, "status 'done' is not one of ok, missing, failed"),
        ({"seed": -1}, "seed -1 is not an integer in 0..4294967295"),
        ({"main_score": float("nan")}, "main_score 'nan' is not a finite number"),
        ({"scores": {}}, "has no 'scores' object"),
        ({"status": "failed"}, "a failed record needs a 'message' saying why"),
    ],
)
def test_content_that_breaks_the_schema_is_refused_with_its_one_line_reason(changes, reason):
    with pytest.raises(
        ValueError, match="refusing to store an invalid record: " + reason.replace("(", r"\(").replace(")", r"\)")
    ):
        CellRecord.seal(_content(**changes))


def test_a_stored_record_with_a_wrong_checksum_or_place_is_refused(tmp_path):
    sealed = CellRecord.seal(_content()).to_dict()
    with pytest.raises(InvalidRecordError, match="content does not match its checksum"):
        CellRecord.from_dict({**sealed, "main_score": 99.0})
    with pytest.raises(InvalidRecordError, match="stored at the wrong place: its content belongs at m-key/seed-1/t"):
        CellRecord.from_dict(sealed, tmp_path / "other" / "seed-1" / "t.json")


def test_the_reuse_rule_names_what_changed():
    record = CellRecord.seal(_content(training_data_checksum="x"))
    same = {"model_hash": "h" * 8, "task_version": "1", "dataset_checksum": "d" * 64}
    assert record.reuse_problem(**same) is None
    assert "another model spec" in record.reuse_problem(**{**same, "model_hash": "other"})
    assert "task version changed (1 -> 2)" in record.reuse_problem(**{**same, "task_version": "2"})
    assert "dataset changed" in record.reuse_problem(**{**same, "dataset_checksum": "e" * 64})
    assert "training data changed" in record.reuse_problem(**same, training_data_checksum="y")


class _Linear(CheckpointedModule):
    """A model whose trained state is one torch module, with one setting kept beside the weights."""

    def __init__(self, seed: int):
        import torch

        torch.manual_seed(seed)
        self.network = torch.nn.Linear(3, 2)
        self.device = "cpu"
        self.labels: list[str] = []

    def checkpoint_module(self):
        return self.network

    def checkpoint_config(self) -> dict:
        return {"labels": self.labels}

    def restore_checkpoint_config(self, config: dict) -> None:
        self.labels = config.get("labels", [])


def test_a_checkpointed_module_saves_safetensors_and_json_and_loads_them_back(tmp_path):
    import torch

    trained = _Linear(seed=1)
    trained.labels = ["a", "b"]
    build_checkpoint(tmp_path / "ckpt", trained.save)
    assert checkpoint_problem(tmp_path / "ckpt") is None
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == ["COMPLETE", "config.json", "model.safetensors"]
    fresh = _Linear(seed=2)
    assert not torch.equal(fresh.network.weight, trained.network.weight)
    fresh.load(tmp_path / "ckpt")
    assert torch.equal(fresh.network.weight, trained.network.weight) and fresh.labels == ["a", "b"]


def test_a_checkpoint_written_by_the_hand_written_save_of_harness_0_2_still_loads(tmp_path):
    """The built-in models wrote ``model.safetensors`` with safetensors.torch.save_model and a compact JSON
    ``config.json``; those checkpoints (in stores made before CheckpointedModule) load unchanged."""
    import torch
    from safetensors.torch import save_model

    old = _Linear(seed=3)
    save_model(old.network, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"labels": ["x"], "pooling": "mean"}))
    fresh = _Linear(seed=4)
    fresh.load(tmp_path)
    assert torch.equal(fresh.network.weight, old.network.weight) and fresh.labels == ["x"]
