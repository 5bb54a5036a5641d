"""Leaderboards rebuilt from the store alone: one file per task family, one ranked section per set of comparable rows.

The package is handed its tables; it never looks anything up in the plugin registry (the CLI passes the families'
task order and baselines in).

- :mod:`.tables`: the data model (:class:`~.tables.Table`, rows, cells, labels) and :func:`~.tables.collect_tables`
  (sections, labels and legend rules: docs/fidelity.md, "Leaderboard tables").
- :mod:`.stats`: bootstrap intervals, tie marks and significance over per-example data.
- :mod:`.text` (markdown, CSV, LaTeX), :mod:`.html` (a static sortable page), :mod:`.plots` (bar charts).
- :mod:`.matrix_board`: one matrix file as the paper table it reproduces (``harness leaderboard --matrix``).

This module writes every family's files (:func:`write_leaderboards`).
"""
from __future__ import annotations

import logging
from pathlib import Path

from ..files import prepare_output_dir
from ..store import Store, atomic_write_text
from .html import render_html
from .stats import attach_statistics
from .tables import (
    CELL_ANNOTATORS,
    LONG_LABEL,
    SAMPLE_NOTE,
    Baseline,
    Cell,
    CellView,
    Row,
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

FORMATS = ("md", "csv", "tex", "html")
RENDERERS = {"md": render_markdown, "csv": render_csv, "tex": render_latex, "html": render_html}

__all__ = [
    "CELL_ANNOTATORS", "FORMATS", "LONG_LABEL", "RENDERERS", "SAMPLE_NOTE", "Baseline", "Cell", "CellView", "Row",
    "Table", "assign_labels", "cell_view", "collect_tables", "group_by_family", "legend_rows", "render_csv",
    "render_html", "render_latex", "render_markdown", "sample_size", "table_path", "write_leaderboards",
]


def write_leaderboards(
    store: Store, output_dir: Path, formats: tuple[str, ...] = ("md", "csv"),
    family_members: dict[str, list[str]] | None = None, include_samples: bool = False,
    family_baselines: dict[str, Baseline] | None = None,
) -> list[Path]:
    """Write every family's file; invalid records are in ``store.skipped`` (also logged, and shown as ``invalid``),
    records on an evaluation sample that were left out in ``store.sample_records``, missing or damaged per-example
    files in ``store.side_file_problems``."""
    prepare_output_dir(Path(output_dir), "the leaderboard folder")
    tables = collect_tables(store, family_members, include_samples, family_baselines)
    store.side_file_problems = []  # missing or damaged per-example files (the CLI reports them, exits non-zero)
    for table in tables:
        store.side_file_problems += attach_statistics(table).problems  # bootstrap intervals and tie marks (.stats)
    for path, reason in store.skipped:  # the caller reports them (the CLI: one line each, then exits non-zero)
        logger.debug("invalid record %s: %s", path, reason)
    written = []
    for family, sections in group_by_family(tables).items():
        for fmt in formats:
            path = table_path(output_dir, family, fmt)
            text = render_html(sections, output_dir) if fmt == "html" else RENDERERS[fmt](sections)
            atomic_write_text(path, text)
            written.append(path)
    return written
