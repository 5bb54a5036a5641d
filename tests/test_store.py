"""Atomic records, resume and overwrite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.checkpoints import build_checkpoint
from harness.files import atomic_write_json
from harness.store import Store


def test_interrupted_write_leaves_old_record_and_no_temp_file(tmp_path, monkeypatch):
    path = tmp_path / "a" / "record.json"
    atomic_write_json(path, {"value": 1})

    real_fsync = os.fsync

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_json(path, {"value": 2, "padding": "x" * 100_000})
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert json.loads(path.read_text()) == {"value": 1}
    assert sorted(p.name for p in path.parent.iterdir()) == ["record.json"]


def test_interrupted_checkpoint_leaves_nothing(tmp_path):
    target = tmp_path / "ckpt" / "seed-1"

    def save(directory: Path):
        (directory / "model.safetensors").write_bytes(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_checkpoint(target, save)
    # Nothing but the checkpoint's (released) lock file, which lives beside it for good (harness.locks).
    assert not target.exists() and [p.name for p in (tmp_path / "ckpt").iterdir()] == ["seed-1.lock"]


def test_unreadable_record_is_recomputed(tmp_path):
    store = Store(tmp_path)
    path = store.record_path("m", 1, "t")
    path.parent.mkdir(parents=True)
    path.write_text('{"status": "ok", "sco')
    assert not store.has("m", 1, "t")


def _run(results: Path, tiny_bert: str, *extra: str, **kwargs):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--models",
            "be",
            "--tasks",
            "senteval",
            "--profile",
            "smoke",
            "--backbone",
            tiny_bert,
            "--results",
            str(results),
            "--no-progress",
            "--seeds",
            "1,2",
            *extra,
        ],
        capture_output=True,
        text=True,
        **kwargs,
    )


def test_rerun_uses_store_and_overwrite_recomputes(tmp_path, tiny_bert):
    results = tmp_path / "results"
    first = _run(results, tiny_bert)
    assert first.returncode == 0, first.stderr
    assert "14 cells computed, 0 from the store" in first.stdout
    records = sorted(results.glob("*/seed-*/*.json"))
    assert len(records) == 14
    stamps = {p: p.stat().st_mtime_ns for p in records}
    second = _run(results, tiny_bert)
    assert "0 cells computed, 14 from the store" in second.stdout
    assert {p: p.stat().st_mtime_ns for p in records} == stamps
    assert first.stdout.split("| model")[1].split("\n\n")[0] == second.stdout.split("| model")[1].split("\n\n")[0]
    third = _run(results, tiny_bert, "--overwrite")
    assert "14 cells computed" in third.stdout


def test_killed_run_resumes(tmp_path, tiny_bert):
    results = tmp_path / "results"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "run",
            "--models",
            "be",
            "--tasks",
            "senteval",
            "--profile",
            "smoke",
            "--backbone",
            tiny_bert,
            "--results",
            str(results),
            "--no-progress",
            "--seeds",
            "1,2,3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline and len(list(results.glob("*/seed-*/*.json"))) < 3:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done = list(results.glob("*/seed-*/*.json"))
    assert 3 <= len(done) < 21
    for path in done:  # every record that exists is complete
        assert json.loads(path.read_text())["status"] == "ok"
    assert not list(results.rglob("*.tmp"))
    resumed = _run(results, tiny_bert, "--seeds", "1,2,3")
    assert resumed.returncode == 0, resumed.stderr
    computed = int(resumed.stdout.split(" cells computed")[0].split("\n")[-1])
    assert computed == 21 - len(done)
    assert len(list(results.glob("*/seed-*/*.json"))) == 21
