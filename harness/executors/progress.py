"""Progress of a matrix: one line per finished cell (the runner's log) and, on a terminal, an overall bar with the
cells done / total, the elapsed time and the ETA, kept below the lines."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ..runner import Runner


class CellProgress:
    """Counts the cells an executor finishes. While it is open, the runner's log lines are written above the bar
    (tqdm clears it, writes, redraws), so the bar never garbles them; ``close`` gives the runner its log back."""

    def __init__(self, runner: Runner, total: int, enabled: bool):
        from tqdm.auto import tqdm

        self.runner = runner
        self.total = total
        self.done = 0
        self._log: Callable[[str], None] = runner.log
        self.bar = tqdm(total=total, desc="cells", unit="cell", disable=not enabled or total == 0,
                        dynamic_ncols=True, smoothing=0.1)
        if not self.bar.disable:
            runner.log = self.write

    def write(self, message: str) -> None:
        with self.bar.external_write_mode():
            self._log(message)

    def advance(self, cells: int = 1) -> None:
        self.done += cells
        self.bar.update(cells)

    def close(self) -> None:
        self.runner.log = self._log
        self.bar.close()

    def __enter__(self) -> CellProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
