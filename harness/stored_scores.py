"""A stored record's per-example scores, read for a test of a difference: what ``harness compare``, the
leaderboard's statistics and results site and the trackers' intervals share, kept below all of them.

:func:`stored_run` reads an ok record and its per-example side file (:func:`harness.store.read_examples`) into
:class:`harness.evaluation.bootstrap.ExampleScores`, or says in one line why it cannot; :func:`seed_dependent`
says whether the record's score depends on its seed (comparisons with it are then across runs).
"""

from __future__ import annotations

from pathlib import Path

from .evaluation.bootstrap import ExampleDataError, ExampleScores
from .plugin_api import seeded_evaluation
from .record import InvalidRecordError
from .status import CellStatus
from .store import SIDE_FILE_PROBLEM, examples_path, read_examples, read_record

NO_DATA = "no per-example data (stored before harness kept it, or the task keeps none: `harness rescore` recomputes it)"


def seed_dependent(record: dict) -> bool:
    """Whether a stored record's score depends on its seed: it comes from training (its ``training`` report), or its
    task's evaluation is seeded (a trained probe scores an untrained model differently per seed). Comparisons with
    such a row are across runs, and it needs :data:`harness.evaluation.significance.MIN_TRAINED_SEEDS` seeds."""
    return bool(record.get("training")) or seeded_evaluation((record.get("task") or {}).get("name"))


def stored_examples(path: str | Path) -> tuple[ExampleScores | None, str]:
    """The per-example data of the ok record at ``path``, or ``(None, why not)`` (:data:`NO_DATA` for a record
    that has none)."""
    data, reason, _ = stored_run(path)
    return data, reason


def stored_run(path: str | Path) -> tuple[ExampleScores | None, str, bool]:
    """:func:`stored_examples` and whether the record's score depends on its seed (:func:`seed_dependent`), so
    comparisons with it are across runs."""
    try:
        record = read_record(Path(path))
    except InvalidRecordError as exc:
        return None, exc.reason, False
    trained = seed_dependent(record)
    if record["status"] != CellStatus.OK:
        return None, f"its status is {record['status']}", trained
    record["_path"] = str(path)
    content, problem = read_examples(record)
    if content is None:
        return None, problem or NO_DATA, trained
    try:
        return ExampleScores.from_npz(content, record["examples"]), "", trained
    except (ExampleDataError, ValueError, KeyError) as exc:
        return None, f"{SIDE_FILE_PROBLEM} {examples_path(Path(path))} cannot be read ({exc})", trained
