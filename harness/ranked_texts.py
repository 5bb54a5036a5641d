"""The texts behind a ranking task's stored hits (``Task.ranked_texts``): its queries and documents by id.

A ranking task keeps each query's top hits as ids (:class:`harness.evaluation.bootstrap.RankedHits`); the results
site asks the task for the texts of just the ids it shows, never the whole corpus. Ids are passed and returned as
text (``str`` of the stored id: a corpus row ``17`` is ``"17"``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from .errors import DataFileError

logger = logging.getLogger(__name__)

UNKNOWN_IDS_SHOWN = 3  # unknown ids named in the error (then a count)


@dataclass(frozen=True)
class RankedTexts:
    """What ``Task.ranked_texts`` returns: the text of each asked-for query id and document id (ids as text, the way
    the stored hits name them), nothing else; ``""`` for an id the task's data names without a text."""

    queries: Mapping[str, str] = field(default_factory=dict)
    documents: Mapping[str, str] = field(default_factory=dict)


def texts_by_id(
    task: str, kind: str, wanted: Collection[str], lookup: Mapping[str, str] | Callable[[str], str | None]
) -> dict[str, str]:
    """``{id: text}`` of the ``wanted`` ids (``kind``: "query" or "document" of task ``task``) from ``lookup`` (a
    mapping, or a function giving None for an id it does not know). An id without a text raises one
    :class:`harness.DataFileError` naming the first few: the ids come from records of other data than the task
    reads now."""
    get = lookup.get if isinstance(lookup, Mapping) else lookup
    found: dict[str, str] = {}
    unknown: list[str] = []
    for identifier in sorted({str(i) for i in wanted}):
        text = get(identifier)
        if text is None:
            unknown.append(identifier)
        else:
            found[identifier] = str(text)
    if unknown:
        named = ", ".join(repr(i) for i in unknown[:UNKNOWN_IDS_SHOWN])
        more = f" and {len(unknown) - UNKNOWN_IDS_SHOWN} more" if len(unknown) > UNKNOWN_IDS_SHOWN else ""
        raise DataFileError(
            f"task {task!r} has no {kind} {named}{more} in the data it reads now: the ids come from records of other "
            "data (another task version, options or data files); evaluate again with the current data to name them"
        )
    return found
