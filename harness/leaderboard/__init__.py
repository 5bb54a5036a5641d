"""Leaderboards rebuilt from the store alone: one file per task family, one ranked section per set of comparable rows.

The package is handed its tables; it never looks anything up in the plugin registry (the CLI passes the families'
task order and baselines in).

- :mod:`.tables`: the data model (:class:`~.tables.Table`, rows, cells, labels) and :func:`~.tables.collect_tables`
  (sections, labels and legend rules: docs/core/leaderboards.md, "Leaderboard tables").
- :mod:`.stats`: bootstrap intervals, tie marks and significance over per-example data.
- :mod:`.text` (markdown, CSV, LaTeX), :mod:`.html` (a static sortable page), :mod:`.plots` (bar charts).
- :mod:`.marks`: what each mark of a table means, for its caption line and the HTML tooltips.
- :mod:`.formats`: the file formats as ``leaderboard-format`` components, one renderer signature; a plugin adds one.
- :mod:`.matrix_board`: one matrix file as the paper table it reproduces (``harness leaderboard --matrix``).

This module writes every family's files (:func:`write_leaderboards`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

from ..files import atomic_write_text, prepare_output_dir
from ..store import Store
from .formats import BUILTIN_FORMATS, LEADERBOARD_FORMAT, LeaderboardFormat, LeaderboardRenderer
from .html import render_html
from .marks import STALE
from .stats import attach_statistics
from .tables import (
    CELL_MARKS,
    LONG_LABEL,
    SAMPLE_NOTE,
    Baseline,
    CellKind,
    CellView,
    Row,
    ScoreCell,
    Table,
    assign_labels,
    cell_view,
    collect_tables,
    group_by_family,
    legend_rows,
    sample_size,
    table_path,
)
from .text import render_csv, render_latex, render_markdown

logger = logging.getLogger(__name__)

# The built-in formats' names and renderers (a plugin's formats come from the registry: .formats).
FORMATS = tuple(BUILTIN_FORMATS)
RENDERERS: dict[str, LeaderboardRenderer] = dict(BUILTIN_FORMATS)

__all__ = [
    "BUILTIN_FORMATS",
    "CELL_MARKS",
    "FORMATS",
    "LEADERBOARD_FORMAT",
    "LONG_LABEL",
    "RENDERERS",
    "SAMPLE_NOTE",
    "Baseline",
    "CellKind",
    "CellView",
    "LeaderboardFormat",
    "LeaderboardRenderer",
    "Row",
    "ScoreCell",
    "Table",
    "assign_labels",
    "cell_view",
    "collect_tables",
    "group_by_family",
    "legend_rows",
    "render_csv",
    "render_html",
    "render_latex",
    "render_markdown",
    "sample_size",
    "table_path",
    "write_leaderboards",
]


def mark_stale(table: Table, stale: dict[str, str]) -> None:
    """Mark the rows whose spec now resolves to another model (a default of the spec changed since they were
    trained, e.g. a new option whose default is a different setting): the row keeps its records and scores but no
    rank (:meth:`Table.ranked`), its label gets :data:`STALE`, and the table's notes say which current model to run.
    By default :func:`write_leaderboards` leaves such rows out; this marks the ones it was asked to show."""
    marked = [row for row in table.rows if row.model_key in stale]
    for row in marked:
        row.label = f"{row.label} {STALE}"
        row.superseded_by = stale[row.model_key]
    table.stale_notes = [
        f"{STALE} `{row.spec or row.label}` ({row.model_key}): trained before a default of its spec "
        f"changed; the spec now resolves to another model, {stale[row.model_key]}. Its numbers are "
        "those of the older setting (re-run the spec for the current one)."
        for row in marked
    ]


def stale_models(store: Store, registry: object) -> dict[str, str]:
    """Model key -> the key the record's spec resolves to now, for every stored model whose spec no longer resolves
    to its own key (a record whose spec cannot be resolved any more is left out)."""
    from ..errors import HarnessError
    from ..profiles import get_profile
    from ..spec import resolve_model_spec

    seen: dict[str, str] = {}
    for record in store.records():
        model = record.get("model") or {}
        key = record.get("model_key")
        if key in seen or not model.get("label"):
            continue
        try:
            current = resolve_model_spec(
                registry,
                model["label"],
                get_profile(model.get("profile", "quick")),
                model.get("backbone"),
                model.get("train_on"),
                model.get("budget") or None,
            )
        except (HarnessError, KeyError, ValueError):
            seen[key] = key
            continue
        seen[key] = current.key
    return {key: current for key, current in seen.items() if current != key}


def write_leaderboards(
    store: Store,
    output_dir: Path,
    formats: tuple[str, ...] = ("md", "csv"),
    family_members: dict[str, list[str]] | None = None,
    include_samples: bool = False,
    family_baselines: dict[str, Baseline] | None = None,
    stale: dict[str, str] | None = None,
    renderers: Mapping[str, LeaderboardRenderer] | None = None,
    cost: bool = False,
    show_superseded: bool = False,
) -> list[Path]:
    """Write every family's file; invalid records are in ``store.skipped`` (also logged, and shown as ``invalid``),
    records on an evaluation sample that were left out in ``store.sample_records``, missing or damaged per-example
    files in ``store.side_file_problems``. ``stale`` (model key -> the key its spec resolves to now; the CLI computes
    it with the registry) marks rows trained under an older default (:func:`mark_stale`). ``renderers`` (format
    name -> renderer; default the built-in ones) holds every name of ``formats``: the CLI passes the registered
    ones (.formats.available_formats). ``cost``: add the cost columns (harness.leaderboard.cost). The rows of
    ``stale`` are left out of every format (a note counts them) unless ``show_superseded``."""
    renderers = BUILTIN_FORMATS if renderers is None else renderers
    unknown = [fmt for fmt in formats if fmt not in renderers]
    if unknown:
        from ..errors import invalid_choice

        raise invalid_choice("--formats", unknown[0], tuple(renderers))
    prepare_output_dir(Path(output_dir), "the leaderboard folder")
    hidden = () if show_superseded else tuple(stale or {})
    tables = collect_tables(store, family_members, include_samples, family_baselines, hidden)
    store.side_file_problems = []  # missing or damaged per-example files (the CLI reports them, exits non-zero)
    for table in tables:
        store.side_file_problems += attach_statistics(table).problems  # bootstrap intervals and tie marks (.stats)
        mark_stale(table, stale or {})
        table.show_cost = cost
    for path, reason in store.skipped:  # the caller reports them (the CLI: one line each, then exits non-zero)
        logger.debug("invalid record %s: %s", path, reason)
    written = []
    for family, sections in group_by_family(tables).items():
        for fmt in formats:
            path = table_path(output_dir, family, fmt)
            atomic_write_text(path, renderers[fmt](sections, output_dir))
            written.append(path)
    return written
