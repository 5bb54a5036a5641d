"""The rule that turns a claim's tests into a verdict, and how claims and their outcomes are written.

Kept below :mod:`harness.leaderboard.claims` (which judges a matrix's claims on the store's records and builds its
board through :mod:`harness.leaderboard.matrix_board`) so the matrix pages render verdicts without importing the
judge: one rule, :data:`VERDICT_RULE`, for the reproduction page and the matrix pages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..evaluation.significance import (
    ACROSS_RUNS_QUESTION,
    ALPHA,
    EXAMPLES_QUESTION,
    MIN_TRAINED_SEEDS,
    POWER,
    TOO_FEW_SEEDS,
    UnitComparison,
)

REPRODUCED = "reproduced"
SAME_DIRECTION = "same direction"
OPPOSITE = "not reproduced (significantly opposite)"
NO_DIFFERENCE = "not reproduced (no significant difference)"
TIE_HOLDS = "reproduced (no significant difference)"
TIE_BROKEN = "not reproduced (significant difference)"
NOT_RUN = "not run"
NO_DATA = "untested (records without per-example data)"
NOT_TESTABLE = "not testable here"
BENCHMARK_SEEDS = 3  # seeds a side a benchmark claim needs before it is judged
BENCHMARK_UNDECIDED = f"not decided (fewer than {BENCHMARK_SEEDS} seeds a side)"
# A claim's verdict is its weakest pair's, in this order (first = weakest).
PRECEDENCE = [
    OPPOSITE,
    TIE_BROKEN,
    NOT_RUN,
    TOO_FEW_SEEDS,
    NO_DATA,
    NO_DIFFERENCE,
    SAME_DIRECTION,
    TIE_HOLDS,
    REPRODUCED,
]

VERDICT_RULE = (
    "Each claim names rows of its matrix and a column; every pair of rows it orders is tested on the stored records "
    "(`published/`). The test is across runs wherever a row was trained or its evaluation is seeded (the seeds' "
    f"variance plus the example bootstrap's, Cochran-Cox critical value: {ACROSS_RUNS_QUESTION}) and over test "
    f"examples for two rows that do not depend on a seed (the paired bootstrap: {EXAMPLES_QUESTION}); "
    'docs/core/statistics.md, "Two units of inference". With p < '
    f"{ALPHA} and the paper's sign the pair is **{REPRODUCED}** when the paper's difference lies inside our 95% "
    f"interval (about the claimed size), else **{SAME_DIRECTION}** (the ordering holds, the size differs); "
    f"significant with the other sign: **{OPPOSITE}**; p >= {ALPHA}: **{NO_DIFFERENCE}**, shown with the "
    f"difference the test could have detected ({POWER:.0%} power). A claim that two rows "
    f"are on a par is **{TIE_HOLDS}** when p >= {ALPHA} (no equivalence test: a wide interval also passes), else "
    f"**{TIE_BROKEN}**. A trained row with fewer than {MIN_TRAINED_SEEDS} seeds gives **{TOO_FEW_SEEDS}** (its "
    f"training-run variance is unknown); a record without per-example data gives **{NO_DATA}**; a row without "
    f"records **{NOT_RUN}**. A claim with several pairs takes its weakest pair's verdict, in the order "
    + ", ".join(PRECEDENCE)
    + f". **{NOT_TESTABLE}**: the data, model or budget the claim needs is not available "
    "offline or on 2 CPU cores (the reason is given). A benchmark claim is reproduced when every measured "
    "difference of the two sides' seed means is within its stated bar and within the larger of the two sides' "
    f"seed spreads (max - min), with at least {BENCHMARK_SEEDS} seeds a side; with fewer it is "
    f"**{BENCHMARK_UNDECIDED}**: one seed a side cannot tell a method difference from a seed difference."
)


@dataclass
class Claim:
    matrix: str  # the matrix file's stem
    section: str
    order: int
    text: str
    experiment: str = ""
    columns: list[str] = field(default_factory=list)  # every pair is tested in each
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (higher, lower) as the paper orders them
    relation: str = "order"  # or "tie"
    paper: dict[str, float] | None = None  # row -> the paper's number (None: the matrix's paper.rows)
    baselines: dict[str, str] = field(default_factory=dict)  # row -> its like-for-like baseline row (shown)
    note: str = ""
    not_testable: str = ""
    not_run: str = ""  # testable here, not run yet: what is missing
    benchmark: dict | None = None


@dataclass
class PairOutcome:
    column: str
    higher: str
    lower: str
    score_higher: float | None
    score_lower: float | None
    result: UnitComparison | None
    verdict: str
    paper_difference: float | None = None


@dataclass
class ClaimOutcome:
    claim: Claim
    pairs: list[PairOutcome]
    baselines: list[PairOutcome]
    verdict: str
    seeds: str = ""
    profile: str = ""  # the profile the pairs were measured at (a verdict holds at that scale only)


FULL_SCALE = "paper"  # the profile of the papers' own scale; a verdict measured at any other says its scale


def scale_text(outcome: ClaimOutcome) -> str:
    """``at the quick profile`` (etc.) for a verdict measured at a scale below the papers'; empty otherwise."""
    judged = outcome.verdict not in (NOT_RUN, NO_DATA, TOO_FEW_SEEDS, NOT_TESTABLE)
    tested = judged and outcome.pairs and not (outcome.claim.benchmark or outcome.claim.not_run)
    return f"at the {outcome.profile} profile only" if tested and outcome.profile not in ("", FULL_SCALE) else ""


def benchmark_sides(pair: list) -> tuple[list[float], list[float]]:
    """A benchmark claim's per-seed numbers of each side (``[ours, reference]``, each a number or a list)."""
    a, b = ([float(v) for v in side] if isinstance(side, list) else [float(side)] for side in pair)
    return a, b


def pair_verdict(relation: str, result: UnitComparison | None, paper_difference: float | None) -> str:
    """The verdict of one pair from its test (None: no per-example data) by :data:`VERDICT_RULE`."""
    if result is None:
        return NO_DATA
    if result.p_value is None:
        return TOO_FEW_SEEDS
    significant = result.p_value < ALPHA
    if relation == "tie":
        return TIE_BROKEN if significant else TIE_HOLDS
    if not significant:
        return NO_DIFFERENCE
    if result.difference < 0:
        return OPPOSITE
    low, high = result.interval
    return REPRODUCED if paper_difference is not None and low <= paper_difference <= high else SAME_DIRECTION


def weakest(verdicts: list[str]) -> str:
    return min(verdicts, key=PRECEDENCE.index)


def _difference_text(pair: PairOutcome) -> str:
    if pair.score_higher is None:
        return f"{pair.higher} vs {pair.lower}: not run"
    text = (
        f"{pair.higher} {pair.score_higher:.2f} vs {pair.lower} {pair.score_lower:.2f}: "
        f"{pair.score_higher - pair.score_lower:+.2f}"
    )
    result = pair.result
    if result is None:
        return text + " (no per-example data)"
    if result.p_value is None:
        return text + f" ({TOO_FEW_SEEDS}: one seed of a trained row)"
    low, high = result.interval
    text += f" [{low:+.2f}, {high:+.2f}], p={result.p_value:.3f} ({result.unit})"
    if result.p_value >= ALPHA:
        text += f", detectable ±{result.detectable:.2f}"
    return text


def numbers_text(outcome: ClaimOutcome) -> str:
    """Our numbers for a claim: each pair's scores, difference, interval, p and unit; the like-for-like baselines."""
    claim = outcome.claim
    if claim.not_testable or claim.not_run:
        return "-"
    if claim.benchmark:
        labels = claim.benchmark.get("labels", ["ours", "reference"])
        parts = []
        for task, pair in claim.benchmark.get("numbers", {}).items():
            a, b = benchmark_sides(pair)
            mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
            parts.append(
                f"{task}: {mean_a:.2f} ({labels[0]}, {_seeds_word(a)}) vs {mean_b:.2f} ({labels[1]}, "
                f"{_seeds_word(b)}), {mean_a - mean_b:+.2f}"
            )
        return "; ".join(parts) + f"; bar {float(claim.benchmark['bar']):.2f}"
    parts = [
        f"{column}: " + "; ".join(_difference_text(pair) for pair in outcome.pairs if pair.column == column)
        for column in claim.columns
    ]
    for column in claim.columns if outcome.baselines else []:
        parts.append(
            f"against the baseline row ({column}): "
            + "; ".join(
                _difference_text(pair) + f" ({_baseline_word(pair)})"
                for pair in outcome.baselines
                if pair.column == column
            )
        )
    return ". ".join(parts)


def _seeds_word(values: list[float]) -> str:
    if len(values) == 1:
        return "1 seed"
    return f"{len(values)} seeds, spread {max(values) - min(values):.2f}"


def _baseline_word(pair: PairOutcome) -> str:
    result = pair.result
    if result is None or result.p_value is None:
        return "untested" if result is None else TOO_FEW_SEEDS
    if result.p_value >= ALPHA:
        return "no significant difference"
    return "above" if result.difference > 0 else "below"


def paper_text(outcome: ClaimOutcome) -> str:
    several = len(outcome.claim.columns) > 1
    differences = list(
        dict.fromkeys(
            (f"{pair.column}: " if several else "") + f"{pair.higher} - {pair.lower} {pair.paper_difference:+.2f}"
            for pair in outcome.pairs
            if pair.paper_difference is not None
        )
    )
    return ("paper: " + "; ".join(differences)) if differences else ""


def verdict_text(outcome: ClaimOutcome) -> str:
    claim = outcome.claim
    pieces = [f"**{outcome.verdict}**"]
    if scale_text(outcome):
        pieces.append(f"({scale_text(outcome)})")
    if claim.not_testable or claim.not_run:
        pieces.append(f"({claim.not_testable or claim.not_run})")
    if len(outcome.pairs) > 1:
        relation = "≈" if claim.relation == "tie" else ">"
        pieces.append(
            "(pairs: "
            + "; ".join(
                f"{p.higher} {relation} {p.lower}"
                + (f" on {p.column}" if len(claim.columns) > 1 else "")
                + f": {p.verdict}"
                for p in outcome.pairs
            )
            + ")"
        )
    if claim.note:
        pieces.append(claim.note)
    return " ".join(pieces)


def experiment_text(outcome: ClaimOutcome) -> str:
    claim = outcome.claim
    text = f"`matrices/{claim.matrix}.yaml`"
    if outcome.seeds:
        text += f", seeds {outcome.seeds}"
    if claim.benchmark:
        text = f"`{claim.benchmark.get('command', '')}`"
    return text + (f": {claim.experiment}" if claim.experiment else "")


def claim_row(outcome: ClaimOutcome) -> list[str]:
    paper = paper_text(outcome)
    return [
        outcome.claim.text + (f" ({paper})" if paper else ""),
        experiment_text(outcome),
        numbers_text(outcome),
        verdict_text(outcome),
    ]


HEADERS = ["claim", "experiment", "our numbers", "verdict"]


def claims_markdown(outcomes: list[ClaimOutcome], heading: str = "## Claims") -> list[str]:
    """The claims table of a matrix page (the same rows as the reproduction page's)."""
    if not outcomes:
        return []
    return [
        heading,
        "",
        "Verdicts computed from the records by the rule of docs/reproduction.md: " + VERDICT_RULE,
        "",
        _table([claim_row(outcome) for outcome in outcomes]),
        "",
    ]


def _table(rows: list[list[str]]) -> str:
    escape = lambda text: text.replace("|", "\\|").replace("\n", " ")  # noqa: E731 - a local shorthand
    lines = ["| " + " | ".join(HEADERS) + " |", "| " + " | ".join("---" for _ in HEADERS) + " |"]
    return "\n".join(lines + ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows])
