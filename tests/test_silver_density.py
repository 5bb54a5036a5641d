"""The ``silver-density`` plot (plugins/silver_density.py, thesis figure 6.4) on hand-written silver-pair artifacts:
its densities, one figure per (gold source, teacher, mode), and what it says when there is nothing to draw."""

from __future__ import annotations

import numpy as np
import pytest

from harness import HarnessError
from harness.nn.silver_pairs import write_silver_pairs
from harness.plugins.silver_density import density, draw_silver_density


def _artifact(
    results,
    key,
    seed,
    sampler,
    mode="semi-supervised",
    teacher="cbe",
    gold_scores=(0.1, 0.5, 0.9),
    scores=(0.2, 0.4, 0.6, 0.8),
    kept=(0, 1, 2),
):
    folder = results / "artifacts" / key / f"seed-{seed}"
    folder.mkdir(parents=True)
    fields = {
        "gold_source": "stsb",
        "teacher": teacher,
        "mode": mode,
        "sampler": sampler,
        "seed": seed,
        "sentences": ["a", "b", "c", "d", "e"],
        "gold_scores": list(gold_scores),
    }
    pairs = [(0, 1), (1, 2), (2, 3), (3, 4)][: len(scores)]
    return write_silver_pairs(folder, fields, pairs, scores, kept)


def test_density_is_a_density_even_for_equal_scores():
    grid = np.linspace(-1, 2, 3001)
    step = grid[1] - grid[0]
    spread = density([0.2, 0.4, 0.5, 0.9], grid)
    assert spread.sum() * step == pytest.approx(1.0, abs=0.02)
    equal = density([0.5, 0.5, 0.5], grid)  # Scott's bandwidth would be 0: a narrow fixed bandwidth instead
    assert np.isfinite(equal).all() and grid[np.argmax(equal)] == pytest.approx(0.5, abs=step)
    assert equal.sum() * step == pytest.approx(1.0, abs=0.02)


def test_one_figure_per_gold_source_teacher_and_mode_with_seeds_pooled(tmp_path):
    results = tmp_path / "results"
    _artifact(results, "model-a", 42, "bm25")
    _artifact(results, "model-a", 43, "bm25")  # pooled with seed 42 in one figure
    _artifact(results, "model-b", 42, "kde")
    _artifact(results, "model-c", 42, "bm25", mode="self-distillation")
    written = draw_silver_density(results, tmp_path / "plots")
    assert sorted(path.name for path in written) == [
        "silver-density-stsb-cbe-self-distillation.png",
        "silver-density-stsb-cbe-semi-supervised.png",
    ]
    assert all(path.read_bytes().startswith(b"\x89PNG") for path in written)


def test_too_few_scores_draw_nothing(tmp_path):
    results = tmp_path / "results"
    _artifact(results, "model-a", 42, "bm25", gold_scores=(), scores=(0.3,), kept=(0,))
    assert draw_silver_density(results, tmp_path / "plots") == []


def test_no_artifacts_says_what_to_run(tmp_path):
    with pytest.raises(HarnessError, match="no silver-pair artifacts.*harness run --models augsbert"):
        draw_silver_density(tmp_path / "empty", tmp_path / "plots")


def test_it_is_the_plot_component_silver_density(registry):
    assert registry.component("plot", "silver-density") is draw_silver_density
