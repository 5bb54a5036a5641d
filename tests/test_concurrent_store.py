"""A store that many processes share: locks with stale-lock recovery, checkpoints that concurrent
builders and readers never see half-way, and two `harness run` processes on one store that train each model once
and end with the records one run would write."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import harness
from conftest import REPO
from harness.checkpoints import build_checkpoint, check_checkpoint_target, checkpoint_problem
from harness.files import temporary_prefix
from harness.locks import LockingUnsupportedError, LockTimeoutError, StoreLock, check_locking
from harness.store import Store, read_record

HOLD_LOCK = textwrap.dedent("""
    import sys, time
    from harness.locks import StoreLock
    lock = StoreLock(sys.argv[1], "a test holder")
    lock.acquire()
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
""")


def hold_in_subprocess(path: Path, seconds: float = 60.0) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


# -- locks -------------------------------------------------------------------------------------------------------------
def test_a_lock_excludes_other_processes_and_names_its_holder(tmp_path):
    path = tmp_path / "locks" / "m" / "seed-1.lock"
    holder = hold_in_subprocess(path)
    try:
        lock = StoreLock(path, "me")
        assert not lock.acquire(blocking=False)
        assert f"pid {holder.pid} (a test holder)" in lock.holder()
        with pytest.raises(LockTimeoutError, match=f"pid {holder.pid}"):
            lock.acquire(timeout=0.3)
    finally:
        holder.kill()
        holder.wait()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    """Stale-lock recovery: the kernel drops the lock of a process however it dies (here kill -9), at once."""
    path = tmp_path / "seed-1.lock"
    holder = hold_in_subprocess(path)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    lock = StoreLock(path)
    started = time.monotonic()
    assert lock.acquire(timeout=10)
    assert time.monotonic() - started < 5
    lock.release()


def test_a_waiter_is_told_whom_it_waits_for_and_gets_the_lock_when_it_is_released(tmp_path):
    path = tmp_path / "seed-1.lock"
    holder = hold_in_subprocess(path, seconds=1.5)
    messages: list[str] = []
    lock = StoreLock(path)
    lock.acquire(timeout=60, on_wait=messages.append)
    lock.release()
    holder.wait()
    assert len(messages) == 1 and "waiting for host" in messages[0] and f"pid {holder.pid}" in messages[0]


def test_a_lock_is_reentrant_in_a_thread_and_exclusive_between_threads(tmp_path):
    path = tmp_path / "seed-1.lock"
    lock, again = StoreLock(path), StoreLock(path)
    lock.acquire()
    assert again.acquire(blocking=False)  # re-entry: the runner holds a checkpoint lock that build_checkpoint takes
    again.release()
    seen: list[bool] = []
    other = threading.Thread(target=lambda: seen.append(StoreLock(path).acquire(blocking=False)))
    other.start()
    other.join()
    assert seen == [False]
    lock.release()
    other = threading.Thread(target=lambda: seen.append(StoreLock(path).acquire(blocking=False)))
    other.start()
    other.join()
    assert seen == [False, True]


def test_a_filesystem_without_locks_is_refused_in_one_line(tmp_path, monkeypatch):
    import harness.locks as locks

    def no_locks(descriptor, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(locks.fcntl, "flock", no_locks)
    with pytest.raises(LockingUnsupportedError) as caught:
        check_locking(tmp_path / "results")
    assert "does not support file locks" in str(caught.value) and "\n" not in str(caught.value)


# -- checkpoints -----------------------------------------------------------------------------------------------------
BUILD_AND_CHECK = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from harness.checkpoints import build_checkpoint
    target, seconds = Path(sys.argv[1]), float(sys.argv[2])
    built = errors = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        def save(directory):
            for part in range(10):
                (directory / f"part-{part}.bin").write_bytes(os.urandom(2000))
            (directory / "model.safetensors").write_bytes(os.urandom(20000))
        try:
            build_checkpoint(target, save)
            built += 1
        except Exception as exc:
            errors += 1
            print(type(exc).__name__, exc, file=sys.stderr)
    print(json.dumps({"built": built, "errors": errors}))
""")


def test_concurrent_checkpoint_builders_and_a_reader_never_see_half_a_checkpoint(tmp_path):
    """The issue's finding: two writers and one reader on one checkpoint gave writer errors (ENOTEMPTY,
    FileNotFoundError) and a COMPLETE marker without model.safetensors. Now: no errors, never a torn checkpoint."""
    target = tmp_path / "checkpoints" / "m-1" / "seed-42"
    seconds = 4.0
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", BUILD_AND_CHECK, str(target), str(seconds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    problems: dict[str, int] = {}
    checks = 0
    deadline = time.monotonic() + 120
    while any(writer.poll() is None for writer in writers) and time.monotonic() < deadline:
        problem = checkpoint_problem(target)
        checks += 1
        if problem is not None:
            problems[problem] = problems.get(problem, 0) + 1
    results = []
    for writer in writers:
        out, err = writer.communicate(timeout=120)
        assert err == "", err
        results.append(json.loads(out))
    assert all(result["errors"] == 0 for result in results), results
    assert sum(result["built"] for result in results) >= 2
    # Before the first build the checkpoint does not exist; after it, the reader only ever sees a complete one.
    assert set(problems) <= {"not built yet"}, problems
    assert checks > problems.get("not built yet", 0)
    assert checkpoint_problem(target) is None
    leftovers = [p.name for p in target.parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def _replaced_after_query(monkeypatch, watched: Path, query_number: int, replace) -> None:
    """Call ``replace()`` right after the ``query_number``-th stat/lstat of ``watched`` answered: a concurrent
    builder's rename landing between two questions about one path, at a chosen place instead of by chance."""
    queries = 0

    def counting(real):
        def query(path, *args, **kwargs):
            nonlocal queries
            is_watched = os.fspath(path) == os.fspath(watched)
            queries += is_watched
            answer = real(path, *args, **kwargs)
            if is_watched and queries == query_number:
                replace()
            return answer

        return query

    monkeypatch.setattr(os, "stat", counting(os.stat))
    monkeypatch.setattr(os, "lstat", counting(os.lstat))


@pytest.mark.parametrize("query_number", [1, 2, 3])
def test_a_checkpoint_being_replaced_is_never_taken_for_a_file(tmp_path, monkeypatch, query_number):
    """Another builder renames the old folder aside (then its new one into place) while the check runs: whichever
    question the rename follows, a folder being replaced is not refused as "a file" (it was, when the check asked
    exists() and then is_dir(), and the rename fell between them)."""
    target = tmp_path / "checkpoints" / "m-1" / "seed-42"
    build_checkpoint(target, lambda directory: (directory / "model.safetensors").write_bytes(b"w"))
    _replaced_after_query(monkeypatch, target, query_number, lambda: os.replace(target, tmp_path / "aside"))
    check_checkpoint_target(target)  # refused "is a file" before: the rename fell between exists() and is_dir()


def test_the_checkpoint_check_still_refuses_a_file_a_link_and_a_fifo(tmp_path):
    place = tmp_path / "seed-42"
    place.write_text("x")
    with pytest.raises(harness.StoreError, match="is a file"):
        check_checkpoint_target(place)
    place.unlink()
    place.symlink_to(tmp_path)
    with pytest.raises(harness.StoreError, match="is a symbolic link"):
        check_checkpoint_target(place)
    place.unlink()
    os.mkfifo(place)
    with pytest.raises(harness.StoreError, match="is a FIFO"):
        check_checkpoint_target(place)


def test_a_builder_removes_what_a_killed_builder_left(tmp_path):
    target = tmp_path / "checkpoints" / "m-1" / "seed-42"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = target.parent / (temporary_prefix(target.name).replace(f".{os.getpid()}.", f".{dead.pid}.") + "x1y2")
    leftover.mkdir(parents=True)
    (leftover / "model.safetensors").write_bytes(b"half")
    build_checkpoint(target, lambda directory: (directory / "model.safetensors").write_bytes(b"whole"))
    assert not leftover.exists() and checkpoint_problem(target) is None


def test_checkpoints_are_readable_by_others_sharing_the_store(tmp_path):
    target = tmp_path / "checkpoints" / "m-1" / "seed-42"
    build_checkpoint(target, lambda directory: (directory / "model.safetensors").write_bytes(b"w"))
    assert target.stat().st_mode & 0o055 == 0o055 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- two runs on one store ---------------------------------------------------------------------------------------------
class GateTask(harness.Task):
    """Evaluates once the file HARNESS_TEST_GATE exists (after saying so in ``<gate>.reached``): lets a test hold a
    run in the middle of its cells for as long as it needs, whatever the machine's load."""

    metadata = harness.TaskMetadata(
        name="gate",
        family="gate",
        description="waits for a file, then scores 1",
        main_score="score",
        metric="constant",
        reference="tests",
        dataset="none",
        dataset_source="tests",
        license="none",
    )

    def check_data(self) -> str:
        return "gate-1"

    def evaluate(self, model, ctx):
        gate = Path(os.environ["HARNESS_TEST_GATE"])
        gate.with_suffix(".reached").touch()
        while not gate.exists():
            time.sleep(0.05)
        return harness.EvalResult({"score": 1.0}, "gate-1")


# Registered in the `harness run` subprocesses through HARNESS_EXTRA_PLUGINS=test_concurrent_store.
@harness.hookimpl
def register_tasks(register):
    register(GateTask)


def _run_command(results: Path, tiny_bert: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb,gate",
        "--train-on",
        "stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        str(results),
        "--device",
        "cpu",
        "--no-progress",
    ]


def differences(first: dict[str, dict], second: dict[str, dict]) -> list[str]:
    """Which records, and which of their fields, differ (a readable failure instead of two long dicts)."""
    if sorted(first) != sorted(second):
        return [f"cells {sorted(first)} != {sorted(second)}"]
    return [
        f"{path}: {key}: {first[path].get(key)!r} != {second[path].get(key)!r}"
        for path in first
        for key in sorted(set(first[path]) | set(second[path]))
        if first[path].get(key) != second[path].get(key)
    ]


# The fields of a record's ``cost`` that are counts and facts, not measurements of one machine's speed or memory.
COUNTED_COST = ("items", "item_unit", "parameters", "device", "runtime", "precision")


def _records(results: Path) -> dict[str, dict]:
    from harness.store import Store

    def comparable(record: dict) -> dict:
        record = {k: v for k, v in record.items() if k not in ("timings", "created_at", "checksum", "_path")}
        record["environment"] = {k: v for k, v in record["environment"].items() if k != "git_commit"}
        if isinstance(record.get("cost"), dict):  # what was measured differs between runs; what was counted may not
            record["cost"] = {k: v for k, v in record["cost"].items() if k in COUNTED_COST}
        if isinstance(record.get("training"), dict):
            record["training"] = {
                k: v
                for k, v in record["training"].items()
                if k not in ("seconds", "wall_seconds", "examples_per_second")
            }
        return record

    return {Path(r["_path"]).relative_to(results).as_posix(): comparable(r) for r in Store(results).records()}


def test_two_concurrent_runs_train_once_and_store_what_one_run_stores(
    tmp_path, tiny_bert, monkeypatch, one_torch_thread
):
    """Two identical `harness run` processes on one store: one trains and computes, the other waits for it and
    answers every cell from the store; the records are valid and equal to those of one run alone."""
    shared, alone, gate = tmp_path / "shared", tmp_path / "alone", tmp_path / "gate"
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), str(REPO)]),
        "HARNESS_EXTRA_PLUGINS": "test_concurrent_store",
        "HARNESS_TEST_GATE": str(gate),
    }

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            _run_command(shared, tiny_bert),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environment,
            cwd=tmp_path,
        )

    def read_until(run: subprocess.Popen, text: str, lines: list[str]) -> None:
        for line in run.stdout:
            lines.append(line)
            if text in line:
                return
        raise AssertionError(f"the run ended without printing {text!r}:\n" + "".join(lines))

    # Both runs are started; the first is held at its gate cell (after training) until the second has met it.
    first, first_lines = start(), []
    deadline = time.monotonic() + 600
    while not gate.with_suffix(".reached").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.1)
    second, second_lines = start(), []
    read_until(second, "another process is computing these cells", second_lines)
    gate.touch()
    second_log = "".join(second_lines) + second.communicate(timeout=600)[0]
    first_log = "".join(first_lines) + first.communicate(timeout=600)[0]
    assert (first.returncode, second.returncode) == (0, 0), (first_log, second_log)
    assert "training be on stsb" in first_log and "2 cells computed" in first_log
    assert "training" not in second_log, second_log  # no duplicate training
    assert "another process is computing these cells" in second_log and f"pid {first.pid}" in second_log
    # stsb was stored before the second run planned; gate is answered once the first run has stored it.
    assert "1 cell(s) answered from the store (stored by another process while this run waited)" in second_log
    assert "0 cells computed, 2 from the store" in second_log
    for path in Store(shared).record_files():
        read_record(path)  # valid: schema and content checksum, never an interleaved write
    # One run alone (in this process: one PyTorch thread, as the subprocesses had: the one_torch_thread fixture sets it,
    # whatever an earlier test in this worker left).
    from harness.executors.local import LocalExecutor
    from harness.matrix import ModelEntry
    from harness.registry import build_registry
    from harness.run.config import RunConfig
    from harness.run.driver import Run

    monkeypatch.setenv("HARNESS_TEST_GATE", str(gate))
    monkeypatch.setenv("HARNESS_EXTRA_PLUGINS", "test_concurrent_store")  # as the subprocesses registered it
    config = RunConfig(
        models=[ModelEntry("be")],
        tasks=["stsb", "gate"],
        train_on="stsb",
        profile="smoke",
        backbone=tiny_bert,
        device="cpu",
        results_dir=alone,
        progress=False,
    )
    Run(build_registry(), config).run(LocalExecutor())
    assert differences(_records(shared), _records(alone)) == []
    assert len(_records(shared)) == 2
