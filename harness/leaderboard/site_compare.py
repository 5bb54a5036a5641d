"""A pair of a site table's rows compared per task as ``harness compare`` compares two specs (:func:`compare_pair`),
with each cell's per-example data read once (:class:`CellData`) and the ``harness compare`` line that gives the
same numbers."""

from __future__ import annotations

import numpy as np

from ..compare import UNTRAINED, TaskComparison, mean_eval_seconds, other_task_versions, seen_lines, task_version
from ..evaluation.bootstrap import ExampleDataError, ExampleScores, check_same_examples, pooled_replicates
from ..evaluation.significance import holm, units_of_replicates
from ..stored_scores import stored_run
from .site_tables import collected_record
from .tables import Row, Table


class CellData:
    """Each cell's per-seed per-example data and trained flag, read once; replicates once per set of seeds."""

    def __init__(self, resamples: int):
        self.resamples = resamples
        self.runs: dict[str, tuple[ExampleScores | None, str, bool]] = {}
        self.replicates: dict[tuple[str, ...], np.ndarray] = {}
        self.tasks: dict[str, tuple[str, str]] = {}
        self.overlaps: dict[str, dict | None] = {}

    def task_version(self, path: str) -> tuple[str, str]:
        """The (task key, task version) a record was evaluated with ("?" where it cannot be read)."""
        if path not in self.tasks:
            self.tasks[path] = task_version(collected_record(path))
        return self.tasks[path]

    def seen(self, path: str) -> dict | None:
        """A record's status and measured overlap (all :func:`harness.compare.seen_lines` reads), read once."""
        if path not in self.overlaps:
            record = collected_record(path) or {}
            self.overlaps[path] = {key: record[key] for key in ("status", "contamination") if key in record} or None
        return self.overlaps[path]

    def run(self, path: str) -> tuple[ExampleScores | None, str, bool]:
        if path not in self.runs:
            self.runs[path] = stored_run(path)
        return self.runs[path]

    def reuse(self, table: Table) -> None:
        """Keep the replicates the leaderboard's statistics computed for the table's cells (the same
        ``pooled_replicates`` of the same seeds' data): a pair over all of a cell's seeds does not resample again."""
        statistics = table.statistics
        for row in table.rows if statistics is not None else []:
            for column, cell in row.cells.items():
                computed = statistics.cells.get((row.model_key, column))
                if computed is not None and all(seed in cell.records for seed in cell.values):
                    self.replicates[tuple(cell.records[seed] for seed in sorted(cell.values))] = computed.replicates

    def pooled(self, paths: tuple[str, ...], data: list[ExampleScores]) -> np.ndarray:
        if paths not in self.replicates:
            self.replicates[paths] = pooled_replicates(data, self.resamples)
        return self.replicates[paths]


def compare_pair(table: Table, row_a: Row, row_b: Row, cells: CellData, seeds: list[int]) -> list[TaskComparison]:
    """Row a minus row b on each of the table's columns, as ``harness compare A B --seeds SEEDS`` computes it: per
    task the seeds' per-example data pooled, both units of inference (across runs where a row was trained), the
    deciding p Holm-adjusted across the tasks. Each row's bootstrap replicates depend only on its own examples (the
    resamples are drawn from the example count and a fixed seed), so they are computed once per cell and reused for
    every pair: the numbers are those of ``compare_units`` on the same data."""
    comparisons = []
    for column in table.columns:
        sides: list[tuple[tuple[str, ...], list[ExampleScores], bool]] = []
        reasons: list[str] = []
        for row in (row_a, row_b):
            cell = row.cells.get(column)
            paths, data, trained = [], [], False
            for seed in seeds:
                path = cell.records.get(seed) if cell is not None else None
                if path is None:
                    reasons.append(f"{row.label} seed {seed} has no record")
                    continue
                examples, reason, was_trained = cells.run(path)
                trained = trained or was_trained
                if examples is None:
                    if reason not in reasons:
                        reasons.append(f"{row.label} seed {seed}: {reason}")
                    continue
                paths.append(path)
                data.append(examples)
            sides.append((tuple(paths), data, trained))
        if not reasons:
            versions = [[cells.task_version(path) for path in paths] for paths, _, _ in sides]
            different = other_task_versions(row_a.label, versions[0], row_b.label, versions[1])
            reasons += [different] if different else []
        if reasons:
            comparisons.append(TaskComparison(column, None, "; ".join(reasons)))
            continue
        (paths_a, a, trained_a), (paths_b, b, trained_b) = sides
        try:
            check_same_examples([*a, *b])
            replicates_a, replicates_b = cells.pooled(paths_a, a), cells.pooled(paths_b, b)
            result = units_of_replicates(a, b, replicates_a, replicates_b, trained_a, trained_b)
        except ExampleDataError as exc:
            comparisons.append(TaskComparison(column, None, str(exc)))
            continue
        seconds_a, seconds_b = (
            mean_eval_seconds([collected_record(path) for path in paths]) for paths in (paths_a, paths_b)
        )
        speedup = seconds_a / seconds_b if seconds_a and seconds_b else None
        comparisons.append(TaskComparison(column, result, speedup=speedup))
    tested = [c for c in comparisons if c.result is not None and c.result.p_value is not None]
    for comparison, adjusted in zip(tested, holm([c.result.p_value for c in tested])):
        comparison.p_holm = adjusted
    return comparisons


def compare_command(row_a: Row, row_b: Row, columns: list[str], seeds: list[int]) -> str:
    """The ``harness compare`` line that gives the same numbers (``--train-on-a`` / ``--train-on-b`` where the rows
    have different training sources, ``none`` for an untrained one)."""
    train = row_a.train_on or row_b.train_on
    parts = [
        "harness compare",
        _spec_head(row_a),
        _spec_head(row_b),
        f"--tasks {','.join(c.split(':')[0] for c in columns)}",
        f"--seeds {','.join(map(str, seeds))}",
        f"--profile {row_a.profile}",
        f"--backbone {row_a.backbone}",
    ]
    if train and row_a.train_on == row_b.train_on:
        parts.append(f"--train-on {train}")
    elif train:  # one source each
        parts.append(f"--train-on-a {row_a.train_on or UNTRAINED} --train-on-b {row_b.train_on or UNTRAINED}")
    return " ".join(parts)


def _spec_head(row: Row) -> str:
    return (row.spec or row.label).split(" [train: ")[0]


def pair_seen_in_training(row_a: Row, row_b: Row, columns: list[str], cells: CellData, seeds: list[int]) -> list[str]:
    """The ``seen in training`` lines ``harness compare`` prints for the two rows over ``seeds`` (each row's own
    seeds where they have none in common), e.g. "A on sts12: 32% of test pairs seen in training (seeds 42, 43)"."""
    lines = []
    for side, row in (("A", row_a), ("B", row_b)):
        for column in columns:
            cell = row.cells.get(column)
            records = (cell.records if cell is not None else {}) or {}
            chosen = seeds or sorted(records)
            lines += seen_lines(side, column, [(seed, cells.seen(records[seed])) for seed in chosen if seed in records])
    return lines
