"""One cell's result record: :class:`CellRecord` owns its schema, its JSON form, its checksum and keyed signature,
and the rule that says when a stored record may answer a cell again (:meth:`CellRecord.reuse_problem`).

- **Records are validated.** Every record read is checked against the schema (:func:`record_problem`) and against
  the sha256 of its own content (``checksum``), and must sit at the path its model key, seed and task key name. A
  record that fails is reported with its path and a one-line reason, never used.
- **Reuse needs a match**: status ``ok``, the same spec hash, task version, dataset checksum and (for trained
  models) training-data checksum.
- **The checksum detects accidents, not tampering**; with ``HARNESS_STORE_KEY`` set records are also signed
  (HMAC) and a record without a matching signature is invalid (:func:`signature_problem`).

Where records live (the folder layout) and who may write them at once is :mod:`harness.store`'s business.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import HarnessError
from .profiles import precision_problem
from .status import RECORD_STATUSES, CellStatus

RECORD_SCHEMA = 2  # 2: records carry ``checksum``; 1 (harness 0.1): no checksum
# The checksum detects accidents (a damaged file, a hand edit that forgot to re-seal), not tampering: anyone can
# compute a sha256. A store whose records must prove who wrote them sets this secret: records are then also signed
# (HMAC-SHA256 of the checksum, field SIGNATURE) and every read (run, leaderboard, publish) refuses a record whose
# signature is missing or wrong.
STORE_KEY_VARIABLE = "HARNESS_STORE_KEY"
SIGNATURE = "signature"
STATUSES = tuple(status.value for status in RECORD_STATUSES)  # the words a stored record's status may be
MAX_SEED = 2**32 - 1
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_FAMILY_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")  # TaskMetadata's rule: no separators, cannot start with '.'
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# Each evaluation runtime keeps its own cells: ONNX Runtime's float rounding can split a tie torch
# keeps (ce on sickr, tiny model: 14.259 torch, 14.243 onnx), and no tolerance bounds what a split tie does to a rank
# correlation, so one runtime never answers for the other. Torch's records keep the name (and so the published keys)
# they always had: ``<task key>.json``; another runtime's sit beside them as ``<task key>@<runtime>.json``.
DEFAULT_RUNTIME = "torch"
RUNTIME_SEPARATOR = "@"  # never in a task key (SAFE_NAME allows letters, digits, _ . -)


def runtime_of(record: Mapping[str, Any]) -> str:
    """The runtime that computed ``record`` (records of torch runs name none)."""
    return str(record.get("runtime") or DEFAULT_RUNTIME)


def record_file_name(task_key: str, runtime: str | None = None) -> str:
    """The file name of a cell's record under its model key and seed folder (see DEFAULT_RUNTIME)."""
    if runtime is None or runtime == DEFAULT_RUNTIME:
        return f"{task_key}.json"
    return f"{task_key}{RUNTIME_SEPARATOR}{runtime}.json"


def split_record_stem(stem: str) -> tuple[str, str]:
    """``"stsb@onnx"`` -> ``("stsb", "onnx")``; ``"stsb"`` -> ``("stsb", "torch")``: a record file's task key and
    runtime, from its name alone (for records that cannot be read)."""
    task_key, separator, runtime = stem.partition(RUNTIME_SEPARATOR)
    return task_key, runtime if separator else DEFAULT_RUNTIME


class InvalidRecordError(HarnessError):
    """A stored record that is unreadable, breaks the schema or fails its content checksum."""

    def __init__(self, path: Path | None, reason: str):
        super().__init__(f"{path}: {reason}" if path is not None else reason)
        self.path = Path(path) if path is not None else None
        self.reason = reason


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
        return (
            f"its signature does not match {STORE_KEY_VARIABLE}: changed after it was signed, or signed with "
            "another key"
        )
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_finite_number(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def is_valid_seed(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SEED


def field_problem(record: dict) -> str | None:
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
    if not isinstance(record.get("model_key"), str) or not SAFE_NAME.match(record["model_key"]):
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
    if not SAFE_NAME.match(task["key"]):
        return f"task.key {task['key']!r} is not a plain name"
    if record.get("hardware") is not None and not isinstance(record.get("hardware"), str):
        return "hardware is not a string"
    budget = record.get("budget")  # requested and applied training budget (records written before it have none)
    if budget is not None and not (
        isinstance(budget, dict)
        and isinstance(budget.get("requested"), dict)
        and isinstance(budget.get("applied"), dict)
    ):
        return "budget is not an object with 'requested' and 'applied' objects"
    cost = record.get("cost")  # what the cell cost (harness.run.cost); records written before it have none
    if cost is not None and not isinstance(cost, dict):
        return "cost is not an object"
    if status == CellStatus.OK:
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
        if examples is not None and not (
            isinstance(examples, dict)
            and isinstance(examples.get("statistic"), str)
            and isinstance(examples.get("sha256"), str)
            and _HEX64.match(examples["sha256"])
        ):
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
        return (
            "written by harness 0.1, without a content checksum; it is recomputed (published records: "
            "`harness publish --trust-unsigned` re-checks and signs them)"
        )
    if schema != RECORD_SCHEMA:
        return f"unknown record schema {schema!r} (this harness reads schema {RECORD_SCHEMA})"
    problem = field_problem(record)
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
        expected = (
            record["model_key"],
            f"seed-{record['seed']}",
            record_file_name(record["task"]["key"], runtime_of(record)),
        )
        # an ONNX record written before runtimes kept their own cells sits at the torch name: valid, and the reuse
        # rule (runtime_of) keeps it from answering a torch cell
        legacy = (*expected[:2], record_file_name(record["task"]["key"]))
        if (path.parent.parent.name, path.parent.name, path.name) not in (expected, legacy):
            return f"stored at the wrong place: its content belongs at {'/'.join(expected)}"
    return None


def reuse_problem(
    record: dict,
    *,
    model_hash: str,
    task_version: str,
    dataset_checksum: str | None,
    training_data_checksum: str | None = None,
    runtime: str = DEFAULT_RUNTIME,
    requested_budget: Mapping[str, Any] | None = None,
) -> str | None:
    """Why a valid stored record cannot answer this cell (of this evaluation ``runtime``), or None when it can be
    reused. ``requested_budget``: the cell's trained spec's (an explicit precision must be the one the record's
    model was trained under)."""
    if record["status"] != CellStatus.OK:
        return f"its status is {record['status']} ({record.get('message', '')})"
    if runtime_of(record) != runtime:
        return (
            f"it was computed under --runtime {runtime_of(record)}, this run evaluates under --runtime {runtime} "
            "(each runtime keeps its own cells)"
        )
    if record["model"]["hash"] != model_hash:
        return "it was computed for another model spec (spec hash differs)"
    if record["task"]["version"] != str(task_version):
        return f"the task version changed ({record['task']['version']} -> {task_version})"
    if dataset_checksum is None:
        return "the task cannot report its dataset checksum before evaluating, so the data cannot be compared"
    if record.get("dataset_checksum") != dataset_checksum:
        return (
            f"the dataset changed since it was computed (sha256 {str(record.get('dataset_checksum'))[:12]}... "
            f"then, {dataset_checksum[:12]}... now)"
        )
    if training_data_checksum is not None and record.get("training_data_checksum") != training_data_checksum:
        return "the training data changed since the model was trained"
    budget = record.get("budget")
    return precision_problem(requested_budget or {}, budget.get("applied") if isinstance(budget, dict) else None)


def _frozen(value: Any) -> Any:
    """A read-only view of a JSON value (objects become mappings that refuse assignment, arrays tuples)."""
    if isinstance(value, dict):
        return MappingProxyType({key: _frozen(item) for key, item in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(item) for item in value)
    return value


def _thawed(value: Any) -> Any:
    """The plain JSON value of a :func:`_frozen` one (a fresh copy the caller may change)."""
    if isinstance(value, Mapping):
        return {key: _thawed(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_thawed(item) for item in value]
    return copy.copy(value)


@dataclass(frozen=True)
class CellRecord:
    """A valid, sealed record of one (model spec, seed, task) cell. Build one with :meth:`from_dict` (a stored record:
    validated, the checksum must match) or :meth:`seal` (new content: canonicalised, checksummed, validated).

    The fields every record has are typed attributes; the rest of its content (details, timings, environment,
    budget, ...) is in ``extra``. :meth:`to_dict` gives back exactly the object it was read from, so reading and
    writing a record again changes no byte of it.
    """

    status: CellStatus  # read from the record's word here, where the store reads records
    model_key: str
    seed: int
    model: Mapping[str, Any]
    task: Mapping[str, Any]
    checksum: str
    schema: int = RECORD_SCHEMA
    extra: Mapping[str, Any] = field(default_factory=dict)

    _TYPED = ("status", "model_key", "seed", "model", "task", "checksum", "schema")

    @classmethod
    def from_dict(cls, payload: Any, path: Path | None = None) -> CellRecord:
        """The record ``payload`` (read from ``path``); InvalidRecordError with today's one-line reason when it breaks
        the schema, fails its checksum or signature, or sits at the wrong place."""
        problem = record_problem(payload, path)
        if problem:
            raise InvalidRecordError(path, problem)
        content = {key: value for key, value in payload.items() if key != "_path"}
        content["status"] = CellStatus(content["status"])
        return cls(
            **{name: _frozen(content[name]) for name in cls._TYPED},
            extra=_frozen({key: value for key, value in content.items() if key not in cls._TYPED}),
        )

    @classmethod
    def from_json(cls, text: str, path: Path | None = None) -> CellRecord:
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidRecordError(path, f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
        return cls.from_dict(payload, path)

    @classmethod
    def seal(cls, content: Mapping[str, Any], path: Path | None = None) -> CellRecord:
        """New record content sealed (canonical JSON values, current schema, checksum, signature with a store key) and
        validated; ValueError names the problem of content that would be rejected when read (a bug in the caller)."""
        sealed = seal_record(_thawed(content))  # values taken from another CellRecord are plain again
        problem = record_problem(sealed, path)
        if problem:
            raise ValueError(f"refusing to store an invalid record{f' at {path}' if path else ''}: {problem}")
        return cls.from_dict(sealed)

    def to_dict(self) -> dict:
        """The record as a plain JSON object (a fresh copy)."""
        content = _thawed(self.extra)
        content.update({name: _thawed(getattr(self, name)) for name in self._TYPED})
        return content

    def to_json(self) -> str:
        """The record's file content (sorted keys, two-space indent, a final newline)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False) + "\n"

    def replace(self, **changes: Any) -> CellRecord:
        """A new sealed record with ``changes`` applied to the content (e.g. ``published=...``)."""
        return CellRecord.seal({**self.to_dict(), **changes})

    def get(self, name: str, default: Any = None) -> Any:
        """A content field by name, typed or not (as a read-only value)."""
        if name in self._TYPED:
            return getattr(self, name)
        return self.extra.get(name, default)

    @property
    def main_score(self) -> float | None:
        return self.extra.get("main_score")

    @property
    def scores(self) -> Mapping[str, float]:
        return self.extra.get("scores") or MappingProxyType({})

    @property
    def message(self) -> str | None:
        return self.extra.get("message")

    @property
    def task_key(self) -> str:
        return self.task["key"]

    def reuse_problem(
        self,
        *,
        model_hash: str,
        task_version: str,
        dataset_checksum: str | None,
        training_data_checksum: str | None = None,
        runtime: str = DEFAULT_RUNTIME,
    ) -> str | None:
        """Why this record cannot answer a cell of ``model_hash`` and this task version, data and runtime, or
        None."""
        return reuse_problem(
            self.to_dict(),
            model_hash=model_hash,
            task_version=task_version,
            dataset_checksum=dataset_checksum,
            training_data_checksum=training_data_checksum,
            runtime=runtime,
        )
