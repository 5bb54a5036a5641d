"""The leaderboard's tables, from the store alone: one file per task family, one ranked section per set of
comparable rows.

Rows are model specs (with their training source, backbone and profile), columns the family's member tasks plus
the average; a cell is mean ± std of the main score over seeds, or ``*``, ``-``, ``missing``, ``failed``,
``invalid``. Cell text comes from :func:`cell_view` (its marks from :data:`CELL_MARKS`; the statistics' interval and
significance marks are added by :func:`harness.leaderboard.stats.decorate`). Seeds, sections, labels, averages and
invalid records: docs/core/leaderboards.md, section "Leaderboard tables" and the table rows "leaderboard averages"
and "leaderboard sections".
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from ..baseline import Baseline
from ..contamination import NORMALISATION, percent, seen_shares
from ..record import DEFAULT_RUNTIME, RUNTIME_SEPARATOR, runtime_of, split_record_stem
from ..status import CellStatus
from ..store import Store
from ..store_files import StoreError
from .stats import TableStatistics, decorate

logger = logging.getLogger(__name__)

LONG_LABEL = 48  # specs (without their training source) longer than this get a short label and a legend entry
SAMPLE_NOTE = "computed on a sample of the evaluation data (max_eval_examples={n}); not comparable to full results"


@dataclass
class ScoreCell:
    """The records of one row and column of a leaderboard, by seed: the main scores of the ok ones and what the
    others say (missing, failed, invalid), with what the statistics attach to it."""

    values: dict[int, float] = field(default_factory=dict)  # seed -> main score
    missing_seeds: set[int] = field(default_factory=set)
    failed_seeds: set[int] = field(default_factory=set)
    invalid_seeds: dict[int, str] = field(default_factory=dict)  # seed -> why the record does not verify
    records: dict[int, str] = field(default_factory=dict)  # seed -> the record's path (the HTML page links them)
    messages: dict[int, str] = field(default_factory=dict)  # seed -> a failed or missing record's message
    # seed -> (share of test pairs, share of test sentences) seen in training, where measured (harness.contamination)
    seen: dict[int, tuple[float, float]] = field(default_factory=dict)
    # (95% bootstrap interval, significance mark) where the statistics computed one (harness.leaderboard.stats)
    bootstrap: tuple[tuple[float, float], str] | None = None

    def mean(self) -> float:
        return statistics.mean(self.values.values())

    def std(self) -> float:
        return statistics.stdev(self.values.values()) if len(self.values) > 1 else 0.0

    @property
    def has_record(self) -> bool:
        return bool(self.values or self.missing_seeds or self.failed_seeds or self.invalid_seeds)


@dataclass
class Row:
    label: str
    model_key: str
    train_on: str | None
    backbone: str
    profile: str
    cells: dict[str, ScoreCell] = field(default_factory=lambda: defaultdict(ScoreCell))
    seeds: set[int] = field(default_factory=set)
    hardware: set[str] = field(default_factory=set)
    spec: str = ""  # the full spec label (with its training source): what a short label stands for
    identity: dict = field(default_factory=dict)  # the record's model identity, flattened (what makes rows differ)
    sample: int | None = None  # the profile's max_eval_examples when the records were computed on a sample
    costs: dict[tuple[str, int], dict] = field(default_factory=dict)  # (column, seed) -> its record's cost object
    runtime: str = DEFAULT_RUNTIME  # the evaluation runtime of its cells (each runtime is a row of its own)
    # the model key its spec resolves to now, when a default changed since it was trained (a superseded row: shown
    # only when asked, never ranked beside the current model)
    superseded_by: str = ""

    @property
    def key(self) -> str:
        """What tells this row from every other: its model key, and its runtime unless torch (:func:`row_id`)."""
        return row_id(self.model_key, self.runtime)

    def complete(self, column: str) -> bool:
        cell = self.cells.get(column)
        return cell is not None and set(cell.values) == self.seeds

    def average(self, columns: list[str]) -> float | None:
        if not columns or not all(self.complete(c) for c in columns):
            return None
        return statistics.mean(self.cells[c].mean() for c in columns)


class CellKind(str, Enum):
    """What a leaderboard cell shows: a score over its seeds, or why it has none. ``failed`` and ``missing`` mean what
    a record's status means (harness.status); ``invalid`` (a record that does not verify) and ``not-run`` (no record)
    are the table's own. The values are the words the site's data and the CSV's status column hold."""

    VALUE = "value"
    FAILED = CellStatus.FAILED.value
    MISSING = CellStatus.MISSING.value
    INVALID = "invalid"
    NOT_RUN = "not-run"

    def __str__(self) -> str:
        return self.value


@dataclass
class CellView:
    """What one cell shows: its ``kind``, its text and the ``annotations`` appended to a value (:data:`CELL_MARKS`:
    ``*`` for a cell with fewer seeds than its row, the seen-in-training marks)."""

    kind: CellKind
    text: str
    annotations: list[str] = field(default_factory=list)

    def render(self) -> str:
        return self.text + "".join(self.annotations)


def _incomplete_mark(row: Row, column: str, cell: ScoreCell) -> str | None:
    return "*" if cell.values and not row.complete(column) else None


SEEN_PAIRS, SEEN_SENTENCES = "†", "‡"


def seen_in_training(cell: ScoreCell) -> tuple[float, float] | None:
    """(share of test pairs, share of test sentences) seen in training, mean over the cell's measured seeds; None
    when no seed was measured or nothing was seen."""
    measured = [cell.seen[seed] for seed in cell.values if seed in cell.seen]
    if not measured:
        return None
    pairs, sentences = statistics.mean(p for p, _ in measured), statistics.mean(s for _, s in measured)
    return (pairs, sentences) if pairs or sentences else None


def _seen_mark(row: Row, column: str, cell: ScoreCell) -> str | None:
    """`` †32%``: 32% of the test pairs were in the training data; `` ‡12%``: no pair, 12% of the sentences."""
    seen = seen_in_training(cell)
    if seen is None:
        return None
    pairs, sentences = seen
    return f" {SEEN_PAIRS}{percent(pairs)}" if pairs else f" {SEEN_SENTENCES}{percent(sentences)}"


# The marks every format shows after a value, in this order: functions (row, column, cell) -> a mark or None.
CELL_MARKS: tuple[Callable[[Row, str, ScoreCell], str | None], ...] = (_incomplete_mark, _seen_mark)


def contamination_notes(sections: list[Table]) -> list[str]:
    """The legend of the seen-in-training marks, naming the rows that carry one (every format says it)."""

    def pairs_seen(row: Row) -> bool:
        return any((seen_in_training(cell) or (0.0, 0.0))[0] for cell in row.cells.values())

    rows = sorted(
        {
            row.label
            for table in sections
            for row in table.rows
            if any(seen_in_training(cell) for cell in row.cells.values())
        }
    )
    if not rows:
        return []
    lines = [
        f"{SEEN_PAIRS}N%: N% of the cell's test pairs were in the row's training data; {SEEN_SENTENCES}N%: no "
        f"test pair, but N% of its test sentences (measured by the harness from the row's training provenance: "
        f"{NORMALISATION}; the backbone's pretraining data is not known). Rows with such cells: "
        f"{', '.join(rows)}. A task option `unseen=true` (e.g. `sts12:unseen=true`) scores only the unseen pairs."
    ]
    for table in sections:
        clean = [(row, average) for _, row, average in table.ranked() if average is not None and not pairs_seen(row)]
        if len(clean) < sum(average is not None for _, _, average in table.ranked()):
            top = "; ".join(
                f"{rank} `{row.label}` ({average:.2f})" for rank, (row, average) in enumerate(clean[:3], start=1)
            )
            lines.append(
                f"Ranked without the rows that saw test pairs ({SEEN_PAIRS})"
                f"{f' in {table.title}' if table.title else ''}: {top or 'none left'}."
            )
    return lines


def cell_view(row: Row, column: str) -> CellView:
    cell = row.cells.get(column)
    if cell is None or not cell.has_record:
        return CellView(CellKind.NOT_RUN, "-")
    if cell.invalid_seeds:  # a damaged record is said first: it hides whatever number it held
        view = CellView(CellKind.INVALID, "invalid")
    elif not cell.values:
        view = CellView(CellKind.FAILED, "failed") if cell.failed_seeds else CellView(CellKind.MISSING, "missing")
    else:
        text = f"{cell.mean():.2f}" + (f" ± {cell.std():.2f}" if len(cell.values) > 1 else "")
        view = CellView(CellKind.VALUE, text)
    if view.kind is CellKind.VALUE:
        view.annotations = [a for a in (mark(row, column, cell) for mark in CELL_MARKS) if a]
    return view


@dataclass
class Table:
    """One ranked section of a family's leaderboard (rows of one profile evaluated on the same columns)."""

    family: str
    columns: list[str]
    rows: list[Row]
    column_metrics: dict[str, str] = field(default_factory=dict)  # column -> its task's main score name
    title: str = ""  # the section's heading when the family has more than one section
    legend: dict[str, str] = field(default_factory=dict)  # short label -> what it stands for (family-wide)
    baseline: Baseline | None = None
    show_cost: bool = False  # `harness leaderboard --cost`: the formats add the cost columns (.cost)
    # the bootstrap intervals and marks of its cells (harness.leaderboard.stats.attach_statistics); None until computed
    statistics: TableStatistics | None = None
    hidden_superseded: int = 0  # superseded models of the family left out (shown with --show-superseded)

    def baseline_lines(self) -> list[str]:
        """The baseline note: which trained rows beat the baseline row on its column, and which do not."""
        baseline, column = self.baseline, self.baseline.column if self.baseline else ""
        reference = next(
            (
                row
                for row in self.rows
                if baseline
                and row.spec == baseline.model
                and row.train_on is None
                and row.cells.get(column)
                and row.cells[column].values
            ),
            None,
        )
        if baseline is None or reference is None:
            return []
        metric = self.column_metrics.get(column, "main score")
        score = reference.cells[column].mean()
        lines = [
            f"Baseline: `{baseline.model}`, untrained, {column} {metric} {score:.2f}"
            + (f" ({baseline.why})." if baseline.why else ".")
        ]
        trained = [row for row in self.rows if row.train_on and row.cells.get(column) and row.cells[column].values]
        below = [
            f"`{row.label}` ({row.cells[column].mean():.2f})" for row in trained if row.cells[column].mean() <= score
        ]
        above = [
            f"`{row.label}` ({row.cells[column].mean():.2f})" for row in trained if row.cells[column].mean() > score
        ]
        if below:
            lines.append(
                f"The untrained baseline beats or ties these trained rows on {column} ({metric}): "
                f"{', '.join(below)}; their training does not pay here."
            )
        if above:
            lines.append(f"Trained rows above the baseline on {column} ({metric}): {', '.join(above)}.")
        return lines

    @property
    def averaged_metric(self) -> str | None:
        """The metric the average is over: the one most columns use (ties: the first column's); None if unknown."""
        metrics = [self.column_metrics[c] for c in self.columns if c in self.column_metrics]
        if not metrics:
            return None
        return max(dict.fromkeys(metrics), key=metrics.count)

    @property
    def averaged_columns(self) -> list[str]:
        """The columns the average joins: those of ``averaged_metric`` (all columns when metrics are unknown)."""
        metric = self.averaged_metric
        if metric is None:
            return list(self.columns)
        return [c for c in self.columns if self.column_metrics.get(c, metric) == metric]

    @property
    def mixed_metrics(self) -> bool:
        return len({self.column_metrics.get(c) for c in self.columns}) > 1

    @property
    def average_header(self) -> str:
        return f"average ({self.averaged_metric})" if self.mixed_metrics else "average"

    def ranked(self) -> list[tuple[int | None, Row, float | None]]:
        """(rank, row, average), best first; rows without an average and superseded rows last, without a rank (a
        superseded row's numbers are those of an older setting: it never takes a rank from the current ones)."""
        scored = [(row, row.average(self.averaged_columns)) for row in self.rows]
        scored.sort(key=lambda item: (item[1] is None or bool(item[0].superseded_by), -(item[1] or 0.0), item[0].label))
        ranked, rank = [], 0
        for row, average in scored:
            ranks = average is not None and not row.superseded_by
            if ranks:
                rank += 1
            ranked.append((rank if ranks else None, row, average))
        return ranked

    def cell_view(self, row: Row, column: str) -> CellView:
        return cell_view(row, column)

    def cell_text(self, row: Row, column: str) -> str:
        view = cell_view(row, column)
        # interval and tie marks (harness.leaderboard.stats) on numbers only
        return decorate(self, row, column, view.render()) if view.kind is CellKind.VALUE else view.render()


def _ordered(columns: list[str], preferred: list[str]) -> list[str]:
    """Columns in the family's registration order (task labels start with the task name), others sorted after."""

    def position(column: str) -> tuple[int, str]:
        name = column.split(":")[0]
        return (preferred.index(name) if name in preferred else len(preferred), column)

    return sorted(columns, key=position)


def _flatten(payload: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(payload, dict):
        flat: dict[str, Any] = {}
        for key, value in payload.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix.rstrip("."): payload}


def _identity(record: dict) -> dict:
    """What tells two specs apart, flattened: the record's model identity (options, budget, backbone, profile, ...)
    and the plugin that made it."""
    model = {k: v for k, v in record["model"].items() if k not in ("hash", "label")}
    runtime = {} if runtime_of(record) == DEFAULT_RUNTIME else {"runtime": runtime_of(record)}
    return {
        **_flatten(model),
        "plugin": record.get("model_package"),
        "plugin version": record.get("model_version"),
        "sample": (record.get("profile") or {}).get("max_eval_examples"),
        **runtime,
    }


def row_id(model_key: str, runtime: str) -> str:
    """A leaderboard row: a model spec evaluated under one runtime (each runtime keeps its own cells)."""
    return model_key if runtime == DEFAULT_RUNTIME else f"{model_key}{RUNTIME_SEPARATOR}{runtime}"


def sample_size(record: dict) -> int | None:
    """The evaluation sample a record was computed on (the profile's ``max_eval_examples``), or None for full data."""
    profile = record.get("profile")
    value = profile.get("max_eval_examples") if isinstance(profile, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class _Family:
    rows: dict[str, Row] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)


def _new_row(record: dict) -> Row:
    """The row of ``record``'s model, without cells."""
    model = record["model"]
    label = model["label"] + (f" [train: {model['train_on']}]" if model.get("train_on") else "")
    if runtime_of(record) != DEFAULT_RUNTIME:  # a row of its own, and it says so
        label += f" [runtime: {runtime_of(record)}]"
    return Row(
        label,
        record["model_key"],
        model.get("train_on"),
        model["backbone"],
        model["profile"],
        spec=label,
        identity=_identity(record),
        sample=sample_size(record),
        runtime=runtime_of(record),
    )


def _add_record(family: _Family, record: dict) -> None:
    task = record["task"]
    key = row_id(record["model_key"], runtime_of(record))
    if key not in family.rows:
        family.rows[key] = _new_row(record)
    row = family.rows[key]
    column = task["label"]
    if column not in family.columns:
        family.columns.append(column)
    if task.get("main_score"):
        family.metrics.setdefault(column, task["main_score"])
    seed = record["seed"]
    row.seeds.add(seed)
    row.hardware.add(record.get("hardware", "?"))
    cell = row.cells[column]
    if record.get("_path"):
        cell.records[seed] = record["_path"]
    if record.get("status") == CellStatus.OK:
        cell.values[seed] = record["main_score"]
        if isinstance(record.get("cost"), dict):
            row.costs[(column, seed)] = record["cost"]
        shares = seen_shares(record)
        if shares is not None:
            cell.seen[seed] = shares
    elif record.get("status") == CellStatus.MISSING:
        cell.missing_seeds.add(seed)
        cell.messages[seed] = record.get("message", "")
    elif record.get("status") == CellStatus.FAILED:
        cell.failed_seeds.add(seed)
        cell.messages[seed] = record.get("message", "")


def _family_of(task_key: str, family_members: dict[str, list[str]]) -> str:
    """The family of a task key (``name`` or ``name-<options hash>``) by the registry's members, else the key."""
    for family, members in family_members.items():
        if any(task_key == member or task_key.startswith(f"{member}-") for member in members):
            return family
    return task_key


def _add_invalid(
    families: dict[str, _Family],
    path: Path,
    reason: str,
    task_places: dict[str, tuple[str, str]],
    models: dict[str, dict],
    family_members: dict[str, list[str]],
) -> None:
    """An invalid record in its cell: model key, seed and task key come from its path (the record itself cannot be
    trusted); the family and column from the valid records of the same task, else from the registry's families."""
    model_key, seed_folder = path.parent.parent.name, path.parent.name
    task_key, runtime = split_record_stem(path.stem)
    try:
        seed = int(seed_folder.removeprefix("seed-"))
    except ValueError:
        return
    family_name, column = task_places.get(task_key, (_family_of(task_key, family_members), task_key))
    family = families.setdefault(family_name, _Family())
    key = row_id(model_key, runtime)
    if key not in family.rows:
        known = models.get(key)
        if known is not None:
            family.rows[key] = _new_row(known)
        else:
            family.rows[key] = Row(key, model_key, None, "?", "?", spec=key, identity={"key": key})
    row = family.rows[key]
    if column not in family.columns:
        family.columns.append(column)
    row.seeds.add(seed)
    row.cells[column].invalid_seeds[seed] = reason
    row.cells[column].records[seed] = str(path)


def _option_parts(spec_label: str) -> tuple[str, list[str], str]:
    """``name:opt=a,opt=b [train: x]`` -> (name, [opt=a, opt=b], " [train: x]")."""
    head, _, train = spec_label.partition(" [train: ")
    name, _, options = head.partition(":")
    return name, [part for part in options.split(",") if part], (f" [train: {train}" if train else "")


def _letters(index: int) -> str:
    text = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        text = chr(ord("A") + remainder) + text
    return text


def assign_labels(rows: list[Row]) -> dict[str, str]:
    """Give ``rows`` (one family) short, distinct labels in place; returns the legend of the option sets."""
    legend: dict[str, str] = {}
    long_rows: dict[tuple[str, str], list[Row]] = defaultdict(list)  # (model name, training source) -> rows
    for row in rows:
        head = row.spec.split(" [train: ")[0]
        if len(head) > LONG_LABEL and ":" in head:
            name, _, train = _option_parts(row.spec)
            long_rows[(name, train)].append(row)
    for index, ((name, _), group) in enumerate(sorted(long_rows.items())):
        parts = [_option_parts(row.spec)[1] for row in group]
        shared = [part for part in parts[0] if all(part in other for other in parts[1:])]
        mark = f"{name}[{_letters(index)}]"
        legend[mark] = f"{name}:{','.join(shared)}"
        for row, own in zip(group, parts):
            rest = [part for part in own if part not in shared]
            row.label = mark + (f":{','.join(rest)}" if rest else "") + _option_parts(row.spec)[2]
    by_label: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_label[row.label].append(row)
    for group in by_label.values():
        if len(group) < 2:
            continue
        keys = sorted({k for row in group for k in row.identity})
        differing = [k for k in keys if len({repr(row.identity.get(k)) for row in group}) > 1]
        for row in group:
            shown = ",".join(f"{k.split('.')[-1]}={_plain(row.identity.get(k))}" for k in differing)
            row.label += " {" + (shown or f"key={row.model_key}") + "}"
    return legend


def _plain(value: Any) -> str:
    return "default" if value is None else str(value)


def collect_tables(
    store: Store,
    family_members: dict[str, list[str]] | None = None,
    include_samples: bool = False,
    family_baselines: dict[str, Baseline] | None = None,
    hidden: Collection[str] = (),
) -> list[Table]:
    """Sections per family (docs/core/leaderboards.md, "Leaderboard tables"). ``family_members`` (from the registry,
    when available) only orders the columns. Records on an evaluation sample are left out unless ``include_samples``;
    their number is in ``store.sample_records``. The models of ``hidden`` (model keys: the superseded ones) are left
    out before the rows get their labels, so a label never carries what only told it from a hidden row; each
    section's ``hidden_superseded`` counts those of its family."""
    family_members = family_members or {}
    families: dict[str, _Family] = defaultdict(_Family)
    task_places: dict[str, tuple[str, str]] = {}
    models: dict[str, dict] = {}
    hidden_models: dict[str, set[str]] = defaultdict(set)  # family -> the hidden model keys it had
    store.sample_records = []
    for record in store.records():
        task = record["task"]
        family_name = task.get("family") or task["name"]
        task_places.setdefault(task["key"], (family_name, task["label"]))
        models.setdefault(row_id(record["model_key"], runtime_of(record)), record)
        if record["model_key"] in hidden:
            hidden_models[family_name].add(record["model_key"])
            continue
        if sample_size(record) is not None and not include_samples:
            store.sample_records.append(record.get("_path"))
            continue
        _add_record(families[family_name], record)
    for path, reason in store.skipped:
        if Path(path).parent.parent.name in hidden:
            continue
        _add_invalid(families, Path(path), reason, task_places, models, family_members)
    tables: list[Table] = []
    for family_name in sorted(families):
        family = families[family_name]
        rows = list(family.rows.values())
        legend = assign_labels(rows)
        columns = _ordered(family.columns, family_members.get(family_name, []))
        groups: dict[tuple, list[Row]] = defaultdict(list)
        for row in rows:
            covered = tuple(c for c in columns if row.cells.get(c) is not None and row.cells[c].has_record)
            groups[(row.sample is not None, row.profile, row.sample or 0, covered)].append(row)
        order = sorted(groups, key=lambda k: (k[0], k[1], -len(k[3]), [columns.index(c) for c in k[3]]))
        for key in order:
            sample, profile, size, covered = key
            title = (
                f"profile {profile}"
                + (f", sample of {size} (not comparable to full results)" if sample else "")
                + f": {len(groups[key])} row(s) evaluated on {', '.join(covered)}"
            )
            tables.append(
                Table(
                    family_name,
                    list(covered),
                    groups[key],
                    {c: m for c, m in family.metrics.items() if c in covered},
                    title if len(order) > 1 or sample else "",
                    legend,
                    (family_baselines or {}).get(family_name),
                    hidden_superseded=len(hidden_models[family_name]),
                )
            )
    return tables


def group_by_family(tables: list[Table]) -> dict[str, list[Table]]:
    grouped: dict[str, list[Table]] = {}
    for table in tables:
        grouped.setdefault(table.family, []).append(table)
    return grouped


def sections_of(tables: Table | list[Table]) -> list[Table]:
    """A family's sections, given one table or a list of them."""
    return [tables] if isinstance(tables, Table) else list(tables)


def legend_rows(sections: list[Table]) -> list[tuple[str, str]]:
    """(short label, what it stands for): the shared option sets, then every row whose label is not its spec."""
    if not sections:
        return []
    entries = list(sections[0].legend.items())
    seen = set()
    for table in sections:
        for row in table.rows:
            shortened = row.label.split(" {")[0] != row.spec  # not only a budget/backbone suffix
            if shortened and row.label not in seen:
                seen.add(row.label)
                entries.append((row.label, row.spec))
    return entries


def table_path(output_dir: Path, family: str, fmt: str) -> Path:
    """``<output_dir>/<family>.<fmt>``, refused unless it stays directly inside ``output_dir``."""
    output_dir = Path(output_dir)
    path = output_dir / f"{family}.{fmt}"
    if (
        not family
        or family.startswith(".")
        or Path(family).name != family
        or path.resolve().parent != output_dir.resolve()
    ):
        raise StoreError(f"task family {family!r} would be written outside {output_dir}; refused.")
    return path
