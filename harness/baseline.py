"""The leaderboard baseline a task declares (``TaskMetadata.details["leaderboard_baseline"]``).

Read by the registry (per family) and drawn by the leaderboard (:mod:`harness.leaderboard`); it lives below both
so that neither reaches up into the other.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Baseline:
    """An untrained row a family's task names as the one trained rows must beat (its metadata
    ``details["leaderboard_baseline"]``: ``model`` = the row's model label, ``column`` = the task compared on,
    ``why``); the markdown table says which trained rows do not, from the table's own numbers."""

    model: str
    column: str
    why: str = ""

    @classmethod
    def from_details(cls, details: dict) -> Baseline | None:
        entry = details.get("leaderboard_baseline")
        return None if not entry else cls(str(entry["model"]), str(entry["column"]), str(entry.get("why", "")))
