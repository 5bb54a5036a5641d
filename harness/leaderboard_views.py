"""Leaderboards people would rather look at: one static HTML page per task family, and a bar chart per family.

Both are drawn from the same :class:`harness.leaderboard.Table` the markdown and CSV tables come from, so every
number agrees with them.

- :func:`render_html_page`: a single self-contained page (inline CSS and a few lines of JavaScript, nothing fetched):
  a header with the family's profile, backbone and hardware and how to read the cells; the table with sortable columns
  (click a header; numbers sort as numbers, empty cells last); each cell mean ± std over seeds with a link to every
  seed's record (relative to the page, so the links work in a checkout and on a static host); the best complete value
  of each column in bold.
- :func:`plot_leaderboards`: ``harness plot leaderboard`` (a ``plot`` component): one PNG per family,
  ``leaderboard-<family>.png``, a grouped bar chart of the main score per task (and the average) with one bar per
  model spec and error bars of the standard deviation over seeds (none for one seed).

Reference: none (presentation only). Deviations: none in the numbers (same Table as the markdown).
"""
from __future__ import annotations

import html
import logging
import os
from pathlib import Path
from typing import Any

from .leaderboard_stats import decorate, significance_bold
from .leaderboard_stats import notes as statistics_notes

logger = logging.getLogger(__name__)

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem; color: #1f2328; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; }
.facts { display: grid; grid-template-columns: max-content auto; gap: .15rem 1rem; margin: .75rem 0 1rem;
         font-size: .9rem; }
.facts dt { color: #59636e; } .facts dd { margin: 0; }
.legend { font-size: .85rem; color: #59636e; max-width: 70rem; }
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


def _best_values(table: Any) -> dict[str, float]:
    """Per column, the best mean among complete cells (higher is better for every main score)."""
    best: dict[str, float] = {}
    for row in table.rows:
        for column in table.columns:
            cell = row.cells.get(column)
            if cell is not None and cell.values and row.complete(column):
                best[column] = max(best.get(column, float("-inf")), cell.mean())
    return best


def _score_cell(table: Any, row: Any, column: str, best: dict[str, float], output_dir: Path) -> str:
    cell = row.cells.get(column)
    text = table.cell_text(row, column)
    records = getattr(cell, "records", {}) or {}
    links = "".join(f'<a href="{_escape(_link(records[seed], output_dir))}" title="record of seed {seed}">'
                    f"s{seed}</a>" for seed in sorted(records))
    if cell is None or not cell.values:  # the record of a missing or failed cell says why
        css = "failed" if text == "failed" else "status"
        seeds = f'<span class="seeds">{links}</span>' if links else ""
        return f'<td data-sort=""><span class="{css}">{_escape(text)}</span>{seeds}</td>'
    is_best = row.complete(column) and column in best and abs(cell.mean() - best[column]) < 1e-12
    significant = significance_bold(table, row, column)  # None: no per-example data to test with
    if significant is not None:  # bold only where significantly better than the runner-up (harness.leaderboard_stats)
        text, is_best = (text[2:-2] if significant else text), significant
    classes = ' class="best"' if is_best else ""
    seeds = f'<span class="seeds">{links}</span>' if links else ""
    return f'<td{classes} data-sort="{cell.mean():.6f}"><span class="value">{_escape(text)}</span>{seeds}</td>'


def render_html_page(table: Any, output_dir: Path | None = None) -> str:
    """The family's leaderboard as one static, sortable HTML page (links relative to ``output_dir``)."""
    output_dir = Path(output_dir or ".")
    best = _best_values(table)
    profiles = sorted({row.profile for row in table.rows})
    backbones = sorted({row.backbone for row in table.rows})
    hardware = sorted({h for row in table.rows for h in row.hardware})
    # A backbone or profile shared by every row is said once in the header instead of in every row.
    per_row = [name for name, values in (("backbone", backbones), ("profile", profiles)) if len(values) > 1]
    heads = ['<th class="text">rank</th>', '<th class="text">model</th>',
             *(f'<th class="text">{name}</th>' for name in per_row), '<th class="text">seeds</th>',
             *(f"<th>{_escape(column)}</th>" for column in table.columns), f"<th>{_escape(table.average_header)}</th>"]
    body = []
    for rank, row, average in table.ranked():
        model = ",<wbr>".join(_escape(part) for part in row.label.split(","))  # long specs may break after a comma
        cells = [
            f'<td class="text" data-sort="{rank if rank is not None else ""}">{rank or ""}</td>',
            f'<td class="text model" data-sort="{_escape(row.label)}">{model}</td>',
            *(f'<td class="text" data-sort="{_escape(getattr(row, name))}">{_escape(getattr(row, name))}</td>'
              for name in per_row),
            f'<td class="text" data-sort="{len(row.seeds)}">{_escape(",".join(map(str, sorted(row.seeds))))}</td>',
            *(_score_cell(table, row, column, best, output_dir) for column in table.columns),
            (f'<td data-sort="{average:.6f}"><strong>'
             f'{_escape(decorate(table, row, table.average_header, f"{average:.2f}").strip("*"))}</strong></td>'
             if average is not None
             else '<td data-sort=""><span class="status">incomplete</span></td>'),
        ]
        body.append("<tr>" + "".join(cells) + "</tr>")
    facts = [("profile", ", ".join(profiles)), ("backbone", ", ".join(backbones)),
             ("hardware", "; ".join(hardware) or "?"), ("models", str(len(table.rows))),
             ("tasks", ", ".join(table.columns))]
    return "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Leaderboard: {_escape(table.family)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>Leaderboard: {_escape(table.family)}</h1>",
        '<dl class="facts">' + "".join(f"<dt>{_escape(k)}</dt><dd>{_escape(v)}</dd>" for k, v in facts) + "</dl>",
        '<p class="legend">Cells: main score x100, mean ± std over seeds; the links under a value open each seed\'s '
        "record. <code>*</code> = not every seed of the row has this cell; <code>-</code> = not run; "
        "<code>missing</code> = data not available when it ran; <code>failed</code> = the computation failed. "
        "Average and rank only for complete rows; the best complete value of each column is bold. Click a column "
        "header to sort.</p>",
        *(f'<p class="legend">{_escape(line.replace("**bold**", "bold"))}</p>' for line in statistics_notes(table)),
        '<div class="scroll"><table class="sortable">',
        "<thead><tr>" + "".join(heads) + "</tr></thead>",
        "<tbody>",
        *body,
        "</tbody></table></div>",
        "<footer>Generated by <code>harness leaderboard --formats html</code> from the result store; do not edit "
        "by hand.</footer>",
        f"<script>{_SCRIPT}</script>",
        "</body>",
        "</html>",
        "",
    ])


def plot_table(table: Any, path: Path) -> Path:
    """A grouped bar chart of one family: per task (and the average) one bar per model, std over seeds as error
    bars; written as a PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ranked = [(rank, row, average) for rank, row, average in table.ranked()]
    columns = [*table.columns, table.average_header]
    width = 0.8 / max(len(ranked), 1)
    figure, axes = plt.subplots(figsize=(max(8.0, 1.1 * len(columns) + 0.35 * len(ranked) * len(columns) / 3),
                                         5.0 + 0.22 * len(ranked)))
    colors = plt.get_cmap("tab10" if len(ranked) <= 10 else "tab20")
    values = [cell.mean() for _, row, _ in ranked for cell in row.cells.values() if cell.values]
    low, high = (min(values), max(values)) if values else (0.0, 100.0)
    bottom = max(0.0, low - 0.15 * (high - low + 1.0) - 2.0)
    without_value: list[tuple[float, str]] = []  # (x, why) of bars that have no number
    for index, (_, row, average) in enumerate(ranked):
        means, errors = [], []
        for column in table.columns:
            cell = row.cells.get(column)
            has = cell is not None and bool(cell.values)
            means.append(cell.mean() if has else np.nan)
            errors.append(cell.std() if has and len(cell.values) > 1 else 0.0)
        means.append(average if average is not None else np.nan)
        errors.append(0.0)
        positions = np.arange(len(columns)) + (index - (len(ranked) - 1) / 2) * width
        for position, column, mean in zip(positions, columns, means):
            if np.isnan(mean):
                why = "incomplete" if column == table.average_header else table.cell_text(row, column)
                without_value.append((position, why))
        axes.bar(positions, means, width, yerr=errors, capsize=2, label=row.label, color=colors(index % colors.N),
                 error_kw={"elinewidth": 0.8})
    axes.set_xlim(-0.5, len(columns) - 0.5)
    axes.set_xticks(np.arange(len(columns)))
    axes.set_xticklabels(columns, rotation=30, ha="right")
    axes.set_ylabel("main score x100, mean ± std over seeds" + (f" (axis from {bottom:.0f})" if bottom > 0 else ""))
    axes.set_ylim(bottom, min(100.0, high + 0.1 * (high - low) + 2.0))
    for position, why in without_value:  # say why a bar is absent instead of leaving a silent gap
        axes.text(position, bottom + 0.01 * (high - bottom + 1.0), why, rotation=90, ha="center", va="bottom",
                  fontsize=7, color="#59636e")
    hardware = sorted({h for row in table.rows for h in row.hardware})
    axes.set_title(f"Leaderboard: {table.family}  (profile {', '.join(sorted({r.profile for r in table.rows}))}; "
                   f"{'; '.join(hardware)})", fontsize=10)
    axes.grid(axis="y", alpha=0.3)
    longest = max((len(row.label) for _, row, _ in ranked), default=0)
    axes.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1 if longest > 45 else 2,
                frameon=False)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")  # the legend under the axes is part of the picture
    plt.close(figure)
    return path


def plot_leaderboards(results_dir: Path, output_dir: Path) -> list[Path]:
    """``harness plot leaderboard``: ``leaderboard-<family>.png`` per family of the store at ``results_dir``."""
    from .leaderboard import collect_tables, table_path
    from .store import Store

    try:  # the registry only orders the columns as the families register their tasks
        from .registry import default_registry

        family_members = default_registry().families()
    except Exception:  # noqa: BLE001 - a broken plugin must not stop a plot of stored numbers
        family_members = {}
    tables = collect_tables(Store(results_dir), family_members)
    written = []
    for table in tables:
        target = table_path(Path(output_dir), table.family, "png")
        written.append(plot_table(table, target.with_name(f"leaderboard-{target.name}")))
    return written
