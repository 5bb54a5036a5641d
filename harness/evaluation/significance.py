"""Paired significance of the difference between two models on the same test examples.

Two units of inference, named wherever a result is shown:

- **examples** (:func:`paired_test`): the paired bootstrap over test examples (Efron & Tibshirani 1993, ch. 16;
  Koehn 2004 for NLP). Both models' scores are recomputed on the same ``resamples`` resamples of the test examples
  (:func:`harness.evaluation.bootstrap.bootstrap_indices`); the difference's 95% interval is the percentile interval
  of the replicated differences, and the two-sided p-value is that of the bootstrap distribution shifted to the null
  (difference 0): ``p = (1 + #{|d* - d| >= |d|}) / (resamples + 1)``. Each model's score is the mean over its seeds,
  every seed resampled with the same examples: the seeds are held fixed, so the result is conditional on these
  training runs. It answers :data:`EXAMPLES_QUESTION`, and it is the whole answer for two rows whose scores do not
  depend on a seed.
- **across runs** (:func:`across_runs_test`): for a row that was trained (or whose evaluation is seeded, such as a
  trained probe), a new seed gives another model. The difference of seed means is divided by the square root of
  the sum of each seed-bearing row's seed variance over its seed count (the training runs, as in Reimers & Gurevych
  2017, 2018) and of the example bootstrap's variance of the difference (the test sample), and judged against
  Cochran & Cox's critical value: the variance-weighted mean of each term's t quantile (seed terms at n - 1 df, the
  example term at the normal's). It answers :data:`ACROSS_RUNS_QUESTION`. Calibrated by simulation for that null
  (:mod:`harness.evaluation.calibration`; docs/core/statistics.md, "Calibration of the across-runs test"):
  false-positive rate at most 4.2% at 2, 3 and 5 seeds, where Welch-Satterthwaite's df reached 10.4%.

Every result carries its minimum detectable difference (80% power, two-sided 5%, from the same variance terms and
critical values): what a "no significant difference" rules out.

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
POWER = 0.8  # the power at which a "no significant difference" states the difference it could have detected
MIN_TRAINED_SEEDS = 2  # a trained row's seeds below this give no estimate of its training-run variance
TOO_FEW_SEEDS = "too few seeds to tell"
NORMAL_975, NORMAL_POWER = 1.959963984540054, 0.8416212335729143  # z_{1 - ALPHA/2}, z_{POWER}
EXAMPLES, ACROSS_RUNS = "examples", "across runs"  # the two units of inference
# The question each unit answers, in the same words wherever a test is shown (compare, legends, pages, docs): the
# across-runs test adds the example bootstrap's variance to the seeds', so its null is about new training runs AND
# a new test sample of the same population, not about the fixed test set.
ACROSS_RUNS_QUESTION = "would new training runs, scored on a new test sample, keep the order?"
EXAMPLES_QUESTION = "would these runs keep the order on a new test sample?"


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
    detectable: float = 0.0  # minimum detectable difference at 80% power, two-sided 5% (detectable_difference)

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
            "detectable_difference": self.detectable,
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
    variance = float(np.var(differences, ddof=1)) if len(differences) > 1 else 0.0
    return PairedResult(
        score_a,
        score_b,
        observed,
        low,
        high,
        p_from_replicates(observed, differences),
        examples,
        seeds_a,
        seeds_b,
        detectable_difference(float(np.sqrt(variance)), NORMAL_975, NORMAL_POWER),
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
    detectable: float = 0.0  # minimum detectable difference at 80% power, two-sided 5% (detectable_difference)

    def as_dict(self) -> dict:
        return {
            "difference": self.difference,
            "interval": [self.low, self.high],
            "p_value": self.p_value,
            # Cochran-Cox's equivalent df (null where no row bears seeds: the normal quantile)
            "degrees_of_freedom": None if np.isinf(self.degrees_of_freedom) else self.degrees_of_freedom,
            "seed_variance": self.seed_variance,
            "example_variance": self.example_variance,
            "seeds_a": self.seeds_a,
            "seeds_b": self.seeds_b,
            "detectable_difference": self.detectable,
        }


def too_few_seeds(seeds_a: int, seeds_b: int, trained_a: bool, trained_b: bool) -> bool:
    """Whether a trained row has fewer than :data:`MIN_TRAINED_SEEDS` seeds (its training-run variance unknown)."""
    return (trained_a and seeds_a < MIN_TRAINED_SEEDS) or (trained_b and seeds_b < MIN_TRAINED_SEEDS)


def _t_quantile(quantile: float, dof):
    from scipy import stats

    return stats.t.ppf(quantile, dof)


def welch_satterthwaite_critical(seed_terms, dofs, example_variance, quantile: float):
    """The critical value of Welch's t with Welch-Satterthwaite's degrees of freedom, the example term counted with
    infinitely many: ``t_{quantile, df}``, ``df = v^2 / sum(term^2 / dof)``. The rule before Cochran-Cox's, kept for the
    calibration tables (:mod:`harness.evaluation.calibration`): it estimates its df from the same one-df variances
    as the standard error, so at 2 seeds a small sampled seed variance both shrinks the error and raises the df, and
    the test is liberal (docs/core/statistics.md, "Calibration of the across-runs test"). Elementwise on arrays."""
    variance = sum(seed_terms) + example_variance
    denominator = sum(np.asarray(term, dtype=float) ** 2 / dof for term, dof in zip(seed_terms, dofs))
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = np.where(
            denominator > 0, np.asarray(variance, dtype=float) ** 2 / np.maximum(denominator, 1e-300), np.inf
        )
    return _t_quantile(quantile, dof)


def min_dof_critical(seed_terms, dofs, example_variance, quantile: float):
    """The critical value of Welch's t with the conservative df, the smallest ``seeds - 1`` over the
    seed-bearing rows. Valid whatever the ratio of the variances, but with the example term present it is far too
    conservative at few seeds (2 seeds: t_{0.975, 1} = 12.7 times an error that never falls below the example
    term's); kept for the calibration tables."""
    dof = float(min(dofs)) if len(dofs) else np.inf
    return _t_quantile(quantile, dof) * np.ones_like(np.asarray(example_variance + sum(seed_terms), dtype=float))


def cochran_cox_critical(seed_terms, dofs, example_variance, quantile: float):
    """The across-runs test's critical value (Cochran & Cox 1950): the variance-weighted mean of each term's own
    t quantile, ``(sum(term * t_{quantile, n - 1}) + v_ex * z_quantile) / v``, the example term (estimated from
    thousands of examples) at the normal quantile. No degrees of freedom are estimated from the one-df seed
    variances, so a small sampled seed variance shrinks the error but not the critical value's tail; where a seed
    term dominates, the critical value is that row's t_{n - 1}. Simulated false-positive rate 1.1-4.2% over the
    cases of docs/core/statistics.md, "Calibration of the across-runs test" (Welch-Satterthwaite: up to 10.4%).
    Elementwise on arrays."""
    variance = sum(seed_terms) + example_variance
    weighted = sum(np.asarray(term, dtype=float) * _t_quantile(quantile, dof) for term, dof in zip(seed_terms, dofs))
    normal = _t_quantile(quantile, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(
            np.asarray(variance) > 0, (weighted + example_variance * normal) / np.maximum(variance, 1e-300), normal
        )


def _cochran_cox_p(statistic: float, seed_terms: list[float], dofs: list[int], example_variance: float) -> float:
    """The two-sided p-value of ``statistic`` under :func:`cochran_cox_critical`: the alpha whose critical value
    equals it (the critical value falls as alpha rises)."""
    from scipy.optimize import brentq

    def excess(alpha: float) -> float:
        return float(cochran_cox_critical(seed_terms, dofs, example_variance, 1 - alpha / 2)) - statistic

    if statistic <= 0:
        return 1.0
    smallest = 1e-15
    if excess(smallest) <= 0:
        return smallest
    return float(brentq(excess, smallest, 1.0, xtol=1e-12))


def equivalent_dof(critical: float, quantile: float = 0.975) -> float:
    """The degrees of freedom whose t quantile equals ``critical`` (infinite at or below the normal quantile): the
    Cochran-Cox test's df, reported so a reader can compare it with a plain t-test's."""
    from scipy.optimize import brentq

    if critical <= float(_t_quantile(quantile, np.inf)) + 1e-12:
        return float("inf")
    return float(brentq(lambda dof: float(_t_quantile(quantile, dof)) - critical, 1e-3, 1e9))


def detectable_difference(scale: float, critical: float, power_critical: float) -> float:
    """The minimum detectable difference of a two-sided test: ``(c_{1 - alpha/2} + c_{power}) * se`` (the usual
    normal-shift approximation, with the test's own critical values: :data:`POWER` at :data:`ALPHA`). A difference
    this large is called significant about ``POWER`` of the time, so a "no significant difference" rules out
    differences of about this size, not smaller ones."""
    return float((critical + power_critical) * scale)


def detectable_text() -> str:
    """What the minimum detectable difference is, in the words every legend uses."""
    return (
        f"the smallest difference the deciding test finds {POWER:.0%} of the time (two-sided, p < {ALPHA}), from the "
        "same variance terms: a 'no significant difference' rules out differences about this large, not smaller ones"
    )


def across_runs_test(
    seed_scores_a: Sequence[float],
    seed_scores_b: Sequence[float],
    example_differences: np.ndarray,
    trained_a: bool = True,
    trained_b: bool = True,
    confidence: float = CONFIDENCE,
) -> AcrossRunsResult | None:
    """Welch's statistic for mean(a) - mean(b) over seeds, its variance the seed term plus the example bootstrap's
    variance of the difference (``example_differences``: the paired replicates of the seed-mean difference),
    judged against Cochran & Cox's critical value (:func:`cochran_cox_critical`). It answers
    :data:`ACROSS_RUNS_QUESTION`. A row's seed term is its seeds' sample variance over their count; a row bears seeds
    (a term with its n - 1) when it was trained (``trained_*``: training, or a seeded evaluation such as a trained
    probe) or its seed scores differ, so an untrained deterministic row's repeated seeds add nothing. None when a
    trained row has fewer than :data:`MIN_TRAINED_SEEDS` seeds ("too few seeds to tell")."""
    a, b = np.asarray(seed_scores_a, dtype=float), np.asarray(seed_scores_b, dtype=float)
    if too_few_seeds(len(a), len(b), trained_a, trained_b) or not len(a) or not len(b):
        return None
    seed_terms, dofs = [], []
    for side, trained in ((a, trained_a), (b, trained_b)):
        term = float(np.var(side, ddof=1)) / len(side) if len(side) > 1 else 0.0
        if len(side) > 1 and (trained or term > 0):
            seed_terms.append(term)
            dofs.append(len(side) - 1)
    example_variance = float(np.var(example_differences, ddof=1)) if len(example_differences) > 1 else 0.0
    seed_variance = sum(seed_terms)
    variance = seed_variance + example_variance
    observed = float(a.mean() - b.mean())
    critical = float(cochran_cox_critical(seed_terms, dofs, example_variance, 0.5 + confidence / 2))
    if variance <= 0:
        p_value, scale = (1.0 if observed == 0 else 0.0), 0.0
    else:
        scale = float(np.sqrt(variance))
        p_value = _cochran_cox_p(abs(observed) / scale, seed_terms, dofs, example_variance)
    alpha_critical = float(cochran_cox_critical(seed_terms, dofs, example_variance, 1 - ALPHA / 2))
    power_critical = float(cochran_cox_critical(seed_terms, dofs, example_variance, POWER))
    return AcrossRunsResult(
        observed,
        observed - critical * scale,
        observed + critical * scale,
        min(1.0, p_value),
        equivalent_dof(alpha_critical),
        seed_variance,
        example_variance,
        len(a),
        len(b),
        detectable_difference(scale, alpha_critical, power_critical),
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

    @property
    def detectable(self) -> float | None:
        """The deciding unit's minimum detectable difference at :data:`POWER` (two-sided, :data:`ALPHA`); None when
        there are too few seeds to tell."""
        if not self.trained:
            return self.examples.detectable
        return None if self.across_runs is None else self.across_runs.detectable

    @property
    def question(self) -> str:
        """The question the deciding unit answers."""
        return ACROSS_RUNS_QUESTION if self.trained else EXAMPLES_QUESTION

    def as_dict(self) -> dict:
        return {
            "unit": self.unit,
            "question": self.question,
            "trained": self.trained,
            "too_few_seeds": self.too_few_seeds,
            "p_value": self.p_value,
            "interval": None if self.interval is None else list(self.interval),
            "detectable_difference": self.detectable,
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
