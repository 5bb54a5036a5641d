"""Claims of a matrix file and their verdicts, computed from the stored records.

A matrix's optional ``claims:`` block states what a paper claims and which of the matrix's rows test it: the rows
the claim orders (``higher`` above ``lower``, or ``relation: tie``), the column, the paper's numbers and, where it
matters, each row's like-for-like baseline. The verdict is never typed: :func:`judge` computes it from the records by
the one rule :data:`VERDICT_RULE` states (the across-runs test wherever a row was trained,
:mod:`harness.evaluation.significance`). A claim the harness cannot test says why (``not_testable``); a claim checked
by a benchmark script carries the script's measured numbers and the bar they must meet (``benchmark``).

:func:`render_reproduction` writes the whole reproduction page (docs/reproduction.md) from every matrix's claims;
the matrix pages (``harness leaderboard --matrix``) render the same outcomes through :func:`claims_markdown`, so the
two cannot disagree. Format of the block: docs/core/leaderboards.md, "Paper tables".
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import DataFileError, data_error
from ..evaluation.significance import MIN_TRAINED_SEEDS, TOO_FEW_SEEDS, UnitComparison
from ..files import atomic_write_text, prepare_output_dir
from ..store import Store
from .formats import BUILTIN_FORMATS, LeaderboardRenderer, matrix_renderers
from .matrix_board import build_board
from .verdicts import (
    BENCHMARK_SEEDS,
    BENCHMARK_UNDECIDED,
    NOT_RUN,
    NOT_TESTABLE,
    REPRODUCED,
    VERDICT_RULE,
    Claim,
    ClaimOutcome,
    PairOutcome,
    _table,
    benchmark_sides,
    claim_row,
    pair_verdict,
    weakest,
)


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
        unknown = set(item) - {
            "section",
            "order",
            "claim",
            "experiment",
            "column",
            "higher",
            "lower",
            "pairs",
            "relation",
            "paper",
            "baselines",
            "note",
            "not_testable",
            "not_run",
            "benchmark",
        }
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
        if paper is not None and (
            not isinstance(paper, dict)
            or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in paper.values()
            )
        ):
            raise data_error(path, None, f"claims: paper must map row names to numbers; got {paper!r}.")
        benchmark = item.get("benchmark")
        if benchmark is not None and not (
            isinstance(benchmark, dict) and "bar" in benchmark and isinstance(benchmark.get("numbers"), dict)
        ):
            raise data_error(
                path,
                None,
                "claims: benchmark needs command, bar and numbers (task: [ours, reference], each a number or a list "
                "of per-seed numbers).",
            )
        claim = Claim(
            path.stem,
            _text(path, item, "section", True),
            int(item.get("order", 0)),
            _text(path, item, "claim", True),
            _text(path, item, "experiment"),
            columns,
            pairs,
            relation,
            None if paper is None else {str(k): float(v) for k, v in paper.items()},
            {str(k): str(v) for k, v in (item.get("baselines") or {}).items()},
            _text(path, item, "note"),
            _text(path, item, "not_testable"),
            _text(path, item, "not_run"),
            benchmark,
        )
        if not (claim.not_testable or claim.not_run or claim.benchmark or (claim.columns and claim.pairs)):
            raise data_error(
                path,
                None,
                f"claims: {claim.text[:60]!r} needs column, higher and lower (or pairs; or "
                "not_testable / not_run: why, or benchmark: its numbers).",
            )
        claims.append(claim)
    return claims


class _Statistics:
    """Cell statistics computed once per page (many claims share rows)."""

    def __init__(self, cache: dict | None = None) -> None:
        self.cache: dict[tuple, Any] = {} if cache is None else cache

    def compare(self, cells_a: list, cells_b: list) -> UnitComparison | None:
        from .stats import compare_cells

        return compare_cells(cells_a, cells_b, self.cache)


def _pair(board: Any, claim: Claim, column_label: str, higher: str, lower: str, statistics: _Statistics) -> PairOutcome:
    from .matrix_board import member_cells

    rows = {row.label: row for row in board.rows}
    columns = {column.label: column for column in board.columns}
    for name in (higher, lower):
        if name not in rows:
            raise DataFileError(
                f"matrices/{claim.matrix}.yaml: claim {claim.text[:60]!r} names row {name!r}, which is "
                f"not an entry of the matrix (entries: {sorted(rows)})."
            )
    if column_label not in columns:
        raise DataFileError(
            f"matrices/{claim.matrix}.yaml: claim {claim.text[:60]!r} names column {column_label!r}, "
            f"which the matrix does not have (columns: {sorted(columns)})."
        )
    column = columns[column_label]
    paper = (
        claim.paper
        if claim.paper is not None
        else {name: values[column_label] for name, values in board.paper.rows.items() if column_label in values}
    )
    paper_difference = paper[higher] - paper[lower] if higher in paper and lower in paper else None
    cells_h, cells_l = member_cells(rows[higher], column), member_cells(rows[lower], column)
    if not all(cell.values for cell in cells_h + cells_l):
        return PairOutcome(column_label, higher, lower, None, None, None, NOT_RUN, paper_difference)
    score_h = rows[higher].cells[column_label].mean()
    score_l = rows[lower].cells[column_label].mean()
    result = statistics.compare(cells_h, cells_l)
    verdict = pair_verdict(claim.relation, result, paper_difference)
    if result is None and any(
        rows[name].train_on and len(rows[name].cells[column_label].values) < MIN_TRAINED_SEEDS
        for name in (higher, lower)
    ):
        verdict = TOO_FEW_SEEDS  # no per-example data either, but one seed of a trained row settles it
    return PairOutcome(column_label, higher, lower, score_h, score_l, result, verdict, paper_difference)


def _benchmark_verdict(claim: Claim) -> str:
    """:data:`REPRODUCED` when, per task, the difference of the two sides' seed means is within the bar and within
    the larger of the two sides' seed spreads (max - min); :data:`BENCHMARK_UNDECIDED` while a side has fewer than
    :data:`BENCHMARK_SEEDS` seeds (one seed a side cannot tell a method difference from a seed difference)."""
    sides = [benchmark_sides(pair) for pair in claim.benchmark.get("numbers", {}).values()]
    if any(min(len(a), len(b)) < BENCHMARK_SEEDS for a, b in sides):
        return BENCHMARK_UNDECIDED
    bar = float(claim.benchmark["bar"])
    for a, b in sides:
        difference = abs(sum(a) / len(a) - sum(b) / len(b))
        if difference > bar or difference > max(max(a) - min(a), max(b) - min(b)):
            return "not reproduced (beyond the bar or both sides' seed spread)"
    return REPRODUCED


def judge(board: Any, claim: Claim, statistics: _Statistics | None = None) -> ClaimOutcome:
    """The claim's pairs tested on the board's records and its verdict (:data:`VERDICT_RULE`)."""
    statistics = statistics or _Statistics()
    if claim.not_testable:
        return ClaimOutcome(claim, [], [], NOT_TESTABLE)
    if claim.not_run:
        return ClaimOutcome(claim, [], [], NOT_RUN)
    if claim.benchmark:
        return ClaimOutcome(claim, [], [], _benchmark_verdict(claim))
    pairs = [
        _pair(board, claim, column, high, low, statistics) for column in claim.columns for high, low in claim.pairs
    ]
    reference = Claim(claim.matrix, claim.section, 0, claim.text, paper={})
    baselines = [
        _pair(board, reference, column, row, base, statistics)
        for column in claim.columns
        for row, base in claim.baselines.items()
    ]
    seeds = sorted(
        {
            seed
            for row in board.rows
            for cell in row.cells.values()
            for seed in cell.values
            if row.label in {name for pair in claim.pairs for name in pair}
        }
    )
    return ClaimOutcome(
        claim,
        pairs,
        baselines,
        weakest([pair.verdict for pair in pairs]),
        ", ".join(map(str, seeds)),
        str(getattr(board, "profile", "")),
    )


def matrix_outcomes(
    matrix_path: Path, store: Any, registry: Any, statistics: _Statistics | None = None, board: Any = None
) -> list[ClaimOutcome]:
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
/mBART base models; per-method step budgets of tens to hundreds of steps: docs/guide/running.md#budgets), usually 2
seeds. Quick rows rank methods after a short adaptation of a strong encoder; they test directions, rarely sizes. The
`paper` matrices are the full-scale counterparts and need a GPU. Scores are x100.
"""


FINGERPRINT = "<!-- generated from inputs sha256:{inputs}; page sha256:{page} -->"
# The code a verdict depends on (its text enters the inputs' digest, so a change to the rule asks for a new page).
VERDICT_CODE = ("claims.py", "verdicts.py", "../evaluation/significance.py", "../evaluation/bootstrap.py")


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
    return (
        body
        + FINGERPRINT.format(
            inputs=inputs_digest(matrix_paths, store, registry), page=hashlib.sha256(body.encode()).hexdigest()
        )
        + "\n"
    )


def write_reproduction(path: Path, matrix_dir: Path, store: Any, registry: Any) -> Path:
    matrix_paths = sorted(Path(matrix_dir).glob("*.yaml"))
    if not matrix_paths:
        raise DataFileError(f"no matrix files (*.yaml) in {matrix_dir}; pass --matrix-dir with the matrices folder.")
    atomic_write_text(Path(path), render_reproduction(matrix_paths, store, registry))
    return Path(path)


def write_matrix_board(
    matrix_path: Path,
    store: Store,
    output_dir: Path,
    formats: tuple[str, ...],
    registry: Any,
    renderers: Mapping[str, LeaderboardRenderer] | None = None,
) -> list[Path]:
    """``<output_dir>/<matrix file stem>.<fmt>`` for each of ``formats``: those of ``renderers`` (default the
    built-in ones) that render a matrix (md, csv, html)."""
    matrix_formats = matrix_renderers(BUILTIN_FORMATS if renderers is None else renderers)
    for fmt in formats:
        if fmt not in matrix_formats:
            from ..errors import invalid_choice

            raise invalid_choice("--formats (with --matrix)", fmt, tuple(matrix_formats))
    board = build_board(matrix_path, store, registry)
    outcomes = matrix_outcomes(matrix_path, store, registry, board=board)  # the reproduction page's verdicts
    prepare_output_dir(Path(output_dir), "the matrix table folder")
    written = []
    for fmt in formats:
        path = Path(output_dir) / f"{board.name}.{fmt}"
        atomic_write_text(path, matrix_formats[fmt](board, outcomes))
        written.append(path)
    return written
