"""Null and power simulations of the across-runs test (:func:`harness.evaluation.significance.across_runs_test`),
vectorised over trials: the evidence behind its degrees-of-freedom rule (docs/core/statistics.md, "Calibration of
the across-runs test").

The simulated question is the test's own (:data:`harness.evaluation.significance.ACROSS_RUNS_QUESTION`): new
training runs and a new test sample. Per trial, the test sample shifts the difference of the two rows by a draw of
sd ``example_sd`` (its variance is what the example bootstrap estimates; the bootstrap's estimate from thousands of
examples is taken as exact), and each seed of a row shifts that seed's score by a draw of sd ``run_sd`` of the row
(an untrained row: one seed, no run draw, no seed term). Under the null the methods are equal in expectation; for
power the first row is ``shift`` points better. A trial is significant when the two-sided p of the t statistic
``d / sqrt(s_a^2/n_a + s_b^2/n_b + v_ex)`` exceeds the rule's critical value at ``1 - alpha / 2`` (the same as
its p-value falling below ``alpha``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .significance import ALPHA, cochran_cox_critical, min_dof_critical, welch_satterthwaite_critical

# Name -> critical value ``rule(seed_terms, dofs, example_variance, quantile)``; the last is the test's own.
RULES = {
    "Welch-Satterthwaite df (before)": welch_satterthwaite_critical,
    "min(n - 1) df": min_dof_critical,
    "Cochran-Cox (after)": cochran_cox_critical,
}


@dataclass(frozen=True)
class Case:
    """Two rows compared across runs: each one's seed count and run sd (None: untrained, one seed, no run
    variance), and the sd the test sample adds to their difference."""

    name: str
    seeds: int
    run_sd_a: float
    run_sd_b: float | None
    example_sd: float = 0.4

    @property
    def seeds_b(self) -> int:
        return self.seeds if self.run_sd_b is not None else 1


def issue_cases(seed_counts: tuple[int, ...] = (2, 3, 5)) -> list[Case]:
    """The cases whose false positives must stay at or below 6%: trained vs trained with equal and unequal run sds,
    trained vs untrained, at each seed count (run sd 1.0 and 0.3, test-sample sd 0.4 on the difference)."""
    cases = []
    for seeds in seed_counts:
        cases += [
            Case(f"trained vs trained, equal run sd (1.0, 1.0), {seeds} seeds", seeds, 1.0, 1.0),
            Case(f"trained vs trained, unequal run sd (1.0, 0.3), {seeds} seeds", seeds, 1.0, 0.3),
            Case(f"trained (run sd 1.0, {seeds} seeds) vs untrained", seeds, 1.0, None),
        ]
    return cases


def _side(rng: np.random.Generator, trials: int, seeds: int, run_sd: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per trial: the row's seed mean (its run draws' mean) and its seed term (sample variance / seeds; 0 for an
    untrained row)."""
    if run_sd is None:
        return np.zeros(trials), np.zeros(trials)
    runs = rng.normal(scale=run_sd, size=(trials, seeds))
    return runs.mean(axis=1), runs.var(axis=1, ddof=1) / seeds


def rejection_rate(case: Case, rule, trials: int, shift: float = 0.0, seed: int = 49, alpha: float = ALPHA) -> float:
    """The share of ``trials`` simulated comparisons of ``case`` (row a ``shift`` points better) that the test with
    critical value ``rule(seed_terms, dofs, example_variance, quantile)`` calls significant at ``alpha``: the
    false-positive rate at ``shift`` 0, the power otherwise. The same ``seed`` gives the same draws for every rule."""
    rng = np.random.default_rng(seed)
    mean_a, term_a = _side(rng, trials, case.seeds, case.run_sd_a)
    mean_b, term_b = _side(rng, trials, case.seeds_b, case.run_sd_b)
    test_sample = rng.normal(scale=case.example_sd, size=trials)
    difference = shift + mean_a - mean_b + test_sample
    variance = term_a + term_b + case.example_sd**2
    terms, dofs = [term_a], [case.seeds - 1]
    if case.run_sd_b is not None:
        terms.append(term_b)
        dofs.append(case.seeds_b - 1)
    critical = rule(terms, dofs, case.example_sd**2, 1 - alpha / 2)
    return float(np.mean(np.abs(difference) / np.sqrt(variance) > critical))


def calibration_table(trials: int, cases: list[Case] | None = None, shifts=(1.0, 2.0)) -> list[list[str]]:
    """Per case and rule: the false-positive rate and the power at each of ``shifts`` (percent), as table rows
    (case, rule, false positives, power at each shift)."""
    rows = []
    for case in cases or issue_cases():
        for name, rule in RULES.items():
            rates = [rejection_rate(case, rule, trials)] + [rejection_rate(case, rule, trials, s) for s in shifts]
            rows.append([case.name, name, *(f"{100 * rate:.1f}%" for rate in rates)])
    return rows
