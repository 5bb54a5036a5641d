"""Calibration of the across-runs test: false-positive rate and power of each critical-value rule, per case.

Prints, as a markdown table, the simulated share of comparisons called significant at 5% under the test's null
(new training runs and a new test sample; the two rows equal in expectation) and with the first row 1 and 2 points
better, for the cases the test must hold (trained vs trained with equal and unequal run sds, trained vs untrained; 2, 3
and 5 seeds; run sds 1.0 and 0.3, the example term's sd 0.4) under three rules: Welch-Satterthwaite's df (the rule
before), Banerjee's min(n - 1) df, and Cochran-Cox (the test's rule since). The model and the rules:
:mod:`harness.evaluation.calibration`; the table is docs/core/statistics.md's, "Calibration of the across-runs test".
tests/test_significance_seeds.py runs the same simulation with fewer trials and asserts the 6% bound.

    .venv/bin/python benchmarks/across_runs_calibration.py [--trials 200000]
"""

from __future__ import annotations

import argparse

from harness.evaluation.calibration import calibration_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200_000, help="simulated comparisons per case and rule")
    trials = parser.parse_args().trials
    headers = ["case", "rule", "false positives (null)", "power, 1 point", "power, 2 points"]
    print(f"{trials} trials per cell (binomial sd at 5%: {100 * (0.05 * 0.95 / trials) ** 0.5:.2f} points)\n")
    print("| " + " | ".join(headers) + " |")
    print("| " + " | ".join("---" for _ in headers) + " |")
    for row in calibration_table(trials):
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
