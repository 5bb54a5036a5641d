"""What each mark of a leaderboard table means, in a few words, for where the mark appears: the caption line above a
table names the marks that occur in it, and the HTML page gives every marked cell a tooltip with the meaning of its
own marks. The notes under the table explain each mark in full (.stats.notes, .tables.contamination_notes).

Reference: none (presentation only). Deviations: none in the numbers.
"""

from __future__ import annotations

from .stats import TIED, TOO_FEW, UNTESTED
from .tables import SEEN_PAIRS, SEEN_SENTENCES

STALE = "§"  # a superseded row: trained before a default of its spec changed (shown only when asked)
BOLD = "**"  # markdown's bold: the one rule for "best" (.stats.cell_mark) says best and significantly so
INTERVAL = "["  # `` [low, high]`` after a mean: the 95% bootstrap interval

# (how the mark shows in a cell's text, what it means), in the order a caption lists them.
MARK_MEANINGS: tuple[tuple[str, str], ...] = (
    (BOLD, "bold = best in its column and significantly better than the runner-up"),
    (TIED, f"{TIED} = not distinguishable from the column's best"),
    (TOO_FEW, f"{TOO_FEW} = too few seeds to tell it from the column's best"),
    (UNTESTED, f"{UNTESTED} = the column's top row, not tested against the next (no per-example data)"),
    (SEEN_PAIRS, f"{SEEN_PAIRS}N% = N% of the test pairs were in the row's training data"),
    (SEEN_SENTENCES, f"{SEEN_SENTENCES}N% = no test pair, but N% of the test sentences were in its training data"),
    ("*", "* = not every seed of the row has this cell"),
    (INTERVAL, "[low, high] = 95% bootstrap interval"),
)
STALE_MEANING = f"{STALE} = superseded: trained before a default of its spec changed; not ranked"


def marks_in(text: str) -> list[str]:
    """The meanings of the marks in one cell's text (a number with its marks), in :data:`MARK_MEANINGS` order."""
    plain = text.replace(BOLD, "")  # markdown's bold holds two stars, the incomplete-cell mark one
    return [meaning for mark, meaning in MARK_MEANINGS if mark in (text if mark == BOLD else plain)]


def marks_caption(cell_texts: list[str], labels: list[str] = ()) -> str:
    """``Marks: ...`` for the marks that occur in ``cell_texts`` (and § among the row ``labels``), or ""."""
    found = {meaning for text in cell_texts for meaning in marks_in(text)}
    meanings = [meaning for _, meaning in MARK_MEANINGS if meaning in found]
    if any(label.endswith(f" {STALE}") for label in labels):
        meanings.append(STALE_MEANING)
    return ("Marks: " + "; ".join(meanings) + ".") if meanings else ""
