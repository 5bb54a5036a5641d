"""``harness plot leaderboard`` (a ``plot`` component): one PNG per task family, ``leaderboard-<family>.png``.

Small multiples: one panel per task (and the average), one horizontal bar per model spec labelled on the shared y
axis (legible at any number of rows: no colour has to be matched to a legend), error bars of the standard deviation
over seeds (none for one seed), bars coloured by section. Drawn from the same tables as the markdown.

Reference: none (presentation only). Deviations: none in the numbers (same Table as the markdown).
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from ..store import Store
from .tables import collect_tables, group_by_family, table_path


def plot_table(tables: Any, path: Path) -> Path:
    """Small multiples of one family: one panel per task (and the section average), one horizontal bar per row
    (labelled on the shared y axis, so no colour legend is needed), std over seeds as error bars, bars coloured by
    section; written as a PNG to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    sections = tables if isinstance(tables, list) else [tables]
    ordered = [(table, rank, row, average) for table in sections for rank, row, average in table.ranked()]
    columns = [*dict.fromkeys(c for table in sections for c in table.columns), "average"]
    count = len(ordered)
    height = 1.6 + 0.24 * count + (0.3 * len(sections) if len(sections) > 1 else 0)
    longest = max((len(row.label) for _, _, row, _ in ordered), default=10)
    figure, axes = plt.subplots(1, len(columns), sharey=True, squeeze=False,
                                figsize=(min(2.0 + 0.065 * longest + 1.9 * len(columns), 26.0), height))
    palette = plt.get_cmap("tab10")
    positions = np.arange(count)[::-1]
    for panel, column in zip(axes[0], columns):
        means, errors, colours, notes = [], [], [], []
        for (table, _, row, average), _position in zip(ordered, positions):
            section = sections.index(table)
            colours.append(palette(section % 10))
            if column == "average":
                value, error = (average, 0.0) if average is not None else (np.nan, 0.0)
                note = "" if average is not None else "incomplete"
            elif column not in table.columns:
                value, error, note = np.nan, 0.0, ""
            else:
                cell = row.cells.get(column)
                has = cell is not None and bool(cell.values)
                value = cell.mean() if has else np.nan
                error = cell.std() if has and len(cell.values) > 1 else 0.0
                note = "" if has else table.cell_text(row, column)
            means.append(value)
            errors.append(error)
            notes.append(note)
        panel.barh(positions, means, xerr=errors, color=colours, height=0.75, error_kw={"elinewidth": 0.8},
                   capsize=1.5)
        finite = [m for m in means if not np.isnan(m)]
        low, high = (min(finite), max(finite)) if finite else (0.0, 100.0)
        left = max(0.0, low - 0.25 * (high - low + 1.0) - 2.0)
        panel.set_xlim(left, min(100.0, high + 0.08 * (high - low + 1.0) + 1.0) + 0.18 * (high - left))
        for position, value, error, note in zip(positions, means, errors, notes):
            if np.isnan(value) and note:  # say why a bar is absent instead of leaving a silent gap
                panel.text(left, position, f" {note}", va="center", fontsize=7, color="#59636e")
            elif not np.isnan(value):  # the number itself, so nobody has to read it off the axis
                panel.text(value + error, position, f" {value:.1f}", va="center", fontsize=6, color="#1f2328")
        panel.set_title(column if column != "average" else "average\n(of the row's section)", fontsize=8)
        panel.tick_params(axis="x", labelsize=7)
        panel.grid(axis="x", alpha=0.3)
    axes[0][0].set_yticks(positions)
    axes[0][0].set_yticklabels([row.label for _, _, row, _ in ordered], fontsize=7)
    axes[0][0].set_ylim(-0.6, count - 0.4)
    from matplotlib.patches import Patch

    handles = [Patch(color=palette(i % 10), label=table.title) for i, table in enumerate(sections)
               if len(sections) > 1]
    # What a short label stands for, so the picture reads without the markdown legend.
    handles += [Patch(color="none", label=textwrap.fill(f"{mark} = {spec}", 160, subsequent_indent="    "))
                for mark, spec in sections[0].legend.items()]
    if handles:
        figure.legend(handles=handles, loc="upper center", ncol=1, fontsize=7, frameon=False,
                      bbox_to_anchor=(0.5, 0.0), handlelength=1.0)
    hardware = sorted({h for _, _, row, _ in ordered for h in row.hardware})
    family = sections[0].family
    figure.suptitle(f"Leaderboard: {family}  (main score x100, mean ± std over seeds; "
                    f"profile {', '.join(sorted({r.profile for _, _, r, _ in ordered}))}; {'; '.join(hardware)})",
                    fontsize=9)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110, bbox_inches="tight")  # the section legend under the panels is part of the picture
    plt.close(figure)
    return path



def plot_leaderboards(results_dir: Path, output_dir: Path,
                      family_members: dict[str, list[str]] | None = None) -> list[Path]:
    """``leaderboard-<family>.png`` per family of the store at ``results_dir``; ``family_members`` (the registry's
    families, handed in by whoever registers this plot) only orders the columns."""
    tables = collect_tables(Store(results_dir), family_members or {})
    written = []
    for family, sections in group_by_family(tables).items():
        target = table_path(Path(output_dir), family, "png")
        written.append(plot_table(sections, target.with_name(f"leaderboard-{target.name}")))
    return written
