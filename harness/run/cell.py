"""A cell of a run (one model spec, seed and task) and where it stands (:class:`harness.status.CellStatus`, the one
status vocabulary, shared by every stage): the plan fixes each cell's status (``pending``, ``cached``, or
``missing``/``failed`` with the data problem that settles it), a worker computes a pending cell into ``ok``,
``missing`` or ``failed`` with its record, and the driver stores it and returns the same cell to the caller."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..spec import ModelSpec, TaskSpec
from ..status import CellStatus

__all__ = ["Cell", "CellStatus"]


@dataclass(frozen=True)
class Cell:
    """One cell and where it stands. ``record``: the stored record that answers it (cached), or the record computed
    for it and not yet stored (ok, missing, failed); ``problem``: the data or training problem, found while
    planning, that settles it as missing or failed; ``message``: why it is missing or failed; ``why``: why a pending
    cell is computed, and ``invalid`` why its stored record is invalid, ``recomputed_ok`` whether a stored ok record
    is replaced (the driver says both); ``keeps_ok``: a data problem that keeps a stored ok record rather than
    replacing it; ``examples``: the per-example side file (npz) of a computed ok record."""

    spec: ModelSpec
    seed: int
    task: TaskSpec
    status: CellStatus = CellStatus.PENDING
    record: dict[str, Any] | None = None
    problem: Exception | None = None
    message: str = ""
    why: str = ""
    invalid: str | None = None
    recomputed_ok: bool = False
    keeps_ok: bool = False
    examples: bytes | None = None

    @property
    def label(self) -> str:
        return f"{self.spec.label} seed {self.seed} {self.task.label}"

    @property
    def main_score(self) -> float | None:
        """The score of an ok or cached cell (None otherwise)."""
        if self.status in (CellStatus.OK, CellStatus.CACHED) and self.record is not None:
            return float(self.record["main_score"])
        return None
