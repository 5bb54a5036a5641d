"""Atomic writes; leftovers are cleaned: temporaries name their host, namespace and process, and every writer (run,
leaderboard, publish, export-results) removes those of killed writers and never those of a live process; exports
are written atomically and never over an earlier one silently (docs/guide/store.md, "Atomic writes; leftovers are
cleaned")."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from harness.registry import build_registry
from harness.store import Store
from store_toys import ToyPlugin, store_with_mteb_record, toy_run, write_toy_data


def test_stale_temporaries_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    from harness.files import STALE_AFTER_SECONDS, temporary_prefix

    store = Store(tmp_path / "results")
    folder = store.root / "be-123" / "seed-42"
    folder.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead_prefix = temporary_prefix("stsb.json").replace(f".{os.getpid()}.", f".{dead.pid}.")
        live_prefix = temporary_prefix("stsb.json").replace(f".{os.getpid()}.", f".{live.pid}.")
        dead_record = folder / f"{dead_prefix}abc.tmp"
        live_record = folder / f"{live_prefix}abc.tmp"
        checkpoint_parent = store.root / "checkpoints" / "be-123"
        dead_checkpoint = checkpoint_parent / temporary_prefix("seed-42").replace(f".{os.getpid()}.", f".{dead.pid}.")
        old_legacy = checkpoint_parent / ".seed-43.k2j4h5g6"  # harness 0.1: no owner in the name
        young_legacy = folder / ".sts12.json.a1b2c3d4.tmp"
        for path in (dead_checkpoint, old_legacy):
            path.mkdir(parents=True)
            (path / "model.safetensors").write_bytes(b"x" * 1000)
        for path in (dead_record, live_record, young_legacy):
            path.write_text("{}")
        old = time.time() - STALE_AFTER_SECONDS - 60
        os.utime(old_legacy, (old, old))
        os.utime(old_legacy / "model.safetensors", (old, old))
        removed = {path for path, _ in store.clean_stale_temporaries()}
        assert removed == {dead_record, dead_checkpoint, old_legacy}
        assert live_record.exists() and young_legacy.exists()
    finally:
        live.kill()
        live.wait()


def test_a_run_cleans_leftovers_before_it_starts(tmp_path):
    from harness.files import temporary_prefix

    write_toy_data(tmp_path / "data")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = (
        tmp_path
        / "results"
        / "checkpoints"
        / "x"
        / (temporary_prefix("seed-42").replace(f".{os.getpid()}.", f".{dead.pid}.") + "q1w2e3r4")
    )
    leftover.mkdir(parents=True)
    _, messages = toy_run(tmp_path)
    assert not leftover.exists() and any("which is no longer running" in m for m in messages)


def test_temporary_names_carry_host_and_process(tmp_path):
    from harness.files import _OWNED_TEMP, atomic_write_json

    seen = []
    real_replace = os.replace

    def spy(source, target):
        seen.append(Path(source).name)
        return real_replace(source, target)

    import harness.files as files_module

    original = files_module.os.replace
    files_module.os.replace = spy
    try:
        atomic_write_json(tmp_path / "r.json", {"a": 1})
    finally:
        files_module.os.replace = original
    match = _OWNED_TEMP.search(seen[0])
    assert match and int(match.group("pid")) == os.getpid()


def test_temporaries_of_another_pid_namespace_are_kept_while_young(tmp_path):
    """Containers sharing a store may share a host name but not process ids: a temporary named by another PID
    namespace (or by harness 0.2, which did not name it) is removed only when old, whatever its pid says here."""
    from harness.files import STALE_AFTER_SECONDS, _host_tag, temporary_prefix

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "results" / "be-1" / "seed-42"
    folder.mkdir(parents=True)
    other_space = folder / f".stsb.json.harness-tmp.{_host_tag()}.n0badcafe.{dead.pid}.abc.tmp"
    unnamed_space = folder / f".sts12.json.harness-tmp.{_host_tag()}.{dead.pid}.abc.tmp"
    same_space = folder / (temporary_prefix("sickr.json").replace(f".{os.getpid()}.", f".{dead.pid}.") + "abc.tmp")
    for path in (other_space, unnamed_space, same_space):
        path.write_text("{}")
    store = Store(tmp_path / "results")
    assert {path for path, _ in store.clean_stale_temporaries()} == {same_space}
    old = time.time() - STALE_AFTER_SECONDS - 60
    for path in (other_space, unnamed_space):
        os.utime(path, (old, old))
    assert {path for path, _ in store.clean_stale_temporaries()} == {other_space, unnamed_space}


def test_export_results_does_not_overwrite_an_earlier_export_silently(run_cli, tmp_path):
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    target = tmp_path / "exported"
    target.mkdir()
    (target / "harness_export.json").write_text("[]")
    common = (
        "export-results",
        "--format",
        "mteb",
        "--to",
        target,
        "--results",
        tmp_path / "results",
        "--include-samples",
    )  # toy_run's records are smoke-profile samples
    code, _, err = run_cli(*common)
    assert code == 2 and "already holds files" in err and "--overwrite" in err
    assert (target / "harness_export.json").read_text() == "[]"
    code, _, err = run_cli(*common, "--overwrite")
    assert code == 0, err


def _dead_writer_temporary(folder: Path, name: str) -> Path:
    from harness.files import temporary_prefix

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(finished.stdout)
    prefix = temporary_prefix(name).replace(f".{os.getpid()}.", f".{dead}.")
    folder.mkdir(parents=True, exist_ok=True)
    leftover = folder / f"{prefix}abcd1234.tmp"
    leftover.write_text("half a file")
    return leftover


def test_leaderboard_and_publish_remove_the_temporaries_of_killed_writers(run_cli, tmp_path):
    from harness.publish import Selection, publish

    write_toy_data(tmp_path / "data")
    toy_run(tmp_path, profile="quick")
    registry = build_registry(extra_plugins=[ToyPlugin()])
    published = Store(tmp_path / "published")
    publish(Store(tmp_path / "results"), published, Selection(), registry=registry, data_dir=tmp_path / "data")
    (record_path,) = published.record_files()
    in_published = _dead_writer_temporary(record_path.parent, record_path.name)
    in_boards = _dead_writer_temporary(tmp_path / "boards", "toy.md")
    publish(Store(tmp_path / "results"), published, Selection(), registry=registry, data_dir=tmp_path / "data")
    code, _, err = run_cli("leaderboard", "--results", published.root, "--output", tmp_path / "boards")
    assert code == 0, err
    assert not in_published.exists() and not in_boards.exists()


def test_export_results_writes_each_file_atomically(run_cli, tmp_path, monkeypatch):
    import errno

    import harness.files as files

    store_with_mteb_record(tmp_path, "STS12")
    out = tmp_path / "out"
    code, _, err = run_cli(
        "export-results", "--format", "mteb", "--results", tmp_path / "results", "--to", out, "--include-samples"
    )
    assert code == 0, err
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert any(p.name == "model_meta.json" for p in before)

    def full_disk(descriptor):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files.os, "fsync", full_disk)  # every file of the next export fails at its flush
    code, _, err = run_cli(
        "export-results",
        "--format",
        "mteb",
        "--results",
        tmp_path / "results",
        "--to",
        out,
        "--include-samples",
        "--overwrite",
    )
    assert code == 2 and "No space left on device; free some space" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # nothing half-written, no leftovers
