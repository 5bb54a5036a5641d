"""Two units of inference: the across-runs test keeps its false-positive rate near the nominal 5% when
two methods are equal in expectation but each training run (seed) shifts a model's score, where the example-only
paired bootstrap, conditional on the runs, does not; the rule for too few seeds; marks and paper verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from harness.evaluation.bootstrap import ExampleScores
from harness.evaluation.calibration import RULES, issue_cases, rejection_rate
from harness.evaluation.significance import (
    ACROSS_RUNS,
    EXAMPLES,
    TOO_FEW_SEEDS,
    across_runs_test,
    agrees_with_paper,
    cochran_cox_critical,
    column_marks,
    compare_units,
)

EXAMPLES_PER_SET = 300


def _method_runs(rng, difficulty, seeds, run_sd, shift=0.0):
    """One method's runs on the same test examples: per-example values = the example's difficulty (shared by every
    method) + the method's own per-example effect + a run effect per seed + per-run example noise (+ ``shift``)."""
    method_effect = rng.normal(scale=0.5, size=len(difficulty))
    return [
        ExampleScores(
            "mean",
            {
                "values": difficulty
                + method_effect
                + rng.normal(scale=run_sd)
                + rng.normal(scale=0.5, size=len(difficulty))
                + shift
            },
            scale=1.0,
        )
        for _ in range(seeds)
    ]


def false_positive_rates(trials: int, seeds: int, run_sd: float, seed: int = 34) -> tuple[float, float]:
    """The share of ``trials`` simulated null comparisons (equal methods in expectation) that each unit calls
    significant at 5%: (examples, across runs)."""
    rng = np.random.default_rng(seed)
    examples = across = 0
    for trial in range(trials):
        difficulty = rng.normal(size=EXAMPLES_PER_SET)
        a, b = (_method_runs(rng, difficulty, seeds, run_sd) for _ in range(2))
        result = compare_units(a, b, True, True, resamples=200, seed=trial)
        examples += result.examples.p_value < 0.05
        across += result.across_runs.p_value < 0.05
    return examples / trials, across / trials


@pytest.mark.parametrize("seeds", [2, 3])
def test_across_runs_false_positive_rate_stays_near_five_percent(seeds):
    """Run effects (sd 0.15) larger than the example noise of a 300-example mean: the example-only test calls about
    half of the null comparisons significant; the across-runs one stays at or below 6% (binomial sd at 600 trials
    ~0.009; Cochran-Cox is conservative at 2 seeds, so no lower bound). Measured (seed 34, 600 trials):
    docs/core/statistics.md, "Two units of inference"."""
    example_rate, across_rate = false_positive_rates(600, seeds, run_sd=0.15)
    assert example_rate > 0.30
    assert across_rate <= 0.06


def test_across_runs_without_run_variance_is_conservative_not_liberal():
    """No run effect at all: the example-only test is calibrated and the across-runs test does not exceed it (the
    within-run example noise enters both of its terms)."""
    example_rate, across_rate = false_positive_rates(400, 3, run_sd=0.0)
    assert 0.02 <= example_rate <= 0.09
    assert across_rate <= example_rate + 0.01


def test_across_runs_has_power_and_the_seed_rule():
    rng = np.random.default_rng(5)
    difficulty = rng.normal(size=EXAMPLES_PER_SET)
    better = _method_runs(rng, difficulty, 3, 0.05, shift=0.6)
    worse = _method_runs(rng, difficulty, 3, 0.05)
    result = compare_units(better, worse, True, True)
    assert result.unit == ACROSS_RUNS and result.p_value < 0.01 and result.interval[0] > 0
    assert agrees_with_paper(result, 1.0) == "agrees" and agrees_with_paper(result, -1.0) == "opposite"
    # one seed of a trained row: no estimate of its run variance, so no claim either way
    single = compare_units(better[:1], worse, True, True)
    assert single.too_few_seeds and single.p_value is None and single.interval is None
    assert agrees_with_paper(single, 1.0) == TOO_FEW_SEEDS
    # an untrained row (deterministic) against a trained one with seeds: only the trained row needs them
    assert not compare_units(worse[:1], better, False, True).too_few_seeds
    untrained = compare_units(better[:1], worse[:1], False, False)
    assert untrained.unit == EXAMPLES and untrained.p_value == untrained.examples.p_value
    assert across_runs_test([1.0], [0.5, 0.7], np.zeros(10), trained_a=True) is None


def test_column_marks_use_the_across_runs_test_for_trained_rows():
    """Two trained rows whose seed means differ by less than their seeds spread: the example-only marks would bold
    the best; the across-runs marks tie them, and a one-seed trained row is 'too few' (never bold over it)."""
    rng = np.random.default_rng(2)
    replicates = {"a": 72.0 + rng.normal(size=1000) * 0.05, "b": 71.3 + rng.normal(size=1000) * 0.05}
    scores = {"a": 72.0, "b": 71.3}
    assert column_marks(scores, replicates).best_significant  # examples only: these two runs differ
    seed_scores = {"a": [72.5, 71.5], "b": [70.8, 71.8]}
    marks = column_marks(scores, replicates, seed_scores=seed_scores, trained={"a": True, "b": True})
    assert marks.best == "a" and not marks.best_significant and marks.tied == {"b"}
    one_seed = column_marks(scores, replicates, seed_scores={"a": [72.0], "b": [71.3]}, trained={"a": True, "b": True})
    assert not one_seed.best_significant and one_seed.too_few == {"b"} and not one_seed.tied


def test_compare_prints_both_units_and_says_which_decides(tmp_path):
    import json

    import harness.testing as ht

    run = ht.run_harness(
        "run",
        "--models",
        "testing-trainable,testing-trainable:dim=8",
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        "--seeds",
        "42,43",
        "--profile",
        "smoke",
        "--results",
        tmp_path,
        "--no-progress",
        plugins=["harness.testing"],
    )
    assert run.exit_code == 0, run.stderr
    arguments = [
        "compare",
        "testing-trainable",
        "testing-trainable:dim=8",
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        tmp_path,
    ]
    both = ht.run_harness(*arguments, "--seeds", "42,43", "--json", plugins=["harness.testing"])
    assert both.exit_code == 0, both.stderr
    (task,) = json.loads(both.stdout)["tasks"]
    assert task["unit"] == "across runs" and task["trained"] and task["verdict"] in ("significant", "not significant")
    assert task["p_value"] == task["across_runs"]["p_value"] and task["over_examples"]["examples"] == task["examples"]
    assert task["across_runs"]["seed_variance"] >= 0 and task["across_runs"]["degrees_of_freedom"] >= 1
    one = ht.run_harness(*arguments, "--seeds", "42", plugins=["harness.testing"])
    assert one.exit_code == 0, one.stderr
    assert "too few seeds to tell" in one.stdout and "across runs" in one.stdout and "examples: paired" in one.stdout


CALIBRATION_TRIALS = 20_000  # binomial sd of a 5% rate: 0.15 points, so the 6% bound is 6 sds above nominal


def test_across_runs_false_positive_rate_at_most_six_percent_in_every_case_of_issue_49(capsys):
    """The test's null (new training runs and a new test sample; harness.evaluation.calibration): trained vs trained
    with equal and unequal run sds and trained vs untrained, at 2, 3 and 5 seeds, the example term present. The
    Cochran-Cox critical value keeps every false-positive rate at or below 6%; Welch-Satterthwaite's df, the rule
    before, did not (it is liberal at 2 seeds vs an untrained row). Power at 1 and 2 points is printed (-s) for
    docs/core/statistics.md, "Calibration of the across-runs test" (benchmarks/across_runs_calibration.py: the
    full table)."""
    chosen = RULES["Cochran-Cox (after)"]
    before = RULES["Welch-Satterthwaite df (before)"]
    lines = []
    for case in issue_cases():
        rate = rejection_rate(case, chosen, CALIBRATION_TRIALS)
        power = [rejection_rate(case, chosen, CALIBRATION_TRIALS, shift) for shift in (1.0, 2.0)]
        lines.append(f"{case.name}: false positives {rate:.3f}, power 1 pt {power[0]:.3f}, 2 pts {power[1]:.3f}")
        assert rate <= 0.06, lines[-1]
        assert power[0] <= power[1]  # a larger difference is found at least as often
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    liberal = issue_cases((2,))[2]  # trained, 2 seeds, vs untrained
    assert rejection_rate(liberal, before, CALIBRATION_TRIALS) > 0.08


def test_across_runs_test_decides_as_the_simulated_rule():
    """The library's p-value and the simulation's critical value are one rule: p < 5% exactly when |d| / se exceeds
    the Cochran-Cox critical value (random seed scores, example terms, seed counts 2-5, trained and untrained)."""
    rng = np.random.default_rng(49)
    for _ in range(200):
        seeds = int(rng.integers(2, 6))
        a = rng.normal(scale=rng.uniform(0.1, 2), size=seeds) + rng.normal(scale=1.5)
        untrained = bool(rng.integers(2))
        b = np.zeros(1) if untrained else rng.normal(scale=rng.uniform(0.1, 2), size=seeds)
        differences = rng.normal(scale=rng.uniform(0.05, 1), size=500)
        result = across_runs_test(a, b, differences, True, not untrained)
        terms = [np.var(a, ddof=1) / seeds] + ([] if untrained else [np.var(b, ddof=1) / seeds])
        dofs = [seeds - 1] * len(terms)
        example_variance = np.var(differences, ddof=1)
        statistic = abs(a.mean() - b.mean()) / np.sqrt(sum(terms) + example_variance)
        critical = float(cochran_cox_critical(terms, dofs, example_variance, 0.975))
        if abs(statistic - critical) > 1e-6:
            assert (result.p_value < 0.05) == (statistic > critical)
        assert result.high - result.low == pytest.approx(2 * critical * np.sqrt(sum(terms) + example_variance))
        assert result.detectable > result.high - result.difference  # 80% power needs more than the half-width


def test_an_untrained_rows_repeated_seeds_neither_add_variance_nor_cut_the_critical_value():
    """An untrained deterministic row run under two seeds (identical scores) is not seed-bearing: against a trained
    row with 5 seeds the test is the one against its single seed."""
    differences = np.random.default_rng(3).normal(scale=0.3, size=400)
    trained = [71.0, 72.5, 70.2, 71.9, 72.8]
    twice = across_runs_test(trained, [70.0, 70.0], differences, True, False)
    once = across_runs_test(trained, [70.0], differences, True, False)
    assert twice.p_value == pytest.approx(once.p_value) and twice.degrees_of_freedom == once.degrees_of_freedom
    # a seeded evaluation of an untrained row (a trained probe) bears seeds: marked trained, its spread counts
    probe = across_runs_test(trained, [69.0, 71.0], differences, True, True)
    assert probe.seed_variance > once.seed_variance and probe.degrees_of_freedom < once.degrees_of_freedom


def test_an_untrained_probe_row_is_seed_dependent_and_tested_across_runs(registry):
    """A task whose evaluation trains a probe per seed declares Task.seeded_evaluation: its records depend on the
    seed without a training report, so the published untrained `be` rows of 20NG are tested across runs,
    while an untrained STS record is not."""
    import glob

    from conftest import REPO
    from harness.stored_scores import seed_dependent, stored_run

    assert registry.task("20ng-topic").seeded_evaluation and not registry.task("stsb").seeded_evaluation
    assert seed_dependent({"task": {"name": "20ng-topic"}}) and not seed_dependent({"task": {"name": "stsb"}})
    probe_records = sorted(glob.glob(str(REPO / "published" / "be-*" / "seed-4*" / "20ng-topic-*.json")))
    assert probe_records
    for path in probe_records[:2]:
        data, _, seeded = stored_run(path)
        assert seeded and data is not None
