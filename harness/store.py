"""The result store: where records, checkpoints and a spec's own files live, and the locks that let several
processes share it.

Layout: ``<store>/<model-key>/seed-<seed>/<task-key>.json``; trained checkpoints under
``<store>/checkpoints/<model-key>/seed-<seed>/`` and a spec's own files under ``<store>/artifacts/...``.

What the store guarantees (docs/guide/store.md); each part is owned by one module:

- **Atomic writes** (:mod:`harness.files`): a crash leaves the old version of a file or the new one, never half of
  one; the next run removes the temporaries of dead processes (:meth:`Store.clean_stale_temporaries`).
- **Records are validated** (:class:`harness.record.CellRecord`): schema, content checksum, signature with
  ``HARNESS_STORE_KEY``, and the path its model key, seed and task key name. A record that fails is reported with
  its path and reason, never used (the runner recomputes the cell; the leaderboard skips it and says so).
- **Reuse needs a match** (:meth:`CellRecord.reuse_problem`).
- **Checkpoints carry file checksums** (:mod:`harness.checkpoints`).
- **Several processes can share a store** (``harness.locks``): a checkpoint is checked, built and replaced under its
  lock (``<checkpoint>.lock``); the runner holds a per-(model key, seed) lock while it computes those cells
  (``locks/``), so two runs never compute the same cells at the same time. Records need no lock: each is one atomic
  rename.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from .files import atomic_write_bytes, atomic_write_text, check_writable_dir, remove_stale_temporaries
from .locks import LOCKS, StoreLock, check_locking, checkpoint_lock
from .record import CellRecord, InvalidRecordError, record_file_name, runtime_of
from .status import CellStatus
from .store_files import (
    StoreError,
    UnsafeFileError,
    is_inside,
    is_real_dir,
    list_store_folder,
    read_store_bytes,
    remove_store_file,
)

logger = logging.getLogger(__name__)

# The store's own names; the record, file and checkpoint functions are imported from their modules
# (harness.record, harness.files, harness.checkpoints).
__all__ = [
    "Store",
    "read_cell_record",
    "read_record",
    "read_examples",
    "examples_path",
    "store_root_of",
    "NON_RECORD_FOLDERS",
    "SIDE_FILE_PROBLEM",
    "REPAIR_ADVICE",
]

CHECKPOINTS = "checkpoints"
ARTIFACTS = "artifacts"
# slurm: the job files, logs and state of the SLURM executor (harness.executors.slurm)
NON_RECORD_FOLDERS = (CHECKPOINTS, ARTIFACTS, "cache", "leaderboards", LOCKS, "slurm")


def store_root_of(record_path: Path) -> Path:
    """The store a record (or its side file) at ``<store>/<model-key>/seed-<n>/<file>`` belongs to."""
    record_path = Path(record_path)
    return record_path.parents[2] if len(record_path.parents) > 2 else record_path.parent


def read_cell_record(path: Path, root: Path | None = None) -> CellRecord:
    """The validated record at ``path``: a regular file inside its store (``root``, by default the folder three
    levels up, where every record lives), so a link out of the store, a FIFO or a device is never read;
    InvalidRecordError (with the path and reason) otherwise."""
    path = Path(path)
    try:
        raw = read_store_bytes(path, root if root is not None else store_root_of(path))
    except UnsafeFileError as exc:
        raise InvalidRecordError(path, exc.reason) from None
    except OSError as exc:
        raise InvalidRecordError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRecordError(path, "not UTF-8 text (damaged file)") from None
    return CellRecord.from_json(text, path)


def read_record(path: Path, root: Path | None = None) -> dict:
    """The validated record at ``path`` as a plain JSON object; InvalidRecordError otherwise."""
    return read_cell_record(path, root).to_dict()


EXAMPLES_SUFFIX = ".examples.npz"
# Every reason :func:`read_examples` gives starts with this: a record's side file is missing or damaged (`harness run`
# recomputes the cell), as opposed to a record that has none.
SIDE_FILE_PROBLEM = "its per-example file"
REPAIR_ADVICE = "`harness run` with the same arguments recomputes the cell and rewrites it"


def examples_path(record_path: Path) -> Path:
    """The per-example side file of the record at ``record_path`` (``<task-key>.examples.npz`` beside it)."""
    record_path = Path(record_path)
    return record_path.with_name(record_path.stem + EXAMPLES_SUFFIX)


def read_examples(record: dict) -> tuple[bytes | None, str | None]:
    """A valid record's per-example side file: ``(content, None)``, ``(None, reason)`` when it is absent or does
    not match the sha256 the record names, ``(None, None)`` when the record has none (stored before harness kept
    per-example data, or by a task that keeps none). ``record`` carries ``_path`` (as :meth:`Store.records` gives)."""
    description = record.get("examples")
    if not description or not record.get("_path"):
        return None, None
    path = examples_path(Path(record["_path"]))
    try:
        content = read_store_bytes(path, store_root_of(path))
    except UnsafeFileError as exc:
        return None, f"{SIDE_FILE_PROBLEM} {path} is {exc.reason}"
    except FileNotFoundError:
        return None, f"{SIDE_FILE_PROBLEM} {path} is missing"
    except OSError as exc:
        return None, f"{SIDE_FILE_PROBLEM} {path} cannot be read ({exc.strerror or exc})"
    if hashlib.sha256(content).hexdigest() != description["sha256"]:
        return None, f"{SIDE_FILE_PROBLEM} {path} does not match the sha256 its record names"
    return content, None


class Store:
    """A folder of records. ``skipped`` lists ``(path, reason)`` of the invalid records the last scan met."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.skipped: list[tuple[Path, str]] = []
        self.unlisted: list[tuple[Path, str]] = []  # folders the last listing left out (a link out of the store)

    def record_path(self, model_key: str, seed: int, task_key: str, runtime: str | None = None) -> Path:
        """Where the record of a cell evaluated under ``runtime`` (None: torch) lives
        (:func:`harness.record.record_file_name`: each runtime keeps its own cells)."""
        return self.root / model_key / f"seed-{seed}" / record_file_name(task_key, runtime)

    def checkpoint_dir(self, model_key: str, seed: int) -> Path:
        return self.root / CHECKPOINTS / model_key / f"seed-{seed}"

    def artifact_dir(self, model_key: str, seed: int) -> Path:
        return self.root / ARTIFACTS / model_key / f"seed-{seed}"

    def checkpoint_lock(self, model_key: str, seed: int, purpose: str | None = None) -> StoreLock:
        """Held while the (model key, seed) checkpoint is checked, trained, built or loaded."""
        return checkpoint_lock(self.checkpoint_dir(model_key, seed), purpose, self.root)

    def cells_lock(self, model_key: str, seed: int, purpose: str = "") -> StoreLock:
        """Held by the run that computes the cells of (model key, seed): another run waits, or does other cells."""
        return StoreLock(self.root / LOCKS / model_key / f"seed-{seed}.lock", purpose, self.root)

    def check_locking(self) -> None:
        """Refuse a store on a filesystem without file locks (LockingUnsupportedError), before any cell runs."""
        check_locking(self.root)

    def lookup(
        self, model_key: str, seed: int, task_key: str, runtime: str | None = None
    ) -> tuple[dict | None, str | None]:
        """``(record, None)`` for a valid record, ``(None, reason)`` for an invalid one, ``(None, None)`` if none."""
        path = self.record_path(model_key, seed, task_key, runtime)
        if not path.exists():
            return None, None
        try:
            return read_record(path, self.root), None
        except InvalidRecordError as exc:
            return None, exc.reason

    def has(self, model_key: str, seed: int, task_key: str, runtime: str | None = None) -> bool:
        """A valid record with status ok is stored for this cell (whether it may be reused is ``reuse_problem``)."""
        record, _ = self.lookup(model_key, seed, task_key, runtime)
        return record is not None and record["status"] == CellStatus.OK

    def write(
        self, model_key: str, seed: int, task_key: str, record: CellRecord | dict, examples: bytes | None = None
    ) -> Path:
        """Store a record (a :class:`CellRecord`, or the content of one as a dict, sealed here; either is sealed
        again, so the checksum and signature are this store's); ``examples`` is its per-example side file (npz),
        whose sha256 ``record["examples"]`` names. The side file is written first: a crash in between leaves a side
        file no record names (unused). The record's runtime names its file (each runtime keeps its own cells)."""
        content = record.to_dict() if isinstance(record, CellRecord) else record
        path = self.record_path(model_key, seed, task_key, runtime_of(content))
        if path.parent.exists() and not is_inside(path.parent, self.root):
            raise StoreError(
                f"cannot store the record {path}: its folder is a link to {path.parent.resolve()}, "
                "outside the store; remove the link and run again (finished cells are stored)."
            )
        if is_real_dir(path):
            raise StoreError(
                f"cannot store the record {path}: a folder has its name; remove or rename that folder "
                "and run again (finished cells are stored)."
            )
        # A bug in the caller when refused: never store what would be rejected when read.
        sealed = CellRecord.seal(content, path)
        side_file = examples_path(path)
        if examples is not None:
            if (sealed.get("examples") or {}).get("sha256") != hashlib.sha256(examples).hexdigest():
                raise ValueError(f"refusing to store {side_file}: the record does not name its sha256")
            atomic_write_bytes(side_file, examples, self.root)
        elif os.path.lexists(side_file):
            remove_store_file(side_file, self.root)  # a recomputed record without per-example data: never the old one
        atomic_write_text(path, sealed.to_json(), self.root)
        return path

    def record_files(self) -> list[Path]:
        """``<model-key>/seed-*/*.json`` under the root. A folder of the store that cannot be read is a StoreError:
        read as empty, it would make a leaderboard or an export leave its records out without a word."""
        self.unlisted = []
        if not self.root.is_dir():
            return []
        files = []
        for model in _listed(self.root, self.root, self.unlisted):
            if model.name in NON_RECORD_FOLDERS or not model.is_dir():
                continue
            for seed in _listed(model, self.root, self.unlisted):
                if seed.name.startswith("seed-") and seed.is_dir():
                    files.extend(
                        path
                        for path in _listed(seed, self.root, self.unlisted)
                        if path.suffix == ".json" and not path.name.startswith(".")
                    )
        return files

    def records(self) -> Iterator[dict]:
        """Every valid record (with its path under ``_path``); invalid ones are listed in ``self.skipped``."""
        paths = self.record_files()
        self.skipped = list(self.unlisted)
        for path in paths:
            try:
                record = read_record(path, self.root)
            except InvalidRecordError as exc:
                self.skipped.append((path, exc.reason))
                continue
            record["_path"] = str(path)
            yield record

    def check_writable(self) -> None:
        check_writable_dir(self.root, "the result store")

    def clean_stale_temporaries(self) -> list[tuple[Path, str]]:
        """Remove temporary files and folders left by dead processes (:func:`harness.files.remove_stale_temporaries`);
        returns ``(path, why)`` of each removed."""
        return remove_stale_temporaries(self.root)


def _listed(folder: Path, root: Path, unlisted: list[tuple[Path, str]]) -> list[Path]:
    """The entries of a store folder, sorted (:func:`harness.store_files.list_store_folder`); one that links out of the
    store is left out and noted in ``unlisted``, one that cannot be read is one StoreError line."""
    try:
        return list_store_folder(folder, root)
    except UnsafeFileError as exc:
        unlisted.append((folder, exc.reason))
        return []
    except OSError as exc:
        raise StoreError(
            f"cannot read {folder} ({exc.strerror or exc}); make it readable, or pass the store you "
            "mean with --results."
        ) from None
