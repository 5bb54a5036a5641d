"""Problems of the machine are one line: a full disk, a folder that cannot be written, a record path that is a folder
or a FIFO, a read-only store or mount, a lost Ray node; no traceback, no hang, and the same command resumes
(docs/guide/store.md, "Problems of the machine are one line")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import harness
from harness.checkpoints import build_checkpoint
from harness.store import Store, read_record
from store_toys import SMOKE, toy_run, trained_be, write_toy_data


# OSError(EROFS): what a read-only mount answers (it is not a PermissionError)
@pytest.mark.parametrize("refusal", [PermissionError, OSError], ids=["permission", "read-only-mount"])
def test_export_from_a_store_it_cannot_write_loads_the_checkpoint(run_cli, tmp_path, tiny_bert, monkeypatch, refusal):
    import errno

    import harness.locks as locks

    results, _ = trained_be(run_cli, tmp_path, tiny_bert)
    real_open = os.open

    def read_only_locks(path, flags, *args, **kwargs):  # the store is read-only: no lock file can be created
        if str(path).endswith(".lock"):
            raise refusal(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(locks.os, "open", read_only_locks)
    code, out, err = run_cli(
        "export",
        "--models",
        "be",
        "--train-on",
        "stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        results,
        "--to",
        tmp_path / "exported",
    )
    assert code == 0 and "Traceback" not in err and (tmp_path / "exported" / "README.md").is_file(), err


@pytest.mark.parametrize(
    "error, expected",
    [
        (28, "No space left on device; free some space and run the same command again"),
        (13, "Permission denied; make it writable (or choose another folder)"),
    ],
)
def test_a_full_disk_or_an_unwritable_sub_folder_is_one_line_and_resumes(
    run_cli, tmp_path, monkeypatch, error, expected
):
    import harness.files as files_module

    write_toy_data(tmp_path / "data")
    monkeypatch.setenv("HARNESS_EXTRA_PLUGINS", "store_toys")
    from harness.registry import default_registry

    default_registry.cache_clear()
    real_fsync = os.fsync

    def failing_fsync(descriptor):
        raise OSError(error, os.strerror(error))

    monkeypatch.setattr(files_module.os, "fsync", failing_fsync)
    common = (
        "run",
        "--models",
        "toy-embedder",
        "--tasks",
        "toy-pairs",
        *SMOKE,
        "--data-dir",
        tmp_path / "data",
        "--results",
        tmp_path / "results",
    )
    try:
        code, _, err = run_cli(*common)
        assert code == 2 and expected in err and "Traceback" not in err, err
        assert not list((tmp_path / "results").rglob("*.json")) or all(
            p.parts[-3] == "cache" for p in (tmp_path / "results").rglob("*.json")
        )
        monkeypatch.setattr(files_module.os, "fsync", real_fsync)
        code, out, err = run_cli(*common)
        assert code == 0 and "1 cells computed" in out, err
    finally:
        default_registry.cache_clear()


def test_a_record_path_that_is_a_folder_is_one_line(tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    path.unlink()
    path.mkdir()
    assert "not a regular file (a folder)" in Store(tmp_path / "results").lookup(path.parts[-3], 42, "toy-pairs")[1]
    with pytest.raises(harness.HarnessError, match="a folder has its name; remove or rename that folder"):
        toy_run(tmp_path)


def test_a_record_path_that_is_a_fifo_is_recomputed_without_hanging(tmp_path):
    import threading

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    path.unlink()
    os.mkfifo(path)
    finished: list = []
    worker = threading.Thread(target=lambda: finished.append(toy_run(tmp_path)[0]), daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():  # unblock the reader so the test process can end
        with open(path, "w"):
            pass
        pytest.fail("reading a FIFO record blocked the run")
    assert [o.status for o in finished[0]] == ["ok"] and read_record(path)["status"] == "ok"


def test_st_with_pickle_only_weights_is_refused_in_one_line(run_cli, tmp_path, tiny_bert):
    import torch
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    folder = tmp_path / "pickled-st"
    SentenceTransformer(tiny_bert, device="cpu").save(str(folder))
    (weights,) = folder.rglob("model.safetensors")
    torch.save(load_file(weights), weights.with_name("pytorch_model.bin"))
    weights.unlink()
    code, _, err = run_cli(
        "run", "--models", "st", "--tasks", "stsb", *SMOKE, "--backbone", folder, "--results", tmp_path / "results"
    )
    assert code == 2 and "safetensors weights (pickled weights are never loaded)" in err and "Traceback" not in err


def test_a_lost_ray_node_is_reported_in_one_line_of_its_own(caplog):
    from harness.executors.ray_cluster import RayExecutor

    class FakeRay:
        nodes_now = [
            {"NodeID": "aaaaaaaa11", "NodeManagerHostname": "gpu-1", "Alive": True},
            {"NodeID": "bbbbbbbb22", "NodeManagerHostname": "gpu-2", "Alive": True},
        ]

        def nodes(self):
            return self.nodes_now

    executor, ray = RayExecutor(max_retries=3), FakeRay()
    executor._report_lost_nodes(ray)
    ray.nodes_now = [ray.nodes_now[0], {**ray.nodes_now[1], "Alive": False}]
    executor._nodes_checked_at = 0.0
    with caplog.at_level("ERROR"):
        executor._report_lost_nodes(ray)
    assert (
        "Ray node gpu-2 (bbbbbbbb) was lost: its running tasks are retried on the other nodes (up to 3 times)"
        in caplog.text
        and "gpu-1" not in caplog.text
    )


def test_a_full_disk_inside_safetensors_is_one_line(tmp_path):
    from safetensors import SafetensorError

    from harness.store_files import os_error_line

    def save(folder: Path):
        (folder / "model.safetensors").write_bytes(b"partial")
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    with pytest.raises(OSError) as raised:
        build_checkpoint(tmp_path / "ckpt" / "seed-1", save)
    assert raised.value.errno == 28
    assert os_error_line(raised.value).endswith(
        "No space left on device; free some space and run the same command again (finished cells are stored)."
    )
    assert not (tmp_path / "ckpt" / "seed-1").exists() and list((tmp_path / "ckpt").iterdir()) == [
        tmp_path / "ckpt" / "seed-1.lock"
    ]  # the half-written temporary folder is gone
