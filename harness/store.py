"""The result store: one JSON record per (model spec, seed, task), written atomically, checked when read.

Layout: ``<store>/<model-key>/seed-<seed>/<task-key>.json``; trained checkpoints under
``<store>/checkpoints/<model-key>/seed-<seed>/`` and a spec's own files under ``<store>/artifacts/...``.

What the store guarantees (README "What the store guarantees"):

- **Atomic writes.** A record is written to a temporary file in the same folder, flushed, fsynced and renamed over
  the target; a checkpoint folder is built under a temporary name and renamed when complete. A crash leaves the old
  version or the new one, never half of one. Temporary names carry the host and process id, so the next run removes
  the leftovers of dead processes (never those of a live one; see :meth:`Store.clean_stale_temporaries`). They also
  name the kernel boot and PID namespace, so containers sharing a store never take each other's live temporaries
  for leftovers.
- **Records are validated.** Every record read is checked against the schema below and against the sha256 of its
  own content (``checksum``), and must sit at the path its model key, seed and task key name. A record that fails is
  reported with its path and reason, never used (the runner recomputes the cell; the leaderboard skips it and says so).
- **Reuse needs a match** (:func:`reuse_problem`): status ``ok``, the same spec hash, task version, dataset checksum
  and (for trained models) training-data checksum.
- **Checkpoints carry file checksums**: ``COMPLETE`` lists the sha256 and size of every file; a checkpoint whose
  files do not match is not complete (:func:`checkpoint_problem`) and is rebuilt. A trained model's checkpoint
  names the spec hash, seed and training data it was made of (:func:`trained_checkpoint_problem`).
- **Cache entries are checksummed** (:func:`cached_bytes`): an edited or damaged entry is computed again.
- **The checksum detects accidents, not tampering**; with ``HARNESS_STORE_KEY`` set records are also signed
  (HMAC) and a record without a matching signature is invalid (:func:`signature_problem`).
- **Several processes can share a store** (``harness.locks``): a checkpoint is checked, built and replaced under its
  lock (``<checkpoint>.lock``), so two writers never interleave and a reader never sees half of one; the runner
  holds a per-(model key, seed) lock while it computes those cells (``locks/``), so two runs never compute the same
  cells at the same time. Records need no lock: each is one atomic rename.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import os
import re
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import HarnessError
from .locks import LOCKS, StoreLock, check_locking, checkpoint_lock

logger = logging.getLogger(__name__)

RECORD_SCHEMA = 2  # 2: records carry ``checksum``; 1 (harness 0.1): no checksum
# The checksum detects accidents (a damaged file, a hand edit that forgot to re-seal), not tampering: anyone can
# compute a sha256. A store whose records must prove who wrote them sets this secret: records are then also signed
# (HMAC-SHA256 of the checksum, field SIGNATURE) and every read (run, leaderboard, publish) refuses a record whose
# signature is missing or wrong.
STORE_KEY_VARIABLE = "HARNESS_STORE_KEY"
SIGNATURE = "signature"
STATUSES = ("ok", "missing", "failed")
CHECKPOINTS = "checkpoints"
ARTIFACTS = "artifacts"
NON_RECORD_FOLDERS = (CHECKPOINTS, ARTIFACTS, "cache", "leaderboards", LOCKS)
COMPLETE = "COMPLETE"
CHECKPOINT_FORMAT = 2  # 2: COMPLETE lists every file's sha256 and size; 1 (harness 0.1): COMPLETE says "ok"
MAX_SEED = 2**32 - 1
STALE_AFTER_SECONDS = 3600.0  # temporaries whose owner cannot be checked are removed only after this long
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_FAMILY_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")  # TaskMetadata's rule: no separators, cannot start with '.'
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_UMASK = os.umask(0o022)  # read once at import; records get the mode a plain open() would give them
os.umask(_UMASK)


class StoreError(HarnessError):
    """A result store (or output folder) that cannot be used: not a folder, not writable."""


class InvalidRecordError(HarnessError):
    """A stored record that is unreadable, breaks the schema or fails its content checksum."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


# -- temporary names ---------------------------------------------------------------------------------------------------
_TEMP_TAG = "harness-tmp"
# ``.<name>.harness-tmp.<host>.n<space>.<pid>.<random>``: ``space`` names the kernel boot and the PID namespace of
# the writer, so a process id is only checked by a process that sees the same processes (containers sharing a store
# with the same host name do not); names without it (harness 0.2) are treated as another space's.
_OWNED_TEMP = re.compile(rf"\.{_TEMP_TAG}\.(?P<host>[A-Za-z0-9_]+)\.(?:n(?P<space>[0-9a-f]{{8}})\.)?(?P<pid>\d+)\.")
# harness 0.1 temporaries (no owner in the name): ``.<name>.<8 random chars>.tmp`` files and ``.<name>.<8 chars>``
# checkpoint folders.
_LEGACY_TEMP_FILE = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
_LEGACY_TEMP_DIR = re.compile(r"^\..+\.[a-z0-9_]{8}$")


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname() or "host")[:40] or "host"


def _process_space() -> str:
    """8 hex digits naming this boot of the kernel and this process's PID namespace: two processes with the same
    space see the same process ids."""
    parts = []
    for source in ("/proc/sys/kernel/random/boot_id", "/proc/self/ns/pid"):
        try:
            parts.append(os.readlink(source) if source.endswith("/pid") else Path(source).read_text().strip())
        except OSError:
            parts.append("")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:8]


_SPACE = _process_space()


def temporary_prefix(name: str) -> str:
    """Prefix of a temporary file or folder that will be renamed to ``name``; it names this host, its boot and PID
    namespace, and this process (mkstemp adds a random token)."""
    return f".{name}.{_TEMP_TAG}.{_host_tag()}.n{_SPACE}.{os.getpid()}."


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return True  # cannot tell: keep
    return True


def _newest_mtime(path: Path) -> float:
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for folder, _, files in os.walk(path):
            for name in files:
                try:
                    newest = max(newest, os.lstat(os.path.join(folder, name)).st_mtime)
                except OSError:
                    pass
    return newest


def stale_temporary(path: Path, now: float | None = None) -> str | None:
    """Why ``path`` is a leftover that can be removed, or None (not a temporary, or possibly still in use)."""
    name = path.name
    owned = _OWNED_TEMP.search(name)
    now = time.time() if now is None else now
    if owned:
        if owned.group("host") == _host_tag() and owned.group("space") == _SPACE:
            pid = int(owned.group("pid"))
            if pid == os.getpid() or _process_alive(pid):
                return None
            return f"left by process {pid}, which is no longer running"
        age = now - _newest_mtime(path)
        if age > STALE_AFTER_SECONDS:
            return (f"left by process {owned.group('pid')} of host {owned.group('host')} (another boot or "
                    f"container), untouched for {age / 3600:.1f} h")
        return None
    legacy = _LEGACY_TEMP_FILE.match(name) if path.is_file() else _LEGACY_TEMP_DIR.match(name)
    if legacy:
        age = now - _newest_mtime(path)
        if age > STALE_AFTER_SECONDS:
            return f"left by an older harness, untouched for {age / 3600:.1f} h"
    return None


# -- atomic writes -----------------------------------------------------------------------------------------------------
def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=temporary_prefix(path.name), suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(handle, 0o666 & ~_UMASK)  # mkstemp's 0600 would hide records from the others sharing a store
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
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


def check_writable_dir(path: Path, what: str) -> None:
    """Raise StoreError unless ``path`` is (or can be created as) a folder this process can write to. Creates
    nothing: the probe file goes into the folder itself or its nearest existing parent and is removed at once."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise StoreError(f"{what} {path} is a file, not a folder; give a folder (it is created if missing).")
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise StoreError(f"{what} {path} cannot be created: {probe} is a file.")
    try:
        handle, name = tempfile.mkstemp(prefix=temporary_prefix("write-test"), suffix=".tmp", dir=probe)
        os.close(handle)
        os.unlink(name)
    except OSError as exc:
        raise StoreError(
            f"{what} {path} is not writable ({exc.strerror or exc}); choose a writable folder."
        ) from None


# -- records -----------------------------------------------------------------------------------------------------------
def _canonical(payload: Any) -> Any:
    """The value as it reads back from its JSON file (tuples become lists, other objects strings, and NaN or
    infinite numbers the strings "nan", "inf", "-inf": JSON has no such numbers, and a score that is a string is
    rejected by the record schema)."""
    def finite(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if isinstance(value, dict):
            return {key: finite(item) for key, item in value.items()}
        if isinstance(value, list):
            return [finite(item) for item in value]
        return value

    return finite(json.loads(json.dumps(payload, default=str)))


# Fields that are not part of a record's content: its checksum, its keyed signature, and where it was read from.
_NOT_CONTENT = ("checksum", SIGNATURE, "_path")


def content_checksum(record: dict) -> str:
    """sha256 of a record's content without its ``checksum`` field (canonical JSON: sorted keys, no spaces)."""
    body = {key: value for key, value in record.items() if key not in _NOT_CONTENT}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal_record(record: dict) -> dict:
    """The record as stored: canonical JSON values, the current schema and the checksum of its content (and, when
    ``HARNESS_STORE_KEY`` is set, its keyed signature)."""
    sealed = _canonical({key: value for key, value in record.items() if key not in _NOT_CONTENT})
    sealed["schema"] = RECORD_SCHEMA
    sealed["checksum"] = content_checksum(sealed)
    key = store_key()
    if key is not None:
        sealed[SIGNATURE] = _signature(key, sealed["checksum"])
    return sealed


def store_key() -> bytes | None:
    """The secret of ``HARNESS_STORE_KEY``, or None when it is not set (records are then checksummed, not signed)."""
    value = os.environ.get(STORE_KEY_VARIABLE, "")
    return value.encode("utf-8") if value else None


def _signature(key: bytes, checksum: str) -> str:
    return hmac.new(key, checksum.encode("ascii"), hashlib.sha256).hexdigest()


def signature_problem(record: dict) -> str | None:
    """With ``HARNESS_STORE_KEY`` set: why the record's keyed signature does not prove it was written by someone
    holding the key (missing, or not matching its content checksum), else None. Without a key: None."""
    key = store_key()
    if key is None:
        return None
    signature = record.get(SIGNATURE)
    if not isinstance(signature, str):
        return f"not signed, and {STORE_KEY_VARIABLE} is set: only records signed with that key are trusted"
    if not hmac.compare_digest(signature, _signature(key, str(record.get("checksum")))):
        return (f"its signature does not match {STORE_KEY_VARIABLE}: changed after it was signed, or signed with "
                "another key")
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite_number(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def is_valid_seed(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED


def _field_problem(record: dict) -> str | None:
    status = record.get("status")
    if status not in STATUSES:
        return f"status {status!r} is not one of {', '.join(STATUSES)}"
    model = record.get("model")
    if not isinstance(model, dict):
        return "has no 'model' object"
    for key in ("name", "label", "backbone", "profile", "hash"):
        if not isinstance(model.get(key), str):
            return f"model.{key} is missing or not a string"
    if model.get("train_on") is not None and not isinstance(model.get("train_on"), str):
        return "model.train_on is not a string"
    if not isinstance(record.get("model_key"), str) or not _SAFE_NAME.match(record["model_key"]):
        return "model_key is missing or not a plain name"
    if not is_valid_seed(record.get("seed")):
        return f"seed {record.get('seed')!r} is not an integer in 0..{MAX_SEED}"
    task = record.get("task")
    if not isinstance(task, dict):
        return "has no 'task' object"
    for key in ("name", "key", "label", "family", "version"):
        if not isinstance(task.get(key), str):
            return f"task.{key} is missing or not a string"
    if not _FAMILY_NAME.match(task["family"]):
        return f"task.family {task['family']!r} is not a task family name (lower-case letters, digits, '-', '_', '.')"
    if not _SAFE_NAME.match(task["key"]):
        return f"task.key {task['key']!r} is not a plain name"
    if record.get("hardware") is not None and not isinstance(record.get("hardware"), str):
        return "hardware is not a string"
    budget = record.get("budget")  # requested and applied training budget (records written before it have none)
    if budget is not None and not (isinstance(budget, dict) and isinstance(budget.get("requested"), dict)
                                   and isinstance(budget.get("applied"), dict)):
        return "budget is not an object with 'requested' and 'applied' objects"
    if status == "ok":
        if not _is_finite_number(record.get("main_score")):
            return f"main_score {record.get('main_score')!r} is not a finite number"
        scores = record.get("scores")
        if not isinstance(scores, dict) or not scores:
            return "has no 'scores' object"
        for name, value in scores.items():
            if not _is_finite_number(value):
                return f"score {name!r} is {value!r}, not a finite number"
        if not isinstance(record.get("dataset_checksum"), str):
            return "dataset_checksum is missing"
        examples = record.get("examples")
        if examples is not None and not (isinstance(examples, dict) and isinstance(examples.get("statistic"), str)
                                         and isinstance(examples.get("sha256"), str)
                                         and _HEX64.match(examples["sha256"])):
            return "examples (the per-example side file's description) lacks its statistic or sha256"
    elif not isinstance(record.get("message"), str):
        return f"a {status} record needs a 'message' saying why"
    return None


def record_problem(record: Any, path: Path | None = None) -> str | None:
    """Why ``record`` (read from ``path``) must not be used, or None when it is valid."""
    if not isinstance(record, dict):
        return f"not a record: a JSON {type(record).__name__} instead of an object"
    schema = record.get("schema")
    if schema == 1:
        return ("written by harness 0.1, without a content checksum; it is recomputed (published records: "
                "`harness publish --trust-unsigned` re-checks and signs them)")
    if schema != RECORD_SCHEMA:
        return f"unknown record schema {schema!r} (this harness reads schema {RECORD_SCHEMA})"
    problem = _field_problem(record)
    if problem:
        return problem
    checksum = record.get("checksum")
    if not isinstance(checksum, str) or not _HEX64.match(checksum):
        return "has no content checksum"
    try:
        actual = content_checksum(record)
    except ValueError:  # NaN or infinity somewhere in the record
        return "contains NaN or infinite values"
    if actual != checksum:
        return "content does not match its checksum: the record was changed after it was written"
    signature = signature_problem(record)
    if signature:
        return signature
    if path is not None:
        path = Path(path)
        expected = (record["model_key"], f"seed-{record['seed']}", f"{record['task']['key']}.json")
        if (path.parent.parent.name, path.parent.name, path.name) != expected:
            return f"stored at the wrong place: its content belongs at {'/'.join(expected)}"
    return None


def read_record(path: Path) -> dict:
    """The validated record at ``path``; InvalidRecordError (with the path and reason) otherwise."""
    path = Path(path)
    kind = _not_a_regular_file(path)
    if kind:  # never open a FIFO (it would block the run) or a folder
        raise InvalidRecordError(path, f"not a regular file ({kind})")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InvalidRecordError(path, f"cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRecordError(path, "not UTF-8 text (damaged file)") from None
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidRecordError(path, f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    problem = record_problem(record, path)
    if problem:
        raise InvalidRecordError(path, problem)
    return record


def _not_a_regular_file(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file ("a folder", "a FIFO", ...), else None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # missing or unreadable: the read says why
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a socket or device"


EXAMPLES_SUFFIX = ".examples.npz"


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
        content = path.read_bytes()
    except OSError:
        return None, f"its per-example file {path} is missing"
    if hashlib.sha256(content).hexdigest() != description["sha256"]:
        return None, f"its per-example file {path} does not match the sha256 its record names"
    return content, None


def reuse_problem(
    record: dict,
    *,
    model_hash: str,
    task_version: str,
    dataset_checksum: str | None,
    training_data_checksum: str | None = None,
) -> str | None:
    """Why a valid stored record cannot answer this cell, or None when it can be reused."""
    if record["status"] != "ok":
        return f"its status is {record['status']} ({record.get('message', '')})"
    if record["model"]["hash"] != model_hash:
        return "it was computed for another model spec (spec hash differs)"
    if record["task"]["version"] != str(task_version):
        return f"the task version changed ({record['task']['version']} -> {task_version})"
    if dataset_checksum is None:
        return "the task cannot report its dataset checksum before evaluating, so the data cannot be compared"
    if record.get("dataset_checksum") != dataset_checksum:
        return (f"the dataset changed since it was computed (sha256 {str(record.get('dataset_checksum'))[:12]}... "
                f"then, {dataset_checksum[:12]}... now)")
    if training_data_checksum is not None and record.get("training_data_checksum") != training_data_checksum:
        return "the training data changed since the model was trained"
    return None


class Store:
    """A folder of records. ``skipped`` lists ``(path, reason)`` of the invalid records the last scan met."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        self.skipped: list[tuple[Path, str]] = []

    def record_path(self, model_key: str, seed: int, task_key: str) -> Path:
        return self.root / model_key / f"seed-{seed}" / f"{task_key}.json"

    def checkpoint_dir(self, model_key: str, seed: int) -> Path:
        return self.root / CHECKPOINTS / model_key / f"seed-{seed}"

    def artifact_dir(self, model_key: str, seed: int) -> Path:
        return self.root / ARTIFACTS / model_key / f"seed-{seed}"

    def checkpoint_lock(self, model_key: str, seed: int, purpose: str | None = None) -> StoreLock:
        """Held while the (model key, seed) checkpoint is checked, trained, built or loaded."""
        return checkpoint_lock(self.checkpoint_dir(model_key, seed), purpose)

    def cells_lock(self, model_key: str, seed: int, purpose: str = "") -> StoreLock:
        """Held by the run that computes the cells of (model key, seed): another run waits, or does other cells."""
        return StoreLock(self.root / LOCKS / model_key / f"seed-{seed}.lock", purpose)

    def check_locking(self) -> None:
        """Refuse a store on a filesystem without file locks (LockingUnsupportedError), before any cell runs."""
        check_locking(self.root)

    def lookup(self, model_key: str, seed: int, task_key: str) -> tuple[dict | None, str | None]:
        """``(record, None)`` for a valid record, ``(None, reason)`` for an invalid one, ``(None, None)`` if none."""
        path = self.record_path(model_key, seed, task_key)
        if not path.exists():
            return None, None
        try:
            return read_record(path), None
        except InvalidRecordError as exc:
            return None, exc.reason

    def has(self, model_key: str, seed: int, task_key: str) -> bool:
        """A valid record with status ok is stored for this cell (whether it may be reused is ``reuse_problem``)."""
        record, _ = self.lookup(model_key, seed, task_key)
        return record is not None and record["status"] == "ok"

    def write(self, model_key: str, seed: int, task_key: str, record: dict, examples: bytes | None = None) -> Path:
        """Store a record; ``examples`` is its per-example side file (npz), whose sha256 ``record["examples"]``
        names. The side file is written first: a crash in between leaves a side file no record names (unused)."""
        path = self.record_path(model_key, seed, task_key)
        if path.is_dir() and not path.is_symlink():
            raise StoreError(f"cannot store the record {path}: a folder has its name; remove or rename that folder "
                             "and run again (finished cells are stored).")
        sealed = seal_record(record)
        problem = record_problem(sealed, path)
        if problem:  # a bug in the caller: never store what would be rejected when read
            raise ValueError(f"refusing to store an invalid record at {path}: {problem}")
        side_file = examples_path(path)
        if examples is not None:
            if (sealed.get("examples") or {}).get("sha256") != hashlib.sha256(examples).hexdigest():
                raise ValueError(f"refusing to store {side_file}: the record does not name its sha256")
            atomic_write_bytes(side_file, examples)
        elif side_file.exists():
            side_file.unlink()  # a recomputed record without per-example data: never leave the old one beside it
        atomic_write_text(path, json.dumps(sealed, indent=2, sort_keys=True, allow_nan=False) + "\n")
        return path

    def record_files(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [
            path for path in sorted(self.root.glob("*/seed-*/*.json"))
            if path.parts[-3] not in NON_RECORD_FOLDERS and not path.name.startswith(".")
        ]

    def records(self) -> Iterator[dict]:
        """Every valid record (with its path under ``_path``); invalid ones are listed in ``self.skipped``."""
        self.skipped = []
        for path in self.record_files():
            try:
                record = read_record(path)
            except InvalidRecordError as exc:
                self.skipped.append((path, exc.reason))
                continue
            record["_path"] = str(path)
            yield record

    def check_writable(self) -> None:
        check_writable_dir(self.root, "the result store")

    def clean_stale_temporaries(self) -> list[tuple[Path, str]]:
        """Remove temporary files and folders left by dead processes; returns ``(path, why)`` of each removed.

        A temporary names its host and process id: one of this host whose process is gone is removed; one of a live
        process never is. Temporaries whose owner cannot be checked (another host, or written by harness 0.1) are
        removed only when untouched for STALE_AFTER_SECONDS.
        """
        removed: list[tuple[Path, str]] = []
        if not self.root.is_dir():
            return removed
        now = time.time()
        for folder, dirs, files in os.walk(self.root):
            base = Path(folder)
            for name in list(dirs):
                path = base / name
                if not name.startswith(".") or path.is_symlink():
                    continue
                why = stale_temporary(path, now)
                if why:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append((path, why))
                dirs.remove(name)  # never descend into hidden folders
            for name in files:
                if not name.startswith(".") or not name.endswith(".tmp"):
                    continue
                path = base / name
                why = stale_temporary(path, now)
                if why:
                    try:
                        path.unlink()
                        removed.append((path, why))
                    except OSError:
                        pass
        return removed


# -- cache entries -----------------------------------------------------------------------------------------------------
CACHE_CHECKSUM_SUFFIX = ".sha256"


def cached_bytes(path: Path, compute: Callable[[], bytes], check: Callable[[bytes], bool] | None = None,
                 what: str = "cache entry") -> tuple[bytes, bool]:
    """The content of the cache file ``path`` if it verifies, else ``compute()`` written there; returns ``(content,
    True if it came from the cache)``. Plugins keep what they cache in the store (``ctx.cache_dir``) through this.

    Every entry is written atomically with its sha256 in ``<path>.sha256``; an entry whose file or checksum is
    missing, does not match (edited, truncated or damaged) or that ``check`` rejects is logged and recomputed, so a
    damaged cache file never serves wrong values or breaks later runs. Two processes computing the same entry at
    once both write the same content (a cache key names everything that determines it), so no lock is needed.
    """
    path = Path(path)
    sidecar = path.with_name(path.name + CACHE_CHECKSUM_SUFFIX)
    problem = _cache_problem(path, sidecar, check)
    if problem is None:
        return path.read_bytes(), True
    if problem != "not cached yet":
        logger.warning("%s %s cannot be used: %s; computing it again", what, path, problem)
    content = compute()
    atomic_write_bytes(path, content)
    atomic_write_text(sidecar, hashlib.sha256(content).hexdigest() + "\n")
    return content, False


def _cache_problem(path: Path, sidecar: Path, check: Callable[[bytes], bool] | None) -> str | None:
    if not path.exists():
        return "not cached yet"
    try:
        content = path.read_bytes()
        expected = sidecar.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return f"it has no checksum file {sidecar.name}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"it cannot be read ({getattr(exc, 'strerror', None) or exc})"
    if hashlib.sha256(content).hexdigest() != expected:
        return "its content does not match its checksum (edited or damaged)"
    if check is not None and not check(content):
        return "its content is not what this entry holds"
    return None


# -- checkpoints -------------------------------------------------------------------------------------------------------
def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _checkpoint_files(directory: Path) -> dict[str, dict]:
    files = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        relative = path.relative_to(directory).as_posix()
        if relative == COMPLETE:
            continue
        files[relative] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return files


def checkpoint_problem(directory: Path) -> str | None:
    """Why the checkpoint in ``directory`` cannot be loaded as it is (not built, or its files do not match the
    checksums recorded when it was built), or None. Checked under the checkpoint's lock, so a checkpoint being
    replaced by another process is seen before or after, never half-way (in a read-only store: without the lock)."""
    directory = Path(directory)
    if not directory.parent.is_dir():
        return "not built yet"
    lock = checkpoint_lock(directory)
    try:
        lock.acquire()
    except OSError:  # a store this process cannot write (e.g. read-only): nobody can be replacing it from here
        return _checkpoint_problem(directory)
    try:
        return _checkpoint_problem(directory)
    finally:
        lock.release()


def _checkpoint_problem(directory: Path) -> str | None:
    marker = directory / COMPLETE
    if not marker.is_file():
        return "not built yet" if not directory.exists() else f"incomplete (no {COMPLETE} marker)"
    try:
        manifest = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        manifest = None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return "built by harness 0.1 without file checksums, so it cannot be verified"
    for relative, expected in manifest["files"].items():
        path = directory / relative
        if not path.is_file():
            return f"{relative} is missing"
        size = path.stat().st_size
        if size != expected.get("bytes"):
            return f"{relative} has {size} bytes, {expected.get('bytes')} when it was built (truncated or replaced)"
        if sha256_file(path) != expected.get("sha256"):
            return f"{relative} does not match the sha256 recorded when it was built (the file was changed)"
    return None


TRAINING_RECORD = "training.json"  # in a trained model's checkpoint: the spec, seed and training data it was made of


def trained_checkpoint_problem(directory: Path, *, spec_hash: str, seed: int,
                               training_data_checksum: str | None = None, train_on: str | None = None) -> str | None:
    """Why the checkpoint of a trained model in ``directory`` cannot serve the spec ``spec_hash`` and ``seed``: not
    built or damaged (:func:`checkpoint_problem`), or its ``training.json`` names another spec hash, another seed or
    (when ``training_data_checksum`` is given) other training data, e.g. ``seed-43`` copied over ``seed-42`` by
    hand. None: load it."""
    problem = checkpoint_problem(directory)
    if problem is not None:
        return problem
    try:
        training_record = json.loads((Path(directory) / TRAINING_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"its {TRAINING_RECORD} is unreadable"
    trained_for = training_record.get("spec") if isinstance(training_record, dict) else None
    trained_hash = trained_for.get("hash") if isinstance(trained_for, dict) else None
    if trained_hash != spec_hash:
        return (f"it was trained for another model spec (spec hash {str(trained_hash)[:12]}..., wanted "
                f"{spec_hash[:12]}...): a checkpoint copied or moved by hand")
    if training_record.get("seed") != seed:
        return f"it was trained with seed {training_record.get('seed')!r}, not {seed}: a checkpoint copied by hand"
    if training_data_checksum is not None and training_record.get("source_checksum") != training_data_checksum:
        return f"the training data{' of ' + train_on if train_on else ''} changed since it was trained"
    return None


def checkpoint_complete(directory: Path) -> bool:
    """The checkpoint is built and every file matches its recorded checksum (a damaged one logs a warning)."""
    problem = checkpoint_problem(directory)
    if problem is not None and (Path(directory) / COMPLETE).is_file():
        logger.warning("checkpoint %s cannot be used: %s; it will be rebuilt", directory, problem)
    return problem is None


def build_checkpoint(directory: Path, save: Callable[[Path], Any]) -> Path:
    """Call ``save(temporary_dir)``, record every file's sha256 in ``COMPLETE``, then move the folder into place.

    All of it happens under the checkpoint's lock (re-entrant: a caller may already hold it), so concurrent builders
    take turns and :func:`checkpoint_problem` never sees a checkpoint half-replaced. An existing checkpoint is renamed
    aside before the new one is renamed in (a folder cannot be renamed over a non-empty one) and removed after; a
    crash in between leaves no checkpoint (it is rebuilt) and a temporary that the next build or run removes.
    """
    directory = Path(directory)
    check_checkpoint_target(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with checkpoint_lock(directory):
        _remove_stale_siblings(directory)
        temporary = Path(tempfile.mkdtemp(prefix=temporary_prefix(directory.name), dir=directory.parent))
        try:
            os.chmod(temporary, 0o777 & ~_UMASK)  # mkdtemp's 0700 would hide it from others sharing the store
            save(temporary)
            _share_like_records(temporary)
            manifest = {"format": CHECKPOINT_FORMAT, "files": _checkpoint_files(temporary)}
            (temporary / COMPLETE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
            if directory.exists():
                aside = Path(tempfile.mkdtemp(prefix=temporary_prefix(directory.name), dir=directory.parent))
                os.replace(directory, aside)  # onto the empty folder just made: atomic, and the name is ours
                os.replace(temporary, directory)
                shutil.rmtree(aside, ignore_errors=True)
            else:
                os.replace(temporary, directory)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
    return directory


def _share_like_records(folder: Path) -> None:
    """Give what a model's ``save`` wrote the modes records get (0644 / 0755 under the usual umask): some writers
    create files 0600 (e.g. through mkstemp), which would hide a checkpoint from the others sharing a store."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        os.chmod(path, (0o777 if path.is_dir() else 0o666) & ~_UMASK)


def check_checkpoint_target(directory: Path) -> None:
    """Refuse (StoreError) a checkpoint place that cannot be replaced by a rename: a symbolic link (renaming onto it
    fails after training; the link's target would keep the old checkpoint) or a file. Called before training."""
    directory = Path(directory)
    if directory.is_symlink():
        raise StoreError(f"the checkpoint folder {directory} is a symbolic link (to {os.readlink(directory)}); the "
                         "harness replaces checkpoints by renaming, which a link does not allow: remove the link "
                         "(link the whole store elsewhere instead) and run again.")
    if directory.exists() and not directory.is_dir():
        raise StoreError(f"the checkpoint folder {directory} is a file; remove it and run again.")


def _remove_stale_siblings(directory: Path) -> None:
    """Temporaries of earlier builds of this checkpoint whose process died (e.g. a Ray worker killed mid-save)."""
    prefix = f".{directory.name}.{_TEMP_TAG}."
    for sibling in directory.parent.iterdir():
        if sibling.name.startswith(prefix) and sibling.is_dir() and stale_temporary(sibling):
            shutil.rmtree(sibling, ignore_errors=True)
