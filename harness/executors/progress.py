"""Progress of a matrix: one line per finished cell (the worker's log) and, on a terminal, an overall bar with the
cells done / total, the elapsed time and the ETA, kept below the lines (elsewhere a line with the same at an interval,
harness.progress)."""
from __future__ import annotations

from typing import Any, Callable


class CellProgress:
    """Counts the cells an executor finishes. While it is open, the log lines of ``owner`` (the driver's worker:
    anything with a ``log`` attribute) are written above the bar (tqdm clears it, writes, redraws), so the bar never
    garbles them; ``close`` gives the owner its log back."""

    def __init__(self, owner: Any, total: int, enabled: bool):
        from ..progress import LogProgress, progress_bar

        self.owner = owner
        self.total = total
        self.done = 0
        self._log: Callable[[str], None] = owner.log
        self.bar = progress_bar(total, "cells", enabled and total > 0, unit="cell", leave=True, dynamic_ncols=True,
                                smoothing=0.1)
        if not self.bar.disable and not isinstance(self.bar, LogProgress):  # a log needs no clearing around lines
            owner.log = self.write

    def write(self, message: str) -> None:
        with self.bar.external_write_mode():
            self._log(message)

    def advance(self, cells: int = 1) -> None:
        self.done += cells
        self.bar.update(cells)

    def close(self) -> None:
        self.owner.log = self._log
        self.bar.close()

    def __enter__(self) -> CellProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
