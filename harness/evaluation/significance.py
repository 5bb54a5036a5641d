"""Paired significance of the difference between two models on the same test examples.

Two units of inference, named wherever a result is shown:

- **examples** (:func:`paired_test`): the paired bootstrap over test examples (Efron & Tibshirani 1993, ch. 16;
  Koehn 2004 for NLP). Both models' scores are recomputed on the same ``resamples`` resamples of the test examples
  (:func:`harness.evaluation.bootstrap.bootstrap_indices`); the difference's 95% interval is the percentile interval
  of the replicated differences, and the two-sided p-value is that of the bootstrap distribution shifted to the null
  (difference 0): ``p = (1 + #{|d* - d| >= |d|}) / (resamples + 1)``. Each model's score is the mean over its seeds,
  every seed resampled with the same examples: the seeds are held fixed, so the result is conditional on these
  training runs. It answers "do these runs differ on this population of test examples?", and it is the whole answer
  for untrained rows (whose score does not depend on a training seed).
- **across runs** (:func:`across_runs_test`): for a row that was trained, a new seed gives another model. The
  difference of seed means is tested with a Welch t-test (Welch 1947) whose variance is the sum of each trained
  row's seed variance over its seed count (the training runs, as in Reimers & Gurevych 2017, 2018) and of the
  example bootstrap's variance of the difference (the test sample); the degrees of freedom are Welch-Satterthwaite's,
  the example term counted with infinitely many (it comes from thousands of examples). It answers "would another
  training run of each method keep the order?". Within-seed example noise enters both terms, so it is conservative
  where training-run variance is small (measured: tests/test_significance_seeds.py, docs/fidelity.md "Two units of
  inference").

:func:`compare_units` gives both and says which decides: across runs when either row was trained, else examples.
A trained row needs at least :data:`MIN_TRAINED_SEEDS` seeds (one seed gives no estimate of its training-run
variance): with fewer the answer is "too few seeds to tell" (:data:`TOO_FEW_SEEDS`), never a significance claim.

:func:`holm` adjusts the p-values of several tasks (Holm 1979). :func:`column_marks` is what a leaderboard column
needs: which row is best, whether it is significantly better than the runner-up, which rows cannot be told apart
from the best (p >= alpha, uncorrected within a column) and which cannot be compared for too few seeds.
:func:`agrees_with_paper` says whether our difference between two rows has the paper's sign and is significant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
MIN_TRAINED_SEEDS = 2  # a trained row's seeds below this give no estimate of its training-run variance
TOO_FEW_SEEDS = "too few seeds to tell"
EXAMPLES, ACROSS_RUNS = "examples", "across runs"  # the two units of inference


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
        return {
            "score_a": self.score_a,
            "score_b": self.score_b,
            "difference": self.difference,
            "interval": [self.low, self.high],
            "p_value": self.p_value,
            "examples": self.examples,
            "seeds_a": self.seeds_a,
            "seeds_b": self.seeds_b,
        }


def paired_replicates(
    a: Sequence[ExampleScores], b: Sequence[ExampleScores], resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> tuple[np.ndarray, np.ndarray]:
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


def paired_test(
    a: Sequence[ExampleScores],
    b: Sequence[ExampleScores],
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
) -> PairedResult:
    """Paired bootstrap test of mean(a) - mean(b) over seeds, on the same test examples."""
    replicates_a, replicates_b = paired_replicates(a, b, resamples, seed)
    score_a = float(np.mean([data.value() for data in a]))
    score_b = float(np.mean([data.value() for data in b]))
    return from_replicates(score_a, score_b, replicates_a, replicates_b, len(a[0]), len(a), len(b), confidence)


def from_replicates(
    score_a: float,
    score_b: float,
    replicates_a: np.ndarray,
    replicates_b: np.ndarray,
    examples: int,
    seeds_a: int,
    seeds_b: int,
    confidence: float = CONFIDENCE,
) -> PairedResult:
    """A :class:`PairedResult` from both models' replicates on the same resamples."""
    differences = replicates_a - replicates_b
    observed = score_a - score_b
    low, high = percentile_interval(differences, confidence)
    return PairedResult(
        score_a, score_b, observed, low, high, p_from_replicates(observed, differences), examples, seeds_a, seeds_b
    )


@dataclass(frozen=True)
class AcrossRunsResult:
    """``a`` minus ``b`` with training runs as a source of variance: the Welch t interval and p-value of the
    difference of seed means (:func:`across_runs_test`). ``seed_variance``: the seed term of the difference's
    variance (sum over rows of seed variance / seeds); ``example_variance``: the example bootstrap's term."""

    difference: float
    low: float
    high: float
    p_value: float
    degrees_of_freedom: float
    seed_variance: float
    example_variance: float
    seeds_a: int
    seeds_b: int

    def as_dict(self) -> dict:
        return {
            "difference": self.difference,
            "interval": [self.low, self.high],
            "p_value": self.p_value,
            "degrees_of_freedom": self.degrees_of_freedom,
            "seed_variance": self.seed_variance,
            "example_variance": self.example_variance,
            "seeds_a": self.seeds_a,
            "seeds_b": self.seeds_b,
        }


def too_few_seeds(seeds_a: int, seeds_b: int, trained_a: bool, trained_b: bool) -> bool:
    """Whether a trained row has fewer than :data:`MIN_TRAINED_SEEDS` seeds (its training-run variance unknown)."""
    return (trained_a and seeds_a < MIN_TRAINED_SEEDS) or (trained_b and seeds_b < MIN_TRAINED_SEEDS)


def across_runs_test(
    seed_scores_a: Sequence[float],
    seed_scores_b: Sequence[float],
    example_differences: np.ndarray,
    trained_a: bool = True,
    trained_b: bool = True,
    confidence: float = CONFIDENCE,
) -> AcrossRunsResult | None:
    """Welch t-test of mean(a) - mean(b) over seeds, its variance the seed term plus the example bootstrap's
    variance of the difference (``example_differences``: the paired replicates of the seed-mean difference). A row's
    seed term is its seeds' sample variance over their count; an untrained row with one seed contributes none.
    None when a trained row has fewer than :data:`MIN_TRAINED_SEEDS` seeds ("too few seeds to tell")."""
    from scipy import stats

    a, b = np.asarray(seed_scores_a, dtype=float), np.asarray(seed_scores_b, dtype=float)
    if too_few_seeds(len(a), len(b), trained_a, trained_b) or not len(a) or not len(b):
        return None
    seed_terms = [(float(np.var(side, ddof=1)) / len(side), len(side) - 1) for side in (a, b) if len(side) > 1]
    example_variance = float(np.var(example_differences, ddof=1)) if len(example_differences) > 1 else 0.0
    seed_variance = sum(term for term, _ in seed_terms)
    variance = seed_variance + example_variance
    observed = float(a.mean() - b.mean())
    denominator = sum(term**2 / dof for term, dof in seed_terms)
    dof = variance**2 / denominator if denominator > 0 else float("inf")
    if variance <= 0:
        p_value, half = (1.0 if observed == 0 else 0.0), 0.0
    else:
        scale = float(np.sqrt(variance))
        p_value = float(2 * stats.t.sf(abs(observed) / scale, dof))
        half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * scale
    return AcrossRunsResult(
        observed,
        observed - half,
        observed + half,
        min(1.0, p_value),
        dof,
        seed_variance,
        example_variance,
        len(a),
        len(b),
    )


@dataclass(frozen=True)
class UnitComparison:
    """Both units of inference for ``a`` minus ``b``: ``examples`` (these runs), ``across_runs`` (new training runs;
    None for two untrained rows, or when a trained row has too few seeds), and whether either row was ``trained``
    (then across runs decides)."""

    examples: PairedResult
    across_runs: AcrossRunsResult | None
    trained: bool

    @property
    def unit(self) -> str:
        """The unit that decides: across runs when either row was trained, else examples."""
        return ACROSS_RUNS if self.trained else EXAMPLES

    @property
    def difference(self) -> float:
        return self.examples.difference

    @property
    def too_few_seeds(self) -> bool:
        return self.trained and self.across_runs is None

    @property
    def p_value(self) -> float | None:
        """The deciding unit's p-value; None when there are too few seeds to tell."""
        if not self.trained:
            return self.examples.p_value
        return None if self.across_runs is None else self.across_runs.p_value

    @property
    def interval(self) -> tuple[float, float] | None:
        """The deciding unit's 95% interval; None when there are too few seeds to tell."""
        if not self.trained:
            return self.examples.low, self.examples.high
        return None if self.across_runs is None else (self.across_runs.low, self.across_runs.high)

    def as_dict(self) -> dict:
        return {
            "unit": self.unit,
            "trained": self.trained,
            "too_few_seeds": self.too_few_seeds,
            "p_value": self.p_value,
            "interval": None if self.interval is None else list(self.interval),
            "over_examples": self.examples.as_dict(),
            "across_runs": None if self.across_runs is None else self.across_runs.as_dict(),
        }


def compare_units(
    a: Sequence[ExampleScores],
    b: Sequence[ExampleScores],
    trained_a: bool,
    trained_b: bool,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
) -> UnitComparison:
    """Both units of inference for mean(a) - mean(b) over seeds on the same test examples (``trained_*``: whether
    each row's records come from training, so its score depends on the seed)."""
    replicates_a, replicates_b = paired_replicates(a, b, resamples, seed)
    return units_of_replicates(a, b, replicates_a, replicates_b, trained_a, trained_b, confidence)


def units_of_replicates(
    a: Sequence[ExampleScores],
    b: Sequence[ExampleScores],
    replicates_a: np.ndarray,
    replicates_b: np.ndarray,
    trained_a: bool,
    trained_b: bool,
    confidence: float = CONFIDENCE,
) -> UnitComparison:
    """:func:`compare_units` for bootstrap replicates already drawn (the same resamples of the same examples for
    both rows): a caller comparing many pairs draws each row's replicates once."""
    examples = from_replicates(
        float(np.mean([data.value() for data in a])),
        float(np.mean([data.value() for data in b])),
        replicates_a,
        replicates_b,
        len(a[0]),
        len(a),
        len(b),
        confidence,
    )
    return units_from(
        examples,
        [data.value() for data in a],
        [data.value() for data in b],
        replicates_a - replicates_b,
        trained_a,
        trained_b,
        confidence,
    )


def units_from(
    examples: PairedResult,
    seed_scores_a: Sequence[float],
    seed_scores_b: Sequence[float],
    example_differences: np.ndarray,
    trained_a: bool,
    trained_b: bool,
    confidence: float = CONFIDENCE,
) -> UnitComparison:
    """A :class:`UnitComparison` from the example-level result, each row's per-seed scores and the paired
    replicates of the difference."""
    trained = trained_a or trained_b
    across = (
        across_runs_test(seed_scores_a, seed_scores_b, example_differences, trained_a, trained_b, confidence)
        if trained
        else None
    )
    return UnitComparison(examples, across, trained)


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
    runner-up at ``alpha``), ``tied`` (rows not distinguishable from the best), ``p_values`` (each row vs best, by
    the deciding unit), ``too_few`` (rows that cannot be compared with the best: a trained row of the two has fewer
    than :data:`MIN_TRAINED_SEEDS` seeds)."""

    best: str | None
    best_significant: bool
    tied: frozenset[str]
    p_values: dict[str, float]
    too_few: frozenset[str] = frozenset()


def column_marks(
    scores: dict[str, float],
    replicates: dict[str, np.ndarray],
    alpha: float = ALPHA,
    seed_scores: dict[str, Sequence[float]] | None = None,
    trained: dict[str, bool] | None = None,
) -> ColumnMarks:
    """Marks of one column from each row's score and bootstrap replicates (rows with replicates share the same
    resamples: :func:`harness.evaluation.bootstrap.pooled_replicates`). Where the best row or the other row was
    trained (``trained``; its per-seed scores in ``seed_scores``) the across-runs test decides, else the example
    one. Rows without replicates are never compared (no mark); the column's best row must have them (else nothing
    is marked), and it is bold only when the runner-up has them too and is significantly below it (a row without
    data, or one that cannot be told for too few seeds, may be as good)."""
    trained = trained or {}
    seed_scores = seed_scores or {}
    ranked = sorted(scores, key=lambda key: -scores[key])
    if not ranked or ranked[0] not in replicates:
        return ColumnMarks(None, False, frozenset(), {})
    best = ranked[0]
    p_values, too_few = {}, set()
    for key in ranked[1:]:
        if key not in replicates:
            continue
        differences = replicates[best] - replicates[key]
        observed = scores[best] - scores[key]
        if trained.get(best) or trained.get(key):
            across = across_runs_test(
                seed_scores.get(best, [scores[best]]),
                seed_scores.get(key, [scores[key]]),
                differences,
                bool(trained.get(best)),
                bool(trained.get(key)),
            )
            if across is None:
                too_few.add(key)
                continue
            p_values[key] = across.p_value
        else:
            p_values[key] = p_from_replicates(observed, differences)
    tied = frozenset(key for key, p in p_values.items() if p >= alpha)
    best_significant = len(ranked) > 1 and ranked[1] in p_values and p_values[ranked[1]] < alpha
    return ColumnMarks(best, best_significant, tied, p_values, frozenset(too_few))


def agrees_with_paper(ours: PairedResult | UnitComparison, paper_difference: float, alpha: float = ALPHA) -> str:
    """Our difference (row a - row b) against the paper's: ``"agrees"`` (same sign, significant), ``"opposite"``
    (other sign, significant), ``"not significant"`` (our difference is within noise, or the paper's is 0) or
    :data:`TOO_FEW_SEEDS`. A :class:`UnitComparison` is judged by its deciding unit; a bare example-level
    :class:`PairedResult` by itself (two untrained rows)."""
    p_value = ours.p_value
    if p_value is None:
        return TOO_FEW_SEEDS
    if p_value >= alpha or paper_difference == 0:
        return "not significant"
    return "agrees" if np.sign(ours.difference) == np.sign(paper_difference) else "opposite"
