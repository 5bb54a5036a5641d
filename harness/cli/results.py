"""`harness results`: stored results as a table, CSV, JSON or Parquet (harness.results.load_results), filtered,
sorted and queried; it reads records and never recomputes anything."""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import HarnessError, close_matches_hint
from .common import DEFAULT_PUBLISHED, DEFAULT_RESULTS, results_dir
from .parsing import add_command

if TYPE_CHECKING:
    import pandas as pd

FORMATS = ("table", "csv", "json", "parquet")
# What the table shows unless --columns says otherwise (csv, json and parquet carry every column).
TABLE_COLUMNS = ("spec", "profile", "seed", "task", "metric", "score", "status")
WIDE_STATS = ("mean", "std", "n")


def add_parser(commands: Any) -> None:
    results = add_command(
        commands,
        "results",
        "stored results as data: one row per cell and seed (or --wide: models x tasks), filtered, sorted, "
        "as a table, csv, json or parquet; recomputes nothing",
        (
            "harness results --published --families senteval --sort score:desc",
            "harness results --where \"score > 80 and train_on == 'stsb'\" --format csv",
            "harness results --wide --stat std --tasks stsb,sickr",
        ),
    )
    results.set_defaults(handler=cmd_results)
    source = results.add_argument_group("which records")
    source.add_argument(
        "--results",
        type=Path,
        action="append",
        default=None,
        help=f"a store to read (repeatable; default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR, unless "
        "--published or --exported is given)",
    )
    source.add_argument(
        "--published", action="store_true", help=f"also read the published records (./{DEFAULT_PUBLISHED})"
    )
    source.add_argument(
        "--exported",
        action="append",
        default=[],
        metavar="FORMAT=DIR",
        help="also read a folder `harness export-results --format FORMAT --to DIR` wrote, e.g. mteb=out (repeatable)",
    )
    rows = results.add_argument_group("which rows, in which order")
    rows.add_argument(
        "--models", help="model specs as the leaderboards label them, model names or keys (comma-separated)"
    )
    rows.add_argument("--tasks", help="task labels, names or keys (comma-separated)")
    rows.add_argument("--profile", help="only records of this profile")
    rows.add_argument("--families", help="task families (comma-separated), e.g. senteval")
    rows.add_argument(
        "--where",
        help="keep rows where this holds, on any column: comparisons (== != < <= > >=, in [..], not in [..]) "
        "joined by and/or/not, e.g. \"score > 80 and train_on == 'stsb'\"; `column == None` for empty",
    )
    rows.add_argument(
        "--sort",
        help="columns to sort by (comma-separated; column:desc or --sort=-column for descending), e.g. score:desc",
    )
    shown = results.add_argument_group("what to show, and how")
    shown.add_argument("--columns", help=f"columns to show (comma-separated; table default: {','.join(TABLE_COLUMNS)})")
    shown.add_argument("--wide", action="store_true", help="models x tasks, seeds aggregated as in the leaderboards")
    shown.add_argument("--stat", default="mean", help=f"with --wide: {', '.join(WIDE_STATS)} over seeds (default mean)")
    shown.add_argument(
        "--intervals", action="store_true", help="add each row's 95%% bootstrap interval from its per-example file"
    )
    shown.add_argument("--format", default="table", help=f"{', '.join(FORMATS)} (default table)")
    shown.add_argument("--output", type=Path, help="write to this file instead of standard output (parquet needs it)")
    source.add_argument(
        "--strict", action="store_true", help="stop at a record that does not verify (default: skip it, exit 1)"
    )


def cmd_results(args: argparse.Namespace) -> int:
    from ..errors import invalid_choice
    from ..results import load_results, wide_view

    if args.format not in FORMATS:
        raise invalid_choice("--format", args.format, FORMATS)
    if args.wide and args.stat not in WIDE_STATS:
        raise invalid_choice("--stat", args.stat, WIDE_STATS)
    if args.format == "parquet":
        if args.output is None:
            raise HarnessError("--format parquet writes a binary file: add --output FILE.parquet")
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise HarnessError("--format parquet needs pyarrow: pip install 'sentence-harness[data]'") from None
    if args.output is not None:
        _check_output_file(Path(args.output), args.format)
    stores: list[Path] = list(args.results or [])
    if args.published:
        stores.append(Path(DEFAULT_PUBLISHED))
    if not stores and not args.exported:
        stores.append(results_dir(None))
    exported = {}
    for item in args.exported:
        name, separator, folder = item.partition("=")
        if not separator or not name or not folder:
            raise HarnessError(f"--exported {item!r}: expected FORMAT=DIR, e.g. --exported mteb=out")
        exported[name] = Path(folder)
    loaded = load_results(
        stores,
        exported=exported,
        models=args.models,
        tasks=args.tasks,
        profile=args.profile,
        families=args.families,
        strict=args.strict,
        intervals=args.intervals,
    )
    frame = loaded.frame
    if args.where:
        frame = frame[where_mask(frame, args.where)]
    if args.wide:
        frame = wide_view(frame, args.stat).reset_index()
    if args.sort:
        frame = sorted_frame(frame, args.sort)
    if args.columns:
        frame = frame[checked_columns(frame, _names(args.columns), "--columns")]
    elif args.format == "table" and not args.wide:
        frame = frame[list(TABLE_COLUMNS)]
    write(frame, args.format, args.output)
    for problem in loaded.errors:
        print(f"error: not loaded: {problem}", file=sys.stderr)
    return 1 if loaded.errors else 0


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def checked_columns(frame: pd.DataFrame, names: list[str], option: str) -> list[str]:
    """``names`` when every one is a column of ``frame``; else one error naming the closest columns."""
    known = [str(column) for column in frame.columns]
    for name in names:
        if name not in known:
            raise HarnessError(
                f"{option}: no column {name!r}.{close_matches_hint(name, known)} Columns: {', '.join(known)}"
            )
    return names


def sorted_frame(frame: pd.DataFrame, text: str) -> pd.DataFrame:
    keys = _names(text)  # "-score" or "score:desc": descending
    descending = [key.startswith("-") or key.endswith(":desc") for key in keys]
    names = [key.removeprefix("-").removesuffix(":desc").removesuffix(":asc") for key in keys]
    columns = checked_columns(frame, names, "--sort")
    ascending = [not flag for flag in descending]
    return frame.sort_values(columns, ascending=ascending, na_position="last", kind="stable")


_COMPARE = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
}


# The --where grammar is bounded: an expression longer or nested deeper than this is refused in one line (a
# recursive parser or evaluator would otherwise end in a RecursionError).
MAX_WHERE_LENGTH = 2000
MAX_WHERE_DEPTH = 40


def _where_depth(tree: ast.AST) -> int:
    """The nesting depth of a parsed expression, walked without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def where_mask(frame: pd.DataFrame, expression: str) -> pd.Series:
    """The rows of ``frame`` where ``expression`` holds. A small language, evaluated here (never ``eval``): column
    names, literals (numbers, strings, True/False/None, lists of them after ``in``), comparisons, ``in``/``not in`` a
    list, and ``and``/``or``/``not``; at most :data:`MAX_WHERE_LENGTH` characters nested :data:`MAX_WHERE_DEPTH`
    deep. ``column == None`` / ``!= None`` test for empty values; a number column compares with numbers, a text
    column with texts (docs/guide/results.md)."""
    import pandas as pd

    if len(expression) > MAX_WHERE_LENGTH:
        raise HarnessError(
            f"--where: {len(expression)} characters, more than the {MAX_WHERE_LENGTH} allowed; "
            "write a shorter condition, e.g. \"score > 80 and task in ['sts12', 'sts13']\""
        )
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise HarnessError(f'--where {expression!r}: not an expression ({exc.msg}); e.g. "score > 80"') from None
    except (RecursionError, MemoryError):
        tree = None
    if tree is None or _where_depth(tree) > MAX_WHERE_DEPTH:
        raise HarnessError(
            f"--where: nested more than {MAX_WHERE_DEPTH} levels deep; write a flatter condition "
            "(and/or of comparisons)"
        )
    known = [str(column) for column in frame.columns]

    def literal(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple)):
            return [literal(item) for item in node.elts]
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, ast.USub)
            and isinstance(node.operand, ast.Constant)
            and _is_number(node.operand.value)
        ):
            return -node.operand.value
        raise HarnessError(
            f"--where {expression!r}: {ast.unparse(node)!r} is not allowed (columns, literals, comparisons, "
            "in [..], and/or/not only)"
        )

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            if node.id not in known:
                raise HarnessError(
                    f"--where: no column {node.id!r}.{close_matches_hint(node.id, known)} Columns: {', '.join(known)}"
                )
            return frame[node.id]
        return literal(node)

    def kind(side: Any) -> str | None:
        """'number' or 'text' for a literal or a column whose values are all of one kind; None: anything goes."""
        if isinstance(side, pd.Series):
            values = side.dropna()
            if len(values) and pd.api.types.is_bool_dtype(values):
                return None
            if len(values) and pd.api.types.is_numeric_dtype(values):
                return "number"
            if len(values) and all(isinstance(item, str) for item in values):
                return "text"
            return None
        if _is_number(side):
            return "number"
        return "text" if isinstance(side, str) else None

    def check_types(left: Any, right: Any) -> None:
        kinds = {kind(left), kind(right)}
        if kinds == {"number", "text"}:
            raise HarnessError(
                f"--where {expression!r}: compares a number with a text; compare a number column with a number "
                "(score > 80) and a text column with a text (task == 'sts12')"
            )

    def compare(left: Any, op: ast.cmpop, right: Any) -> pd.Series:
        if isinstance(op, (ast.In, ast.NotIn)):
            if not isinstance(right, list):
                raise HarnessError(
                    f"--where {expression!r}: `in` needs a list on its right, e.g. task in ['sts12', 'sts13']"
                )
            inside = pd.Series(left, index=frame.index).isin(right)
            return inside if isinstance(op, ast.In) else ~inside
        if isinstance(left, list) or isinstance(right, list):
            raise HarnessError(
                f"--where {expression!r}: a list is compared only with `in` / `not in`, e.g. task in ['sts12']"
            )
        if isinstance(op, (ast.Eq, ast.NotEq)) and right is None:
            empty = pd.Series(left, index=frame.index).isna()
            return empty if isinstance(op, ast.Eq) else ~empty
        function = _COMPARE.get(type(op))
        if function is None:
            raise HarnessError(f"--where {expression!r}: operator {type(op).__name__} is not allowed")
        check_types(left, right)
        try:
            result = function(left, right)
        except TypeError as exc:  # e.g. a number compared with a text column
            raise HarnessError(f"--where {expression!r}: {exc}") from None
        return pd.Series(result, index=frame.index).fillna(False).astype(bool)

    def mask(node: ast.AST) -> pd.Series:
        if isinstance(node, ast.BoolOp):
            parts = [mask(item) for item in node.values]
            result = parts[0]
            for part in parts[1:]:
                result = (result & part) if isinstance(node.op, ast.And) else (result | part)
            return result
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ~mask(node.operand)
        if isinstance(node, ast.Compare):
            result = pd.Series(True, index=frame.index)
            left = value(node.left)
            for op, comparator in zip(node.ops, node.comparators):
                right = value(comparator)
                result &= compare(left, op, right)
                left = right
            return result
        if isinstance(node, ast.Name):  # a column of booleans
            return value(node).fillna(False).astype(bool)
        raise HarnessError(
            f"--where {expression!r}: {ast.unparse(node)!r} is not a condition (e.g. score > 80, train_on == 'stsb')"
        )

    return mask(tree.body)


def _check_output_file(output: Path, fmt: str) -> None:
    """--output names a file to write: a folder is one line naming the option, before any record is read (the
    atomic write would otherwise fail on its temporary file and name that)."""
    example = output / f"results.{'md' if fmt == 'table' else fmt}"
    if output.is_dir():
        raise HarnessError(f"--output {output} is a folder; name the file to write, e.g. --output {example}")


def write(frame: pd.DataFrame, fmt: str, output: Path | None) -> None:
    """``frame`` in ``fmt`` to ``output`` (written atomically) or standard output."""
    from ..files import atomic_write_bytes, atomic_write_text

    if fmt == "parquet":
        import io

        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        atomic_write_bytes(output, buffer.getvalue())  # type: ignore[arg-type]  # checked by cmd_results
        print(f"wrote {output} ({len(frame)} rows)")
        return
    if fmt == "csv":
        text = frame.to_csv(index=False)
    elif fmt == "json":
        text = frame.to_json(orient="records", indent=1) + "\n"
    else:
        from tabulate import tabulate

        shown = frame.copy()
        for column in shown.columns:  # whole numbers (seeds, counts) stay whole where empty cells made them floats
            values = shown[column].dropna()
            if (
                shown[column].dtype.kind == "f"
                and len(values)
                and (values == values.round()).all()
                and column != "score"
            ):
                shown[column] = shown[column].astype("Int64")
        shown = shown.astype(object).where(shown.notna(), "")
        text = tabulate(shown.values.tolist(), headers=list(frame.columns), tablefmt="github", floatfmt=".2f") + "\n"
        text += f"{len(frame)} row(s)\n"
    if output is not None:
        atomic_write_text(output, text)
        print(f"wrote {output} ({len(frame)} rows)")
    else:
        sys.stdout.write(text)
