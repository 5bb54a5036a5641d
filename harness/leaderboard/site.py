"""One static results site from a store (``harness site --to DIR``): plain HTML, one script, one stylesheet and JSON
data files, no server and nothing fetched from elsewhere.

Every number comes from the leaderboard's own code: the tables, labels, legend and notes from
:func:`harness.leaderboard.tables.collect_tables` with the intervals and marks of :mod:`.stats` (the cell texts are
``Table.cell_text``, as in every format), the cost columns from :mod:`.cost`. A pair of rows is compared per task
as ``harness compare`` compares two specs (:func:`compare_pair`: the seeds both rows have pooled, both units of
inference, Holm across the table's tasks, each entry ``TaskComparison.as_dict``), written per pair and fetched when
a reader asks for it. The examples behind a difference come from each cell's per-example side files, written per
cell (one JSON each, fetched on demand), and the task's own texts (``Task.evaluated_texts``) unless its licence
says they may not be redistributed: then the site shows example positions and says why.

Layout of ``DIR``: ``index.html``, ``app.js``, ``site.css``, ``data/index.json`` (families and their tables),
``data/tables/<table>.json``, ``data/compare/<table>/<a>-<b>.json`` (row indices, a < b: A is row a),
``data/cells/<key>.json`` (each seed's model scores per example, one file per set of records however many tables
show the cell; a table's ``cell_files`` names its cells'), ``data/examples/<identity>.json`` (the gold, ids and
groups of one set of test examples, shared by the cells over it) and ``data/texts/<task key>.json``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..compare import TaskComparison, mean_eval_seconds
from ..contamination import seen_shares
from ..curves import curve_files
from ..evaluation.bootstrap import (
    DEFAULT_RESAMPLES,
    ExampleDataError,
    ExampleScores,
    RankedHits,
    check_same_examples,
    pooled_replicates,
)
from ..evaluation.significance import holm, units_of_replicates
from ..files import atomic_write_text, prepare_output_dir
from ..store import Store
from .cost import COST_HEADER, COST_NOTE, row_cost
from .stats import BEST_SIGNIFICANT, NO_DATA, attach_statistics, cell_mark, stored_run
from .stats import notes as statistics_notes
from .tables import (
    Row,
    Table,
    cell_view,
    collect_tables,
    contamination_notes,
    group_by_family,
    legend_rows,
    seen_in_training,
)

logger = logging.getLogger(__name__)

ASSETS = ("index.html", "app.js", "site.css")
# Licence texts that forbid passing a task's sentences on: the site then shows example positions only.
NOT_REDISTRIBUTABLE = re.compile(
    r"not\s+(be\s+)?redistribut|no\s+(public\s+)?redistribution|may not be redistribut", re.I
)
# Per-example data of one score per scored pair against a gold value: the examples view shows the pairs' texts.
PAIR_STATISTICS = ("spearman", "pearson", "average_precision")
# Main scores of ranking tasks (retrieval, reranking): their per-query records may keep each query's top hits.
RANKING_SCORE = re.compile(r"^(map|mrr|ndcg|recall|precision|[rp]@)", re.I)
TRAINING_CURVES_HOOK = "training-curves"  # a row's entry: the path of its curves file, or None (untrained or older)


@dataclass
class SiteReport:
    """What :func:`build_site` wrote: the folder, its files, and the cells whose per-example data could not be read."""

    folder: Path
    files: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)


class _Writer:
    def __init__(self, folder: Path, report: SiteReport):
        self.folder, self.report = folder, report

    def json(self, relative: str, payload: Any) -> None:
        text = json.dumps(finite(payload), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        self.report.files += 1
        self.report.bytes += len(text.encode())


def finite(payload: Any) -> Any:
    """``payload`` with every infinite or NaN float as the string ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``
    (JSON has no such numbers; e.g. an across-runs test's degrees of freedom are infinite without seed variance)."""
    if isinstance(payload, float) and not np.isfinite(payload):
        return "NaN" if np.isnan(payload) else ("Infinity" if payload > 0 else "-Infinity")
    if isinstance(payload, dict):
        return {key: finite(value) for key, value in payload.items()}
    if isinstance(payload, (list, tuple)):
        return [finite(value) for value in payload]
    return payload


def _rounded(values: np.ndarray, digits: int = 4) -> list:
    return [round(float(v), digits) for v in values]


def _json_number(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


class _CellData:
    """Each cell's per-seed per-example data and trained flag, read once; replicates once per set of seeds."""

    def __init__(self, resamples: int):
        self.resamples = resamples
        self.runs: dict[str, tuple[ExampleScores | None, str, bool]] = {}
        self.replicates: dict[tuple[str, ...], np.ndarray] = {}
        self.tasks: dict[str, tuple[str, str]] = {}

    def task_version(self, path: str) -> tuple[str, str]:
        """The (task key, task version) a record was evaluated with ("?" where it cannot be read)."""
        if path not in self.tasks:
            task = (_read_record(path) or {}).get("task") or {}
            self.tasks[path] = (str(task.get("key", "?")), str(task.get("version", "?")))
        return self.tasks[path]

    def run(self, path: str) -> tuple[ExampleScores | None, str, bool]:
        if path not in self.runs:
            self.runs[path] = stored_run(path)
        return self.runs[path]

    def reuse(self, table: Table) -> None:
        """Keep the replicates the leaderboard's statistics computed for the table's cells (the same
        ``pooled_replicates`` of the same seeds' data): a pair over all of a cell's seeds does not resample again."""
        statistics = getattr(table, "statistics", None)
        for row in table.rows if statistics is not None else []:
            for column, cell in row.cells.items():
                computed = statistics.cells.get((row.model_key, column))
                if computed is not None and all(seed in cell.records for seed in cell.values):
                    self.replicates[tuple(cell.records[seed] for seed in sorted(cell.values))] = computed.replicates

    def pooled(self, paths: tuple[str, ...], data: list[ExampleScores]) -> np.ndarray:
        if paths not in self.replicates:
            self.replicates[paths] = pooled_replicates(data, self.resamples)
        return self.replicates[paths]


def _read_record(path: str) -> dict[str, Any] | None:
    """A stored record, or None when it cannot be read (its speed then goes unreported, as in ``harness compare``)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def compare_pair(table: Table, row_a: Row, row_b: Row, cells: _CellData, seeds: list[int]) -> list[TaskComparison]:
    """Row a minus row b on each of the table's columns, as ``harness compare A B --seeds SEEDS`` computes it: per
    task the seeds' per-example data pooled, both units of inference (across runs where a row was trained), the
    deciding p Holm-adjusted across the tasks. Each row's bootstrap replicates depend only on its own examples (the
    resamples are drawn from the example count and a fixed seed), so they are computed once per cell and reused for
    every pair: the numbers are those of ``compare_units`` on the same data."""
    comparisons = []
    for column in table.columns:
        sides: list[tuple[tuple[str, ...], list[ExampleScores], bool]] = []
        reasons: list[str] = []
        for row in (row_a, row_b):
            cell = row.cells.get(column)
            paths, data, trained = [], [], False
            for seed in seeds:
                path = cell.records.get(seed) if cell is not None else None
                if path is None:
                    reasons.append(f"{row.label} seed {seed} has no record")
                    continue
                examples, reason, was_trained = cells.run(path)
                trained = trained or was_trained
                if examples is None:
                    if reason not in reasons:
                        reasons.append(f"{row.label} seed {seed}: {reason}")
                    continue
                paths.append(path)
                data.append(examples)
            sides.append((tuple(paths), data, trained))
        versions = [sorted({cells.task_version(path) for path in paths}) for paths, _, _ in sides]
        if not reasons and versions[0] != versions[1]:  # other task versions may score other data or another way
            named = [", ".join(f"{key} version {version}" for key, version in side) for side in versions]
            reasons.append(f"different task versions: {row_a.label} {named[0]}, {row_b.label} {named[1]}")
        if reasons:
            comparisons.append(TaskComparison(column, None, "; ".join(reasons)))
            continue
        (paths_a, a, trained_a), (paths_b, b, trained_b) = sides
        try:
            check_same_examples([*a, *b])
            replicates_a, replicates_b = cells.pooled(paths_a, a), cells.pooled(paths_b, b)
            result = units_of_replicates(a, b, replicates_a, replicates_b, trained_a, trained_b)
        except ExampleDataError as exc:
            comparisons.append(TaskComparison(column, None, str(exc)))
            continue
        seconds_a, seconds_b = (
            mean_eval_seconds([_read_record(path) for path in paths]) for paths in (paths_a, paths_b)
        )
        speedup = seconds_a / seconds_b if seconds_a and seconds_b else None
        comparisons.append(TaskComparison(column, result, speedup=speedup))
    tested = [c for c in comparisons if c.result is not None and c.result.p_value is not None]
    for comparison, adjusted in zip(tested, holm([c.result.p_value for c in tested])):
        comparison.p_holm = adjusted
    return comparisons


def compare_command(row_a: Row, row_b: Row, columns: list[str], seeds: list[int]) -> str:
    """The ``harness compare`` line that gives the same numbers (when both rows share a training source)."""
    train = row_a.train_on or row_b.train_on
    parts = [
        "harness compare",
        _spec_head(row_a),
        _spec_head(row_b),
        f"--tasks {','.join(c.split(':')[0] for c in columns)}",
        f"--seeds {','.join(map(str, seeds))}",
        f"--profile {row_a.profile}",
        f"--backbone {row_a.backbone}",
    ]
    if train and row_a.train_on == row_b.train_on:
        parts.append(f"--train-on {train}")
    elif train:  # `harness compare` takes one training source for both specs
        return (
            f"The rows have different training sources ({row_a.train_on or 'none'} and {row_b.train_on or 'none'}), "
            "which one `harness compare` line cannot name; the numbers are computed as it computes them"
        )
    return " ".join(parts)


def _spec_head(row: Row) -> str:
    return (row.spec or row.label).split(" [train: ")[0]


def _cell_key(cell: Any) -> str:
    """A name for a cell's per-example file from the records it is made of (the same records, the same file)."""
    import hashlib

    named = "\n".join(f"{seed}:{cell.records.get(seed)}" for seed in sorted(cell.values))
    return hashlib.sha256(named.encode()).hexdigest()[:20]


def _cell_payload(cell: Any, cells: _CellData) -> tuple[dict, dict] | None:
    """A cell's per-example model arrays per seed (what the examples view reads) and, apart, what names its
    examples (gold, ids, groups: the same for every row over these examples, so written once and shared), or None
    without per-example data."""
    seeds, shared = {}, {}
    for seed in sorted(cell.values):
        path = cell.records.get(seed)
        data = cells.run(path)[0] if path else None
        if data is None:
            return None
        seeds[str(seed)] = {name: _rounded(values) for name, values in data.arrays.items() if name != "gold"}
        if data.hits is not None:
            seeds[str(seed)]["hits"] = hits_payload(data.hits)
        if not shared:
            shared = {"identity": data.identity()}
            if "gold" in data.arrays:
                shared["gold"] = _rounded(data.arrays["gold"])
            if data.ids is not None:
                shared["ids"] = [str(i) for i in data.ids.tolist()]
            if data.groups is not None:
                shared["groups"] = data.groups.tolist()
    first = cells.run(cell.records[min(cell.values)])[0]
    record = _read_record(cell.records[min(cell.values)]) or {}
    main_score = str((record.get("task") or {}).get("main_score") or "")
    payload = {
        "statistic": first.statistic,
        "aggregate": first.aggregate,
        "examples": shared["identity"][:24],
        "ranking": bool(RANKING_SCORE.match(main_score)),  # the view says when such a record keeps no hits
    }
    return {**payload, "seeds": seeds}, shared


def hits_payload(hits: RankedHits) -> dict:
    """A ranking task's stored top hits as the examples view reads them: per query its top document ids and gold
    document ids (padding dropped, ids as text), the rank of its best-ranked gold document (0: not within
    ``depth``)."""

    def rows(array: np.ndarray) -> list[list[str]]:
        padding = -1 if array.dtype.kind in "iu" else ""
        return [[str(value) for value in row.tolist() if value != padding] for row in array]

    return {"top": rows(hits.top), "gold": rows(hits.gold), "gold_rank": hits.gold_rank.tolist(), "depth": hits.depth}


def _texts_payload(record_path: str, count: int, registry: Any) -> dict:
    """The task's scored pairs in the order of its per-example data, or why they are not shown."""
    record = json.loads(Path(record_path).read_text())
    task_record = record["task"]
    if registry is None:
        return {"withheld": "the task's texts need its plugin (build the site where the task is installed)"}
    try:
        plugin = registry.task(task_record["name"])
    except Exception as exc:  # a task no longer installed: positions only
        return {"withheld": f"task {task_record['name']!r} is not installed here ({exc})"}
    licence = getattr(plugin.metadata, "license", "")
    if NOT_REDISTRIBUTABLE.search(licence or ""):
        return {"withheld": f"its licence forbids redistributing the texts: {licence}", "license": licence}
    try:
        from ..plugin_api import EvalContext
        from ..profiles import get_profile

        task = plugin.factory(task_record.get("options") or {}, None)
        profile = get_profile(record["model"]["profile"])
        evaluated = task.evaluated_texts(EvalContext(profile, "cpu", int(record["seed"]), 32, progress=False))
    except Exception as exc:  # the data is not here: positions only, and why
        return {"withheld": f"the task's texts could not be read here ({exc})"}
    pairs = list(getattr(evaluated, "pairs", ()) or ())
    if not pairs:
        return {"withheld": "the task does not say which texts each example scores (Task.evaluated_texts)"}
    if len(pairs) != count:
        return {"withheld": f"the task names {len(pairs)} scored pairs for {count} examples; positions only"}
    return {"pairs": [[first, second] for first, second in pairs], "license": licence}


def _dates(table: Table, created: dict[str, str]) -> list[str]:
    dates = sorted(
        created[path]
        for row in table.rows
        for cell in row.cells.values()
        for path in cell.records.values()
        if path in created
    )
    return [dates[0][:10], dates[-1][:10]] if dates else []


def row_curves(row: Row) -> list[dict[str, Any]]:
    """The training curves of a row's seeds (each checkpoint's training.json, :mod:`harness.curves`): per seed and
    fit, its loss and dev series as step/value lists; empty where no checkpoint beside the records keeps curves
    (untrained rows, checkpoints trained before curves were kept, a published store without checkpoints)."""
    found = curve_files(
        (seed, path) for cell in row.cells.values() for seed, path in (getattr(cell, "records", {}) or {}).items()
    )
    curves = []
    for seed, path in sorted(found.items()):
        fits = json.loads(path.read_text(encoding="utf-8"))["curves"].get("fits") or []
        for fit in fits:
            series = {f"loss: {term}": values for term, values in (fit.get("loss") or {}).items()}
            if fit.get("dev"):
                series["dev score"] = fit["dev"]
            curves.append(
                {
                    "seed": seed,
                    "fit": fit.get("fit"),
                    "series": {
                        name: {"step": values.get("step", []), "value": values.get("value", [])}
                        for name, values in series.items()
                        if isinstance(values, dict)
                    },
                }
            )
    return curves


def _table_payload(table_id: str, table: Table, sections: list[Table], with_examples: dict[str, bool]) -> dict:
    rows = []
    ranked = table.ranked()
    for index, (rank, row, average) in enumerate(ranked):
        cells = []
        for column in table.columns:
            view = table.cell_view(row, column)
            cell = row.cells.get(column)
            cells.append(
                {
                    "text": _unbold(table.cell_text(row, column), cell_mark(table, row, column)),
                    "kind": view.kind,
                    "sort": round(cell.mean(), 6) if view.kind == "value" else None,
                    "mark": cell_mark(table, row, column),
                    "seeds": sorted(cell.values) if cell is not None else [],
                }
            )
        rows.append(
            {
                "index": index,
                "label": row.label,
                "spec": row.spec or row.label,
                "model_key": row.model_key,
                "train_on": row.train_on or "",
                "backbone": row.backbone,
                "profile": row.profile,
                "seeds": sorted(row.seeds),
                "complete": all(row.complete(column) for column in table.columns),
                "contaminated": any(seen_in_training(cell) for cell in row.cells.values()),
                "rank": rank,
                "average": None if average is None else round(average, 6),
                "average_text": "" if average is None else _average_text(table, row, average),
                "average_mark": cell_mark(table, row, table.average_header),
                "cells": cells,
                "cost": row_cost(row).fields(),
                TRAINING_CURVES_HOOK: None,
            }
        )
    return {
        "id": table_id,
        "family": table.family,
        "title": table.title,
        "columns": table.columns,
        "metrics": table.column_metrics,
        "average_header": table.average_header,
        "cost_header": list(COST_HEADER),
        "has_cost": any(row_cost(row).measured_on for row in table.rows),
        "notes": [
            *statistics_notes(table),
            *contamination_notes(sections),
            *([COST_NOTE] if any(row_cost(row).measured_on for row in table.rows) else []),
        ],
        "legend": legend_rows(sections),
        "cost_view": cost_view(table),
        "examples": with_examples,
        "rows": rows,
    }


def cost_view(table: Table) -> list[dict]:
    """Quality against cost as ``harness plot cost`` draws it (its panels and Pareto front): per panel the complete
    rows whose records measured that cost, by cost, each with whether it is on the section's front."""
    from .cost_plot import PANELS, pareto_front

    panels = []
    for title, attribute, axis, _ in PANELS:
        points = []
        for index, (_, row, average) in enumerate(table.ranked()):
            value = getattr(row_cost(row), attribute)
            if average is not None and value is not None:
                points.append((index, float(value), float(average)))
        if not points:
            continue
        front = set(pareto_front([(cost, quality) for _, cost, quality in points]))
        panels.append(
            {
                "panel": title,
                "axis": axis,
                "points": [
                    {"row": index, "cost": round(cost, 3), "quality": round(quality, 6), "front": position in front}
                    for position, (index, cost, quality) in sorted(enumerate(points), key=lambda item: item[1][1:])
                ],
            }
        )
    return panels


def _average_text(table: Table, row: Row, average: float) -> str:
    from .stats import decorate

    text = decorate(table, row, table.average_header, f"{average:.2f}")
    return _unbold(text, cell_mark(table, row, table.average_header))


def _unbold(text: str, mark: str) -> str:
    """The cell's text without markdown's bold stars (the page shows ``best-significant`` in bold by its mark)."""
    return text[2:-2] if mark == BEST_SIGNIFICANT and text.startswith("**") else text


def _table_id(family: str, number: int) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", family).strip("-") or "family"
    return f"{slug}-{number}"


class _Written:
    """Writes each table's files (its cells' per-example data, the examples and texts they share, the table, every
    pair's comparison): one way for family tables and paper tables alike."""

    def __init__(self, writer: _Writer, cells: _CellData, registry: Any, progress: Callable[[str], None] | None):
        self.writer, self.cells, self.registry, self.progress = writer, cells, registry, progress
        self.texts: set[str] = set()
        self.examples: set[str] = set()
        self.cell_files: dict[str, str | None] = {}  # cell key -> its file, None: no per-example data

    def _write_cell(self, cell: Any, key: str) -> str | None:
        """Write a cell's per-example data once (a paper table's cell is a family table's too), with the examples
        and task texts it refers to; its file, or None without per-example data."""
        read = _cell_payload(cell, self.cells)
        if read is None:
            return None
        payload, shared = read
        path = f"data/cells/{key}.json"
        self.writer.json(path, payload)
        if payload["examples"] not in self.examples:
            self.examples.add(payload["examples"])
            self.writer.json(f"data/examples/{payload['examples']}.json", shared)
        task_key = json.loads(Path(cell.records[min(cell.values)]).read_text())["task"]["key"]
        if task_key not in self.texts:
            self.texts.add(task_key)
            count = len(next(iter(next(iter(payload["seeds"].values())).values())))
            texts = (
                _texts_payload(cell.records[min(cell.values)], count, self.registry)
                if payload["statistic"] in PAIR_STATISTICS
                else {"withheld": "the store names these examples by id; the task's texts are not read"}
            )
            self.writer.json(f"data/texts/{task_key}.json", texts)
        return path

    def table(
        self, table_id: str, table: Table, sections: list[Table], created: dict, extra: dict | None = None
    ) -> dict:
        """Write ``table`` under ``table_id`` (``extra``: more keys of its table file) and return its index entry."""
        writer, cells = self.writer, self.cells
        if self.progress:
            self.progress(f"table {table_id}: {len(table.rows)} rows, {len(table.columns)} columns")
        ranked_rows = [row for _, row, _ in table.ranked()]
        with_examples: dict[str, bool] = {}
        cell_files: dict[str, str] = {}  # "<row>-<column>" -> its cell file (shared by every table showing the cell)
        for column_index, column in enumerate(table.columns):
            with_examples[column] = False
            for row_index, row in enumerate(ranked_rows):
                cell = row.cells.get(column)
                if cell is None or not cell.values:
                    continue
                key = _cell_key(cell)
                if key not in self.cell_files:
                    self.cell_files[key] = self._write_cell(cell, key)
                if self.cell_files[key] is not None:
                    with_examples[column] = True
                    cell_files[f"{row_index}-{column_index}"] = self.cell_files[key]
        table_payload = _table_payload(table_id, table, sections, with_examples)
        for row_index, row in enumerate(ranked_rows):
            curves = row_curves(row)
            if curves:
                path = f"data/curves/{table_id}/{row_index}.json"
                writer.json(path, curves)
                table_payload["rows"][row_index][TRAINING_CURVES_HOOK] = path
        table_payload["task_keys"] = _task_keys(table, ranked_rows)
        table_payload["cell_files"] = cell_files
        table_payload.update(extra or {})
        writer.json(f"data/tables/{table_id}.json", table_payload)
        for a in range(len(ranked_rows)):
            for b in range(a + 1, len(ranked_rows)):
                row_a, row_b = ranked_rows[a], ranked_rows[b]
                seeds = sorted(_seeds_run(table, row_a) & _seeds_run(table, row_b))
                pair: dict[str, Any] = {"a": a, "b": b, "seeds": seeds}
                if not seeds:
                    pair["reason"] = "the two rows have no seed in common: nothing to pair"
                else:
                    comparisons = compare_pair(table, row_a, row_b, cells, seeds)
                    pair["tasks"] = [c.as_dict() for c in comparisons]
                    pair["command"] = compare_command(row_a, row_b, table.columns, seeds)
                writer.json(f"data/compare/{table_id}/{a}-{b}.json", pair)
        return {
            "id": table_id,
            "title": table.title,
            "rows": len(table.rows),
            "columns": table.columns,
            "profiles": sorted({row.profile for row in table.rows}),
            "backbones": sorted({row.backbone for row in table.rows}),
            "seeds": sorted({seed for row in table.rows for seed in row.seeds}),
            "dates": _dates(table, created),
        }


def build_site(
    store: Store,
    folder: Path,
    registry: Any = None,
    family_members: dict[str, list[str]] | None = None,
    include_samples: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    progress: Callable[[str], None] | None = None,
    matrices: tuple[Path, ...] = (),
) -> SiteReport:
    """Write the site for ``store`` into ``folder`` (created; files of an earlier site are replaced). ``registry``
    (optional) orders the families' columns and reads the tasks' texts for the examples view; ``include_samples``
    as for ``harness leaderboard`` (records on an evaluation sample in sections of their own). ``matrices``: matrix
    files whose paper tables join the index, each the page ``harness leaderboard --matrix FILE --formats html``
    writes (the same renderer), under ``matrices/`` (they need ``registry``)."""
    folder = Path(folder)
    prepare_output_dir(folder, "the site folder")
    report = SiteReport(folder)
    writer = _Writer(folder, report)
    for name in ASSETS:
        text = resources.files("harness.leaderboard").joinpath("site_assets", name).read_text(encoding="utf-8")
        atomic_write_text(folder / name, text)
        report.files += 1
        report.bytes += len(text.encode())
    created = {record.get("_path"): str(record.get("created_at") or "") for record in store.records()}
    created = {path: date for path, date in created.items() if path and date}
    tables = collect_tables(store, family_members, include_samples)
    cells = _CellData(resamples)
    index: list[dict] = []
    written = _Written(writer, cells, registry, progress)
    for family, sections in group_by_family(tables).items():
        for table in sections:
            report.problems += attach_statistics(table, resamples).problems
            cells.reuse(table)
        entries = [
            written.table(_table_id(family, number), table, sections, created) for number, table in enumerate(sections)
        ]
        index.append({"family": family, "tables": entries})
    paper_tables = [_paper_table(Path(path), store, registry, folder, created, written, resamples) for path in matrices]
    writer.json(
        "data/index.json",
        {
            "store": str(store.root),
            "families": index,
            "matrices": paper_tables,
            "invalid_records": len(store.skipped),
            "unit_note": NO_DATA,
        },
    )
    return report


class MatrixTable(Table):
    """A matrix's paper table as a site table: its entries in the matrix's order (ranked by the average over its
    task columns as a family table is, the rank a column of its own), each entry a row with its records' cells."""

    def ranked(self) -> list[tuple[int | None, Row, float | None]]:
        ranks = {id(row): (rank, average) for rank, row, average in super().ranked()}
        return [(*ranks[id(row)][:1], row, ranks[id(row)][1]) for row in self.rows]


def _seeds_run(table: Table, row: Row) -> set[int]:
    """The seeds a pair of rows is compared over: a family row's seeds are those it has records of; a paper table's
    row declares the matrix's seeds, of which those with a record count (a seed not run yet has nothing to pair)."""
    if isinstance(table, MatrixTable):
        return {seed for cell in row.cells.values() for seed in cell.records}
    return set(row.seeds)


def _plain_marks(text: str) -> str:
    """A verdict's or header's text without markdown's ``**`` and backticks (the site shows text, not markdown)."""
    return text.replace("**", "").replace("`", "")


def matrix_table(board: Any, records: dict[str, dict]) -> MatrixTable:
    """The board's rows over its task columns (a family average is shown beside them, not ranked on), with each
    cell's cost and contamination read from its records (``records``: record path -> record) as a family table
    reads them, so that filters, the cost columns and the marks mean the same in both."""
    columns = [column.label for column in board.columns if not column.is_average]
    metrics: dict[str, str] = {}
    for row in board.rows:
        for column in columns:
            cell = row.cells.get(column)
            for seed, path in sorted(cell.records.items()) if cell is not None else []:
                record = records.get(path)
                if record is None or record.get("status") != "ok":
                    continue
                if record["task"].get("main_score"):
                    metrics.setdefault(column, record["task"]["main_score"])
                if isinstance(record.get("cost"), dict):
                    row.costs[(column, seed)] = record["cost"]
                shares = seen_shares(record)
                if shares is not None:
                    cell.seen[seed] = shares
    legend = {row.label: row.spec for row in board.rows if row.label != row.spec}
    return MatrixTable(board.name, columns, board.rows, metrics, firstline(board.description), legend)


def firstline(text: str) -> str:
    """A description's first sentence (the table's subtitle; the index and the page show the whole)."""
    match = re.search(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)[.;] (?=[A-Z(])", text)  # not at "et al. "
    return text[: match.start() + 1] if match and match.start() < 220 else text[:220]


def _matrix_extra(board: Any, table: MatrixTable, outcomes: list | None) -> dict:
    """What a paper table shows beyond a family table: the family-average columns, the paper's numbers and ours
    minus the paper's beside each column they cover, the header lines, and the claims (or the paper's ordering)
    with their verdicts, all as ``harness leaderboard --matrix`` writes them."""
    from .matrix_board import (
        AGREEMENT_HEADERS,
        AGREEMENT_LEGEND,
        _difference,
        _interval,
        _paper_value,
        header_lines,
        paper_agreement_rows,
    )
    from .verdicts import HEADERS, VERDICT_RULE, claim_row

    rows = [row for _, row, _ in table.ranked()]
    with_paper = set(board.paper_columns())
    extra_columns: list[dict] = []
    for column in board.columns:
        after = max(table.columns.index(member) for member in column.members) if column.is_average else None
        if column.is_average:
            texts = [cell_view(row, column.label).render() + _interval(row, column, board.statistics) for row in rows]
            values = [
                round(row.cells[column.label].mean(), 6) if row.cells[column.label].values else None for row in rows
            ]
            extra_columns.append({"header": column.label, "after": after, "cells": texts, "sort": values})
        if column.label in with_paper:
            place = after if column.is_average else table.columns.index(column.label)
            papers = [_paper_value(board, row, column.label) for row in rows]
            differences = [_difference(board, row, column.label) for row in rows]
            extra_columns.append(
                {
                    "header": f"{column.label} (paper)",
                    "after": place,
                    "cells": ["" if value is None else f"{value:.2f}" for value in papers],
                    "sort": papers,
                    "paper": True,
                }
            )
            extra_columns.append(
                {
                    "header": f"{column.label} Δ",
                    "after": place,
                    "cells": differences,
                    "sort": [float(text) if text else None for text in differences],
                    "paper": True,
                }
            )
    if outcomes:
        agreement = {
            "title": "The paper's claims, judged on our records",
            "legend": VERDICT_RULE,
            "headers": list(HEADERS),
            "lines": [list(claim_row(outcome)) for outcome in outcomes],
        }
    else:
        agreement = {
            "title": "Does our ordering agree with the paper's?",
            "legend": AGREEMENT_LEGEND + VERDICT_RULE,
            "headers": list(AGREEMENT_HEADERS),
            "lines": paper_agreement_rows(board),
        }
    agreement["title"], agreement["legend"] = _plain_marks(agreement["title"]), _plain_marks(agreement["legend"])
    agreement["lines"] = [[_plain_marks(str(value)) for value in line] for line in agreement["lines"]]
    return {
        "kind": "matrix",
        "matrix": board.name,
        "description": board.description,
        "header_lines": [_plain_marks(line) for line in header_lines(board)],
        "extra_columns": extra_columns,
        "agreement": agreement if agreement["lines"] else None,
        "page": f"matrices/{board.name}.html",
    }


def _paper_table(
    path: Path, store: Store, registry: Any, folder: Path, created: dict, written: _Written, resamples: int
) -> dict:
    """One matrix file's paper table: a site table like a family's (filters, sorting, compare and examples for any
    two of its entries, with the paper's numbers and the verdicts), plus the page ``harness leaderboard --matrix``
    writes in HTML (the same renderer), and its index entry."""
    from ..errors import HarnessError
    from .claims import matrix_outcomes
    from .matrix_board import build_board
    from .matrix_board import render_html as render_matrix_html

    if registry is None:
        raise HarnessError(
            f"the paper table of {path} needs the plugins its entries name; install them or leave it out"
        )
    board = build_board(path, store, registry)
    outcomes = matrix_outcomes(path, store, registry, board=board)
    page = render_matrix_html(board, outcomes)
    relative = f"matrices/{board.name}.html"
    (folder / "matrices").mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / relative, page)
    written.writer.report.files += 1
    written.writer.report.bytes += len(page.encode())
    records = {record["_path"]: record for record in store.records() if record.get("_path")}
    table = matrix_table(board, records)
    written.writer.report.problems += attach_statistics(table, resamples).problems
    written.cells.reuse(table)
    table_id = "matrix-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", board.name).strip("-") or "table")
    entry = written.table(table_id, table, [table], created, _matrix_extra(board, table, outcomes))
    return {
        **entry,
        "name": board.name,
        "page": relative,
        "description": board.description,
        "profiles": [board.profile],
        "seeds": list(board.seeds),
        "columns": [column.label for column in board.columns],
    }


def _task_keys(table: Table, ranked_rows: list[Row]) -> dict[str, str]:
    keys = {}
    for column in table.columns:
        for row in ranked_rows:
            cell = row.cells.get(column)
            if cell is not None and cell.records:
                keys[column] = json.loads(Path(next(iter(cell.records.values()))).read_text())["task"]["key"]
                break
    return keys


def serve(folder: Path, port: int) -> None:
    """Serve ``folder`` on http://127.0.0.1:PORT until interrupted (Python's http.server; localhost only)."""
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        logger.info("serving %s on http://127.0.0.1:%d/ (Ctrl-C stops)", folder, server.server_address[1])
        server.serve_forever()
