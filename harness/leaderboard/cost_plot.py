"""``harness plot cost`` (a ``plot`` component): per task family, ``cost-<family>.png``: quality against cost, one
point per leaderboard row, the Pareto front marked.

Quality is the row's average as the tables compute it (complete rows only); cost is what the row's records measured
(harness.leaderboard.cost): evaluation wall time, training wall time and parameter count, one panel each. A point is
on the Pareto front of its section when no other row of the section is at least as good in quality and at most as
costly, and better in one of them; front points are filled and joined by a step line, the others hollow. Rows
whose records predate cost measurement are left out (the title says how many). Times are of the machine the title
names.

Reference: none (presentation only). Deviations: none in the numbers (the tables' rows and averages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import HarnessError
from ..files import atomic_write_file
from ..store import Store
from .cost import row_cost
from .tables import collect_tables, group_by_family, table_path

# (panel title, RowCost attribute, axis label, log axis)
PANELS = (
    ("evaluation time", "evaluation_seconds", "evaluation wall time of the row's cells (s)", True),
    ("training time", "training_seconds", "training wall time of its checkpoint (s; 0: untrained)", False),
    ("size", "parameters_millions", "parameters (millions)", False),
)


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points (cost, quality) no other point dominates (at most the cost and at least the quality,
    better in one), ordered by cost."""
    front = []
    for index, (cost, quality) in enumerate(points):
        dominated = any(
            other_cost <= cost and other_quality >= quality and (other_cost < cost or other_quality > quality)
            for other_cost, other_quality in points
        )
        if not dominated:
            front.append(index)
    return sorted(front, key=lambda i: points[i])


def plot_cost(results_dir: Path, output_dir: Path, family_members: dict[str, list[str]] | None = None) -> list[Path]:
    """``cost-<family>.png`` for every family with rows whose records carry cost; HarnessError when none does."""
    store = Store(results_dir)
    tables = collect_tables(store, family_members or {}, include_samples=True)
    written = []
    for family, sections in group_by_family(tables).items():
        path = table_path(Path(output_dir), family, "png")
        drawn = plot_family(sections, path.with_name(f"cost-{path.name}"))
        if drawn is not None:
            written.append(drawn)
    if not written:
        raise HarnessError(
            f"no record in {results_dir} says what its cell cost (records written before harness measured cost, "
            "e.g. most of published/, have none); run `harness run` into a store and plot that store with --results."
        )
    return written


def plot_family(sections: list[Any], path: Path) -> Path | None:
    """The family's cost plot at ``path``, or None when none of its rows has cost."""
    points = []  # (section index, label, average, RowCost)
    left_out = 0
    for number, table in enumerate(sections):
        for _, row, average in table.ranked():
            cost = row_cost(row)
            if average is None or cost.evaluation_seconds is None:
                left_out += 1
                continue
            points.append((number, row.label, average, cost))
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(PANELS), figsize=(5.2 * len(PANELS), 4.6), squeeze=False)
    palette = plt.get_cmap("tab10")
    for panel, (title, attribute, label, log) in zip(axes[0], PANELS):
        for number in range(len(sections)):
            mine = [(p[1], p[2], getattr(p[3], attribute)) for p in points if p[0] == number]
            mine = [(name, quality, cost) for name, quality, cost in mine if cost is not None]
            if not mine:
                continue
            colour = palette(number % 10)
            front = set(pareto_front([(cost, quality) for _, quality, cost in mine]))
            for index, (name, quality, cost) in enumerate(mine):
                on_front = index in front
                panel.scatter(
                    [cost],
                    [quality],
                    s=36,
                    facecolors=colour if on_front else "none",
                    edgecolors=colour,
                    zorder=3,
                )
                panel.annotate(
                    name,
                    (cost, quality),
                    textcoords="offset points",
                    xytext=(4, 3),
                    fontsize=6.5,
                    color="#1f2328" if on_front else "#59636e",
                )
            ordered = sorted((mine[i][2], mine[i][1]) for i in front)
            if len(ordered) > 1:
                panel.step(
                    [c for c, _ in ordered],
                    [q for _, q in ordered],
                    where="post",
                    color=colour,
                    linewidth=1.0,
                    alpha=0.7,
                    label=f"Pareto front{f' (section {number + 1})' if len(sections) > 1 else ''}",
                )
        values = [getattr(p[3], attribute) for p in points if getattr(p[3], attribute) is not None]
        if log and values and min(values) > 0 and max(values) / min(values) >= 20:  # a log axis only for wide ranges
            panel.set_xscale("log")
        panel.set_xlabel(label, fontsize=8)
        panel.set_ylabel("average main score x100 (higher is better)", fontsize=8)
        panel.set_title(f"quality vs {title}", fontsize=9)
        panel.tick_params(labelsize=7)
        panel.grid(alpha=0.3)
        if panel.get_legend_handles_labels()[0]:
            panel.legend(fontsize=6.5, loc="lower right")
    hardware = sorted({p[3].measured_on for p in points})
    family = sections[0].family
    skipped = f"; {left_out} row(s) without cost or average left out" if left_out else ""
    figure.suptitle(
        f"Cost: {family}  (filled: on the Pareto front of its section, no row is better and cheaper; "
        f"measured on {'; '.join(hardware)}{skipped})",
        fontsize=9,
    )
    sections_text = "; ".join(
        f"section {number + 1}: {table.title}" if len(sections) > 1 else table.title
        for number, table in enumerate(sections)
        if table.title
    )
    if sections_text:  # which rows each front ranks, under the panels
        figure.text(0.5, -0.01, sections_text, ha="center", va="top", fontsize=7, wrap=True)
    figure.tight_layout()
    atomic_write_file(path, lambda target: figure.savefig(target, format="png", dpi=110, bbox_inches="tight"))
    plt.close(figure)
    return path
