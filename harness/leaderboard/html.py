"""The leaderboard as one static HTML page per task family (``harness leaderboard --formats html``).

Drawn from the same :class:`harness.leaderboard.tables.Table` the markdown and CSV tables come from, so every number
agrees with them. :func:`render_html_page` writes a single self-contained page (inline CSS and a few lines of
JavaScript, nothing fetched), table first: the title, the caption line the markdown has (.text.caption: what a cell
holds, the backbone and profile every row shares, the marks that occur), one sortable table per section (rows of
one profile evaluated on the same tasks; click a header; numbers sort as numbers, empty cells last); each cell
mean ± std over seeds with a link to every seed's record (relative to the page, so the links work in a checkout and
on a static host); bold where the one rule for "best" (.stats.cell_mark) says so, as in every format; a model's full
spec as its tooltip, a marked cell's marks (.marks) and a failed or invalid cell's reason as its tooltip; then the
notes as a list, the hardware, and a legend table of the short labels.

Reference: none (presentation only). Deviations: none in the numbers (same Table as the markdown).
"""

from __future__ import annotations

import html
import logging
import os
from pathlib import Path
from typing import Any

from ..curves import curve_files
from .cost import COST_HEADER, COST_NOTE, row_cost
from .marks import STALE_MEANING, marks_in
from .stats import BEST_SIGNIFICANT, cell_mark, decorate
from .stats import notes as statistics_notes
from .tables import CellKind, Table, contamination_notes, legend_rows, sections_of
from .text import PER_ROW, caption, missing_line, shared_values, superseded_note

logger = logging.getLogger(__name__)

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem; color: #1f2328; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; }
.facts { display: grid; grid-template-columns: max-content auto; gap: .15rem 1rem; margin: .75rem 0 1rem;
         font-size: .9rem; }
.facts dt { color: #59636e; } .facts dd { margin: 0; }
.legend { font-size: .85rem; color: #59636e; max-width: 70rem; }
.caption { font-size: .9rem; max-width: 70rem; margin: .25rem 0 .5rem; }
ul.notes { font-size: .85rem; color: #59636e; max-width: 70rem; padding-left: 1.2rem; }
ul.notes li { margin-bottom: .4rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: .88rem; margin-top: .5rem; }
th, td { padding: .35rem .6rem; border-bottom: 1px solid #d1d9e0; text-align: right; white-space: nowrap; }
th { position: sticky; top: 0; background: #f6f8fa; cursor: pointer; user-select: none; }
th.text, td.text { text-align: left; }
th[aria-sort="ascending"]::after { content: " \\25B2"; font-size: .7em; }
th[aria-sort="descending"]::after { content: " \\25BC"; font-size: .7em; }
tbody tr:nth-child(even) { background: #fafbfc; }
tbody tr:hover { background: #eef4ff; }
td.best .value { font-weight: 700; }
td .seeds { display: block; font-size: .7rem; }
td .seeds a { color: #59636e; margin-left: .3rem; text-decoration: none; }
td .seeds a:hover { text-decoration: underline; }
td.model { min-width: 16rem; max-width: 30rem; white-space: normal; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 .25rem; }
table.legend-table td.spec { white-space: normal; max-width: 60rem; font-family: ui-monospace, monospace;
                             font-size: .8rem; }
.status { color: #9a6700; } .failed { color: #d1242f; }
footer { margin-top: 1rem; font-size: .8rem; color: #59636e; }
"""

# Sort by the cell's data-sort (a number) when every non-empty cell of the column has one, else by text.
_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (header, column) {
    header.addEventListener("click", function () {
      var ascending = header.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (row) {
        var cell = row.cells[column];
        var value = cell.getAttribute("data-sort");
        if (value === null || value === "") { return null; }
        var number = parseFloat(value);
        return isNaN(number) ? value.toLowerCase() : number;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null && y === null) { return 0; }
        if (x === null) { return 1; }
        if (y === null) { return -1; }
        var order = x < y ? -1 : x > y ? 1 : 0;
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def _escape(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _link(record_path: str, output_dir: Path) -> str:
    """The record's path relative to the page, with forward slashes (a URL)."""
    return Path(os.path.relpath(Path(record_path).resolve(), Path(output_dir).resolve())).as_posix()


def _score_cell(table: Any, row: Any, column: str, output_dir: Path) -> str:
    cell = row.cells.get(column)
    view = table.cell_view(row, column)
    records = getattr(cell, "records", {}) or {}
    links = "".join(
        f'<a href="{_escape(_link(records[seed], output_dir))}" title="record of seed {seed}">s{seed}</a>'
        for seed in sorted(records)
    )
    seeds = f'<span class="seeds">{links}</span>' if links else ""
    if view.kind is not CellKind.VALUE:  # the record of a missing, failed or invalid cell says why
        css = "failed" if view.kind in (CellKind.FAILED, CellKind.INVALID) else "status"
        why = (
            "; ".join(
                f"seed {seed}: {message}"
                for seed, message in sorted(
                    {**getattr(cell, "messages", {}), **getattr(cell, "invalid_seeds", {})}.items()
                )
                if message
            )
            if cell
            else ""
        )
        title = f' title="{_escape(why)}"' if why else ""
        return f'<td data-sort=""><span class="{css}"{title}>{_escape(view.render())}</span>{seeds}</td>'
    text = table.cell_text(row, column)  # with its interval and marks (the one rule for "best": .stats.cell_mark)
    is_best = cell_mark(table, row, column) == BEST_SIGNIFICANT
    classes = ' class="best"' if is_best else ""
    return (
        f'<td{classes}{_marks_title(text)} data-sort="{cell.mean():.6f}"><span class="value">'
        f"{_escape(text[2:-2] if is_best else text)}</span>{seeds}</td>"  # bold by the class, not markdown's stars
    )


def _marks_title(text: str) -> str:
    """A marked cell's tooltip: what each of its marks means (.marks), next to where the mark appears."""
    meanings = marks_in(text)
    return f' title="{_escape("; ".join(meanings))}"' if meanings else ""


def _curves_links(row: Any, output_dir: Path) -> str:
    """Links to the training curves of the row's seeds (each checkpoint's training.json, harness.curves), only
    where a checkpoint with curves sits beside the records: rows without them (the published records) are
    rendered exactly as before."""
    checkpoints = curve_files(
        (seed, path) for cell in row.cells.values() for seed, path in (getattr(cell, "records", {}) or {}).items()
    )
    return "".join(
        f'<a href="{_escape(_link(str(path), output_dir))}" title="training curves of seed {seed} (per-step '
        f'losses and dev scores; harness plot training draws them)">curves s{seed}</a>'
        for seed, path in sorted(checkpoints.items())
    )


def _average_cell(table: Any, row: Any, average: float) -> str:
    """The row's average, bold by the same rule as every cell (.stats.cell_mark)."""
    is_best = cell_mark(table, row, table.average_header) == BEST_SIGNIFICANT
    text = decorate(table, row, table.average_header, f"{average:.2f}")
    classes = ' class="best"' if is_best else ""
    return (
        f'<td{classes}{_marks_title(text)} data-sort="{average:.6f}"><span class="value">'
        f"{_escape(text[2:-2] if is_best else text)}</span></td>"
    )


def _section_html(table: Any, output_dir: Path, per_row: list[str]) -> list[str]:
    heads = [
        '<th class="text">rank</th>',
        '<th class="text">model</th>',
        *(f'<th class="text">{name}</th>' for name in per_row),
        '<th class="text">seeds</th>',
        *(f"<th>{_escape(column)}</th>" for column in table.columns),
        f"<th>{_escape(table.average_header)}</th>",
        *(f"<th>{_escape(name)}</th>" for name in (COST_HEADER if getattr(table, "show_cost", False) else ())),
    ]
    body = []
    for rank, row, average in table.ranked():
        model = ",<wbr>".join(_escape(part) for part in row.label.split(","))  # long specs may break after a comma
        curves = _curves_links(row, output_dir)
        if curves:
            model += f'<span class="seeds">{curves}</span>'
        spec = (getattr(row, "spec", "") or row.label) + (
            f" ({STALE_MEANING})" if getattr(row, "superseded_by", "") else ""
        )
        cells = [
            f'<td class="text" data-sort="{rank if rank is not None else ""}">{rank or ""}</td>',
            f'<td class="text model" data-sort="{_escape(row.label)}" title="{_escape(spec)}">{model}</td>',
            *(
                f'<td class="text" data-sort="{_escape(getattr(row, name))}">{_escape(getattr(row, name))}</td>'
                for name in per_row
            ),
            f'<td class="text" data-sort="{len(row.seeds)}">{_escape(",".join(map(str, sorted(row.seeds))))}</td>',
            *(_score_cell(table, row, column, output_dir) for column in table.columns),
            (
                _average_cell(table, row, average)
                if average is not None
                else '<td data-sort=""><span class="status">incomplete</span></td>'
            ),
            *(_cost_cells(row) if getattr(table, "show_cost", False) else []),
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    missing = missing_line(table)
    metrics = ""
    if table.mixed_metrics:
        metrics = (
            '<p class="legend">Members use different metrics ('
            + ", ".join(f"{_escape(c)}: {_escape(m)}" for c, m in table.column_metrics.items())
            + f"); the average joins only the {_escape(table.averaged_metric)} columns.</p>"
        )
    return [
        *([f"<h2>{_escape(table.title)}</h2>"] if table.title else []),
        *([metrics] if metrics else []),
        '<div class="scroll"><table class="sortable">',
        "<thead><tr>" + "".join(heads) + "</tr></thead>",
        "<tbody>",
        *body,
        "</tbody></table></div>",
        *([f'<p class="legend">{inline_markup(missing)}</p>'] if missing else []),
    ]


def _cost_cells(row: Any) -> list[str]:
    """`harness leaderboard --cost`: the row's cost (.cost), sortable by its number."""
    return [f'<td data-sort="{_escape(value)}">{_escape(value or "-")}</td>' for value in row_cost(row).fields()]


def _legend_html(entries: list[tuple[str, str]]) -> list[str]:
    if not entries:
        return []
    rows = "".join(
        f'<tr><td class="text">{_escape(label)}</td><td class="text spec">{_escape(spec)}</td></tr>'
        for label, spec in entries
    )
    return [
        "<h2>Short labels</h2>",
        '<table class="legend-table"><thead><tr><th class="text">label</th><th class="text">full spec</th></tr>'
        f"</thead><tbody>{rows}</tbody></table>",
    ]


def inline_markup(text: str) -> str:
    """A note's text as HTML: escaped, its markdown ``code`` and **strong** as tags (no literal backticks)."""
    import re

    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", _escape(text))
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def notes_html(notes: list[str]) -> str:
    """The notes under a table, as a list."""
    return '<ul class="notes">' + "".join(f"<li>{inline_markup(note)}</li>" for note in notes) + "</ul>"


def render_html_page(tables: Any, output_dir: Path | None = None) -> str:
    """A family's leaderboard (its sections) as one static, sortable HTML page (links relative to ``output_dir``):
    title, one caption line, the tables, then the notes."""
    sections = tables if isinstance(tables, list) else [tables]
    output_dir = Path(output_dir or ".")
    rows = [row for table in sections for row in table.rows]
    hardware = sorted({h for row in rows for h in row.hardware})
    columns = list(dict.fromkeys(c for table in sections for c in table.columns))
    # A backbone or profile shared by every row is said once in the caption instead of in every row.
    per_row = [name for name in PER_ROW if name not in shared_values(sections)]
    family = sections[0].family
    cell_texts = [
        text
        for table in sections
        for rank, row, average in table.ranked()
        for text in (
            *(table.cell_text(row, column) for column in table.columns),
            decorate(table, row, table.average_header, f"{average:.2f}") if average is not None else "",
        )
    ]
    facts = [("hardware", "; ".join(hardware) or "?"), ("models", str(len(rows))), ("tasks", ", ".join(columns))]
    body = [line for table in sections for line in _section_html(table, output_dir, per_row)]
    facts_html = "".join(f"<dt>{_escape(k)}</dt><dd>{_escape(v)}</dd>" for k, v in facts)
    notes = [
        "`-` = not run; `missing` = data not available when it ran; `failed` = the computation failed; `invalid` = "
        "the record does not verify (damaged or edited). The links under a value open each seed's record. Hover a "
        "model for its full spec, a marked cell for its marks, a failed cell for the reason. Average and rank only "
        "for complete rows, and only against rows of the same profile evaluated on the same tasks (one section "
        "each). Click a column header to sort.",
        *superseded_note(sections),
        *(
            line.replace("**bold**", "bold")
            for line in dict.fromkeys(line for table in sections for line in statistics_notes(table))
        ),
        *contamination_notes(sections),
        *([COST_NOTE] if any(t.show_cost for t in sections) else []),
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>Leaderboard: {_escape(family)}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            f"<h1>Leaderboard: {_escape(family)}</h1>",
            f'<p class="caption">{inline_markup(caption(sections, cell_texts))}</p>',
            *body,
            "<h2>Notes</h2>",
            notes_html(notes),
            f'<dl class="facts">{facts_html}</dl>',
            *_legend_html(legend_rows(sections)),
            "<footer>Generated by <code>harness leaderboard --formats html</code> from the result store; do not edit "
            "by hand.</footer>",
            f"<script>{_SCRIPT}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )


def render_html(tables: Table | list[Table], output_dir: Path | None = None) -> str:
    """A static, sortable page; record links are relative to ``output_dir``."""
    return render_html_page(sections_of(tables), output_dir)
