"""The leaderboard as text: markdown, CSV and LaTeX tables of a family's sections (:mod:`.tables`).

Reference: none (presentation only). Deviations: none in the numbers.
"""

from __future__ import annotations

import csv
import io
import re

from .cost import COST_CSV_HEADER, COST_HEADER, COST_NOTE, row_cost
from .marks import marks_caption
from .stats import csv_fields, decorate
from .stats import notes as statistics_notes
from .tables import (
    CellKind,
    Row,
    ScoreCell,
    Table,
    cell_view,
    contamination_notes,
    legend_rows,
    sections_of,
    seen_in_training,
)

PER_ROW = ("backbone", "profile")  # columns that say something of a row; one shared by every row goes to the caption


def shared_values(sections: list[Table]) -> dict[str, str]:
    """``{"backbone": ..., "profile": ...}`` for each of :data:`PER_ROW` that every row of ``sections`` shares."""
    rows = [row for table in sections for row in table.rows]
    values = {name: {getattr(row, name) for row in rows} for name in PER_ROW}
    return {name: next(iter(found)) for name, found in values.items() if len(found) == 1}


def _header(table: Table, per_row: tuple[str, ...] = PER_ROW) -> list[str]:
    cost = list(COST_HEADER) if table.show_cost else []
    return ["rank", "model", *per_row, "seeds", *table.columns, table.average_header, *cost]


def _body(table: Table, per_row: tuple[str, ...] = PER_ROW) -> list[list[str]]:
    body = []
    for rank, row, average in table.ranked():
        body.append(
            [
                str(rank) if rank is not None else "",
                row.label,
                *(getattr(row, name) for name in per_row),
                ",".join(str(s) for s in sorted(row.seeds)),
                *(table.cell_text(row, column) for column in table.columns),
                decorate(table, row, table.average_header, f"{average:.2f}") if average is not None else "incomplete",
                *(row_cost(row).texts() if table.show_cost else []),
            ]
        )
    return body


def _cells(sections: list[Table]) -> list[tuple[Row, ScoreCell]]:
    return [(row, cell) for table in sections for row in table.rows for cell in row.cells.values()]


def caption(sections: list[Table], cell_texts: list[str]) -> str:
    """The one line above the table: what a cell holds, what every row shares, and the marks that occur in it."""
    shared = shared_values(sections)
    rows = sum(len(table.rows) for table in sections)
    every_row = ", ".join(f"{name} {value}" for name, value in shared.items())
    marks = marks_caption(cell_texts, [row.label for table in sections for row in table.rows])
    return " ".join(
        part
        for part in (
            "Cells: main score x100, mean ± std over seeds"
            + (f"; all {rows} rows: {every_row}." if every_row else "."),
            marks,
            "Notes below the table.",
        )
        if part
    )


def missing_line(table: Table) -> str:
    """Under a table with ``missing`` cells: which columns, the reason their records give (the first sentence of the
    first one, paths left out) and the commands those records name to get the data; "" when none is missing."""
    missing = [
        (column, row.cells[column])
        for column in table.columns
        for row in table.rows
        if cell_view(row, column).kind is CellKind.MISSING
    ]
    if not missing:
        return ""
    columns = list(dict.fromkeys(column for column, _ in missing))
    messages = [message for _, cell in missing for message in cell.messages.values() if message]
    reasons = list(dict.fromkeys(_first_sentence(message) for message in messages))
    commands = list(dict.fromkeys(command for message in messages for command in re.findall(r"`([^`]+)`", message)))
    because = f" ({reasons[0]}" + (f"; {len(reasons) - 1} more like it" if len(reasons) > 1 else "") + ")"
    get = f"; get it with {' or '.join(f'`{command}`' for command in commands)}" if commands else ""
    return (
        f"`missing` in {', '.join(columns)} ({len(missing)} cells): the data was not on the machine that ran them"
        f"{because if reasons else ''}{get}, then run the same command again: it computes only these cells."
    )


def _first_sentence(message: str) -> str:
    """A record's message up to its first full stop, without the parentheses that list folders (paths differ by
    machine and say nothing of the reason)."""
    sentence = re.split(r"\.(?:\s|$)", message.strip(), maxsplit=1)[0]
    return re.sub(r" \([^()]*/[^()]*\)", "", sentence)


def notes_list(lines: list[str]) -> list[str]:
    """Notes as a markdown list, a blank line between items so no renderer joins them into one paragraph."""
    return [line for note in lines for line in (f"- {note}", "")]


def superseded_note(sections: list[Table]) -> list[str]:
    """How many superseded rows are left out and how to show them (none when nothing is left out)."""
    count = max((table.hidden_superseded for table in sections), default=0)
    if not count:
        return []
    return [
        f"{count} superseded model(s) left out: trained before a default of their spec changed, so their numbers are "
        "those of an older setting. `harness leaderboard --show-superseded` shows them (marked §, not ranked)."
    ]


def render_markdown(tables: Table | list[Table]) -> str:
    from tabulate import tabulate

    sections = sections_of(tables)
    first = sections[0]
    hardware = sorted({h for table in sections for row in table.rows for h in row.hardware})
    cells = _cells(sections)
    per_row = tuple(name for name in PER_ROW if name not in shared_values(sections))
    bodies = [_body(table, per_row) for table in sections]
    cell_texts = [text for body in bodies for line in body for text in line[2 + len(per_row) :]]
    lines = [f"# Leaderboard: {first.family}", "", caption(sections, cell_texts), ""]
    for table, body in zip(sections, bodies):
        if table.title:
            lines += [f"## {table.title}", ""]
        if table.mixed_metrics:
            metrics = ", ".join(f"{c}: {m}" for c, m in table.column_metrics.items())
            lines += [
                f"Members use different metrics ({metrics}); the average joins only the "
                f"{table.averaged_metric} columns.",
                "",
            ]
        lines += [tabulate(body, headers=_header(table, per_row), tablefmt="github", disable_numparse=True), ""]
        if missing_line(table):
            lines += [missing_line(table), ""]
    notes = [
        "Generated by `harness leaderboard` from the result store; do not edit by hand.",
        "`-` = not run; `missing` = data not available when it ran"
        + (
            "; `failed` = the computation failed (e.g. training diverged), the record says why"
            if any(cell.failed_seeds and not cell.values for _, cell in cells)
            else ""
        )
        + (
            "; `invalid` = the record does not verify (damaged or edited), `harness leaderboard` names the file"
            if any(cell.invalid_seeds for _, cell in cells)
            else ""
        )
        + ". Average and rank only for complete rows"
        + (
            ", ranked only against rows of the same profile evaluated on the same tasks (one section each)."
            if len(sections) > 1
            else "."
        ),
        *superseded_note(sections),
        *dict.fromkeys(line for table in sections for line in statistics_notes(table)),
        *contamination_notes(sections),
        *(line for table in sections for line in table.baseline_lines()),
        *([COST_NOTE] if any(table.show_cost for table in sections) else []),
        f"Hardware: {'; '.join(hardware)}.",
    ]
    lines += ["## Notes", "", *notes_list(notes)]
    legend = legend_rows(sections)
    if legend:
        lines += ["## Short labels", "", *notes_list([f"`{label}`: `{spec}`" for label, spec in legend])]
    return "\n".join(lines)


def render_csv(tables: Table | list[Table]) -> str:
    sections = sections_of(tables)
    columns = list(dict.fromkeys(c for table in sections for c in table.columns))
    show_cost = any(table.show_cost for table in sections)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            "section",
            "rank",
            "model",
            "spec",
            "model_key",
            "train_on",
            "backbone",
            "profile",
            "seeds",
            "hardware",
            *[f"{c}_mean" for c in columns],
            *[f"{c}_std" for c in columns],
            *[f"{c}_n" for c in columns],
            *[f"{c}_status" for c in columns],
            "average",
            *[f"{c}_{field}" for c in (*columns, "average") for field in ("ci_low", "ci_high", "mark")],
            *[f"{c}_seen_{unit}" for c in columns for unit in ("pairs", "sentences")],
            *(COST_CSV_HEADER if show_cost else ()),
        ]
    )
    for number, table in enumerate(sections, start=1):
        for rank, row, average in table.ranked():
            means, stds, counts, statuses = [], [], [], []
            for column in columns:
                cell = row.cells.get(column) if column in table.columns else None
                has = cell is not None and cell.values
                means.append(f"{cell.mean():.4f}" if has else "")
                stds.append(f"{cell.std():.4f}" if has else "")
                counts.append(str(len(cell.values)) if cell is not None else "0")
                statuses.append(cell_view(row, column).kind if column in table.columns else "")
            writer.writerow(
                [
                    number,
                    rank or "",
                    row.label,
                    row.spec,
                    row.model_key,
                    row.train_on or "",
                    row.backbone,
                    row.profile,
                    " ".join(str(s) for s in sorted(row.seeds)),
                    "; ".join(sorted(row.hardware)),
                    *means,
                    *stds,
                    *counts,
                    *statuses,
                    f"{average:.4f}" if average is not None else "",
                    *[
                        value
                        for c in columns
                        for value in (csv_fields(table, row, c) if c in table.columns else ["", "", ""])
                    ],
                    *csv_fields(table, row, table.average_header),
                    *[value for c in columns for value in _seen_fields(row, c, table)],
                    *(row_cost(row).fields() if show_cost else []),
                ]
            )
    # The csv's last column is "average" of the row's section; with mixed metrics only the averaged_metric columns.
    return buffer.getvalue()


def _seen_fields(row: Row, column: str, table: Table) -> list[str]:
    """The csv's share of test pairs and of test sentences seen in training (empty: not measured)."""
    cell = row.cells.get(column) if column in table.columns else None
    measured = cell is not None and any(seed in cell.seen for seed in cell.values)
    if not measured:
        return ["", ""]
    seen = seen_in_training(cell) or (0.0, 0.0)
    return [f"{seen[0]:.4f}", f"{seen[1]:.4f}"]


def render_latex(tables: Table | list[Table]) -> str:
    from tabulate import tabulate

    parts = []
    for table in sections_of(tables):
        title = f"% {table.title}\n" if table.title else ""
        parts.append(
            title
            + tabulate(_body(table), headers=_header(table), tablefmt="latex_booktabs", disable_numparse=True)
            + "\n"
        )
    # significance bold (harness.leaderboard.stats) in LaTeX
    return re.sub(r"\*\*(.+?)\*\*", r"\\textbf{\1}", "\n".join(parts))
