"""``harness plot leaderboard`` (a ``plot`` component): one PNG per task family, ``leaderboard-<family>.png``.

Small multiples: one panel per task (and one average panel per set of averaged tasks: averages over different tasks
never share a panel), one horizontal bar per model spec labelled on the shared y axis (legible at any number of
rows: no colour has to be matched to a legend), error bars of the intervals the tables show (the 95% bootstrap
interval where there is one, else the std over seeds), the tables' marks for "best" (harness.leaderboard.stats
.cell_mark) on the values, an axis that does not start at zero labelled as cut, bars coloured by section. Drawn from
the same tables as the markdown.

Reference: none (presentation only). Deviations: none in the numbers (same Table as the markdown).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from ..store import Store
from .stats import (
    BEST_SIGNIFICANT,
    BEST_UNTESTED,
    TIED,
    TIED_WITH_BEST,
    TOO_FEW,
    TOO_FEW_SEEDS_MARK,
    UNTESTED,
    attach_statistics,
    cell_mark,
)
from .tables import CELL_MARKS, collect_tables, group_by_family, table_path

AVERAGE = "average"
# as the tables write them (bold is drawn as a bold value)
MARK_SUFFIX = {TIED_WITH_BEST: f" {TIED}", BEST_UNTESTED: f" {UNTESTED}", TOO_FEW_SEEDS_MARK: f" {TOO_FEW}"}


def value_marks(table: Any, row: Any, column: str, mark: str) -> str:
    """Every mark a table's cell carries after its number, for a plot's value label: the significance mark
    (:data:`MARK_SUFFIX`) and, for a task column, the cell annotators' (``*`` not every seed, ``†``/``‡`` seen in
    training), so a plot never drops a mark the tables show."""
    suffix = MARK_SUFFIX.get(mark, "")
    cell = row.cells.get(column) if column in table.columns else None
    if cell is not None:
        suffix += "".join(
            (text if text.startswith(" ") else " " + text)
            for annotate in CELL_MARKS
            if (text := annotate(row, column, cell))
        )
    return suffix


def plot_table(tables: Any, path: Path) -> Path:
    """Small multiples of one family (see the module docstring): one panel per task and per averaged task set, one
    horizontal bar per row, the tables' intervals as error bars and their marks on the values; a PNG at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sections = tables if isinstance(tables, list) else [tables]
    for table in sections:
        if table.statistics is None:
            attach_statistics(table)  # the intervals and marks the tables show
    ordered = [(table, rank, row, average) for table in sections for rank, row, average in table.ranked()]
    # An average is only comparable across rows averaged over the same tasks: one panel per task set.
    task_sets = list(dict.fromkeys(tuple(table.averaged_columns) for table in sections))
    averages = [(AVERAGE, task_set) for task_set in task_sets]
    columns = [*((c, None) for c in dict.fromkeys(c for table in sections for c in table.columns)), *averages]
    count = len(ordered)
    height = 1.6 + 0.24 * count + (0.3 * len(sections) if len(sections) > 1 else 0)
    longest = max((len(row.label) for _, _, row, _ in ordered), default=10)
    figure, axes = plt.subplots(
        1,
        len(columns),
        sharey=True,
        squeeze=False,
        figsize=(min(2.0 + 0.065 * longest + 1.9 * len(columns), 26.0), height),
    )
    palette = plt.get_cmap("tab10")
    positions = np.arange(count)[::-1]
    for panel, (column, task_set) in zip(axes[0], columns):
        bars = panel_bars(sections, ordered, column, task_set)
        means = [bar[0] for bar in bars]
        errors = [bar[1] for bar in bars]
        notes = [bar[2] for bar in bars]
        marks = [bar[3] for bar in bars]
        colours = [palette(sections.index(table) % 10) for table, _, _, _ in ordered]
        xerr = np.array(errors, dtype=float).T  # row 0: below the mean, row 1: above (the tables' interval)
        panel.barh(positions, means, xerr=xerr, color=colours, height=0.75, error_kw={"elinewidth": 0.8}, capsize=1.5)
        finite = [m for m in means if not np.isnan(m)]
        low, high = (min(finite), max(finite)) if finite else (0.0, 100.0)
        left = max(0.0, low - 0.25 * (high - low + 1.0) - 2.0) if low >= 0 else low - 0.1 * (high - low + 1.0)
        panel.set_xlim(left, min(100.0, high + 0.08 * (high - low + 1.0) + 1.0) + 0.18 * (high - left))
        if left > 0:  # a cut axis is said, never silent: bars do not start at zero
            panel.set_xlabel(f"axis cut: starts at {left:.0f}, not 0", fontsize=6, color="#b3261e")
            panel.spines["left"].set_linestyle((0, (2, 2)))
        for position, value, (_, above), note, mark, (table, _, row, _) in zip(
            positions, means, errors, notes, marks, ordered
        ):
            if np.isnan(value) and note:  # say why a bar is absent instead of leaving a silent gap
                panel.text(left, position, f" {note}", va="center", fontsize=7, color="#59636e")
            elif not np.isnan(value):  # the number itself (with the tables' mark), so nobody reads it off the axis
                panel.text(
                    value + above,
                    position,
                    f" {value:.1f}" + value_marks(table, row, column, mark),
                    va="center",
                    fontsize=6,
                    color="#1f2328",
                    fontweight="bold" if mark == BEST_SIGNIFICANT else "normal",
                )
        title = column
        if column == AVERAGE:
            title = "average" + (f"\nof {len(task_set)} tasks" if len(task_sets) > 1 else "\n(of the row's section)")
        panel.set_title(title, fontsize=8)
        panel.tick_params(axis="x", labelsize=7)
        panel.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(positions)
    axes[0][0].set_yticklabels([row.label for _, _, row, _ in ordered], fontsize=7)
    axes[0][0].set_ylim(-0.6, count - 0.4)
    from matplotlib.patches import Patch

    handles = [Patch(color=palette(i % 10), label=table.title) for i, table in enumerate(sections) if len(sections) > 1]
    # What a short label stands for, so the picture reads without the markdown legend.
    handles += [
        Patch(color="none", label=textwrap.fill(f"{mark} = {spec}", 160, subsequent_indent="    "))
        for mark, spec in sections[0].legend.items()
    ]
    if handles:
        figure.legend(
            handles=handles,
            loc="upper center",
            ncol=1,
            fontsize=7,
            frameon=False,
            bbox_to_anchor=(0.5, 0.0),
            handlelength=1.0,
        )
    hardware = sorted({h for _, _, row, _ in ordered for h in row.hardware})
    family = sections[0].family
    figure.suptitle(
        f"Leaderboard: {family}  (main score x100, mean over seeds; error bars: the tables' 95% "
        "bootstrap interval where there is one, else ± std over seeds; bold: best and significantly "
        f"better than the runner-up, {TIED}: tied with the best, {UNTESTED}: best, untested;\n"
        f"profile {', '.join(sorted({r.profile for _, _, r, _ in ordered}))}; {'; '.join(hardware)})",
        fontsize=9,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")  # the section legend under the panels is part of the picture
    plt.close(figure)
    return path


def panel_bars(
    sections: list[Any], ordered: list[tuple], column: str, task_set: tuple[str, ...] | None
) -> list[tuple[float, tuple[float, float], str, str]]:
    """Per row of ``ordered`` ((table, rank, row, average), as drawn top-down) in one panel: (value or NaN, error
    below and above, why there is no bar, the tables' mark). ``column`` is a task, or :data:`AVERAGE` over
    ``task_set`` (rows averaged over other tasks get no bar in that panel)."""
    import numpy as np

    bars = []
    for table, _, row, average in ordered:
        header = table.average_header if column == AVERAGE else column
        if (column == AVERAGE and tuple(table.averaged_columns) != task_set) or (
            column != AVERAGE and column not in table.columns
        ):
            bars.append((np.nan, (0.0, 0.0), "", ""))
            continue
        if column == AVERAGE:
            value, note = (average, "") if average is not None else (np.nan, "incomplete")
            error = _error(table, row, header, value, None)
        else:
            cell = row.cells.get(column)
            has = cell is not None and bool(cell.values)
            value = cell.mean() if has else np.nan
            error = _error(table, row, column, value, cell) if has else (0.0, 0.0)
            note = "" if has else table.cell_text(row, column)
        bars.append((value, error, note, cell_mark(table, row, header) if not np.isnan(value) else ""))
    return bars


def _error(table: Any, row: Any, column: str, value: float, cell: Any) -> tuple[float, float]:
    """(below, above) the mean: the cell's 95% bootstrap interval where the tables show one, else the std over
    seeds the tables show as ± (none for one seed or an average without an interval)."""
    statistics = table.statistics
    interval = statistics.cells.get((row.key, column)) if statistics is not None else None
    if interval is not None:
        low, high = interval.interval
        return max(0.0, value - low), max(0.0, high - value)
    spread = cell.std() if cell is not None and len(cell.values) > 1 else 0.0
    return spread, spread


def plot_leaderboards(
    results_dir: Path,
    output_dir: Path,
    family_members: dict[str, list[str]] | None = None,
    hidden: tuple[str, ...] = (),
) -> list[Path]:
    """``leaderboard-<family>.png`` per family of the store at ``results_dir``; ``family_members`` (the registry's
    families, handed in by whoever registers this plot) only orders the columns; the models of ``hidden`` (the
    superseded ones) are left out, as the tables leave them out by default."""
    tables = collect_tables(Store(results_dir), family_members or {}, hidden=hidden)
    written = []
    for family, sections in group_by_family(tables).items():
        target = table_path(Path(output_dir), family, "png")
        written.append(plot_table(sections, target.with_name(f"leaderboard-{target.name}")))
    return written
