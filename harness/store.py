"""The result store: one JSON record per (model spec, seed, task), written atomically.

Layout: ``<results>/<model-key>/seed-<seed>/<task-key>.json`` and trained checkpoints under
``<results>/checkpoints/<model-key>/seed-<seed>/``. A record is written to a temporary file in the same folder,
flushed, fsynced and renamed over the target, so a crash or Ctrl-C leaves either the old record or the new one,
never half of one. Checkpoint folders are built under a temporary name and renamed when complete.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

RECORD_SCHEMA = 1
CHECKPOINTS = "checkpoints"
ARTIFACTS = "artifacts"


def atomic_write_text(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:  # includes KeyboardInterrupt: never leave the temporary file behind
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def atomic_write_json(path: Path, payload: Any) -> None:
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")


class Store:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    def record_path(self, model_key: str, seed: int, task_key: str) -> Path:
        return self.root / model_key / f"seed-{seed}" / f"{task_key}.json"

    def checkpoint_dir(self, model_key: str, seed: int) -> Path:
        return self.root / CHECKPOINTS / model_key / f"seed-{seed}"

    def artifact_dir(self, model_key: str, seed: int) -> Path:
        return self.root / ARTIFACTS / model_key / f"seed-{seed}"

    def has(self, model_key: str, seed: int, task_key: str) -> bool:
        path = self.record_path(model_key, seed, task_key)
        if not path.is_file():
            return False
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return False  # unreadable: recompute rather than trust it
        return record.get("status") == "ok"

    def write(self, model_key: str, seed: int, task_key: str, record: dict) -> Path:
        path = self.record_path(model_key, seed, task_key)
        atomic_write_json(path, {"schema": RECORD_SCHEMA, **record})
        return path

    def records(self) -> Iterator[dict]:
        """Every readable record; unreadable files are skipped with their path noted in ``self.skipped``."""
        self.skipped: list[Path] = []
        if not self.root.is_dir():
            return
        for path in sorted(self.root.glob("*/seed-*/*.json")):
            if path.parts[-3] in (CHECKPOINTS, ARTIFACTS):
                continue
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                self.skipped.append(path)
                continue
            if isinstance(record, dict) and record.get("schema") == RECORD_SCHEMA:
                record["_path"] = str(path)
                yield record


def checkpoint_complete(directory: Path) -> bool:
    return (Path(directory) / "COMPLETE").is_file()


def build_checkpoint(directory: Path, save) -> Path:
    """Call ``save(temporary_dir)``, then move the folder into place with a COMPLETE marker."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        save(temporary)
        (temporary / "COMPLETE").write_text("ok\n")
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(temporary, directory)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return directory
