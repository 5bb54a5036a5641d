"""Thesis figure 6.4 (6.2): the density of the teacher's scores on each sampler's silver pairs against the density
of the gold scores, drawn from the silver-pair artifacts Augmented SBERT runs leave in the result store.

Registered as the ``plot`` component ``silver-density`` (``harness plot silver-density --results RESULTS``). It
reads the silver-pair artifacts (``<results>/artifacts/<model-key>/seed-<seed>/silver_pairs.json``, the core's
format :mod:`harness.nn.silver_pairs`, written by the ``augsbert`` recipe). One PNG per (gold source, teacher, mode);
seeds are pooled.

Deviations: densities are Gaussian KDEs with Scott's bandwidth (``scipy.stats.gaussian_kde``, the estimator the KDE
samplers reproduce); a series whose scores are all equal is drawn with a 1e-3 bandwidth instead of failing.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from harness import Component, HarnessError, hookimpl
from harness.blocks import read_silver_pairs

logger = logging.getLogger(__name__)

DEGENERATE_BANDWIDTH = 1e-3  # for a series of equal scores, where Scott's bandwidth is 0


def density(points: list[float], grid: np.ndarray) -> np.ndarray:
    """Gaussian KDE of ``points`` evaluated on ``grid`` (Scott's bandwidth)."""
    values = np.asarray(points, dtype=np.float64)
    if np.ptp(values) == 0:
        offsets = (grid[:, None] - values[None, :]) / DEGENERATE_BANDWIDTH
        return np.exp(-0.5 * offsets**2).sum(axis=1) / (len(values) * DEGENERATE_BANDWIDTH * np.sqrt(2 * np.pi))
    from scipy.stats import gaussian_kde

    return gaussian_kde(values)(grid)


def _series_label(artifact: dict) -> str:
    label = artifact["sampler"]
    if artifact.get("candidate_samplers"):
        label += f" ({artifact['candidate_samplers']} candidates)"
    if artifact.get("teacher_mlm"):
        label += " [MLM teacher]"
    return label


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "-" for c in text).strip("-")


def draw_silver_density(results_dir: Path, output_dir: Path) -> list[Path]:
    """Thesis figure 6.4: per gold source and teacher, the density of teacher scores on the silver pairs of each
    sampler (seeds pooled) against the density of the gold scores. One PNG per (gold source, teacher, mode)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    artifacts = read_silver_pairs(results_dir)
    if not artifacts:
        raise HarnessError(
            f"no silver-pair artifacts under {Path(results_dir) / 'artifacts'}; run a distilled model first, e.g. "
            "`harness run --models augsbert:teacher=cbe,sampler=kde-iterative --train-on bws-cross-topic --tasks "
            f"bws-cross-topic --results {results_dir}`."
        )
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for artifact in artifacts:
        groups.setdefault((artifact["gold_source"], artifact["teacher"], artifact["mode"]), []).append(artifact)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (gold_source, teacher, mode), members in sorted(groups.items()):
        series: dict[str, list[float]] = {}
        gold_scores: dict[int, list[float]] = {}
        for artifact in members:
            kept_scores = [row[2] for row in artifact["pairs"] if row[3]]
            series.setdefault(_series_label(artifact), []).extend(kept_scores)
            gold_scores.setdefault(artifact["seed"], artifact["gold_scores"])
        gold = [s for scores in gold_scores.values() for s in scores]
        everything = gold + [s for scores in series.values() for s in scores]
        if len(everything) < 2:
            logger.info("silver-density: too few scores for %s / %s / %s; no figure", gold_source, teacher, mode)
            continue
        grid = np.linspace(min(everything) - 0.1, max(everything) + 0.1, 400)
        figure, axes = plt.subplots(figsize=(7, 4.5))
        if len(gold) >= 2:  # unlabeled targets (domain transfer into plain sentences) have no gold scores
            axes.plot(grid, density(gold, grid), color="black", linewidth=2.5, label=f"gold ({len(gold)} pairs)")
        for label, scores in sorted(series.items()):
            if len(scores) >= 2:
                axes.plot(grid, density(scores, grid), linewidth=1.5, label=f"{label} ({len(scores)} pairs)")
        seeds = sorted({a["seed"] for a in members})
        axes.set_title(f"Silver-pair teacher scores vs gold: {gold_source}, teacher {teacher} ({mode})", fontsize=10)
        axes.set_xlabel("score (gold, or teacher score on silver pairs)")
        axes.set_ylabel(f"density (Gaussian KDE; seeds pooled: {', '.join(map(str, seeds))})")
        axes.legend(fontsize=8)
        figure.tight_layout()
        path = output_dir / f"silver-density-{_slug(gold_source)}-{_slug(teacher)}-{mode}.png"
        figure.savefig(path, dpi=120)
        plt.close(figure)
        written.append(path)
    return written


@hookimpl
def register_components(register):
    register(
        Component(
            "plot",
            "silver-density",
            draw_silver_density,
            "thesis figure 6.4: teacher-score density of each sampler's silver pairs vs the gold scores",
        )
    )
