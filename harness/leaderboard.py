"""Leaderboards rebuilt from the store alone: one table per task family.

Rows are model specs (with their training source, backbone and profile), columns the family's member tasks plus
the average; a cell is mean ± std of the main score over seeds. A row's expected seeds are all seeds it has any
record for in that family: a cell with fewer seeds is marked incomplete (``*``), a cell without records shows
``-`` (or ``missing`` when the data was not available), and the average is given only when every cell is complete.
Rows with an average are ranked. A cell whose computation failed (e.g. training diverged) shows ``failed``, never a
number. The average only joins members that share a metric (their ``main_score``): when a family mixes metrics
(BWS: Spearman for the similarity tasks, macro-F1 for the topic probe), it averages the columns of the metric most
of its members use (ties: the first column's) and its header names that metric, e.g. ``average (spearman)``.

Only valid records are used (:meth:`harness.store.Store.records`); invalid ones are skipped, and
:func:`write_leaderboards` returns them with the reason so the caller can warn. Every file is written inside the
output folder: a table's file name is its family name, which must be a plain name.
"""
from __future__ import annotations

import csv
import io
import logging
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .store import Store, StoreError, atomic_write_text, check_writable_dir

logger = logging.getLogger(__name__)

FORMATS = ("md", "csv", "tex", "html")


@dataclass
class Cell:
    values: dict[int, float] = field(default_factory=dict)  # seed -> main score
    missing_seeds: set[int] = field(default_factory=set)
    failed_seeds: set[int] = field(default_factory=set)
    records: dict[int, str] = field(default_factory=dict)  # seed -> the record's path (the HTML page links them)

    def mean(self) -> float:
        return statistics.mean(self.values.values())

    def std(self) -> float:
        return statistics.stdev(self.values.values()) if len(self.values) > 1 else 0.0


@dataclass
class Row:
    label: str
    model_key: str
    train_on: str | None
    backbone: str
    profile: str
    cells: dict[str, Cell] = field(default_factory=lambda: defaultdict(Cell))
    seeds: set[int] = field(default_factory=set)
    hardware: set[str] = field(default_factory=set)

    def complete(self, column: str) -> bool:
        cell = self.cells.get(column)
        return cell is not None and set(cell.values) == self.seeds

    def average(self, columns: list[str]) -> float | None:
        if not columns or not all(self.complete(c) for c in columns):
            return None
        return statistics.mean(self.cells[c].mean() for c in columns)


@dataclass(frozen=True)
class Baseline:
    """An untrained row a family's task names as the one trained rows must beat (its metadata
    ``details["leaderboard_baseline"]``: ``model`` = the row's model label, ``column`` = the task compared on,
    ``why``); the markdown table says which trained rows do not, from the table's own numbers."""

    model: str
    column: str
    why: str = ""

    @classmethod
    def from_details(cls, details: dict) -> "Baseline | None":
        entry = details.get("leaderboard_baseline")
        return None if not entry else cls(str(entry["model"]), str(entry["column"]), str(entry.get("why", "")))


@dataclass
class Table:
    family: str
    columns: list[str]
    rows: list[Row]
    column_metrics: dict[str, str] = field(default_factory=dict)  # column -> its task's main score name
    baseline: Baseline | None = None

    def baseline_lines(self) -> list[str]:
        """The baseline note: which trained rows beat the baseline row on its column, and which do not."""
        baseline, column = self.baseline, self.baseline.column if self.baseline else ""
        reference = next((row for row in self.rows if baseline and row.label == baseline.model
                          and row.train_on is None and row.cells.get(column) and row.cells[column].values), None)
        if baseline is None or reference is None:
            return []
        metric = self.column_metrics.get(column, "main score")
        score = reference.cells[column].mean()
        lines = [f"Baseline: `{baseline.model}`, untrained, {column} {metric} {score:.2f}"
                 + (f" ({baseline.why})." if baseline.why else ".")]
        trained = [row for row in self.rows if row.train_on and row.cells.get(column) and row.cells[column].values]
        below = [f"`{row.label}` ({row.cells[column].mean():.2f})" for row in trained
                 if row.cells[column].mean() <= score]
        above = [f"`{row.label}` ({row.cells[column].mean():.2f})" for row in trained
                 if row.cells[column].mean() > score]
        if below:
            lines.append(f"The untrained baseline beats or ties these trained rows on {column} ({metric}): "
                         f"{', '.join(below)}; their training does not pay here.")
        if above:
            lines.append(f"Trained rows above the baseline on {column} ({metric}): {', '.join(above)}.")
        return lines

    @property
    def averaged_metric(self) -> str | None:
        """The metric the average is over: the one most columns use (ties: the first column's); None if unknown."""
        metrics = [self.column_metrics[c] for c in self.columns if c in self.column_metrics]
        if not metrics:
            return None
        return max(dict.fromkeys(metrics), key=metrics.count)

    @property
    def averaged_columns(self) -> list[str]:
        """The columns the average joins: those of ``averaged_metric`` (all columns when metrics are unknown)."""
        metric = self.averaged_metric
        if metric is None:
            return list(self.columns)
        return [c for c in self.columns if self.column_metrics.get(c, metric) == metric]

    @property
    def mixed_metrics(self) -> bool:
        return len(set(self.column_metrics.get(c) for c in self.columns)) > 1

    @property
    def average_header(self) -> str:
        return f"average ({self.averaged_metric})" if self.mixed_metrics else "average"

    def ranked(self) -> list[tuple[int | None, Row, float | None]]:
        scored = [(row, row.average(self.averaged_columns)) for row in self.rows]
        scored.sort(key=lambda item: (item[1] is None, -(item[1] or 0.0), item[0].label))
        ranked, rank = [], 0
        for row, average in scored:
            if average is not None:
                rank += 1
            ranked.append((rank if average is not None else None, row, average))
        return ranked

    def cell_text(self, row: Row, column: str) -> str:
        cell = row.cells.get(column)
        if cell is None or not cell.values:
            if cell is not None and cell.failed_seeds:
                return "failed"
            return "missing" if cell is not None and cell.missing_seeds else "-"
        text = f"{cell.mean():.2f}" + (f" ± {cell.std():.2f}" if len(row.seeds) > 1 else "")
        return text + ("*" if not row.complete(column) else "")


def _ordered(columns: list[str], preferred: list[str]) -> list[str]:
    """Columns in the family's registration order (task labels start with the task name), others sorted after."""
    def position(column: str) -> tuple[int, str]:
        name = column.split(":")[0]
        return (preferred.index(name) if name in preferred else len(preferred), column)

    return sorted(columns, key=position)


def collect_tables(store: Store, family_members: dict[str, list[str]] | None = None,
                   family_baselines: dict[str, Baseline] | None = None) -> list[Table]:
    """Tables per family. ``family_members`` (from the registry, when available) only orders the columns;
    ``family_baselines`` (also from the registry) adds the baseline note."""
    family_members = family_members or {}
    family_baselines = family_baselines or {}
    rows_by_family: dict[str, dict[str, Row]] = defaultdict(dict)
    columns_by_family: dict[str, list[str]] = defaultdict(list)
    metrics_by_family: dict[str, dict[str, str]] = defaultdict(dict)
    for record in store.records():
        task = record["task"]
        family = task.get("family") or task["name"]
        model = record["model"]
        row_id = record["model_key"]
        rows = rows_by_family[family]
        if row_id not in rows:
            label = model["label"] + (f" [train: {model['train_on']}]" if model.get("train_on") else "")
            rows[row_id] = Row(label, row_id, model.get("train_on"), model["backbone"], model["profile"])
        row = rows[row_id]
        column = task["label"]
        if column not in columns_by_family[family]:
            columns_by_family[family].append(column)
        if task.get("main_score"):
            metrics_by_family[family].setdefault(column, task["main_score"])
        row.seeds.add(record["seed"])
        row.hardware.add(record.get("hardware", "?"))
        if record.get("_path"):
            row.cells[column].records[record["seed"]] = record["_path"]
        if record.get("status") == "ok":
            row.cells[column].values[record["seed"]] = record["main_score"]
        elif record.get("status") == "missing":
            row.cells[column].missing_seeds.add(record["seed"])
        elif record.get("status") == "failed":
            row.cells[column].failed_seeds.add(record["seed"])
    return [
        Table(family, _ordered(columns_by_family[family], family_members.get(family, [])),
              list(rows_by_family[family].values()), dict(metrics_by_family[family]), family_baselines.get(family))
        for family in sorted(rows_by_family)
    ]


def _header(table: Table) -> list[str]:
    return ["rank", "model", "backbone", "profile", "seeds", *table.columns, table.average_header]


def _body(table: Table) -> list[list[str]]:
    body = []
    for rank, row, average in table.ranked():
        body.append(
            [
                str(rank) if rank is not None else "",
                row.label,
                row.backbone,
                row.profile,
                ",".join(str(s) for s in sorted(row.seeds)),
                *(table.cell_text(row, column) for column in table.columns),
                f"{average:.2f}" if average is not None else "incomplete",
            ]
        )
    return body


def render_markdown(table: Table) -> str:
    from tabulate import tabulate

    hardware = sorted({h for row in table.rows for h in row.hardware})
    lines = [
        f"# Leaderboard: {table.family}",
        "",
        "Generated by `harness leaderboard` from the result store; do not edit by hand.",
        "Cells: main score x100, mean ± std over seeds. `*` = not every seed of the row has this cell; "
        "`-` = not run; `missing` = data not available when it ran. Average and rank only for complete rows.",
        *([f"Members use different metrics ({', '.join(f'{c}: {m}' for c, m in table.column_metrics.items())}); "
           f"the average joins only the {table.averaged_metric} columns."] if table.mixed_metrics else []),
        *(["`failed` = the computation failed (e.g. training diverged); the record says why."]
          if any(cell.failed_seeds and not cell.values for row in table.rows for cell in row.cells.values()) else []),
        *(["", *table.baseline_lines()] if table.baseline_lines() else []),
        "",
        f"Hardware: {'; '.join(hardware)}",
        "",
        tabulate(_body(table), headers=_header(table), tablefmt="github", disable_numparse=True),
        "",
    ]
    return "\n".join(lines)


def render_csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["rank", "model", "model_key", "train_on", "backbone", "profile", "seeds", "hardware",
                     *[f"{c}_mean" for c in table.columns], *[f"{c}_std" for c in table.columns],
                     *[f"{c}_n" for c in table.columns], "average"])
    for rank, row, average in table.ranked():
        means, stds, counts = [], [], []
        for column in table.columns:
            cell = row.cells.get(column)
            has = cell is not None and cell.values
            means.append(f"{cell.mean():.4f}" if has else "")
            stds.append(f"{cell.std():.4f}" if has else "")
            counts.append(str(len(cell.values)) if cell is not None else "0")
        writer.writerow([rank or "", row.label, row.model_key, row.train_on or "", row.backbone, row.profile,
                         " ".join(str(s) for s in sorted(row.seeds)), "; ".join(sorted(row.hardware)),
                         *means, *stds, *counts, f"{average:.4f}" if average is not None else ""])
    # The csv's last column is "average"; with mixed metrics it averages only the averaged_metric columns.
    return buffer.getvalue()


def render_latex(table: Table) -> str:
    from tabulate import tabulate

    return tabulate(_body(table), headers=_header(table), tablefmt="latex_booktabs", disable_numparse=True) + "\n"


def render_html(table: Table, output_dir: Path | None = None) -> str:
    """A static, sortable page (harness/leaderboard_views.py); record links are relative to ``output_dir``."""
    from .leaderboard_views import render_html_page

    return render_html_page(table, output_dir)


RENDERERS = {"md": render_markdown, "csv": render_csv, "tex": render_latex, "html": render_html}


def table_path(output_dir: Path, family: str, fmt: str) -> Path:
    """``<output_dir>/<family>.<fmt>``, refused unless it stays directly inside ``output_dir``."""
    output_dir = Path(output_dir)
    path = output_dir / f"{family}.{fmt}"
    if (not family or family.startswith(".") or Path(family).name != family
            or path.resolve().parent != output_dir.resolve()):
        raise StoreError(f"task family {family!r} would be written outside {output_dir}; refused.")
    return path


def write_leaderboards(
    store: Store, output_dir: Path, formats: tuple[str, ...] = ("md", "csv"),
    family_members: dict[str, list[str]] | None = None, family_baselines: dict[str, Baseline] | None = None,
) -> list[Path]:
    """Write every table; the invalid records that were skipped are in ``store.skipped`` (also logged)."""
    check_writable_dir(Path(output_dir), "the leaderboard folder")
    tables = collect_tables(store, family_members, family_baselines)
    for path, reason in store.skipped:
        logger.warning("skipped record %s: %s", path, reason)
    written = []
    for table in tables:
        for fmt in formats:
            path = table_path(output_dir, table.family, fmt)
            text = render_html(table, output_dir) if fmt == "html" else RENDERERS[fmt](table)
            atomic_write_text(path, text)
            written.append(path)
    return written
