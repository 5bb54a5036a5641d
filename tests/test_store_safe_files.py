"""Nothing is read from, written to or destroyed outside the store: every file the store reads or locks goes through
harness.store_files.open_store_file (regular files whose real path lies inside the store; a lock is never created or
truncated through a link), every output name built from data through harness.store_files.path_inside, so a planted link
or FIFO is refused, never followed or read; a missing or damaged per-example file is named and recomputed
(docs/guide/store.md, "Files: nothing read from, written to or destroyed outside the store")."""

from __future__ import annotations

import os

import pytest

import harness
from harness.checkpoints import build_checkpoint, checkpoint_problem
from harness.registry import build_registry
from harness.store import Store, read_record
from store_toys import FileToyPlugin, ToyPlugin, file_toy_run, finishes, store_with_mteb_record, toy_run, write_toy_data


def test_a_symlinked_cells_lock_is_refused_and_the_file_it_points_to_kept(tmp_path):
    write_toy_data(tmp_path / "data")
    file_toy_run(tmp_path)
    (lock,) = (tmp_path / "results" / "locks").glob("*/seed-*.lock")
    outside = tmp_path / "precious.txt"
    outside.write_text("a user's file\n")
    lock.unlink()
    lock.symlink_to(outside)
    with pytest.raises(harness.StoreError, match="is a symbolic link"):
        file_toy_run(tmp_path, overwrite=True)
    assert outside.read_text() == "a user's file\n"


def test_a_checkpoint_lock_that_is_a_link_or_in_a_linked_folder_is_refused(tmp_path):
    from harness.locks import StoreLock
    from harness.store_files import UnsafeFileError

    store = Store(tmp_path / "store")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "seed-1.lock").write_text("kept\n")
    lock_path = store.checkpoint_dir("be-1", 1).with_name("seed-1.lock")
    lock_path.parent.mkdir(parents=True)
    lock_path.symlink_to(outside / "seed-1.lock")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        store.checkpoint_lock("be-1", 1).acquire()
    (store.root / "locks").mkdir()
    (store.root / "locks" / "be-1").symlink_to(outside, target_is_directory=True)  # a linked folder out of the store
    with pytest.raises(UnsafeFileError, match="outside"):
        store.cells_lock("be-1", 1).acquire()
    assert (outside / "seed-1.lock").read_text() == "kept\n" and sorted(p.name for p in outside.iterdir()) == [
        "seed-1.lock"
    ]
    with StoreLock(tmp_path / "plain.lock"):  # an ordinary lock still works
        pass


def test_export_results_never_writes_outside_its_folder_whatever_a_record_names(run_cli, tmp_path):
    store_with_mteb_record(tmp_path, "../../../../escaped/PWNED")
    (tmp_path / "escaped").mkdir()
    code, out, err = run_cli(
        "export-results",
        "--format",
        "mteb",
        "--results",
        tmp_path / "results",
        "--to",
        tmp_path / "out" / "deep",
        "--include-samples",
    )
    assert list((tmp_path / "escaped").iterdir()) == [] and "Traceback" not in err
    assert "not a plain file name" in err
    from harness.store_files import path_inside

    with pytest.raises(harness.StoreError, match="not a plain file name"):
        path_inside(tmp_path, "..", "x")
    (tmp_path / "out").mkdir(exist_ok=True)
    (tmp_path / "out" / "link").symlink_to(tmp_path / "escaped", target_is_directory=True)
    with pytest.raises(harness.StoreError, match="resolves outside"):
        path_inside(tmp_path / "out", "link", "x.json")
    assert path_inside(tmp_path / "out", "deep", "x.json") == tmp_path / "out" / "deep" / "x.json"


def test_publish_refuses_an_artifact_that_links_out_of_the_store_and_writes_nothing(tmp_path):
    from harness.publish import PublishError, Selection, publish

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path, profile="quick")  # a full evaluation: publishable
    source = Store(tmp_path / "results")
    (record,) = source.records()
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET\n")
    artifacts = source.artifact_dir(record["model_key"], record["seed"])
    artifacts.mkdir(parents=True)
    (artifacts / "pairs.txt").write_text("kept pairs\n")
    (artifacts / "stolen.txt").symlink_to(secret)
    registry = build_registry(extra_plugins=[ToyPlugin()])
    target = Store(tmp_path / "published")
    with pytest.raises(PublishError, match=r"stolen.txt: an artifact that is a link to .*secret.txt, outside"):
        publish(source, target, Selection(), registry=registry, data_dir=tmp_path / "data")
    assert not target.root.exists() or not [p for p in target.root.rglob("*") if p.is_file()]
    (artifacts / "stolen.txt").unlink()
    publish(source, target, Selection(), registry=registry, data_dir=tmp_path / "data")
    assert (target.artifact_dir(record["model_key"], record["seed"]) / "pairs.txt").read_text() == "kept pairs\n"


def test_a_record_that_links_out_of_the_store_is_invalid_and_recomputed(tmp_path, caplog):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    outside = tmp_path / "outside.json"
    path.rename(outside)
    path.symlink_to(outside)
    store = Store(tmp_path / "results")
    assert list(store.records()) == [] and "outside" in store.skipped[0][1]
    outcomes, messages = toy_run(tmp_path)
    assert [o.status for o in outcomes] == ["ok"] and not path.is_symlink()
    assert "is invalid (a link to" in caplog.text
    (inside,) = (tmp_path / "results").glob("*/seed-*/*.json")  # a link that stays inside the store is followed
    moved = inside.with_name("elsewhere.txt")
    inside.rename(moved)
    inside.symlink_to(moved)
    assert [r["status"] for r in Store(tmp_path / "results").records()] == ["ok"]


def test_a_record_folder_that_links_out_of_the_store_is_never_written_to(tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (record_path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    elsewhere = tmp_path / "elsewhere"
    record_path.parent.rename(elsewhere)
    record_path.parent.symlink_to(elsewhere, target_is_directory=True)
    before = (elsewhere / record_path.name).read_bytes()
    with pytest.raises(harness.StoreError, match="its folder is a link to .*outside the store"):
        toy_run(tmp_path, overwrite=True)
    assert (elsewhere / record_path.name).read_bytes() == before and sorted(p.name for p in elsewhere.iterdir()) == [
        record_path.name
    ]


def test_a_checkpoint_file_that_links_out_of_the_checkpoint_or_is_a_fifo_is_never_read(tmp_path):
    directory = tmp_path / "store" / "checkpoints" / "be-1" / "seed-1"
    build_checkpoint(directory, lambda folder: (folder / "model.safetensors").write_bytes(b"weights" * 100))
    weights = directory / "model.safetensors"
    outside = tmp_path / "same-bytes-elsewhere"
    outside.write_bytes(weights.read_bytes())
    weights.unlink()
    weights.symlink_to(outside)  # same content, but from outside the store
    assert "model.safetensors is a link to" in checkpoint_problem(directory)
    weights.unlink()
    os.mkfifo(weights)
    # named for what it is, not reported as "missing" (a FIFO training.json once was)
    assert finishes(lambda: checkpoint_problem(directory)) == "model.safetensors is a FIFO, not a regular file"
    weights.unlink()
    assert checkpoint_problem(directory) == "model.safetensors is missing"


def test_fifos_in_place_of_store_files_are_refused_without_hanging(tmp_path):
    from harness.files import cached_bytes
    from harness.fingerprint import CACHE_FILE, folder_fingerprint
    from harness.store import read_examples
    from harness.store_files import UnsafeFileError, read_store_bytes

    write_toy_data(tmp_path / "data")
    file_toy_run(tmp_path)
    (record_path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    side_file = record_path.with_name(record_path.stem + ".examples.npz")
    side_file.unlink()
    os.mkfifo(side_file)  # leaderboard and compare read it
    record = {**read_record(record_path), "_path": str(record_path)}
    content, problem = finishes(lambda: read_examples(record))
    assert content is None and "not a regular file (a FIFO)" in problem
    cache = tmp_path / "results" / "cache"
    cache.mkdir(exist_ok=True)
    os.mkfifo(cache / "onnx-like.bin")  # run --runtime onnx reads its exported graph like this
    content, cached = finishes(lambda: cached_bytes(cache / "onnx-like.bin", lambda: b"graph"))
    assert (content, cached) == (b"graph", False) and (cache / "onnx-like.bin").read_bytes() == b"graph"
    backbone = tmp_path / "backbone"
    backbone.mkdir()
    (backbone / "config.json").write_text("{}")
    os.mkfifo(cache / CACHE_FILE)  # run reads the backbone checksums first
    assert len(finishes(lambda: folder_fingerprint(backbone, cache))) == 64
    os.mkfifo(tmp_path / "device")
    with pytest.raises(UnsafeFileError, match="a FIFO"):
        finishes(lambda: read_store_bytes(tmp_path / "device"))
    with pytest.raises(harness.DataFileError, match="a FIFO"):  # a task's data file: a data problem, no hang
        finishes(lambda: harness.files_checksum([tmp_path / "device"]))


def test_a_missing_or_damaged_side_file_is_recomputed_by_run_and_named_by_leaderboard_and_compare(run_cli, tmp_path):
    write_toy_data(tmp_path / "data")
    file_toy_run(tmp_path)
    results = tmp_path / "results"
    (side_file,) = results.glob("*/seed-*/*.examples.npz")
    good = side_file.read_bytes()
    side_file.write_bytes(b"damaged")
    code, out, err = run_cli("leaderboard", "--results", results, "--include-samples")
    assert code == 1 and "does not match the sha256 its record names" in err, err
    assert (
        "1 per-example file(s) missing or damaged" in err
        and "stored before harness kept it" not in (results / "leaderboards" / "toy.md").read_text()
    )
    side_file.unlink()
    code, out, err = run_cli("leaderboard", "--results", results, "--include-samples")
    assert code == 1 and f"{side_file} is missing" in err
    outcomes, messages = file_toy_run(tmp_path)
    assert [o.status for o in outcomes] == ["ok"] and side_file.read_bytes() == good
    assert any(f"{side_file} is missing" in m for m in messages)
    assert run_cli("leaderboard", "--results", results, "--include-samples")[0] == 0


def test_compare_names_a_damaged_side_file_and_exits_non_zero(run_cli, tmp_path, monkeypatch):
    from harness.compare import compare

    write_toy_data(tmp_path / "data")
    file_toy_run(tmp_path, models=("toy-embedder", "toy-offset"))
    registry = build_registry(extra_plugins=[ToyPlugin(), FileToyPlugin()])
    store = Store(tmp_path / "results")
    for side_file in store.root.glob("*/seed-*/*.examples.npz"):
        side_file.write_bytes(b"damaged")
    _, _, (comparison,) = compare(
        registry, store, "toy-embedder", "toy-offset", ["toy-examples"], [42], profile="smoke"
    )
    assert comparison.result is None and comparison.damaged >= 1 and "recomputes the cell" in comparison.reason
