"""Where a cell stands: the one status vocabulary of runs, records, the CLI and the leaderboards.

A record's ``status`` is read into a :class:`CellStatus` where the store reads the record
(:class:`harness.record.CellRecord`); code past that point compares members, never words. A member is a ``str``
whose value is its word, so a record holding one is written as the same JSON it was read from.
"""

from __future__ import annotations

from enum import Enum


class CellStatus(str, Enum):
    """Where a cell stands. The values are the words records and the CLI's summary use (``ok``, ``missing`` and
    ``failed`` are also a record's ``status``, :data:`RECORD_STATUSES`)."""

    PENDING = "pending"  # to compute
    CACHED = "cached"  # answered by a valid stored record of this run
    OK = "ok"  # computed, with a score
    MISSING = "missing"  # its data (or training data) is not available
    FAILED = "failed"  # no score: malformed data, diverged training, an undefined or non-finite score, a plugin bug

    def __str__(self) -> str:
        return self.value


# The statuses a stored record may have (a pending or cached cell has no record of its own).
RECORD_STATUSES = (CellStatus.OK, CellStatus.MISSING, CellStatus.FAILED)
