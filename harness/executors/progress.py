"""Progress of a matrix: one line per finished cell (the run's log) and, on a terminal, an overall bar with the
cells done / total, the elapsed time and the ETA, kept below the lines (elsewhere a line with the same at an interval,
harness.progress)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class DivertibleLog(Protocol):
    """A log whose lines go to ``sink`` (harness.run.driver.RunLog)."""

    sink: Callable[[str], None]


class CellProgress:
    """Counts the cells an executor finishes. While it is open, the lines of ``log`` (the run's: its models, its
    worker and the executor say them) are written above the bar (tqdm clears it, writes, redraws), so the bar never
    garbles them; ``close`` gives the log its sink back."""

    def __init__(self, log: DivertibleLog, total: int, enabled: bool):
        from ..progress import LogProgress, progress_bar

        self.log = log
        self.total = total
        self.done = 0
        self._sink = log.sink
        self.bar = progress_bar(
            total, "cells", enabled and total > 0, unit="cell", leave=True, dynamic_ncols=True, smoothing=0.1
        )
        if not self.bar.disable and not isinstance(self.bar, LogProgress):  # a log needs no clearing around lines
            log.sink = self.write

    def write(self, message: str) -> None:
        with self.bar.external_write_mode():
            self._sink(message)

    def advance(self, cells: int = 1) -> None:
        self.done += cells
        self.bar.update(cells)

    def close(self) -> None:
        self.log.sink = self._sink
        self.bar.close()

    def __enter__(self) -> CellProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
