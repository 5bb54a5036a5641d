"""A site table's payload: its rows' cells with the leaderboard's texts and marks, the cost columns and the
quality-vs-cost view, each row's training curves; and a matrix's paper table as a site table (its extra columns,
the paper's numbers and the verdicts)."""

from __future__ import annotations

import logging
import re
import statistics
from pathlib import Path
from typing import Any

from ..contamination import seen_shares
from ..curves import curve_rows, read_training_record, training_record_paths
from ..status import CellStatus
from ..store import store_root_of
from ..store_files import UnsafeFileError, read_store_json
from .cost import COST_HEADER, COST_NOTE, row_cost
from .stats import BEST_SIGNIFICANT, cell_mark
from .stats import notes as statistics_notes
from .tables import CellKind, Row, Table, cell_view, contamination_notes, legend_rows, seen_in_training

logger = logging.getLogger(__name__)
TRAINING_CURVES_HOOK = "training-curves"  # a row's entry: the path of its curves file, or None (untrained or older)


def collected_record(path: str) -> dict[str, Any] | None:
    """A stored record (validated when the tables were collected), or None when it cannot be read (its speed then
    goes unreported, as in ``harness compare``)."""
    try:
        record = read_store_json(path, store_root_of(Path(path)))  # the store's safe open: no FIFO, no link out
    except (OSError, ValueError, UnsafeFileError):
        return None
    return record if isinstance(record, dict) else None


def row_curves(row: Row, skipped: dict[str, str] | None = None, read: dict | None = None) -> list[dict[str, Any]]:
    """The training curves of a row's seeds (each checkpoint's training.json, :mod:`harness.curves`): per seed and
    fit, its loss and dev series as step/value lists; empty where no checkpoint beside the records keeps curves
    (untrained rows, checkpoints trained before curves were kept, a published store without checkpoints). Only a
    checkpoint that verifies is read (:func:`harness.curves.read_training_record`); malformed curves are checked as
    :func:`harness.curves.load_training_curves` checks them (:func:`harness.curves.curve_rows`) and left out with
    one warning per file (``skipped``: path -> why, shared across a site's tables so each file warns once;
    ``read``: path -> its verified content, so a checkpoint shown in several tables is hashed once)."""
    skipped = {} if skipped is None else skipped
    read = {} if read is None else read
    found = training_record_paths(
        (seed, path) for cell in row.cells.values() for seed, path in (getattr(cell, "records", {}) or {}).items()
    )
    curves = []
    for seed, path in sorted(found.items()):
        if str(path) in skipped:
            continue
        try:
            if str(path) not in read:
                read[str(path)] = read_training_record(path)
            record = read[str(path)]
            if record.get("curves") is None:
                continue  # trained before curves were kept
            curve_rows(record, path.parent.parent.name)  # the same checks as load_training_curves
            fits = record["curves"]["fits"]
        except (ValueError, AttributeError, TypeError, KeyError) as exc:
            if str(path) not in skipped:
                skipped[str(path)] = str(exc)
                logger.warning("%s cannot be read (%s); its curves are left out of the site", path, exc)
            continue
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


def site_table_payload(table_id: str, table: Table, sections: list[Table], with_examples: dict[str, bool]) -> dict:
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
                    "sort": round(cell.mean(), 6) if view.kind is CellKind.VALUE else None,
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
                "seeds": seeds_shown(table, row),
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

    # a paper table's entry averaged over fewer seeds than its matrix declares is marked as its cells are
    fewer = "" if all(row.complete(column) for column in table.averaged_columns) else "*"
    text = decorate(table, row, table.average_header, f"{average:.2f}{fewer}")
    return _unbold(text, cell_mark(table, row, table.average_header))


def _unbold(text: str, mark: str) -> str:
    """The cell's text without markdown's bold stars (the page shows ``best-significant`` in bold by its mark)."""
    return text[2:-2] if mark == BEST_SIGNIFICANT and text.startswith("**") else text


class MatrixRow(Row):
    """A matrix entry as a site row: its ``seeds`` are those the matrix declares (a cell with fewer carries ``*``,
    as on the page ``harness leaderboard --matrix`` writes), but it is averaged, and so ranked, over the seeds that
    ran wherever every task column ran the same ones: a matrix whose seeds 43 and 44 have not run yet still ranks
    its entries on seed 42."""

    def average(self, columns: list[str]) -> float | None:
        cells = [self.cells.get(column) for column in columns]
        if not columns or any(cell is None or not cell.values for cell in cells):
            return None
        if len({frozenset(cell.values) for cell in cells if cell is not None}) != 1:
            return None  # columns over different seeds: their means are not comparable
        return statistics.mean(cell.mean() for cell in cells if cell is not None)


class MatrixTable(Table):
    """A matrix's paper table as a site table: its entries in the matrix's order (ranked by the average over its
    task columns as a family table is, the rank a column of its own), each entry a row with its records' cells."""

    def ranked(self) -> list[tuple[int | None, Row, float | None]]:
        ranks = {id(row): (rank, average) for rank, row, average in super().ranked()}
        return [(*ranks[id(row)][:1], row, ranks[id(row)][1]) for row in self.rows]


def seeds_run(table: Table, row: Row) -> set[int]:
    """The seeds a row has run: a family row's seeds are those it has records of; a paper table's row declares the
    matrix's seeds, of which those with a record count (a seed not run yet has nothing to show or pair)."""
    if isinstance(table, MatrixTable):
        return {seed for cell in row.cells.values() for seed in cell.records}
    return set(row.seeds)


def seeds_shown(table: Table, row: Row) -> list[int]:
    """The seeds column of a row: the seeds with a score in some cell for a paper table (what its markdown page
    shows), a family row's seeds otherwise."""
    if isinstance(table, MatrixTable):
        return sorted({seed for cell in row.cells.values() for seed in cell.values})
    return sorted(row.seeds)


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
                if record is None or record.get("status") != CellStatus.OK:
                    continue
                if record["task"].get("main_score"):
                    metrics.setdefault(column, record["task"]["main_score"])
                if isinstance(record.get("cost"), dict):
                    row.costs[(column, seed)] = record["cost"]
                shares = seen_shares(record)
                if shares is not None:
                    cell.seen[seed] = shares
    rows = [MatrixRow(**{name: getattr(row, name) for name in Row.__dataclass_fields__}) for row in board.rows]
    # no legend of option sets: legend_rows lists each entry whose label is not its spec already
    return MatrixTable(board.name, columns, rows, metrics, firstline(board.description), {})


def firstline(text: str) -> str:
    """A description's first sentence (the table's subtitle; the index and the page show the whole)."""
    match = re.search(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)[.;] (?=[A-Z(])", text)  # not at "et al. "
    return text[: match.start() + 1] if match and match.start() < 220 else text[:220]


def matrix_extra(board: Any, table: MatrixTable, outcomes: list | None) -> dict:
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


def column_task_keys(table: Table, ranked_rows: list[Row]) -> dict[str, str]:
    keys = {}
    for column in table.columns:
        for row in ranked_rows:
            cell = row.cells.get(column)
            if cell is not None and cell.records:
                keys[column] = ((collected_record(next(iter(cell.records.values()))) or {}).get("task") or {}).get(
                    "key", column
                )
                break
    return keys
