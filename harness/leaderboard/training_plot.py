"""`harness plot training`: the training curves of a store's trained models (harness.curves), one panel per model
(spec and training source), seeds overlaid in colours: each seed's per-step loss faint, its running mean solid, the
terms of a combined objective in their own line styles, and the dev scores as circles on the right-hand axis."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..files import atomic_write_file

FILE_NAME = "training-curves.png"
PANEL_INCHES = (5.2, 3.4)
COLUMNS = 3
TERM_STYLES = (":", "--", "-.", (0, (1, 4)))  # the terms of a combined objective, by line style


def smoothed(values: list[float]) -> list[float]:
    """The running mean over a window of about a twentieth of the curve (at least 1 point), so a noisy per-step loss
    shows its trend; the first points average what there is."""
    window = max(1, len(values) // 20)
    out, total = [], 0.0
    for index, value in enumerate(values):
        total += value
        if index >= window:
            total -= values[index - window]
        out.append(total / min(index + 1, window))
    return out


def plot_training_curves(frame: Any, path: Path) -> Path:
    """Draw :func:`harness.curves.load_training_curves`'s ``frame`` into the PNG ``path``; returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    panels = list(frame.groupby(["model", "train_on", "model_key"], sort=True, dropna=False))
    columns = min(COLUMNS, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(
        rows, columns, figsize=(PANEL_INCHES[0] * columns, PANEL_INCHES[1] * rows + 0.5), squeeze=False
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = [(model, train_on) for (model, train_on, _), _ in panels]
    for axis, ((model, train_on, key), panel) in zip(axes.flat, panels):
        dev_axis = None
        seeds = sorted(panel["seed"].unique())
        terms = [term for term in dict.fromkeys(panel.loc[panel["kind"] == "loss", "term"]) if term != "loss"]
        styles = {term: TERM_STYLES[number % len(TERM_STYLES)] for number, term in enumerate(terms)}
        for number, seed in enumerate(seeds):
            colour = colours[number % len(colours)]
            for fit, part in panel[panel["seed"] == seed].groupby("fit"):
                faded = 1.0 if fit == 0 else 0.5  # seed trials and stages after the first fit
                for term, series in part[part["kind"] == "loss"].groupby("term", sort=False):
                    series = series.sort_values("step")
                    values = series["value"].tolist()
                    if term == "loss":  # each step faint, its running mean solid
                        axis.plot(series["step"], values, color=colour, alpha=0.2 * faded, linewidth=0.8)
                        axis.plot(series["step"], smoothed(values), color=colour, alpha=faded, linewidth=1.8)
                    else:
                        axis.plot(
                            series["step"],
                            smoothed(values),
                            color=colour,
                            alpha=0.8 * faded,
                            linewidth=1.2,
                            linestyle=styles[term],
                        )
                dev = part[part["kind"] == "dev"].sort_values("step")
                if len(dev):
                    dev_axis = dev_axis or axis.twinx()
                    dev_axis.plot(
                        dev["step"], dev["value"], color=colour, marker="o", markersize=4, linewidth=0.8, alpha=faded
                    )
        # two specs of one label and source (e.g. other backbones) are told apart by their model key
        twin = f" ({key})" if names.count((model, train_on)) > 1 else ""
        axis.set_title(f"{model}{twin}\ntrained on {train_on}", fontsize=10)
        axis.set_xlabel("optimiser step", fontsize=9)
        axis.set_ylabel("training loss (solid: running mean)", fontsize=9)
        axis.tick_params(labelsize=8)
        axis.grid(alpha=0.3)
        if dev_axis is not None:
            dev_axis.set_ylabel("dev score (circles)", fontsize=9)
            dev_axis.tick_params(labelsize=8)
        # one legend entry per seed (colour), per term (line style) and for the dev score, under the panel
        handles = [Line2D([], [], color=colours[n % len(colours)], linewidth=1.8) for n in range(len(seeds))]
        labels = [f"seed {seed}" for seed in seeds]
        handles += [Line2D([], [], color="grey", linestyle=styles[term], linewidth=1.2) for term in terms]
        labels += [f"term {term}" for term in terms]
        if dev_axis is not None:
            handles.append(Line2D([], [], color="grey", marker="o", markersize=4, linewidth=0.8))
            labels.append("dev score")
        if panel["fit"].max() > 0:
            labels[0] += " (faded: later fits)"
        axis.legend(
            handles,
            labels,
            fontsize=7,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.2),
            ncol=min(4, len(handles)),
            frameon=False,
        )
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    figure.tight_layout()
    try:
        atomic_write_file(Path(path), lambda temporary: figure.savefig(temporary, dpi=110, format="png"))
    finally:
        plt.close(figure)
    return Path(path)
