"""Stored results as data: :func:`load_results` reads the records of one or more stores (and folders another
benchmark's results format wrote, e.g. ``harness export-results --format mteb``) into a pandas DataFrame in long form,
one row per cell and seed; :meth:`ResultsFrame.wide` aggregates seeds exactly as the leaderboards do. Nothing is
recomputed: every value is read from a record (intervals, when asked for, come from the records' per-example files,
by the leaderboard's own bootstrap). docs/guide/results-as-data.md shows it in use.

pandas is imported when a frame is built, never when ``harness`` is imported.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import HarnessError, close_matches_hint
from .run.cost import COST_FIELDS
from .status import CellStatus

if TYPE_CHECKING:
    import pandas as pd

logger = logging.getLogger(__name__)

__all__ = ["COLUMNS", "COST_COLUMNS", "LoadProblem", "ResultsError", "ResultsFrame", "load_results"]

# What a cell cost (harness.run.cost's fields; device and runtime have columns of their own); empty for records
# written before cost was measured.
COST_COLUMNS = tuple(name for name in COST_FIELDS if name not in ("device", "runtime"))

# The long form's columns, in order (docs/guide/results-as-data.md says what each holds).
COLUMNS = (
    "source",
    "store",
    "path",
    "status",
    "message",
    "family",
    "task",
    "task_name",
    "task_key",
    "task_version",
    "metric",
    "score",
    "interval_low",
    "interval_high",
    "model",
    "spec",
    "model_name",
    "model_key",
    "model_hash",
    "options",
    "train_on",
    "backbone",
    "profile",
    "sample",
    "seed",
    "budget_requested",
    "budget_applied",
    "device",
    "hardware",
    "runtime",
    "harness_version",
    "plugin",
    "plugin_version",
    "task_package",
    "seen_pairs",
    "seen_sentences",
    "created_at",
    "model_seconds",
    "eval_seconds",
    *COST_COLUMNS,
    "scores",
    "exported_from",  # an exported row's record (its path in the store it was exported from)
)


class ResultsError(HarnessError):
    """A result source that cannot be read, or (``strict=True``) a record that does not verify."""


@dataclass(frozen=True)
class LoadProblem:
    """A record (or exported file) that was not loaded: its path and why (a damaged or edited record, a file that is
    not a result)."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class ResultsFrame:
    """What :func:`load_results` returns: ``frame``, the long form (a pandas DataFrame, one row per cell and seed;
    columns :data:`COLUMNS`), and ``errors``, the records that were not loaded and why (each also logged as a
    warning). :meth:`wide` is the models x tasks view, seeds aggregated as in the leaderboards."""

    frame: pd.DataFrame
    errors: list[LoadProblem] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.frame)

    def wide(self, stat: str = "mean", family: str | None = None) -> pd.DataFrame:
        """Models x tasks: one row per leaderboard row (model spec, training source, runtime), one column per task
        label, plus ``average`` (the leaderboard's: over the columns of the family's most common metric, only for
        rows that have every seed of every column; per family when the frame holds several). ``stat``: ``mean``
        (over seeds), ``std`` (sample standard deviation over seeds, 0 for one seed) or ``n`` (seeds with a score).
        ``family`` keeps one family's tasks."""
        return wide_view(self.frame, stat, family)

    def _repr_html_(self) -> str:  # a notebook shows the frame
        return self.frame._repr_html_()  # type: ignore[operator]

    def __repr__(self) -> str:
        errors = f"; {len(self.errors)} record(s) not loaded (.errors)" if self.errors else ""
        return f"ResultsFrame({len(self.frame)} rows{errors})\n{self.frame!r}"


PathLike = str | os.PathLike


def load_results(
    stores: PathLike | Sequence[PathLike] = (),
    *,
    exported: Mapping[str, PathLike] | None = None,
    models: str | Iterable[str] | None = None,
    tasks: str | Iterable[str] | None = None,
    profile: str | None = None,
    families: str | Iterable[str] | None = None,
    strict: bool = False,
    intervals: bool = False,
    registry: Any = None,
) -> ResultsFrame:
    """The results of ``stores`` (a result store folder such as ``results`` or ``published``, or several) as a
    :class:`ResultsFrame`: ``.frame`` is a pandas DataFrame in long form, one row per cell and seed.

    ``exported``: results-format name -> a folder that format wrote (``{"mteb": "out"}`` for ``harness
    export-results --format mteb --to out``); their rows join the frame (``source`` says where a row came from).
    Filters (each a name or a list, a comma-separated string also works): ``models`` (a spec label as in the
    leaderboards, e.g. ``be [train: stsb]``, a model name such as ``be``, or a model key), ``tasks`` (a task label,
    name or key), ``profile``, ``families``. A record that does not verify (damaged, edited, unreadable) is logged
    as a warning with its path and reason and listed in ``.errors``; with ``strict=True`` it raises
    :class:`ResultsError` instead. ``intervals=True`` adds each row's 95% bootstrap interval from its per-example
    file (``interval_low``/``interval_high``; empty where the record has none), computed as the leaderboards do.
    """
    import pandas as pd

    sources = [Path(stores)] if isinstance(stores, (str, os.PathLike)) else [Path(s) for s in stores]
    if not sources and not exported:
        raise ResultsError("no results to load: name a result store (e.g. load_results('published')) or exported=")
    rows: list[dict[str, Any]] = []
    problems: list[LoadProblem] = []
    for root in sources:
        store_rows, store_problems = _store_rows(root)
        rows += store_rows
        problems += store_problems
    for format_name, folder in (exported or {}).items():
        found, found_problems = _exported_rows(format_name, Path(folder), registry)
        rows += found
        problems += found_problems
    for problem in problems:
        logger.warning("not loaded: %s", problem)
    if problems and strict:
        shown = "; ".join(str(p) for p in problems[:3])
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ResultsError(
            f"{len(problems)} result file(s) do not verify: {shown}{more}. Recompute them (harness run --overwrite), "
            "restore them from git, or load without strict=True to skip them (listed in .errors)."
        )
    frame = pd.DataFrame([{column: row.get(column) for column in COLUMNS} for row in rows], columns=list(COLUMNS))
    frame = _filtered(frame, models=models, tasks=tasks, profile=profile, families=families).reset_index(drop=True)
    if intervals:  # after the filters: each interval reads a per-example file and resamples it
        for index, row in frame.iterrows():
            if row["source"] == "harness" and row["status"] == CellStatus.OK:
                low, high = _interval(int(row["seed"]), float(row["score"]), str(row["path"]))
                frame.at[index, "interval_low"], frame.at[index, "interval_high"] = low, high
    return ResultsFrame(frame, problems)


def _names(value: str | Iterable[str] | None) -> list[str] | None:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return [item.strip() for item in items if item and item.strip()]


def _filtered(frame: pd.DataFrame, **filters: Any) -> pd.DataFrame:
    """Rows that match every filter given; a name that matches nothing is one error naming close matches."""
    matchers = {
        "models": ("model", "spec", "model_name", "model_key"),
        "tasks": ("task", "task_name", "task_key"),
        "profile": ("profile",),
        "families": ("family",),
    }
    for name, value in filters.items():
        wanted = _names(value)
        if wanted is None:
            continue
        columns = matchers[name]
        known = {str(v) for column in columns for v in frame[column].dropna().unique()}
        for item in wanted:
            if item not in known and len(frame):
                raise ResultsError(
                    f"{name}: no loaded result has {item!r}.{close_matches_hint(item, known)} "
                    f"Known: {', '.join(sorted(known)[:12])}{' ...' if len(known) > 12 else ''}"
                )
        mask = frame[list(columns)].astype(str).isin(wanted).any(axis=1)
        frame = frame[mask]
    return frame


def _store_rows(root: Path) -> tuple[list[dict[str, Any]], list[LoadProblem]]:
    from .store import Store

    if not root.is_dir():
        raise ResultsError(f"no result store at {root}: pass the folder `harness run --results` wrote, or published")
    store = Store(root)
    rows = [_record_row(record, root) for record in store.records()]
    return rows, [LoadProblem(Path(path), reason) for path, reason in store.skipped]


def _json_text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True)


def _record_row(record: dict, root: Path) -> dict[str, Any]:
    from .contamination import seen_shares
    from .record import runtime_of

    model, task = record["model"], record["task"]
    label = model["label"] + (f" [train: {model['train_on']}]" if model.get("train_on") else "")
    runtime = runtime_of(record)
    spec = label + (f" [runtime: {runtime}]" if runtime != "torch" else "")  # the leaderboard row's label
    budget = record.get("budget") if isinstance(record.get("budget"), dict) else {}
    timings = record.get("timings") if isinstance(record.get("timings"), dict) else {}
    cost = record.get("cost") if isinstance(record.get("cost"), dict) else {}
    environment = record.get("environment") if isinstance(record.get("environment"), dict) else {}
    published = record.get("published") if isinstance(record.get("published"), dict) else {}
    profile = record.get("profile") if isinstance(record.get("profile"), dict) else {}
    shares = seen_shares(record)
    ok = record["status"] == CellStatus.OK
    row: dict[str, Any] = {
        "source": "harness",
        "store": str(root),
        "path": record.get("_path"),
        "status": str(record["status"]),  # the frame holds the word, as an export reads it
        "message": record.get("message"),
        "family": task["family"],
        "task": task["label"],
        "task_name": task["name"],
        "task_key": task["key"],
        "task_version": task["version"],
        "metric": task.get("main_score"),
        "score": record.get("main_score") if ok else None,
        "model": model["label"],
        "spec": spec,
        "model_name": model["name"],
        "model_key": record["model_key"],
        "model_hash": model["hash"],
        "options": _json_text(model.get("options")),
        "train_on": model.get("train_on"),
        "backbone": model["backbone"],
        "profile": model["profile"],
        "sample": profile.get("max_eval_examples"),
        "seed": record["seed"],
        "budget_requested": _json_text(budget.get("requested")),
        "budget_applied": _json_text(budget.get("applied")),
        "device": record.get("device"),
        "hardware": record.get("hardware"),
        "runtime": runtime,
        "harness_version": published.get("harness") or (environment.get("packages") or {}).get("harness"),
        "plugin": record.get("model_package"),
        "plugin_version": record.get("model_version"),
        "task_package": task.get("package"),
        "seen_pairs": shares[0] if shares else None,
        "seen_sentences": shares[1] if shares else None,
        "created_at": record.get("created_at"),
        "model_seconds": timings.get("model_seconds"),
        "eval_seconds": timings.get("eval_seconds"),
        **{column: cost.get(column) for column in COST_COLUMNS},
        "scores": _json_text(record.get("scores")),
    }
    return row


def _interval(seed: int, score: float, path: str) -> tuple[float | None, float | None]:
    """A record's 95% bootstrap interval over its test examples (the leaderboard's, for one seed), or Nones."""
    from .leaderboard.stats import cell_statistics
    from .leaderboard.tables import ScoreCell

    cell = ScoreCell(values={seed: score}, records={seed: path})
    statistics = cell_statistics(cell)
    if statistics is None:
        return None, None
    low, high = statistics.interval
    return float(low), float(high)


def _exported_rows(format_name: str, folder: Path, registry: Any) -> tuple[list[dict[str, Any]], list[LoadProblem]]:
    """The rows of a folder a results format wrote, read back by that format's component (its ``read_results``)."""
    if registry is None:
        from .components import register_core_components
        from .registry import default_registry

        registry = register_core_components(default_registry())
    writer = registry.component("results-format", format_name)
    read = getattr(writer, "read_results", None)
    if read is None:
        raise ResultsError(
            f"results format {format_name!r} cannot be read back: its component has no read_results(folder)"
        )
    if not folder.is_dir():
        raise ResultsError(
            f"no folder {folder}: pass the --to folder of `harness export-results --format {format_name}`"
        )
    rows, problems = read(folder)
    for row in rows:
        row.setdefault("source", format_name)
        row.setdefault("store", str(folder))
    return list(rows), [LoadProblem(Path(path), reason) for path, reason in problems]


def wide_view(frame: pd.DataFrame, stat: str = "mean", family: str | None = None) -> pd.DataFrame:
    """:meth:`ResultsFrame.wide` of a long-form frame (also one a user filtered or concatenated): the leaderboard's
    own cells and rows (harness.leaderboard.tables) aggregate the seeds."""
    import pandas as pd

    from .errors import invalid_choice
    from .leaderboard.tables import Row, Table

    if stat not in ("mean", "std", "n"):
        raise invalid_choice("stat", stat, ("mean", "std", "n"))
    missing = [c for c in ("family", "task", "spec", "model_key", "seed", "status", "score") if c not in frame]
    if missing:
        raise ResultsError(f"not a long-form results frame (no column {', '.join(missing)}): use load_results(...)")
    if family is not None:
        known = sorted({str(f) for f in frame["family"].dropna().unique()})
        if family not in known:
            raise ResultsError(f"no results of family {family!r}.{close_matches_hint(family, known)}")
        frame = frame[frame["family"] == family]
    families = list(dict.fromkeys(frame["family"]))
    columns: list[str] = list(dict.fromkeys(frame["task"]))
    tables: dict[tuple[str, str, str], Row] = {}  # (family, spec, model key) -> the leaderboard's row
    metrics: dict[str, dict[str, str]] = {}
    for item in frame.itertuples(index=False):
        key = (item.family, item.spec, item.model_key)
        row = tables.get(key)
        if row is None:
            row = tables[key] = Row(
                item.spec, item.model_key, item.train_on, item.backbone, item.profile, spec=item.spec
            )
        if isinstance(item.metric, str):
            metrics.setdefault(item.family, {}).setdefault(item.task, item.metric)
        seed = int(item.seed) if item.seed == item.seed and item.seed is not None else -1  # NaN: an export without
        row.seeds.add(seed)
        cell = row.cells[item.task]
        if item.status == CellStatus.OK and item.score == item.score and item.score is not None:
            cell.values[seed] = float(item.score)
            if isinstance(item.path, str):
                cell.records[seed] = item.path
        elif item.status == CellStatus.FAILED:
            cell.failed_seeds.add(seed)
        else:
            cell.missing_seeds.add(seed)
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for (family_name, spec, model_key), row in tables.items():
        values = records.setdefault((spec, model_key), {})
        for column, cell in row.cells.items():
            if cell.values:
                values[column] = {"mean": cell.mean(), "std": cell.std(), "n": len(cell.values)}[stat]
            elif stat == "n":
                values[column] = 0
        if stat == "mean":
            covered = [c for c in columns if row.cells.get(c) is not None and row.cells[c].has_record]
            section = Table(family_name, covered, [row], metrics.get(family_name, {}))
            name = "average" if len(families) == 1 else f"average {family_name}"
            values[name] = row.average(section.averaged_columns)
    averages = ["average"] if stat == "mean" and len(families) == 1 else []
    averages += [f"average {f}" for f in families] if stat == "mean" and len(families) > 1 else []
    index = pd.MultiIndex.from_tuples(list(records), names=["model", "model_key"])
    wide = pd.DataFrame(list(records.values()), index=index, columns=[*columns, *averages])
    if stat == "mean" and averages:
        wide = wide.sort_values(averages[0], ascending=False, na_position="last", kind="stable")
    return wide
