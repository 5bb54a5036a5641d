"""Claims of a matrix file and their verdicts, computed from the stored records (issue #34).

A matrix's optional ``claims:`` block states what a paper claims and which of the matrix's rows test it: the rows
the claim orders (``higher`` above ``lower``, or ``relation: tie``), the column, the paper's numbers and, where it
matters, each row's like-for-like baseline. The verdict is never typed: :func:`judge` computes it from the records by
the one rule :data:`VERDICT_RULE` states (the across-runs test wherever a row was trained,
:mod:`harness.evaluation.significance`). A claim the harness cannot test says why (``not_testable``); a claim checked
by a benchmark script carries the script's measured numbers and the bar they must meet (``benchmark``).

:func:`render_reproduction` writes the whole reproduction page (docs/reproduction.md) from every matrix's claims;
the matrix pages (``harness leaderboard --matrix``) render the same outcomes through :func:`claims_markdown`, so the
two cannot disagree. Format of the block: docs/fidelity.md, "Paper tables".
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataFileError, data_error
from ..evaluation.significance import ALPHA, MIN_TRAINED_SEEDS, TOO_FEW_SEEDS, UnitComparison

REPRODUCED = "reproduced"
SAME_DIRECTION = "same direction"
OPPOSITE = "not reproduced (significantly opposite)"
NO_DIFFERENCE = "not reproduced (no significant difference)"
TIE_HOLDS = "reproduced (no significant difference)"
TIE_BROKEN = "not reproduced (significant difference)"
NOT_RUN = "not run"
NO_DATA = "untested (records without per-example data)"
NOT_TESTABLE = "not testable here"
# A claim's verdict is its weakest pair's, in this order (first = weakest).
PRECEDENCE = [OPPOSITE, TIE_BROKEN, NOT_RUN, TOO_FEW_SEEDS, NO_DATA, NO_DIFFERENCE, SAME_DIRECTION, TIE_HOLDS,
              REPRODUCED]

VERDICT_RULE = (
    "Each claim names rows of its matrix and a column; every pair of rows it orders is tested on the stored records "
    "(`published/`). The test is across runs wherever a row was trained (Welch t over the seeds with the example "
    "bootstrap's variance added: would new training runs keep the order?) and over test examples for two untrained "
    "rows (the paired bootstrap); docs/fidelity.md, \"Two units of inference\". With p < "
    f"{ALPHA} and the paper's sign the pair is **{REPRODUCED}** when the paper's difference lies inside our 95% "
    f"interval (about the claimed size), else **{SAME_DIRECTION}** (the ordering holds, the size differs); "
    f"significant with the other sign: **{OPPOSITE}**; p >= {ALPHA}: **{NO_DIFFERENCE}**. A claim that two rows "
    f"are on a par is **{TIE_HOLDS}** when p >= {ALPHA} (no equivalence test: a wide interval also passes), else "
    f"**{TIE_BROKEN}**. A trained row with fewer than {MIN_TRAINED_SEEDS} seeds gives **{TOO_FEW_SEEDS}** (its "
    f"training-run variance is unknown); a record without per-example data gives **{NO_DATA}**; a row without "
    f"records **{NOT_RUN}**. A claim with several pairs takes its weakest pair's verdict, in the order "
    + ", ".join(PRECEDENCE) + f". **{NOT_TESTABLE}**: the data, model or budget the claim needs is not available "
    "offline or on 2 CPU cores (the reason is given). A benchmark claim is reproduced when every measured "
    "difference is within its stated bar.")


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


def _text(path: Path, item: dict, key: str, required: bool = False) -> str:
    value = item.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise data_error(path, None, f"claims: {key} must be a text; got {value!r} in {item.get('claim', item)!r}.")
    return " ".join(value.split())


def load_claims(path: Path, document: dict) -> list[Claim]:
    """The ``claims:`` block of a matrix document (row names are checked against the board by :func:`judge`)."""
    block = document.get("claims") or []
    if not isinstance(block, list):
        raise data_error(path, None, "claims must be a list of mappings (section, claim, column, higher, lower, ...).")
    claims = []
    for item in block:
        if not isinstance(item, dict):
            raise data_error(path, None, f"claims: each claim must be a mapping; got {item!r}.")
        unknown = set(item) - {"section", "order", "claim", "experiment", "column", "higher", "lower", "pairs",
                               "relation", "paper", "baselines", "note", "not_testable", "not_run", "benchmark"}
        if unknown:
            raise data_error(path, None, f"claims: unknown key(s) {sorted(unknown)} in {item.get('claim')!r}.")
        pairs = [tuple(map(str, pair)) for pair in item.get("pairs") or []]
        if any(len(pair) != 2 for pair in pairs):
            raise data_error(path, None, f"claims: pairs must be [higher, lower] rows; got {item.get('pairs')!r}.")
        if item.get("higher"):
            lower = item.get("lower", [])
            pairs += [(str(item["higher"]), str(low)) for low in ([lower] if isinstance(lower, str) else lower)]
        column = item.get("column")
        columns = [str(c) for c in ([column] if isinstance(column, str) else column or [])]
        relation = item.get("relation", "order")
        if relation not in ("order", "tie"):
            raise data_error(path, None, f"claims: relation must be order or tie; got {relation!r}.")
        paper = item.get("paper")
        if paper is not None and (not isinstance(paper, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in paper.values())):
            raise data_error(path, None, f"claims: paper must map row names to numbers; got {paper!r}.")
        benchmark = item.get("benchmark")
        if benchmark is not None and not (isinstance(benchmark, dict) and "bar" in benchmark and isinstance(
                benchmark.get("numbers"), dict)):
            raise data_error(path, None, "claims: benchmark needs command, bar and numbers (task: [ours, reference]).")
        claim = Claim(path.stem, _text(path, item, "section", True), int(item.get("order", 0)),
                      _text(path, item, "claim", True), _text(path, item, "experiment"), columns, pairs, relation,
                      None if paper is None else {str(k): float(v) for k, v in paper.items()},
                      {str(k): str(v) for k, v in (item.get("baselines") or {}).items()}, _text(path, item, "note"),
                      _text(path, item, "not_testable"), _text(path, item, "not_run"), benchmark)
        if not (claim.not_testable or claim.not_run or claim.benchmark or (claim.columns and claim.pairs)):
            raise data_error(path, None, f"claims: {claim.text[:60]!r} needs column, higher and lower (or pairs; or "
                                         "not_testable / not_run: why, or benchmark: its numbers).")
        claims.append(claim)
    return claims


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


class _Statistics:
    """Cell statistics computed once per page (many claims share rows)."""

    def __init__(self, cache: dict | None = None) -> None:
        self.cache: dict[tuple, Any] = {} if cache is None else cache

    def compare(self, cells_a: list, cells_b: list) -> UnitComparison | None:
        from .stats import compare_cells

        return compare_cells(cells_a, cells_b, self.cache)


def _pair(board: Any, claim: Claim, column_label: str, higher: str, lower: str,
          statistics: _Statistics) -> PairOutcome:
    from .matrix_board import _member_cells

    rows = {row.label: row for row in board.rows}
    columns = {column.label: column for column in board.columns}
    for name in (higher, lower):
        if name not in rows:
            raise DataFileError(f"matrices/{claim.matrix}.yaml: claim {claim.text[:60]!r} names row {name!r}, which is "
                                f"not an entry of the matrix (entries: {sorted(rows)}).")
    if column_label not in columns:
        raise DataFileError(f"matrices/{claim.matrix}.yaml: claim {claim.text[:60]!r} names column {column_label!r}, "
                            f"which the matrix does not have (columns: {sorted(columns)}).")
    column = columns[column_label]
    paper = claim.paper if claim.paper is not None else {
        name: values[column_label] for name, values in board.paper.rows.items() if column_label in values}
    paper_difference = paper[higher] - paper[lower] if higher in paper and lower in paper else None
    cells_h, cells_l = _member_cells(rows[higher], column), _member_cells(rows[lower], column)
    if not all(cell.values for cell in cells_h + cells_l):
        return PairOutcome(column_label, higher, lower, None, None, None, NOT_RUN, paper_difference)
    score_h = rows[higher].cells[column_label].mean()
    score_l = rows[lower].cells[column_label].mean()
    result = statistics.compare(cells_h, cells_l)
    verdict = pair_verdict(claim.relation, result, paper_difference)
    if result is None and any(rows[name].train_on and len(rows[name].cells[column_label].values) < MIN_TRAINED_SEEDS
                              for name in (higher, lower)):
        verdict = TOO_FEW_SEEDS  # no per-example data either, but one seed of a trained row settles it
    return PairOutcome(column_label, higher, lower, score_h, score_l, result, verdict, paper_difference)


def _benchmark_verdict(claim: Claim) -> str:
    numbers = claim.benchmark.get("numbers", {})
    bar = float(claim.benchmark["bar"])
    return REPRODUCED if all(abs(a - b) <= bar for a, b in numbers.values()) else "not reproduced (beyond the bar)"


def judge(board: Any, claim: Claim, statistics: _Statistics | None = None) -> ClaimOutcome:
    """The claim's pairs tested on the board's records and its verdict (:data:`VERDICT_RULE`)."""
    statistics = statistics or _Statistics()
    if claim.not_testable:
        return ClaimOutcome(claim, [], [], NOT_TESTABLE)
    if claim.not_run:
        return ClaimOutcome(claim, [], [], NOT_RUN)
    if claim.benchmark:
        return ClaimOutcome(claim, [], [], _benchmark_verdict(claim))
    pairs = [_pair(board, claim, column, high, low, statistics) for column in claim.columns
             for high, low in claim.pairs]
    reference = Claim(claim.matrix, claim.section, 0, claim.text, paper={})
    baselines = [_pair(board, reference, column, row, base, statistics) for column in claim.columns
                 for row, base in claim.baselines.items()]
    seeds = sorted({seed for row in board.rows for cell in row.cells.values() for seed in cell.values
                    if row.label in {name for pair in claim.pairs for name in pair}})
    return ClaimOutcome(claim, pairs, baselines, weakest([pair.verdict for pair in pairs]),
                        ", ".join(map(str, seeds)))


def _difference_text(pair: PairOutcome) -> str:
    if pair.score_higher is None:
        return f"{pair.higher} vs {pair.lower}: not run"
    text = f"{pair.higher} {pair.score_higher:.2f} vs {pair.lower} {pair.score_lower:.2f}: " \
           f"{pair.score_higher - pair.score_lower:+.2f}"
    result = pair.result
    if result is None:
        return text + " (no per-example data)"
    if result.p_value is None:
        return text + f" ({TOO_FEW_SEEDS}: one seed of a trained row)"
    low, high = result.interval
    return text + f" [{low:+.2f}, {high:+.2f}], p={result.p_value:.3f} ({result.unit})"


def numbers_text(outcome: ClaimOutcome) -> str:
    """Our numbers for a claim: each pair's scores, difference, interval, p and unit; the like-for-like baselines."""
    claim = outcome.claim
    if claim.not_testable or claim.not_run:
        return "-"
    if claim.benchmark:
        labels = claim.benchmark.get("labels", ["ours", "reference"])
        return "; ".join(f"{task}: {a:.2f} ({labels[0]}) vs {b:.2f} ({labels[1]}), {a - b:+.2f}"
                         for task, (a, b) in claim.benchmark.get("numbers", {}).items()) + \
            f"; bar {float(claim.benchmark['bar']):.2f}"
    parts = [f"{column}: " + "; ".join(_difference_text(pair) for pair in outcome.pairs if pair.column == column)
             for column in claim.columns]
    for column in claim.columns if outcome.baselines else []:
        parts.append(f"against the baseline row ({column}): " + "; ".join(
            _difference_text(pair) + f" ({_baseline_word(pair)})" for pair in outcome.baselines
            if pair.column == column))
    return ". ".join(parts)


def _baseline_word(pair: PairOutcome) -> str:
    result = pair.result
    if result is None or result.p_value is None:
        return "untested" if result is None else TOO_FEW_SEEDS
    if result.p_value >= ALPHA:
        return "no significant difference"
    return "above" if result.difference > 0 else "below"


def paper_text(outcome: ClaimOutcome) -> str:
    several = len(outcome.claim.columns) > 1
    differences = list(dict.fromkeys((f"{pair.column}: " if several else "") + f"{pair.higher} - {pair.lower} "
                                     f"{pair.paper_difference:+.2f}" for pair in outcome.pairs
                                     if pair.paper_difference is not None))
    return ("paper: " + "; ".join(differences)) if differences else ""


def verdict_text(outcome: ClaimOutcome) -> str:
    claim = outcome.claim
    pieces = [f"**{outcome.verdict}**"]
    if claim.not_testable or claim.not_run:
        pieces.append(f"({claim.not_testable or claim.not_run})")
    if len(outcome.pairs) > 1:
        relation = "≈" if claim.relation == "tie" else ">"
        pieces.append("(pairs: " + "; ".join(
            f"{p.higher} {relation} {p.lower}" + (f" on {p.column}" if len(claim.columns) > 1 else "")
            + f": {p.verdict}" for p in outcome.pairs) + ")")
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
    return [outcome.claim.text + (f" ({paper})" if paper else ""), experiment_text(outcome), numbers_text(outcome),
            verdict_text(outcome)]


HEADERS = ["claim", "experiment", "our numbers", "verdict"]


def claims_markdown(outcomes: list[ClaimOutcome], heading: str = "## Claims") -> list[str]:
    """The claims table of a matrix page (the same rows as the reproduction page's)."""
    if not outcomes:
        return []
    return [heading, "", "Verdicts computed from the records by the rule of docs/reproduction.md: " + VERDICT_RULE,
            "", _table([claim_row(outcome) for outcome in outcomes]), ""]


def _table(rows: list[list[str]]) -> str:
    escape = lambda text: text.replace("|", "\\|").replace("\n", " ")  # noqa: E731 - a local shorthand
    lines = ["| " + " | ".join(HEADERS) + " |", "| " + " | ".join("---" for _ in HEADERS) + " |"]
    return "\n".join(lines + ["| " + " | ".join(escape(cell) for cell in row) + " |" for row in rows])


def matrix_outcomes(matrix_path: Path, store: Any, registry: Any, statistics: _Statistics | None = None,
                    board: Any = None) -> list[ClaimOutcome]:
    """Every claim of one matrix file judged on the store's records."""
    import yaml

    from .matrix_board import build_board

    matrix_path = Path(matrix_path)
    document = yaml.safe_load(matrix_path.read_text(encoding="utf-8")) or {}
    claims = load_claims(matrix_path, document)
    if not claims:
        return []
    needs_board = any(claim.pairs and not (claim.not_testable or claim.not_run) for claim in claims)
    if needs_board and board is None:
        board = build_board(matrix_path, store, registry)
    statistics = statistics or _Statistics(board.statistics if board is not None else None)
    return [judge(board, claim, statistics) for claim in claims]


PREAMBLE = """# Reproduction: each paper's headline claims against what the harness measured

Generated by `harness leaderboard --reproduction docs/reproduction.md` from the claims of the matrix files
(`matrices/*.yaml`, block `claims:`) and the published records (`published/`); do not edit by hand (a test checks
that this page equals the generated one). Each claim names the matrix rows that test it, the column, the paper's
numbers and, where it matters, each row's like-for-like baseline (the untrained backbone with the same pooling);
the matrix pages (`leaderboards/matrices/`) show the same claims with the same verdicts.

How a verdict is computed: {rule}

Quick scale, everywhere below: the quick profile (an already trained sentence encoder, not the papers' BERT/RoBERTa
/mBART base models; per-method step budgets of tens to hundreds of steps: README "Budgets"), usually 2 seeds. Quick
rows rank methods after a short adaptation of a strong encoder; they test directions, rarely sizes. The `paper`
matrices are the full-scale counterparts and need a GPU. Scores are x100.
"""


FINGERPRINT = "<!-- generated from inputs sha256:{inputs}; page sha256:{page} -->"
# The code a verdict depends on (its text enters the inputs' digest, so a change to the rule asks for a new page).
VERDICT_CODE = ("claims.py", "../evaluation/significance.py", "../evaluation/bootstrap.py")


def inputs_digest(matrix_paths: list[Path], store: Any, registry: Any) -> str:
    """sha256 over what the page is computed from: the matrix files with claims, the checksums of the records (and
    per-example side files) of their rows, and the verdict code. Cheap (no resampling): a test compares it with the
    one the committed page names, so a page older than its inputs fails."""
    import hashlib

    import yaml

    from ..matrix import load_matrix
    from .matrix_board import entry_specs

    digest = hashlib.sha256()
    records = {(r["model_key"], r["seed"], r["task"]["key"]): r for r in store.records()}
    for path in sorted(matrix_paths):
        text = Path(path).read_text(encoding="utf-8")
        if not (yaml.safe_load(text) or {}).get("claims"):
            continue
        digest.update(f"{Path(path).name}\0{text}\0".encode())
        keys = {spec.key for _, spec in entry_specs(load_matrix(Path(path)), registry)}
        for key in sorted(k for k in records if k[0] in keys):
            record = records[key]
            digest.update(f"{key}:{record.get('checksum')}:{(record.get('examples') or {}).get('sha256')}\0".encode())
    here = Path(__file__).parent
    for name in VERDICT_CODE:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()


def split_fingerprint(page: str) -> tuple[str, dict[str, str]]:
    """The page's body and the digests its last line names ({} when it has none)."""
    import re

    body, _, last = page.rstrip("\n").rpartition("\n")
    found = re.fullmatch(r"<!-- generated from inputs sha256:(\w+); page sha256:(\w+) -->", last)
    if not found:
        return page, {}
    return body + "\n", {"inputs": found.group(1), "page": found.group(2)}


def render_reproduction(matrix_paths: list[Path], store: Any, registry: Any) -> str:
    """The reproduction page: every matrix's claims grouped by section (ordered by the claims' ``order``), ending
    with :data:`FINGERPRINT` (the digest of its inputs and of its own body)."""
    import hashlib

    statistics = _Statistics()
    outcomes = []
    for index, path in enumerate(sorted(matrix_paths)):
        for position, outcome in enumerate(matrix_outcomes(path, store, registry, statistics)):
            outcomes.append(((outcome.claim.order, index, position), outcome))
    lines = [PREAMBLE.format(rule=VERDICT_RULE)]
    sections: dict[str, list[ClaimOutcome]] = {}
    for _, outcome in sorted(outcomes, key=lambda item: item[0]):
        sections.setdefault(outcome.claim.section, []).append(outcome)
    for section, members in sections.items():
        lines += [f"## {section}", "", _table([claim_row(outcome) for outcome in members]), ""]
    body = "\n".join(lines).rstrip("\n") + "\n"
    return body + FINGERPRINT.format(inputs=inputs_digest(matrix_paths, store, registry),
                                     page=hashlib.sha256(body.encode()).hexdigest()) + "\n"


def write_reproduction(path: Path, matrix_dir: Path, store: Any, registry: Any) -> Path:
    from ..store import atomic_write_text

    matrix_paths = sorted(Path(matrix_dir).glob("*.yaml"))
    if not matrix_paths:
        raise DataFileError(f"no matrix files (*.yaml) in {matrix_dir}; pass --matrix-dir with the matrices folder.")
    atomic_write_text(Path(path), render_reproduction(matrix_paths, store, registry))
    return Path(path)
