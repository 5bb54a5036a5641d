"""Leaderboard file formats as components: ``harness leaderboard --formats NAME`` writes one file per family for each.

A format is a component of kind :data:`LEADERBOARD_FORMAT` whose name is the ``--formats`` value and the file suffix
(``leaderboards/<family>.<name>``) and whose object is a :class:`LeaderboardRenderer`: called with a family's
sections (one :class:`~.tables.Table` per set of comparable rows, ranked, with statistics attached) and the folder
the file goes to (for relative links), it returns the file's text. A renderer that also has a ``render_matrix``
attribute (a :class:`MatrixRenderer`) is offered for ``harness leaderboard --matrix`` too. The core registers the
built-in formats (:data:`BUILTIN_FORMATS`) the same way (harness.components); a plugin adds one with::

    @harness.hookimpl
    def register_components(register):
        register(harness.Component("leaderboard-format", "json", render_json, "one JSON file per family"))

Nothing here reads the registry: the CLI hands :func:`~harness.leaderboard.write_leaderboards` and
:func:`~.claims.write_matrix_board` the formats it found there (:func:`available_formats`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from . import matrix_board, text
from .html import render_html
from .tables import Table

if TYPE_CHECKING:
    from .matrix_board import MatrixBoard

LEADERBOARD_FORMAT = "leaderboard-format"  # the component kind


class LeaderboardRenderer(Protocol):
    """The one renderer signature: a family's sections and the output folder -> the text of its file."""

    def __call__(self, sections: list[Table], output_dir: Path) -> str: ...


class MatrixRenderer(Protocol):
    """A matrix file's paper table (``--matrix``) and the verdicts of its claims, if any -> the text of its file."""

    def __call__(self, board: MatrixBoard, outcomes: list | None) -> str: ...


@dataclass(frozen=True)
class LeaderboardFormat:
    """A renderer with an optional matrix renderer, as one callable (the object of a built-in format)."""

    render: Callable[[list[Table], Path], str]
    description: str
    render_matrix: Callable[[Any, list | None], str] | None = None

    def __call__(self, sections: list[Table], output_dir: Path) -> str:
        return self.render(sections, output_dir)


def _without_folder(render: Callable[[list[Table]], str]) -> Callable[[list[Table], Path], str]:
    """A renderer whose text does not depend on where the file goes (no links)."""
    return lambda sections, output_dir: render(sections)


# Order is the order of the CLI's help and of its error messages.
BUILTIN_FORMATS: dict[str, LeaderboardFormat] = {
    "md": LeaderboardFormat(
        _without_folder(text.render_markdown),
        "markdown tables, one section per comparable set",
        matrix_board.render_markdown,
    ),
    "csv": LeaderboardFormat(
        _without_folder(text.render_csv),
        "one CSV row per model and section, intervals and marks",
        matrix_board.render_csv,
    ),
    "tex": LeaderboardFormat(_without_folder(text.render_latex), "LaTeX booktabs tables"),
    "html": LeaderboardFormat(
        render_html, "one static sortable page per family, seed records linked", matrix_board.render_html
    ),
}


def available_formats(names: Sequence[str], lookup: Callable[[str], Any]) -> dict[str, LeaderboardRenderer]:
    """Name -> renderer for the registered format ``names`` (``lookup`` is ``registry.component`` of this kind),
    the built-ins first in their order, then the others by name."""
    ordered = [*(n for n in BUILTIN_FORMATS if n in names), *sorted(n for n in names if n not in BUILTIN_FORMATS)]
    return {name: lookup(name) for name in ordered}


def matrix_renderers(renderers: Mapping[str, LeaderboardRenderer]) -> dict[str, MatrixRenderer]:
    """The formats that also render a matrix's paper table."""
    return {
        name: render.render_matrix
        for name, render in renderers.items()
        if getattr(render, "render_matrix", None) is not None
    }
