"""Bootstrap intervals and tie marks for leaderboard tables: the statistics behind the hook that
``harness.leaderboard`` calls, kept out of the renderers.

For each cell with per-example data (the record's side file, :func:`harness.store.read_examples`) the 95% bootstrap
interval of its seed mean over test examples (:func:`harness.evaluation.bootstrap.pooled_replicates`). Per column,
the rows over the same test examples are compared with the best row by the paired bootstrap on the same resamples
(:func:`harness.evaluation.significance.column_marks`): the best is bold only when significantly better than the
runner-up; rows not distinguishable from the best carry ``≈``. The average column gets the same from the mean of
its columns' replicates (test sets of different tasks are resampled independently). A cell whose records have no
per-example data (stored before harness kept it) shows no interval; the table's notes say which columns.

The hook: :func:`attach_statistics` (once per table, after it is collected) stores a :class:`TableStatistics` on
the table and each cell's interval and mark on the cell (``cell.bootstrap``); :func:`decorate` turns a cell's text
into the text with interval and marks (or :func:`annotate`, a ``(row, column, cell)`` annotator, appends them);
:func:`cell_mark` is the one rule for "best" every format shows (:func:`column_decisions`); :func:`notes` gives
the legend lines; :func:`csv_fields` the csv's extra columns. A paper-table view compares two rows with
:func:`compare_cells` (their cells of one column, or of an average's members) and :func:`paper_agreement` (our
difference against the paper's: same sign and significant?); :func:`compare_rows` does it within a family table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..evaluation.bootstrap import (
    DEFAULT_RESAMPLES,
    ExampleDataError,
    ExampleScores,
    percentile_interval,
    pooled_replicates,
)
from ..evaluation.significance import (
    ACROSS_RUNS_QUESTION,
    ALPHA,
    EXAMPLES_QUESTION,
    MIN_TRAINED_SEEDS,
    ColumnMarks,
    UnitComparison,
    agrees_with_paper,
    column_marks,
    from_replicates,
    units_from,
)
from ..store import REPAIR_ADVICE
from ..stored_scores import NO_DATA, stored_run

logger = logging.getLogger(__name__)

TIED = "≈"
TOO_FEW = "?"  # a row that cannot be compared with the column's best: a trained row of the two has one seed
UNTESTED = "¶"  # distinct from the contamination marks (†N%, ‡N%) and the stale-row mark (§)
# What :func:`cell_mark` (the one rule for "best", every format) says of a cell.
BEST_SIGNIFICANT, BEST, BEST_UNTESTED, TIED_WITH_BEST = "best-significant", "best", "best-untested", "tied"
TOO_FEW_SEEDS_MARK = "too-few-seeds"


@dataclass
class CellStatistics:
    replicates: np.ndarray
    identity: str
    examples: int
    seeds: int
    seed_scores: dict[int, float] = field(default_factory=dict)  # seed -> score (the across-runs test's data)
    trained: bool = False  # its records come from training: comparisons with it are across runs

    @property
    def interval(self) -> tuple[float, float]:
        return percentile_interval(self.replicates)


@dataclass
class TableStatistics:
    cells: dict[tuple[str, str], CellStatistics] = field(default_factory=dict)  # (model key, column) ->
    without_data: set[tuple[str, str]] = field(default_factory=set)  # cells with scores but no per-example data
    marks: dict[str, ColumnMarks] = field(default_factory=dict)  # column -> marks (rows by model key)
    decisions: dict[tuple[str, str], str] = field(default_factory=dict)  # (model key, column) -> cell_mark's answer
    problems: list[str] = field(default_factory=list)  # side files that were absent or damaged
    damaged: set[tuple[str, str]] = field(default_factory=set)  # cells of without_data that have such a side file


def cell_examples(
    paths: dict[int, str], seeds: set[int], problems: list[str], trained: list[bool] | None = None
) -> list[ExampleScores] | None:
    """The per-example data of a cell's seeds (``paths``: seed -> record path), or None when a seed has none
    (damaged or absent side files are added to ``problems``; whether any record comes from training is appended
    to ``trained`` when given)."""
    results = []
    for seed in sorted(seeds):
        data, reason, was_trained = stored_run(paths[seed]) if seed in paths else (None, NO_DATA, False)
        if data is None:
            if reason != NO_DATA:
                problems.append(reason)
            return None
        results.append(data)
        if trained is not None:
            trained.append(was_trained)
    return results


def cell_statistics(
    cell: Any, problems: list[str] | None = None, resamples: int = DEFAULT_RESAMPLES
) -> CellStatistics | None:
    """A leaderboard cell's seed-pooled bootstrap replicates (from the records its ``records`` name, for the seeds
    in its ``values``), or None when a seed has no per-example data. ``problems`` collects damaged side files."""
    problems = problems if problems is not None else []
    trained: list[bool] = []
    results = cell_examples(cell.records, set(cell.values), problems, trained) if cell.values else None
    if results is None:
        return None
    try:
        replicates = pooled_replicates(results, resamples)
    except ExampleDataError as exc:
        problems.append(f"{sorted(cell.records.values())[0]}: {exc}")
        return None
    return CellStatistics(
        replicates,
        results[0].identity(),
        len(results[0]),
        len(results),
        {seed: cell.values[seed] for seed in sorted(cell.values)},
        any(trained),
    )


def mean_of_cells(parts: list[CellStatistics]) -> CellStatistics:
    """The replicates of an average over columns (each column's test set resampled on its own); per seed the mean
    over the columns (seeds every column has)."""
    seeds = sorted(set.intersection(*(set(part.seed_scores) for part in parts)))
    return CellStatistics(
        np.mean([part.replicates for part in parts], axis=0),
        "|".join(part.identity for part in parts),
        sum(part.examples for part in parts),
        min(part.seeds for part in parts),
        {seed: float(np.mean([part.seed_scores[seed] for part in parts])) for seed in seeds},
        any(part.trained for part in parts),
    )


def compare_cells(cells_a: list[Any], cells_b: list[Any], cache: dict | None = None) -> UnitComparison | None:
    """Row a minus row b in both units of inference (examples; across runs where a row was trained), each row given
    as its cells of one column (one task) or of the members of an averaged column (the score is then the mean over
    members); None when a cell has no per-example data or the two rows are not over the same examples. For the
    paper-table view (``leaderboard --matrix``): pass the result and the paper's difference to
    :func:`harness.evaluation.significance.agrees_with_paper`. ``cache`` (a dict kept by the caller) keeps each
    cell's statistics for the next call: a page that tests many pairs of the same rows resamples each cell once."""
    if not cells_a or len(cells_a) != len(cells_b):
        return None
    sides = []
    for cells in (cells_a, cells_b):
        parts = [cached_statistics(cell, cache) for cell in cells]
        if not all(parts):
            return None
        sides.append(mean_of_cells(parts) if len(parts) > 1 else parts[0])
    a, b = sides
    if a.identity != b.identity:
        return None
    score_a = float(np.mean([cell.mean() for cell in cells_a]))
    score_b = float(np.mean([cell.mean() for cell in cells_b]))
    return _units(score_a, score_b, a, b)


def cached_statistics(cell: Any, cache: dict | None) -> CellStatistics | None:
    """:func:`cell_statistics`, kept in ``cache`` (a dict the caller holds) by the cell's records and seeds."""
    if cache is None:
        return cell_statistics(cell)
    key = (tuple(sorted(cell.records.items())), tuple(sorted(cell.values)))
    if key not in cache:
        cache[key] = cell_statistics(cell)
    return cache[key]


def _units(score_a: float, score_b: float, a: CellStatistics, b: CellStatistics) -> UnitComparison:
    """Both units of inference for two cells' statistics (across runs decides where either was trained)."""
    examples = from_replicates(score_a, score_b, a.replicates, b.replicates, a.examples, a.seeds, b.seeds)
    return units_from(
        examples,
        list(a.seed_scores.values()),
        list(b.seed_scores.values()),
        a.replicates - b.replicates,
        a.trained,
        b.trained,
    )


def paper_agreement(cells_a: list[Any], cells_b: list[Any], paper_a: float, paper_b: float) -> str | None:
    """Whether our difference row a - row b has the paper's sign and is significant: ``agrees``, ``opposite`` or
    ``not significant``; None when it cannot be tested (no per-example data)."""
    result = compare_cells(cells_a, cells_b)
    return None if result is None else agrees_with_paper(result, paper_a - paper_b)


def annotate(row: Any, column: str, cell: Any) -> str | None:
    """A cell annotator (``(row, column, cell) -> text or None``): `` [low, high]`` and `` ≈`` for a row tied with
    the column's best, from what :func:`attach_statistics` left on the cell."""
    attached: tuple[tuple[float, float], str] | None = cell.bootstrap
    if attached is None:
        return None
    (low, high), mark = attached
    return f" [{low:.2f}, {high:.2f}]" + {"tied": f" {TIED}", "too-few-seeds": f" {TOO_FEW}"}.get(mark, "")


def attach_statistics(table: Any, resamples: int = DEFAULT_RESAMPLES) -> TableStatistics:
    """Compute intervals and marks for a collected ``harness.leaderboard.Table``; stored as ``table.statistics``."""
    stats = TableStatistics()
    scores: dict[str, dict[str, float]] = {}
    for row in table.rows:
        for column in table.columns:
            cell = row.cells.get(column)
            if cell is None or not cell.values:
                continue
            scores.setdefault(column, {})[row.key] = cell.mean()
            known_problems = len(stats.problems)
            statistics = cell_statistics(cell, stats.problems, resamples)
            if statistics is None:
                stats.without_data.add((row.key, column))
                if len(stats.problems) > known_problems:
                    stats.damaged.add((row.key, column))
            else:
                stats.cells[(row.key, column)] = statistics
    _average_column(table, stats, scores)
    for column, column_scores in scores.items():
        stats.marks[column] = _marks(stats, column, column_scores)
        stats.decisions.update(
            ((key, column), mark) for key, mark in column_decisions(column_scores, stats.marks[column]).items()
        )
    for (row_key, column), statistics in stats.cells.items():  # for annotate(): what a cell shows
        cell = next((row.cells.get(column) for row in table.rows if row.key == row_key), None)
        if cell is not None:
            cell.bootstrap = (statistics.interval, stats.decisions.get((row_key, column), ""))
    for problem in stats.problems:
        logger.warning("no interval: %s; %s", problem, REPAIR_ADVICE)
    table.statistics = stats
    return stats


def _average_column(table: Any, stats: TableStatistics, scores: dict[str, dict[str, float]]) -> None:
    columns = table.averaged_columns
    for row in table.rows:
        average = row.average(columns)
        if average is None:
            continue
        scores.setdefault(table.average_header, {})[row.key] = average
        parts = [stats.cells.get((row.key, column)) for column in columns]
        if all(parts):
            stats.cells[(row.key, table.average_header)] = mean_of_cells(parts)
        else:
            stats.without_data.add((row.key, table.average_header))
            if any((row.key, column) in stats.damaged for column in columns):
                stats.damaged.add((row.key, table.average_header))


def _marks(stats: TableStatistics, column: str, column_scores: dict[str, float]) -> ColumnMarks:
    """Marks among the rows over the same examples as the best row (rows over other examples, e.g. another
    profile's cut, are never compared); none when the best row has no per-example data."""
    with_data = {key: stats.cells[(key, column)] for key in column_scores if (key, column) in stats.cells}
    best = max(column_scores, key=lambda key: column_scores[key])
    if best not in with_data:  # the best row cannot be tested: no marks in this column
        return ColumnMarks(None, False, frozenset(), {})
    same = {key: cell for key, cell in with_data.items() if cell.identity == with_data[best].identity}
    # Every row's score goes in: a runner-up that cannot be compared keeps the best from being bold.
    return column_marks(
        dict(column_scores),
        {key: cell.replicates for key, cell in same.items()},
        seed_scores={key: list(cell.seed_scores.values()) for key, cell in same.items()},
        trained={key: cell.trained for key, cell in same.items()},
    )


def column_decisions(column_scores: dict[str, float], marks: ColumnMarks) -> dict[str, str]:
    """The one rule for "best" in a column, from every row's score (model key -> mean) and the column's significance
    marks (:func:`harness.evaluation.significance.column_marks`, or any statistic that fills a ColumnMarks): the
    top row is ``best-significant`` when tested against the runner-up and significantly better, ``best`` when
    tested and not, ``best-untested`` when it cannot be told apart from the runner-up for want of per-example data
    (its own or the runner-up's); rows not distinguishable from the best are ``tied``; rows that cannot be
    compared with the best for too few seeds (a trained row of the two has fewer than MIN_TRAINED_SEEDS) are
    ``too-few-seeds`` (``?``), and a best whose runner-up is such a row is ``best`` (never bold). A column of one
    row has nothing to tell apart: ``best``."""
    ranked = sorted(column_scores, key=lambda key: -column_scores[key])
    if not ranked:
        return {}
    decisions = dict.fromkeys(marks.tied, TIED_WITH_BEST)
    decisions.update((key, TOO_FEW_SEEDS_MARK) for key in marks.too_few)
    best = ranked[0]
    if len(ranked) == 1:
        decisions[best] = BEST
    elif marks.best == best and ranked[1] in marks.p_values:
        decisions[best] = BEST_SIGNIFICANT if marks.best_significant else BEST
    elif marks.best == best and ranked[1] in marks.too_few:
        decisions[best] = BEST
    else:
        decisions[best] = BEST_UNTESTED
    return decisions


def cell_mark(table: Any, row: Any, column: str) -> str:
    """What the one rule for "best" (:func:`column_decisions`) says of a cell: ``best-significant`` (bold in md, tex
    and html, bold value in plots), ``best``, ``best-untested`` (``¶``), ``tied`` (``≈``) or ``""``. Every format
    asks this function; none keeps a rule of its own."""
    stats: TableStatistics | None = table.statistics
    return stats.decisions.get((row.key, column), "") if stats is not None else ""


def decorate(table: Any, row: Any, column: str, text: str) -> str:
    """The cell's text with its interval ``[low, high]`` and marks (``**bold**``: best and significantly better than
    the runner-up; ``≈``: not distinguishable from the best). A cell without per-example data is left as it is:
    no interval, which :func:`notes` explains."""
    stats: TableStatistics | None = table.statistics
    if stats is None:
        return text
    cell = stats.cells.get((row.key, column))
    if cell is not None:
        low, high = cell.interval
        text = f"{text} [{low:.2f}, {high:.2f}]"
    mark = cell_mark(table, row, column)
    if mark == BEST_SIGNIFICANT:
        return f"**{text}**"
    return text + {TIED_WITH_BEST: f" {TIED}", BEST_UNTESTED: f" {UNTESTED}", TOO_FEW_SEEDS_MARK: f" {TOO_FEW}"}.get(
        mark, ""
    )


def notes(table: Any) -> list[str]:
    """Legend lines for the table's intervals and marks (none when nothing was computed)."""
    stats: TableStatistics | None = table.statistics
    if stats is None:
        return list(getattr(table, "stale_notes", []))
    lines = list(getattr(table, "stale_notes", []))  # rows trained under an older default (mark_stale)
    if stats.cells:
        lines.append(
            f"[low, high]: 95% bootstrap interval over test examples ({DEFAULT_RESAMPLES} resamples, seeds "
            f"pooled). Per column, **bold**: best and significantly better than the runner-up; {TIED}: not "
            f"distinguishable from the best (p >= {ALPHA}). Where either row was trained or its evaluation is "
            "seeded the test is across runs (the seeds' variance plus the example bootstrap's, Cochran-Cox "
            f"critical value: {ACROSS_RUNS_QUESTION}), else the paired bootstrap on the same examples "
            f'({EXAMPLES_QUESTION}); docs/core/statistics.md, "Two units of inference". {TOO_FEW}: too few '
            f"seeds to tell (a trained row of the two has fewer than {MIN_TRAINED_SEEDS} seeds)."
        )
    untested = [
        column
        for column in [*table.columns, table.average_header]
        if any(mark == BEST_UNTESTED and where == column for (_, where), mark in stats.decisions.items())
    ]
    if untested:
        lines.append(
            f"{UNTESTED}: the column's top row, which cannot be told apart from the next one: no per-example "
            f"data to test the difference with (columns: {', '.join(untested)}); it is not bold."
        )
    without = stats.without_data - stats.damaged
    if without:
        columns = sorted({column for _, column in without}, key=lambda c: (c not in table.columns, c))
        lines.append(
            f"No interval in {len(without)} cell(s) (columns: {', '.join(columns)}): their records "
            "have no per-example data (stored before harness kept it, or the task keeps none); "
            "`harness rescore` recomputes the evaluation from the stored checkpoints."
        )
    if stats.damaged:
        columns = sorted({column for _, column in stats.damaged}, key=lambda c: (c not in table.columns, c))
        lines.append(
            f"No interval in {len(stats.damaged)} cell(s) (columns: {', '.join(columns)}): the per-example "
            f"file their record names is missing or damaged; {REPAIR_ADVICE}."
        )
    return lines


def csv_fields(table: Any, row: Any, column: str) -> list[str]:
    """``[ci_low, ci_high, mark]`` of a cell for the csv (mark: best-significant, best, tied, too-few-seeds or
    empty)."""
    stats: TableStatistics | None = table.statistics
    cell = stats.cells.get((row.key, column)) if stats is not None else None
    mark = cell_mark(table, row, column)
    if cell is None:
        no_data = stats is not None and (row.key, column) in stats.without_data
        return ["", "", mark or ("no-data" if no_data else "")]
    low, high = cell.interval
    return [f"{low:.4f}", f"{high:.4f}", mark]


def compare_rows(table: Any, row_a: str, row_b: str, column: str) -> UnitComparison | None:
    """Row ``row_a`` minus row ``row_b`` (row keys: the model key, plus ``@<runtime>`` for another runtime's row) in
    ``column`` in both units of inference, or None when either has no per-example data or they are not over the
    same examples. For the paper-table view: pass the result
    and the paper's difference to :func:`harness.evaluation.significance.agrees_with_paper`."""
    stats: TableStatistics | None = table.statistics or attach_statistics(table)
    a, b = stats.cells.get((row_a, column)), stats.cells.get((row_b, column))
    if a is None or b is None or a.identity != b.identity:
        return None
    rows = {row.key: row for row in table.rows}
    mean = (
        (lambda key: rows[key].average(table.averaged_columns))
        if column == table.average_header
        else (lambda key: rows[key].cells[column].mean())
    )
    return _units(mean(row_a), mean(row_b), a, b)
