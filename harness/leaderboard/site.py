"""One static results site from a store (``harness site --to DIR``): plain HTML, a few classic scripts (one per
view, loaded in order), one stylesheet and JSON data files, no server and nothing fetched from elsewhere.

Every number comes from the leaderboard's own code: the tables, labels, legend and notes from
:func:`harness.leaderboard.tables.collect_tables` with the intervals and marks of :mod:`.stats` (the cell texts are
``Table.cell_text``, as in every format), the cost columns from :mod:`.cost`. A pair of rows is compared per task
as ``harness compare`` compares two specs (:func:`compare_pair`: the seeds both rows have pooled, both units of
inference, Holm across the table's tasks, each entry ``TaskComparison.as_dict``), written per pair and fetched when
a reader asks for it. The examples behind a difference come from each cell's per-example side files, written per
cell (one JSON each, fetched on demand), and the task's own texts (``Task.evaluated_texts``) unless its licence
says they may not be redistributed: then the site shows example positions and says why.

Layout of ``DIR``: ``index.html``, its scripts (``core.js`` ... ``app.js``, :data:`ASSETS`), ``site.css``,
``data/index.json`` (families and their tables), ``data/tables/<table>.json``, ``data/compare/<table>/<a>-<b>.json``
(row indices, a < b: A is row a), ``data/cells/<key>.json`` (each seed's model scores per example, one file per set
of records however many tables show the cell; a table's ``cell_files`` names its cells'),
``data/examples/<identity>.json`` (the gold, ids and groups of one set of test examples, shared by the cells over
it) and ``data/texts/<task key>.json`` (an STS-style task's scored pairs; a ranking task's texts of the ids its
examples views show, per set of test examples under ``examples``).

This module writes the site; what it writes is computed by :mod:`.site_tables` (a table's payload, the paper
tables' extra columns), :mod:`.site_compare` (a pair of rows) and :mod:`.site_examples` (a cell's per-example data
and its task's texts).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..compare import UNITS_NOTE
from ..errors import HarnessError
from ..evaluation.bootstrap import DEFAULT_RESAMPLES
from ..files import UMASK, atomic_write_text, check_writable_dir, remove_stale_siblings, temporary_prefix
from ..progress import progress_bar
from ..store import Store
from ..store_files import StoreError, is_inside
from ..stored_scores import NO_DATA
from .site_compare import CellData, collected_record, compare_command, compare_pair, pair_seen_in_training
from .site_examples import NOT_REDISTRIBUTABLE as NOT_REDISTRIBUTABLE  # re-exported: tests and callers import it here
from .site_examples import (
    PAIR_STATISTICS,
    cell_key,
    cell_payload,
    ranked_texts_payload,
    shown_hits,
    texts_payload,
)
from .site_tables import (
    TRAINING_CURVES_HOOK,
    column_task_keys,
    matrix_extra,
    matrix_table,
    row_curves,
    seeds_run,
    seeds_shown,
    site_table_payload,
)
from .stats import attach_statistics
from .tables import Row, Table, collect_tables, group_by_family

logger = logging.getLogger(__name__)

# The page, its scripts in the order index.html loads them (classic scripts sharing window.harnessSite: a page
# opened from file:// runs them, not ES modules) and its stylesheet.
ASSETS = ("index.html", "core.js", "tables.js", "curves.js", "compare.js", "examples.js", "app.js", "site.css")


@dataclass
class SiteReport:
    """What :func:`build_site` wrote: the folder, its files, and the cells whose per-example data could not be read."""

    folder: Path
    files: int = 0
    bytes: int = 0
    problems: list[str] = field(default_factory=list)


class _Writer:
    def __init__(self, folder: Path, report: SiteReport):
        self.folder, self.report = folder, report

    def json(self, relative: str, payload: Any) -> None:
        text = json.dumps(finite(payload), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        path = self.folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        self.report.files += 1
        self.report.bytes += len(text.encode())


def finite(payload: Any) -> Any:
    """``payload`` with every infinite or NaN float as the string ``"Infinity"``, ``"-Infinity"`` or ``"NaN"``
    (JSON has no such numbers; e.g. an across-runs test's degrees of freedom are infinite without seed variance)."""
    if isinstance(payload, float) and not np.isfinite(payload):
        return "NaN" if np.isnan(payload) else ("Infinity" if payload > 0 else "-Infinity")
    if isinstance(payload, dict):
        return {key: finite(value) for key, value in payload.items()}
    if isinstance(payload, (list, tuple)):
        return [finite(value) for value in payload]
    return payload


def _dates(table: Table, created: dict[str, str]) -> list[str]:
    dates = sorted(
        created[path]
        for row in table.rows
        for cell in row.cells.values()
        for path in cell.records.values()
        if path in created
    )
    return [dates[0][:10], dates[-1][:10]] if dates else []


def _table_id(family: str, number: int) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", family).strip("-") or "family"
    return f"{slug}-{number}"


class _Written:
    """Writes each table's files (its cells' per-example data, the examples and texts they share, the table, every
    pair's comparison): one way for family tables and paper tables alike."""

    def __init__(
        self,
        writer: _Writer,
        cells: CellData,
        registry: Any,
        progress: Callable[[str], None] | None,
        data_dir: Path | None = None,
        seen_positions: Callable[[dict], list[int] | None] | None = None,
    ):
        self.writer, self.cells, self.registry, self.progress = writer, cells, registry, progress
        self.seen_positions = seen_positions  # a record -> the positions of its test pairs seen in training
        self.data_dir = data_dir  # harness site --data-dir: where the records' texts are read (site_examples)
        self.tables_total, self.tables_done = 0, 0  # for the progress lines: "table 3/17"
        self.checksums: dict = {}  # (task, options, data folder) -> its data checksum, computed once per build
        self.texts: set[str] = set()
        self.examples: set[str] = set()
        self.cell_files: dict[str, str | None] = {}  # cell key -> its file, None: no per-example data
        # cell file -> its payload, ids and first record (cells keeping hits)
        self.hit_cells: dict[str, tuple[dict, list[str] | None, str]] = {}
        self.by_id: set[str] = set()  # task keys of examples named by id (their texts written at the end)
        # task key -> examples identity -> a record over those examples, the query and document ids a view shows.
        # Per identity: ids name other texts in another sample cut (PropSegment's corpus rows, for one).
        self.shown: dict[str, dict[str, tuple[str, set[str], set[str]]]] = {}
        self.curves_skipped: dict[str, str] = {}  # training.json left out -> why (each warned of once)
        self.curves_read: dict[str, dict] = {}  # training.json -> its verified content (each checkpoint hashed once)

    def _write_cell(self, cell: Any, key: str) -> str | None:
        """Write a cell's per-example data once (a paper table's cell is a family table's too), with the examples
        and task texts it refers to; its file, or None without per-example data."""
        read = cell_payload(cell, self.cells)
        if read is None:
            return None
        payload, shared = read
        if payload["statistic"] in PAIR_STATISTICS:
            for seed, arrays in payload["seeds"].items():
                seen = self._seen_pairs(cell.records[int(seed)])
                if seen is not None:
                    arrays["seen_in_training"] = seen
        path = f"data/cells/{key}.json"
        self.writer.json(path, payload)
        if payload["examples"] not in self.examples:
            self.examples.add(payload["examples"])
            self.writer.json(f"data/examples/{payload['examples']}.json", shared)
        task_key = (collected_record(cell.records[min(cell.values)]) or {"task": {"key": "unknown"}})["task"]["key"]
        if any("hits" in seed for seed in payload["seeds"].values()):
            self.hit_cells[path] = (payload, shared.get("ids"), cell.records[min(cell.values)])
        if payload["statistic"] not in PAIR_STATISTICS:  # written by write_texts once the tables say what they show
            self.by_id.add(task_key)
        elif task_key not in self.texts:
            self.texts.add(task_key)
            count = len(next(iter(next(iter(payload["seeds"].values())).values())))
            self.writer.json(
                f"data/texts/{task_key}.json",
                texts_payload(cell.records[min(cell.values)], count, self.registry, self.data_dir, self.checksums),
            )
        return path

    def _seen_pairs(self, path: str) -> dict | None:
        """Which of a record's test pairs its model trained on (the examples view marks them), for a record whose
        measured overlap says some were: ``positions`` (of its per-example data) and the ``recorded`` count, or
        the ``reason`` none can be marked; None for a record that saw no test pair."""
        from ..contamination import seen_shares

        record = collected_record(path)
        shares = seen_shares(record) if record is not None else None
        if shares is None or not shares[0]:
            return None
        recorded = int(record["contamination"].get("test_pairs_seen") or 0)
        if self.seen_positions is None:
            return {"recorded": recorded, "reason": "the site was built without the plugins that read training data"}
        try:
            positions = self.seen_positions(record)
        except (HarnessError, OSError, ValueError, KeyError) as exc:
            logger.warning("%s: its test pairs seen in training cannot be marked (%s)", path, exc)
            return {"recorded": recorded, "reason": f"its training data could not be read again here ({exc})"}
        if positions is None:
            return {"recorded": recorded, "reason": "its training data could not be read again here"}
        return {"recorded": recorded, "positions": positions}

    def _note_shown_hits(
        self, table: Table, ranked_rows: list[Row], cell_files: dict[str, str], task_keys: dict[str, str]
    ) -> None:
        """Add the query and document ids each pair of rows' examples view shows on a ranking column (the view
        reads the column's task key's texts, ``task_keys``) to what write_texts asks the task for."""
        for column_index, column in enumerate(table.columns):
            files = [cell_files.get(f"{row}-{column_index}") for row in range(len(ranked_rows))]
            with_hits = [(row, file) for row, file in enumerate(files) if file in self.hit_cells]
            for position, (_, file_a) in enumerate(with_hits):
                for _, file_b in with_hits[position + 1 :]:
                    (cell_a, ids, record), (cell_b, _, _) = self.hit_cells[file_a], self.hit_cells[file_b]
                    queries, documents = shown_hits(cell_a, cell_b, ids)
                    if queries or documents:
                        by_examples = self.shown.setdefault(task_keys[column], {})
                        shown = by_examples.setdefault(cell_a["examples"], (record, set(), set()))
                        shown[1].update(queries)
                        shown[2].update(documents)

    def write_texts(self) -> None:
        """The texts files of the tasks whose examples are named by id: a ranking task's texts of the ids its views
        show (``Task.ranked_texts``), else why there are none."""
        for task_key in sorted(self.by_id):
            if task_key in self.texts:
                continue
            self.texts.add(task_key)
            by_examples = self.shown.get(task_key)
            if by_examples:  # per set of test examples (the examples view picks its cells')
                texts = {
                    "examples": {
                        identity: ranked_texts_payload(
                            path, queries, documents, self.registry, self.data_dir, self.checksums
                        )
                        for identity, (path, queries, documents) in sorted(by_examples.items())
                    }
                }
            else:
                texts = {"withheld": "the store names these examples by id; the task's texts are not read"}
            self.writer.json(f"data/texts/{task_key}.json", texts)

    def _pair(self, table: Table, ranked_rows: list[Row], a: int, b: int) -> dict[str, Any]:
        """Rows a and b (their indices in ``ranked_rows``, a < b) compared per task as ``harness compare`` compares
        them, with the lines it prints on what each row saw of the test data in training."""
        row_a, row_b = ranked_rows[a], ranked_rows[b]
        seeds = sorted(seeds_run(table, row_a) & seeds_run(table, row_b))
        pair: dict[str, Any] = {"a": a, "b": b, "seeds": seeds}
        pair["seen_in_training"] = pair_seen_in_training(row_a, row_b, table.columns, self.cells, seeds)
        if not seeds:
            pair["reason"] = "the two rows have no seed in common: nothing to pair"
            return pair
        comparisons = compare_pair(table, row_a, row_b, self.cells, seeds)
        pair["tasks"] = [c.as_dict() for c in comparisons]
        pair["command"] = compare_command(row_a, row_b, table.columns, seeds)
        pair["units_note"] = UNITS_NOTE  # the same words as `harness compare`
        return pair

    def table(
        self, table_id: str, table: Table, sections: list[Table], created: dict, extra: dict | None = None
    ) -> dict:
        """Write ``table`` under ``table_id`` (``extra``: more keys of its table file) and return its index entry."""
        writer = self.writer
        self.tables_done += 1
        if self.progress:
            self.progress(
                f"table {self.tables_done}/{self.tables_total} {table_id}: {len(table.rows)} rows, "
                f"{len(table.columns)} columns"
            )
        ranked_rows = [row for _, row, _ in table.ranked()]
        with_examples: dict[str, bool] = {}
        cell_files: dict[str, str] = {}  # "<row>-<column>" -> its cell file (shared by every table showing the cell)
        for column_index, column in enumerate(table.columns):
            with_examples[column] = False
            for row_index, row in enumerate(ranked_rows):
                cell = row.cells.get(column)
                if cell is None or not cell.values:
                    continue
                key = cell_key(cell)
                if key not in self.cell_files:
                    self.cell_files[key] = self._write_cell(cell, key)
                if self.cell_files[key] is not None:
                    with_examples[column] = True
                    cell_files[f"{row_index}-{column_index}"] = self.cell_files[key]
        task_keys = column_task_keys(table, ranked_rows)
        self._note_shown_hits(table, ranked_rows, cell_files, task_keys)
        table_payload = site_table_payload(table_id, table, sections, with_examples)
        for row_index, row in enumerate(ranked_rows):
            curves = row_curves(row, self.curves_skipped, self.curves_read)
            if curves:
                path = f"data/curves/{table_id}/{row_index}.json"
                writer.json(path, curves)
                table_payload["rows"][row_index][TRAINING_CURVES_HOOK] = path
        table_payload["task_keys"] = task_keys
        table_payload["cell_files"] = cell_files
        table_payload.update(extra or {})
        writer.json(f"data/tables/{table_id}.json", table_payload)
        pairs = len(ranked_rows) * (len(ranked_rows) - 1) // 2
        # comparing every pair of rows is most of a build's time: a bar on a terminal, a log line a while elsewhere
        with progress_bar(pairs, f"{table_id}: pairs of rows compared", self.progress is not None, "pair") as bar:
            for a in range(len(ranked_rows)):
                for b in range(a + 1, len(ranked_rows)):
                    writer.json(f"data/compare/{table_id}/{a}-{b}.json", self._pair(table, ranked_rows, a, b))
                    bar.update(1)
        return {
            "id": table_id,
            "title": table.title,
            "rows": len(table.rows),
            "columns": table.columns,
            "profiles": sorted({row.profile for row in table.rows}),
            "backbones": sorted({row.backbone for row in table.rows}),
            "seeds": sorted({seed for row in table.rows for seed in seeds_shown(table, row)}),
            "dates": _dates(table, created),
        }


def build_site(
    store: Store,
    folder: Path,
    registry: Any = None,
    family_members: dict[str, list[str]] | None = None,
    include_samples: bool = False,
    resamples: int = DEFAULT_RESAMPLES,
    progress: Callable[[str], None] | None = None,
    matrices: tuple[Path, ...] = (),
    data_dir: Path | None = None,
    seen_positions: Callable[[dict], list[int] | None] | None = None,
) -> SiteReport:
    """Write the site for ``store`` into ``folder`` (created; an earlier site there is replaced whole: no file of it
    stays). ``registry`` (optional) orders the families' columns and reads the tasks' texts for the examples view,
    from the data each record names (``data_dir``: ``harness site --data-dir``; texts of other data than the
    record's ``dataset_checksum`` are withheld with the reason); ``include_samples`` as for ``harness leaderboard``
    (records on an evaluation sample in sections of their own). ``matrices``: matrix files whose paper tables join
    the index, each the page ``harness leaderboard --matrix FILE --formats html`` writes (the same renderer), under
    ``matrices/`` (they need ``registry``). ``seen_positions``: a record -> the positions of its test pairs that
    its model trained on (``harness site`` gives ``harness.run.overlap.OverlapDeriver.seen_positions``), or None
    when they cannot be found; the examples view marks them (without it, it says how many and why not marked).

    The site is built in a temporary folder beside ``folder`` and renamed into place when whole, so a reader sees
    the old site or the new one. Refused (StoreError) for a folder in the store (or holding it) and for a folder
    holding files that are not an earlier site (replacing it would delete them)."""
    folder = Path(folder)
    check_site_folder(folder, store.root)
    check_writable_dir(folder.parent, "the site folder's parent")
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_siblings(folder)
    staging = Path(tempfile.mkdtemp(prefix=temporary_prefix(folder.name), dir=folder.parent))
    report = SiteReport(folder)
    writer = _Writer(staging, report)
    try:
        os.chmod(staging, 0o777 & ~UMASK)  # mkdtemp's 0700 would hide the site from a web server's user
        for name in ASSETS:
            text = resources.files("harness.leaderboard").joinpath("site_assets", name).read_text(encoding="utf-8")
            atomic_write_text(staging / name, text)
            report.files += 1
            report.bytes += len(text.encode())
        created = {record.get("_path"): str(record.get("created_at") or "") for record in store.records()}
        created = {path: date for path, date in created.items() if path and date}
        tables = collect_tables(store, family_members, include_samples)
        cells = CellData(resamples)
        index: list[dict] = []
        written = _Written(writer, cells, registry, progress, data_dir, seen_positions)
        written.tables_total = len(tables) + len(matrices)
        for family, sections in group_by_family(tables).items():
            if progress:
                progress(f"family {family}: intervals and marks of {sum(len(t.rows) for t in sections)} rows")
            for table in sections:
                report.problems += attach_statistics(table, resamples).problems
                cells.reuse(table)
            entries = [
                written.table(_table_id(family, number), table, sections, created)
                for number, table in enumerate(sections)
            ]
            index.append({"family": family, "tables": entries})
        paper_tables = [
            _paper_table(Path(path), store, registry, staging, created, written, resamples) for path in matrices
        ]
        written.write_texts()
        writer.json(
            "data/index.json",
            {
                "store": store.root.name,  # a display name: the site says nothing of the machine it was built on
                "families": index,
                "matrices": paper_tables,
                "invalid_records": len(store.skipped),
                "unit_note": NO_DATA,
            },
        )
        _replace_folder(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return report


SITE_MARKERS = ("index.html", "data/index.json")  # what an earlier site holds (its folder may be replaced)


def check_site_folder(folder: Path, store_root: Path) -> None:
    """Refuse (StoreError, one line) a site folder that is the store, lies inside it or holds it, and an existing
    folder with files that is not an earlier site: building replaces the folder's whole content."""
    folder = Path(folder)
    if is_inside(folder, store_root) or (folder.exists() and is_inside(store_root, folder)):
        raise StoreError(
            f"--to {folder}: the site would be written {'into' if is_inside(folder, store_root) else 'over'} the "
            f"store {store_root}; give a folder outside it (e.g. --to site)"
        )
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise StoreError(f"--to {folder} is {'a link' if folder.is_symlink() else 'a file'}; give a folder")
    if folder.is_dir() and any(folder.iterdir()) and not all((folder / marker).is_file() for marker in SITE_MARKERS):
        raise StoreError(
            f"--to {folder} holds files that are not a harness site; a site replaces its folder's whole content, "
            "so give a new or empty folder (or an earlier site's)"
        )


def _replace_folder(staging: Path, folder: Path) -> None:
    """Rename the whole new site ``staging`` to ``folder``; an earlier site there is renamed aside first (a folder
    cannot be renamed over a non-empty one) and removed after, so none of its files stays."""
    if not folder.exists():
        os.replace(staging, folder)
        return
    aside = Path(tempfile.mkdtemp(prefix=temporary_prefix(folder.name), dir=folder.parent))
    os.replace(folder, aside)  # onto the empty folder just made: atomic, and the name is ours
    os.replace(staging, folder)
    shutil.rmtree(aside, ignore_errors=True)


def _paper_table(
    path: Path, store: Store, registry: Any, folder: Path, created: dict, written: _Written, resamples: int
) -> dict:
    """One matrix file's paper table: a site table like a family's (filters, sorting, compare and examples for any
    two of its entries, with the paper's numbers and the verdicts), plus the page ``harness leaderboard --matrix``
    writes in HTML (the same renderer), and its index entry."""
    from .claims import matrix_outcomes
    from .matrix_board import build_board
    from .matrix_board import render_html as render_matrix_html

    if registry is None:
        raise HarnessError(
            f"the paper table of {path} needs the plugins its entries name; install them or leave it out"
        )
    board = build_board(path, store, registry)
    outcomes = matrix_outcomes(path, store, registry, board=board)
    page = render_matrix_html(board, outcomes)
    relative = f"matrices/{board.name}.html"
    (folder / "matrices").mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / relative, page)
    written.writer.report.files += 1
    written.writer.report.bytes += len(page.encode())
    records = {record["_path"]: record for record in store.records() if record.get("_path")}
    table = matrix_table(board, records)
    written.writer.report.problems += attach_statistics(table, resamples).problems
    written.cells.reuse(table)
    table_id = "matrix-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", board.name).strip("-") or "table")
    entry = written.table(table_id, table, [table], created, matrix_extra(board, table, outcomes))
    return {
        **entry,
        "name": board.name,
        "page": relative,
        "description": board.description,
        "profiles": [board.profile],
        "declared_seeds": list(board.seeds),
        "columns": [column.label for column in board.columns],
    }


def serve(folder: Path, port: int) -> None:
    """Serve ``folder`` on http://127.0.0.1:PORT until interrupted (Python's http.server; localhost only)."""
    import functools
    import http.server

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        logger.info("serving %s on http://127.0.0.1:%d/ (Ctrl-C stops)", folder, server.server_address[1])
        server.serve_forever()
