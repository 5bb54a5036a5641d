"""Paired significance of the difference between two models on the same test examples (issue #25).

:func:`paired_test`: the paired bootstrap (Efron & Tibshirani 1993, ch. 16; Koehn 2004 for NLP): both models' scores
are recomputed on the same ``resamples`` resamples of the test examples (:func:`harness.evaluation.bootstrap.
bootstrap_indices`); the difference's 95% interval is the percentile interval of the replicated differences, and the
two-sided p-value is that of the bootstrap distribution shifted to the null (difference 0):
``p = (1 + #{|d* - d| >= |d|}) / (resamples + 1)``. Seeds are pooled as the design allows: each model's score is
the mean over its seeds, every seed resampled with the same examples, so seed noise and example noise both enter.

:func:`holm` adjusts the p-values of several tasks (Holm 1979). :func:`column_marks` is what a leaderboard column
needs: which row is best, whether it is significantly better than the runner-up, and which rows cannot be told
apart from the best (p >= alpha, uncorrected within a column). :func:`agrees_with_paper` says whether our difference
between two rows has the paper's sign and is significant (the paper-table view calls it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .bootstrap import (
    CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    ExampleScores,
    check_same_examples,
    percentile_interval,
    resample_chunks,
)

ALPHA = 0.05


@dataclass(frozen=True)
class PairedResult:
    """``a`` minus ``b`` on the same test examples (scores x100, seed means)."""

    score_a: float
    score_b: float
    difference: float
    low: float
    high: float
    p_value: float
    examples: int
    seeds_a: int
    seeds_b: int

    def as_dict(self) -> dict:
        return {"score_a": self.score_a, "score_b": self.score_b, "difference": self.difference,
                "interval": [self.low, self.high], "p_value": self.p_value, "examples": self.examples,
                "seeds_a": self.seeds_a, "seeds_b": self.seeds_b}


def paired_replicates(a: Sequence[ExampleScores], b: Sequence[ExampleScores], resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Both models' seed-mean replicates on the same resamples: ``([resamples], [resamples])``."""
    if not a or not b:
        raise ValueError("each model needs at least one result with per-example data")
    check_same_examples([*a, *b])
    replicates_a, replicates_b = [], []
    for block in resample_chunks(a[0], resamples, seed):
        replicates_a.append(np.mean([data.resampled(block) for data in a], axis=0))
        replicates_b.append(np.mean([data.resampled(block) for data in b], axis=0))
    return np.concatenate(replicates_a), np.concatenate(replicates_b)


def p_from_replicates(observed: float, replicates: np.ndarray) -> float:
    """Two-sided p-value of ``observed`` difference against its bootstrap replicates shifted to the null."""
    extreme = np.count_nonzero(np.abs(replicates - observed) >= abs(observed) - 1e-12)
    return float((1 + extreme) / (len(replicates) + 1))


def paired_test(a: Sequence[ExampleScores], b: Sequence[ExampleScores], resamples: int = DEFAULT_RESAMPLES,
                seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE) -> PairedResult:
    """Paired bootstrap test of mean(a) - mean(b) over seeds, on the same test examples."""
    replicates_a, replicates_b = paired_replicates(a, b, resamples, seed)
    score_a = float(np.mean([data.value() for data in a]))
    score_b = float(np.mean([data.value() for data in b]))
    return from_replicates(score_a, score_b, replicates_a, replicates_b, len(a[0]), len(a), len(b), confidence)


def from_replicates(score_a: float, score_b: float, replicates_a: np.ndarray, replicates_b: np.ndarray,
                    examples: int, seeds_a: int, seeds_b: int, confidence: float = CONFIDENCE) -> PairedResult:
    """A :class:`PairedResult` from both models' replicates on the same resamples."""
    differences = replicates_a - replicates_b
    observed = score_a - score_b
    low, high = percentile_interval(differences, confidence)
    return PairedResult(score_a, score_b, observed, low, high, p_from_replicates(observed, differences), examples,
                        seeds_a, seeds_b)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (same order as given)."""
    order = np.argsort(p_values, kind="stable")
    count = len(p_values)
    adjusted = np.empty(count)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (count - rank) * float(p_values[index])))
        adjusted[index] = running
    return adjusted.tolist()


@dataclass(frozen=True)
class ColumnMarks:
    """A column's significance marks: ``best`` (row key of the highest score), ``best_significant`` (best beats the
    runner-up at ``alpha``), ``tied`` (rows not distinguishable from the best), ``p_values`` (each row vs best)."""

    best: str | None
    best_significant: bool
    tied: frozenset[str]
    p_values: dict[str, float]


def column_marks(scores: dict[str, float], replicates: dict[str, np.ndarray], alpha: float = ALPHA) -> ColumnMarks:
    """Marks of one column from each row's score and bootstrap replicates (rows with replicates share the same
    resamples: :func:`harness.evaluation.bootstrap.pooled_replicates` with one seed). Rows without replicates are
    never compared (no mark); the column's best row must have them (else nothing is marked), and it is bold only when
    the runner-up has them too and is significantly below it (a row without data may be as good)."""
    ranked = sorted(scores, key=lambda key: -scores[key])
    if not ranked or ranked[0] not in replicates:
        return ColumnMarks(None, False, frozenset(), {})
    best = ranked[0]
    p_values = {key: p_from_replicates(scores[best] - scores[key], replicates[best] - replicates[key])
                for key in ranked[1:] if key in replicates}
    tied = frozenset(key for key, p in p_values.items() if p >= alpha)
    best_significant = len(ranked) > 1 and ranked[1] in p_values and p_values[ranked[1]] < alpha
    return ColumnMarks(best, best_significant, tied, p_values)


def agrees_with_paper(ours: PairedResult, paper_difference: float, alpha: float = ALPHA) -> str:
    """Our difference (row a - row b) against the paper's: ``"agrees"`` (same sign, significant), ``"opposite"``
    (other sign, significant) or ``"not significant"`` (our difference is within noise, or the paper's is 0)."""
    if ours.p_value >= alpha or paper_difference == 0:
        return "not significant"
    return "agrees" if np.sign(ours.difference) == np.sign(paper_difference) else "opposite"
