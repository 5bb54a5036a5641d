"""``harness leaderboard --matrix FILE``: one matrix file rendered as the paper table it reproduces, with the paper's
numbers (the matrix's optional ``paper:`` block), the differences, 95% bootstrap intervals and whether our
ordering agrees with the paper's (paired bootstrap).

Built from the registry the caller hands it (it resolves the matrix's specs; it never builds one). Reference: none
(presentation); deviations: none in the numbers. Rows, columns, cells, the ``paper:`` block's format and the
ordering test: docs/core/leaderboards.md, section "Paper tables" and the table row "paper tables".
"""

from __future__ import annotations

import html
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import DataFileError, data_error
from ..record import DEFAULT_RUNTIME, runtime_of, split_record_stem
from ..status import CellStatus
from ..store import Store
from .tables import Row, ScoreCell, cell_view, sample_size


@dataclass
class Column:
    label: str
    task_keys: list[str]  # one task; a family average: its members' keys
    members: list[str] = field(default_factory=list)  # a family average: its members' labels

    @property
    def is_average(self) -> bool:
        return bool(self.members)


@dataclass
class Paper:
    source: str = ""
    comparable: bool = True
    caveat: str = ""
    rows: dict[str, dict[str, float]] = field(default_factory=dict)
    aggregation: str = ""  # how the paper aggregated where ours differs (e.g. STS12-16), said in the header


@dataclass
class MatrixBoard:
    name: str
    description: str
    profile: str
    seeds: list[int]
    columns: list[Column]
    rows: list[Row]
    paper: Paper
    sample: int | None = None
    # cell statistics keyed by the cell's records (harness.leaderboard.stats.compare_cells): each cell is resampled
    # once however many formats, intervals and claims read it
    statistics: dict = field(default_factory=dict)

    def paper_columns(self) -> list[str]:
        return [c.label for c in self.columns if any(c.label in values for values in self.paper.rows.values())]


def _paper(path: Path, document: dict) -> Paper:
    block = document.get("paper")
    if block is None:
        return Paper()
    if not isinstance(block, dict) or not isinstance(block.get("rows", {}), dict):
        raise data_error(
            path,
            None,
            "paper must be a mapping with source, comparable, caveat and rows (entry name -> {column: number}).",
        )
    rows: dict[str, dict[str, float]] = {}
    for name, values in (block.get("rows") or {}).items():
        if not isinstance(values, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in values.values()
        ):
            raise data_error(path, None, f"paper.rows[{name!r}] must map column names to numbers; got {values!r}.")
        rows[str(name)] = {str(k): float(v) for k, v in values.items()}
    return Paper(
        str(block.get("source", "")),
        bool(block.get("comparable", True)),
        str(block.get("caveat", "")),
        rows,
        " ".join(str(block.get("aggregation", "")).split()),
    )


def entry_specs(matrix: dict, registry: Any) -> list[tuple[Any, Any]]:
    """Each entry of a loaded matrix with its spec, resolved exactly as ``harness run --matrix`` resolves it."""
    from ..profiles import get_profile
    from ..spec import resolve_model_spec

    profile = get_profile(matrix.get("profile", "quick"))
    return [
        (
            entry,
            resolve_model_spec(
                registry,
                entry.spec,
                profile,
                entry.backbone or matrix.get("backbone"),
                entry.train_on or matrix.get("train_on"),
                entry.budget,
            ),
        )
        for entry in matrix["models"]
    ]


def build_board(matrix_path: Path, store: Store, registry: Any) -> MatrixBoard:
    """The matrix's table from the records in ``store`` (docs/core/leaderboards.md, "Paper tables")."""
    import yaml

    from ..matrix import load_matrix
    from ..profiles import get_profile
    from ..spec import resolve_task_specs

    matrix_path = Path(matrix_path)
    matrix = load_matrix(matrix_path)
    document = yaml.safe_load(matrix_path.read_text(encoding="utf-8"))
    raw_entries = document.get("models") or []
    profile = get_profile(matrix.get("profile", "quick"))
    columns: list[Column] = []
    for text in matrix["tasks"]:
        specs = resolve_task_specs(registry, text)
        columns += [Column(spec.label, [spec.key]) for spec in specs]
        if len(specs) > 1:
            columns.append(Column(f"{text} avg", [s.key for s in specs], [s.label for s in specs]))
    records: dict[tuple[str, int, str], dict] = {}
    for record in store.records():
        if runtime_of(record) == DEFAULT_RUNTIME:  # a matrix board shows the cells of torch runs (the papers')
            records[(record["model_key"], record["seed"], record["task"]["key"])] = record
    invalid = {
        (Path(p).parent.parent.name, Path(p).parent.name, split_record_stem(Path(p).stem)[0]): reason
        for p, reason in store.skipped
        if split_record_stem(Path(p).stem)[1] == DEFAULT_RUNTIME
    }
    rows: list[Row] = []
    samples: set[int] = set()
    for (_, spec), raw in zip(entry_specs(matrix, registry), raw_entries):
        full = spec.label + (f" [train: {spec.train_on}]" if spec.train_on else "")
        name = raw.get("name") if isinstance(raw, dict) and raw.get("name") else full
        row = Row(str(name), spec.key, spec.train_on, spec.backbone, spec.profile, spec=full)
        row.seeds = set(matrix["seeds"])
        for column in columns:
            if column.is_average:
                continue
            task_key = column.task_keys[0]
            for seed in matrix["seeds"]:
                _fill(
                    row.cells[column.label],
                    records.get((spec.key, seed, task_key)),
                    seed,
                    invalid.get((spec.key, f"seed-{seed}", task_key)),
                )
                record = records.get((spec.key, seed, task_key))
                if record is not None and sample_size(record) is not None:
                    samples.add(sample_size(record))
            row.hardware |= {records[k].get("hardware", "?") for k in records if k[0] == spec.key}
        for column in columns:
            if column.is_average:
                _average(row, column)
        rows.append(row)
    names = [row.label for row in rows]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise DataFileError(f"{matrix_path}: entries share the row name(s) {duplicates}; give each a distinct name.")
    paper = _paper(matrix_path, document)
    unknown = sorted(set(paper.rows) - set(names))
    if unknown:
        raise DataFileError(
            f"{matrix_path}: paper.rows names {unknown}, which are not entries of the matrix (entries: {names})."
        )
    labels = {c.label for c in columns}
    stray = sorted({k for values in paper.rows.values() for k in values} - labels)
    if stray:
        raise DataFileError(
            f"{matrix_path}: paper.rows use column(s) {stray} that the matrix does not have "
            f"(columns: {sorted(labels)})."
        )
    description = " ".join(str(document.get("description", "")).split())
    return MatrixBoard(
        matrix_path.stem,
        description,
        profile.name,
        list(matrix["seeds"]),
        columns,
        rows,
        paper,
        max(samples) if samples else None,
    )


def _fill(cell: ScoreCell, record: dict | None, seed: int, invalid: str | None) -> None:
    if invalid is not None:
        cell.invalid_seeds[seed] = invalid
        return
    if record is None:
        return
    if record.get("_path"):
        cell.records[seed] = record["_path"]
    if record["status"] == CellStatus.OK:
        cell.values[seed] = record["main_score"]
    elif record["status"] == CellStatus.MISSING:
        cell.missing_seeds.add(seed)
        cell.messages[seed] = record.get("message", "")
    else:
        cell.failed_seeds.add(seed)
        cell.messages[seed] = record.get("message", "")


def _average(row: Row, column: Column) -> None:
    """Per seed the mean over the family's members (only seeds every member has), as the family's average cell."""
    cell = row.cells[column.label]
    members = [row.cells[m] for m in column.members]
    for seed in sorted(row.seeds):
        if all(seed in member.values for member in members):
            cell.values[seed] = statistics.mean(member.values[seed] for member in members)
        elif any(seed in member.invalid_seeds for member in members):
            cell.invalid_seeds[seed] = "a member's record is invalid"
        elif any(seed in member.failed_seeds for member in members):
            cell.failed_seeds.add(seed)
        elif any(seed in member.missing_seeds for member in members):
            cell.missing_seeds.add(seed)


def _paper_value(board: MatrixBoard, row: Row, column: str) -> float | None:
    return board.paper.rows.get(row.label, {}).get(column)


def _difference(board: MatrixBoard, row: Row, column: str) -> str:
    paper = _paper_value(board, row, column)
    cell = row.cells.get(column)
    if paper is None or cell is None or not cell.values:
        return ""
    return f"{cell.mean() - paper:+.2f}"


def member_cells(row: Row, column: Column) -> list[ScoreCell]:
    """The cells a column's score is made of: its own, or a family average's members."""
    return [row.cells[m] for m in column.members] if column.is_average else [row.cells[column.label]]


def _interval(row: Row, column: Column, cache: dict | None = None) -> str:
    """`` [low, high]``: the 95% bootstrap interval of a cell whose seeds all have per-example data, else ""."""
    from .stats import cached_statistics, mean_of_cells

    cells = member_cells(row, column)
    if not all(cell.values for cell in cells) or not row.cells[column.label].values:
        return ""
    parts = [cached_statistics(cell, cache) for cell in cells]
    if not all(parts):
        return ""
    low, high = (mean_of_cells(parts) if len(parts) > 1 else parts[0]).interval
    return f" [{low:.2f}, {high:.2f}]"


def paper_agreement_rows(board: MatrixBoard) -> list[list[str]]:
    """Per paper column, each neighbouring pair of the paper's rows in the paper's order (higher first): the paper's
    difference, ours with its 95% interval, p-value and unit, and the verdict by the reproduction rule
    (:data:`harness.leaderboard.verdicts.VERDICT_RULE`; equal paper numbers are a claimed tie). For a matrix without
    ``claims:``; one with claims shows those instead (docs/core/leaderboards.md, "Paper tables")."""
    from .stats import compare_cells
    from .verdicts import NO_DATA, NOT_RUN, pair_verdict

    by_label = {row.label: row for row in board.rows}
    lines = []
    cache = board.statistics
    for column in board.columns:
        reported = sorted(
            ((values[column.label], name) for name, values in board.paper.rows.items() if column.label in values),
            reverse=True,
        )
        for (paper_high, high), (paper_low, low) in zip(reported, reported[1:]):
            row_a, row_b = by_label[high], by_label[low]
            cells_a, cells_b = member_cells(row_a, column), member_cells(row_b, column)
            relation = "tie" if paper_high == paper_low else "order"
            if not all(c.values for c in cells_a + cells_b):
                ours, verdict = "", NOT_RUN
            else:
                result = compare_cells(cells_a, cells_b, cache)
                difference = row_a.cells[column.label].mean() - row_b.cells[column.label].mean()
                verdict = pair_verdict(relation, result, paper_high - paper_low)
                if result is None or result.interval is None:
                    ours = f"{difference:+.2f}" + (f" ({NO_DATA})" if result is None else "")
                else:
                    ours = (
                        f"{result.difference:+.2f} [{result.interval[0]:+.2f}, {result.interval[1]:+.2f}], "
                        f"p={result.p_value:.3f} ({result.unit})"
                    )
            lines.append([column.label, high, low, f"{paper_high - paper_low:+.2f}", ours, verdict])
    return lines


AGREEMENT_HEADERS = [
    "column",
    "higher in the paper",
    "lower in the paper",
    "paper Δ",
    "our Δ [95% CI], p (unit)",
    "verdict",
]


def table_rows(board: MatrixBoard) -> tuple[list[str], list[list[str]]]:
    with_paper = set(board.paper_columns())
    headers = ["entry", "seeds"]
    for column in board.columns:
        headers.append(column.label)
        if column.label in with_paper:
            headers += [f"{column.label} (paper)", f"{column.label} Δ"]
    body = []
    for row in board.rows:
        seeds_done = sorted({s for cell in row.cells.values() for s in cell.values})
        line = [row.label, ",".join(map(str, seeds_done)) or "-"]
        for column in board.columns:
            line.append(cell_view(row, column.label).render() + _interval(row, column, board.statistics))
            if column.label in with_paper:
                paper = _paper_value(board, row, column.label)
                line += ["" if paper is None else f"{paper:.2f}", _difference(board, row, column.label)]
        body.append(line)
    return headers, body


def header_lines(board: MatrixBoard) -> list[str]:
    lines = [
        f"Matrix `matrices/{board.name}.yaml`, profile {board.profile}, seeds "
        f"{', '.join(map(str, board.seeds))}. Cells: main score x100, mean ± std over the seeds that ran; `*` = "
        "fewer seeds than the matrix declares; `-` = not run; `failed` / `missing` / `invalid` as in the family "
        "leaderboards. A family's `avg` column is the mean over its members per seed."
    ]
    if board.sample is not None:
        lines.append(
            f"**Computed on a sample of the evaluation data (max_eval_examples={board.sample}): not "
            "comparable to full results or to the paper.**"
        )
    if board.paper.rows:
        lines.append(f"Paper: {board.paper.source}. `(paper)` columns are the paper's numbers, `Δ` = ours - paper.")
        if not board.paper.comparable:
            lines.append(f"**Not comparable to the paper:** {board.paper.caveat}")
        if board.paper.aggregation:
            lines.append(f"**Aggregation differs from the paper's:** {board.paper.aggregation}")
    return lines


def board_caption(board: MatrixBoard, body: list[list[str]]) -> str:
    """The one line above a paper table: the matrix, what a cell holds and the marks that occur in it."""
    from .marks import marks_caption

    paper = " `(paper)` columns: the paper's numbers; `Δ` = ours - paper." if board.paper.rows else ""
    marks = marks_caption([text for line in body for text in line[2:]])
    return (
        f"Matrix `matrices/{board.name}.yaml`, profile {board.profile}, seeds {', '.join(map(str, board.seeds))}. "
        f"Cells: main score x100, mean ± std over the seeds that ran.{paper}"
        + (f" {marks}" if marks else "")
        + " Notes below the table."
    )


def board_notes(board: MatrixBoard) -> list[str]:
    """The notes under a paper table: what it reproduces, the cell words, the paper's source and caveats."""
    return [
        *([f"What it reproduces: {board.description}"] if board.description else []),
        *(
            [
                f"**Computed on a sample of the evaluation data (max_eval_examples={board.sample}): not comparable to "
                "full results or to the paper.**"
            ]
            if board.sample is not None
            else []
        ),
        "`-` = not run; `failed` / `missing` / `invalid` as in the family leaderboards. A family's `avg` column is "
        "the mean over its members per seed.",
        *([f"Paper: {board.paper.source}."] if board.paper.rows else []),
        *(
            [f"**Not comparable to the paper:** {board.paper.caveat}"]
            if board.paper.rows and not board.paper.comparable
            else []
        ),
        *(
            [f"**Aggregation differs from the paper's:** {board.paper.aggregation}"]
            if board.paper.rows and board.paper.aggregation
            else []
        ),
        "Generated by `harness leaderboard --matrix` from the result store; do not edit by hand.",
    ]


def render_markdown(board: MatrixBoard, outcomes: list | None = None) -> str:
    from tabulate import tabulate

    from .text import notes_list

    headers, body = table_rows(board)
    legend = [(row.label, row.spec, row.model_key) for row in board.rows]
    return "\n".join(
        [
            f"# {board.name}",
            "",
            board_caption(board, body),
            "",
            tabulate(body, headers=headers, tablefmt="github", disable_numparse=True),
            "",
            "## Notes",
            "",
            *notes_list(board_notes(board)),
            *_agreement_markdown(board, outcomes),
            "## Entries",
            "",
            tabulate(legend, headers=["entry", "full spec", "model key"], tablefmt="github", disable_numparse=True),
            "",
        ]
    )


AGREEMENT_LEGEND = (
    "Neighbouring rows in the paper's order, tested on our records by the rule of "
    "docs/reproduction.md (across runs wherever a row was trained, else over test examples; equal "
    "paper numbers are a claimed tie): "
)


def _agreement_markdown(board: MatrixBoard, outcomes: list | None = None) -> list[str]:
    from tabulate import tabulate

    from .verdicts import VERDICT_RULE, claims_markdown

    if outcomes:
        return claims_markdown(outcomes, "## The paper's claims, judged on our records")
    lines = paper_agreement_rows(board)
    if not lines:
        return []
    return [
        "## Does our ordering agree with the paper's?",
        "",
        AGREEMENT_LEGEND + VERDICT_RULE,
        "",
        tabulate(lines, headers=AGREEMENT_HEADERS, tablefmt="github", disable_numparse=True),
        "",
    ]


def render_csv(board: MatrixBoard, outcomes: list | None = None) -> str:
    import csv
    import io

    headers, body = table_rows(board)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*headers, "spec", "model_key"])
    for row, line in zip(board.rows, body):
        writer.writerow([*line, row.spec, row.model_key])
    return buffer.getvalue()


def _inline(text: str) -> str:
    """The two markdown marks the header uses (``code`` and **strong**) as HTML, in text already escaped."""
    import re

    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def render_html(board: MatrixBoard, outcomes: list | None = None) -> str:
    from .html import _CSS, _marks_title, inline_markup, notes_html

    escape = lambda text: html.escape(str(text), quote=True)  # noqa: E731 - a local shorthand
    headers, body = table_rows(board)
    head = "".join(f'<th class="{"text" if i < 2 else ""}">{escape(h)}</th>' for i, h in enumerate(headers))
    lines = []
    for row, line in zip(board.rows, body):
        cells = [
            f'<td class="text model" title="{escape(row.spec)}">{escape(line[0])}</td>',
            f'<td class="text">{escape(line[1])}</td>',
        ]
        for text in line[2:]:
            css = "failed" if text in ("failed", "invalid") else "status" if text in ("missing", "-") else ""
            cells.append(
                f'<td><span class="{css}">{escape(text)}</span></td>'
                if css
                else f"<td{_marks_title(text)}>{escape(text)}</td>"
            )
        lines.append("<tr>" + "".join(cells) + "</tr>")
    entries = "".join(
        f'<tr><td class="text">{escape(r.label)}</td><td class="text spec">{escape(r.spec)}</td>'
        f'<td class="text">{escape(r.model_key)}</td></tr>'
        for r in board.rows
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(board.name)}</title>",
            f"<style>{_CSS}</style>",
            "</head>",
            "<body>",
            f"<h1>{escape(board.name)}</h1>",
            f'<p class="caption">{inline_markup(board_caption(board, body))}</p>',
            '<div class="scroll"><table>',
            f"<thead><tr>{head}</tr></thead>",
            "<tbody>",
            *lines,
            "</tbody></table></div>",
            "<h2>Notes</h2>",
            notes_html(board_notes(board)),
            *_agreement_html(board, escape, outcomes),
            "<h2>Entries</h2>",
            '<table class="legend-table"><thead><tr><th class="text">entry</th><th class="text">full spec</th>'
            f'<th class="text">model key</th></tr></thead><tbody>{entries}</tbody></table>',
            "</body>",
            "</html>",
            "",
        ]
    )


def _agreement_html(board: MatrixBoard, escape: Any, outcomes: list | None = None) -> list[str]:
    from .verdicts import HEADERS, VERDICT_RULE, claim_row

    if outcomes:
        title, legend = "The paper's claims, judged on our records", VERDICT_RULE
        headers, lines = HEADERS, [claim_row(outcome) for outcome in outcomes]
    else:
        title, legend = "Does our ordering agree with the paper's?", AGREEMENT_LEGEND + VERDICT_RULE
        headers, lines = AGREEMENT_HEADERS, paper_agreement_rows(board)
    if not lines:
        return []
    head = "".join(f'<th class="text">{escape(h)}</th>' for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="text">{_inline(escape(v))}</td>' for v in line) + "</tr>" for line in lines
    )
    return [
        f"<h2>{escape(title)}</h2>",
        f'<p class="legend">{_inline(escape(legend))}</p>',
        f'<table class="legend-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>',
    ]
