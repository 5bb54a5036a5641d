"""``harness publish``: copy chosen records from a working store into the published set, after verifying them.

The published set (``published/`` in this repository, committed with git) is what ``leaderboards/`` is built from;
a working store (``results/`` by default, not tracked) is where ``harness run`` writes. A record is published only
if it is valid (schema, content checksum, stored at its own path), its status is ``ok`` or ``missing`` (a
``failed`` cell is recomputed, not published), it was computed on the full evaluation data (not on the smoke
profile's sample, ``max_eval_examples``), its task version is the installed one, and, where the task's data
is available here, its dataset checksum is that of the data as it is now (the last two for ``ok`` records: a
``missing`` one holds no number they could make stale). If any chosen record fails, nothing is
written. Records written by harness 0.1 have no content checksum; ``trust_unsigned`` checks everything else and signs
them (the one-time migration of the records committed before checksums existed).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import HarnessError, MissingDataError
from .files import atomic_write_bytes, atomic_write_text, prepare_output_dir
from .record import InvalidRecordError, field_problem, record_problem, seal_record
from .status import CellStatus
from .store import Store, examples_path, read_examples, read_record, store_root_of
from .store_files import UnsafeFileError, path_inside, read_store_bytes, read_store_text, remove_store_file

logger = logging.getLogger(__name__)

DEFAULT_PUBLISHED = "published"


class PublishError(HarnessError):
    """Chosen records that cannot be published; nothing was written."""


@dataclass
class Selection:
    """Which records to publish: every filter given must match (names, labels, keys; task families too).
    ``model_keys``: the store keys of model specs resolved as ``harness run`` resolves them (the CLI's ``--models``
    with ``--profile``/``--train-on``/``--backbone``), so a name never also picks its smoke or trained variants;
    ``profile`` / ``train_on`` filter the records' specs (``train_on`` ``"none"``: untrained)."""

    models: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)
    model_keys: list[str] = field(default_factory=list)
    profile: str | None = None
    train_on: str | None = None

    def matches(self, record: dict) -> bool:
        model, task = record["model"], record["task"]
        if self.models and not {model["name"], model["label"], record["model_key"]} & set(self.models):
            return False
        if self.model_keys and record["model_key"] not in self.model_keys:
            return False
        if self.profile is not None and model.get("profile") != self.profile:
            return False
        if self.train_on is not None and str(model.get("train_on")).lower() != self.train_on.lower():
            return False
        if self.tasks and not {task["name"], task["key"], task["label"], task["family"]} & set(self.tasks):
            return False
        return not self.seeds or record["seed"] in self.seeds

    def describe(self) -> str:
        """`` (be-3f2a..., profile quick)``: the filters that a spec name does not show, for messages."""
        parts = (
            [*self.model_keys]
            + ([f"profile {self.profile}"] if self.profile else [])
            + ([f"trained on {self.train_on}"] if self.train_on else [])
        )
        return f" ({', '.join(parts)})" if parts else ""

    def matches_path(self, path: Path) -> bool:
        """For a record that cannot be read: is it in the folder of a chosen model and seed? (Its task cannot be
        told reliably from the file name, since a filter may name a family, so a damaged record next to chosen ones
        stops the publication.)"""
        model_key, seed_folder = path.parent.parent.name, path.parent.name
        if self.models and not any(model_key == m or model_key.startswith(f"{m}-") for m in self.models):
            return False
        if self.model_keys and model_key not in self.model_keys:
            return False
        return not self.seeds or seed_folder in {f"seed-{s}" for s in self.seeds}


@dataclass
class PublishResult:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _load(path: Path, trust_unsigned: bool) -> tuple[dict, bool]:
    """The record at ``path`` and whether it was an unsigned (harness 0.1) record accepted by ``trust_unsigned``."""
    try:
        return read_record(path), False
    except InvalidRecordError as error:
        if not (trust_unsigned and "harness 0.1" in error.reason):
            raise
    record = json.loads(read_store_text(path, store_root_of(path)))  # read_record read it safely just before
    record.pop("checksum", None)
    candidate = seal_record(record)
    problem = field_problem(candidate) or record_problem(candidate, path)
    if problem:
        raise InvalidRecordError(path, problem)
    return candidate, True


class _DataChecks:
    """Dataset checksums of installed tasks as the data is now (None when the data is not available here)."""

    def __init__(self, registry: Any, data_dir: Path | None):
        self.registry = registry
        self.data_dir = data_dir
        self._checksums: dict[str, str | None] = {}

    def version(self, task: dict) -> str | None:
        if self.registry is None or task["name"] not in getattr(self.registry, "tasks", {}):
            return None
        return str(self.registry.task(task["name"]).metadata.version)

    def checksum(self, task: dict) -> str | None:
        if task["key"] not in self._checksums:
            value = None
            try:
                # A task namespace's task (mteb.sts22) is known once resolved.
                plugin = self.registry.task(self.registry.resolve_task(task["name"]))
                instance = plugin.factory(task.get("options") or {}, self.data_dir)
                value = instance.check_data()
            except (MissingDataError, NotImplementedError):
                value = None
            except HarnessError as error:  # malformed data here: cannot confirm the record
                value = f"unreadable: {error}"
            self._checksums[task["key"]] = value
        return self._checksums[task["key"]]


def publish(
    source: Store,
    target: Store,
    selection: Selection,
    *,
    registry: Any = None,
    data_dir: Path | None = None,
    overwrite: bool = False,
    trust_unsigned: bool = False,
    log: Callable[[str], None] = logger.info,
) -> PublishResult:
    result = PublishResult()
    same_store = source.root.resolve() == target.root.resolve()
    checks = _DataChecks(registry, data_dir)
    refused: list[str] = []
    chosen: list[tuple[Path, dict, bool]] = []
    side_files: dict[Path, bytes] = {}  # source record -> its verified per-example file (copied with it)
    artifacts: dict[tuple[str, int], dict[str, bytes]] = {}  # (model key, seed) -> its artifact files, read safely
    for path in source.record_files():
        try:
            record, unsigned = _load(path, trust_unsigned)
        except InvalidRecordError as error:
            if selection.matches_path(path):
                refused.append(f"{path}: {error.reason}")
            continue
        if not selection.matches(record):
            continue
        problem = _publish_problem(record, checks, result.warnings, path)
        content, side_problem = read_examples({**record, "_path": str(path)})
        if problem or side_problem:
            refused.append(f"{path}: {problem or side_problem + ' (rescore the cell to rewrite it)'}")
            continue
        if content is not None:
            side_files[path] = content
        key = (record["model_key"], record["seed"])
        if key not in artifacts and not same_store:
            try:
                artifacts[key] = _artifacts(source, *key)
            except UnsafeFileError as error:
                refused.append(f"{error.path}: an artifact that is {error.reason}")
                continue
            except OSError as error:
                refused.append(f"{error.filename}: an artifact that cannot be read ({error.strerror or error})")
                continue
        chosen.append((path, record, unsigned))
    if refused:
        raise PublishError(
            f"{len(refused)} chosen record(s) cannot be published, so nothing was: "
            + "; ".join(refused[:8])
            + ("; ..." if len(refused) > 8 else "")
        )
    if not chosen:
        raise PublishError(
            f"no record in {source.root} matches the selection{selection.describe()}; nothing to "
            "publish." + _other_variants(source, selection)
        )
    prepare_output_dir(target.root, "the published set")
    plans: list[tuple[Path, dict, bytes | None, str | None]] = []
    conflicts: list[str] = []
    for path, record, unsigned in chosen:
        destination = target.record_path(
            record["model_key"], record["seed"], record["task"]["key"], record.get("runtime")
        )
        published = seal_record({**record, "published": _provenance(record, unsigned, same_store)})
        existing = _existing(destination)
        if existing is not None and _without_publication(existing) == _without_publication(published):
            if not same_store or existing.get("published"):
                result.unchanged.append(destination)
                if path in side_files and not same_store and not examples_path(destination).exists():
                    atomic_write_bytes(examples_path(destination), side_files[path])
                continue
        elif existing is not None and not overwrite and not same_store:
            conflicts.append(f"{destination} holds another result for this cell")
            continue
        plans.append((destination, published, side_files.get(path) if not same_store else None, record.get("checksum")))
    if conflicts:
        raise PublishError(
            f"{len(conflicts)} cell(s) are already published with other results, so nothing was "
            "published: " + "; ".join(conflicts[:8]) + ". Pass --overwrite to replace them."
        )
    for destination, published, side_file, read_checksum in plans:
        # A record rewriter is a write like any other: under the cell lock a run takes; in place, a record
        # a run replaced since it was read is left as the run wrote it
        with target.cells_lock(published["model_key"], published["seed"], "harness publish"):
            if same_store and (_existing(destination) or {}).get("checksum") != read_checksum:
                result.warnings.append(
                    f"{destination}: replaced by a run while it was published, so left as that run wrote it; "
                    "publish again to mark it"
                )
                continue
            if side_file is not None:
                atomic_write_bytes(examples_path(destination), side_file)  # before the record that names it
            elif not same_store and os.path.lexists(examples_path(destination)):
                remove_store_file(examples_path(destination), target.root)  # the replaced record's: none names it
            atomic_write_text(destination, json.dumps(published, indent=2, sort_keys=True, allow_nan=False) + "\n")
        result.written.append(destination)
        if not same_store:
            key = (published["model_key"], published["seed"])
            _copy_artifacts(target, *key, artifacts.get(key, {}))
    log(
        f"published {len(result.written)} record(s) to {target.root}"
        + (f"; {len(result.unchanged)} already published" if result.unchanged else "")
    )
    return result


def _other_variants(source: Store, selection: Selection) -> str:
    """`` Records of other variants of these models: be:pooling=cls (profile smoke), ...`` when the selection's
    tasks and seeds match records of specs it left out (another profile, training source or backbone)."""
    if not selection.model_keys:
        return ""
    names = {key.rsplit("-", 1)[0] for key in selection.model_keys}
    loose = Selection(tasks=selection.tasks, seeds=selection.seeds)
    variants = sorted(
        {
            f"{r['model']['label']} (profile {r['model'].get('profile')}"
            + (f", trained on {r['model']['train_on']}" if r["model"].get("train_on") else "")
            + ")"
            for r in source.records()
            if r["model"]["name"] in names and loose.matches(r)
        }
    )
    if not variants:
        return ""
    return (
        " Records of other variants: "
        + ", ".join(variants[:6])
        + ("..." if len(variants) > 6 else "")
        + "; name them as for `harness run` (--profile, --train-on, --backbone)."
    )


def _publish_problem(record: dict, checks: _DataChecks, warnings: list[str], path: Path) -> str | None:
    from .leaderboard import sample_size

    sample = sample_size(record)
    if sample is not None:  # the published set builds the committed leaderboards: full evaluations only
        return (
            f"computed on a sample of the evaluation data (max_eval_examples={sample}, profile "
            f"{record['model']['profile']}), not comparable to full results; run it with --profile quick or paper"
        )
    if record["status"] == CellStatus.FAILED:
        return f"the cell failed ({record.get('message', '')}); recompute it, a failure is never published"
    if record["status"] != CellStatus.OK:
        return None  # a "missing" record holds no number that a task version or a dataset could make stale
    installed = checks.version(record["task"])
    if installed is None:
        warnings.append(f"{path}: task {record['task']['name']!r} is not installed here; version and data not checked")
        return None
    if installed != record["task"]["version"]:
        return f"task version {record['task']['version']} is not the installed {installed}; recompute it"
    current = checks.checksum(record["task"])
    if current is None:
        warnings.append(
            f"{path}: the data of {record['task']['label']} is not available here; its dataset checksum "
            "was not compared"
        )
    elif current != record.get("dataset_checksum"):
        return "its dataset checksum differs from the data as it is now (stale); recompute it"
    return None


def _provenance(record: dict, unsigned: bool, same_store: bool) -> dict:
    previous = record.get("published") or {}
    from . import __version__

    return {
        "at": previous.get("at") or datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "harness": previous.get("harness") or __version__,
        "signed_unsigned_record": bool(previous.get("signed_unsigned_record") or unsigned),
    }


def _existing(path: Path) -> dict | None:
    if not path.exists():
        return None
    try:
        return read_record(path)
    except InvalidRecordError:
        return None


def _without_publication(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in ("published", "checksum", "signature", "_path", "schema")}


def _artifacts(source: Store, model_key: str, seed: int) -> dict[str, bytes]:
    """A record's spec+seed artifacts (e.g. silver pairs that plots read), by path relative to their folder, read
    with the store's safe open: a link out of the store, a FIFO or a device among them is refused (UnsafeFileError),
    never copied into the published set (which is committed)."""
    origin = source.artifact_dir(model_key, seed)
    if not origin.is_dir():
        return {}
    found: dict[str, bytes] = {}
    for folder, dirs, files in os.walk(origin):  # never descends through a linked folder
        for name in [*dirs, *files]:
            path = Path(folder) / name
            if name in dirs and not path.is_symlink():
                continue
            if name.startswith(".") and not path.is_symlink():
                continue  # a writer's temporary
            found[str(path.relative_to(origin))] = read_store_bytes(path, source.root)
    return found


def _copy_artifacts(target: Store, model_key: str, seed: int, artifacts: dict[str, bytes]) -> None:
    destination = target.artifact_dir(model_key, seed)
    for relative, content in sorted(artifacts.items()):
        atomic_write_bytes(path_inside(destination, *Path(relative).parts), content)
