"""`harness leaderboard`: rebuild the leaderboard tables (or one matrix's paper table, or the reproduction page)
from a store."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import HarnessError
from ..leaderboard.formats import BUILTIN_FORMATS
from . import values
from .common import (
    DEFAULT_LEADERBOARDS,
    DEFAULT_PUBLISHED,
    DEFAULT_RESULTS,
    existing_store,
    load_registry,
    read_store_and_output,
)
from .parsing import add_command, add_results_option


def add_parser(commands) -> None:
    board = add_command(
        commands,
        "leaderboard",
        "rebuild leaderboards/ from the published records",
        (
            "harness leaderboard --formats md,csv,html",
            f"harness leaderboard --results {DEFAULT_RESULTS}",
            "harness leaderboard --matrix matrices/thesis-tables-6-7-6-8.yaml --formats md,html",
        ),
    )
    source = board.add_argument_group("which records, into which folder")
    add_results_option(
        source,
        f"store to build from (default ./{DEFAULT_PUBLISHED}; e.g. --results {DEFAULT_RESULTS} for your own runs)",
    )
    source.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"folder for the tables (default ./{DEFAULT_LEADERBOARDS} for the published records, "
        "else <results>/leaderboards)",
    )
    source.add_argument(
        "--include-samples",
        action="store_true",
        help="also show records computed on an evaluation sample (max_eval_examples, e.g. --profile "
        "smoke), in sections of their own; left out by default",
    )
    tables = board.add_argument_group("what to write")
    tables.add_argument(
        "--formats",
        default="md,csv",
        help=f"any of {', '.join(BUILTIN_FORMATS)}, or a format a plugin offers (`harness list`, components "
        "of kind 'leaderboard-format')",
    )
    tables.add_argument(
        "--matrix",
        type=Path,
        default=None,
        help="render one matrix file as its paper table (its entries as rows, its tasks as columns, "
        "the paper's numbers from its paper: block), into <output>/matrices/<file name>",
    )
    tables.add_argument(
        "--reproduction",
        type=Path,
        default=None,
        help="write the reproduction page (e.g. docs/reproduction.md): every matrix's claims: block "
        "judged on the records, verdicts computed by the page's rule",
    )
    tables.add_argument(
        "--matrix-dir",
        type=Path,
        default=Path("matrices"),
        help="the matrix files whose claims --reproduction reads (default ./matrices)",
    )
    tables.add_argument(
        "--show-superseded",
        action="store_true",
        help="also show the rows trained before a default of their spec changed (marked §, not ranked); "
        "left out by default, a note under the table counts them",
    )
    tables.add_argument(
        "--cost",
        action="store_true",
        help="add cost columns (training and evaluation wall time, items/s, peak memory, parameters) and the "
        "machine that measured them; records written before harness measured cost show -",
    )
    board.set_defaults(handler=cmd_leaderboard)


def cmd_leaderboard(args) -> int:
    """Needs no plugins: the tables come from the store; the registry only orders families and adds notes."""
    from ..leaderboard import write_leaderboards
    from ..leaderboard.formats import BUILTIN_FORMATS, LEADERBOARD_FORMAT, available_formats

    try:
        registry = load_registry()
        renderers = available_formats(
            registry.component_names(LEADERBOARD_FORMAT), lambda name: registry.component(LEADERBOARD_FORMAT, name)
        )
        family_members = registry.families()
        family_baselines = registry.family_baselines()
    except HarnessError:
        # ordering and notes only; the tables come from the store, in the built-in formats
        renderers, family_members, family_baselines = dict(BUILTIN_FORMATS), {}, {}
    formats = values.formats(args.formats, tuple(renderers))
    if args.cost and (args.reproduction is not None or args.matrix is not None):
        raise HarnessError("--cost adds columns to the family tables; it does not apply to --matrix or --reproduction")
    root, output = read_store_and_output(args.results, args.output)
    store = existing_store(root)
    if args.reproduction is not None:
        from ..leaderboard.claims import write_reproduction

        written = [write_reproduction(args.reproduction, args.matrix_dir, store, load_registry())]
    elif args.matrix is not None:
        from ..leaderboard.claims import write_matrix_board

        written = write_matrix_board(args.matrix, store, output / "matrices", formats, load_registry(), renderers)
    else:
        from ..leaderboard import stale_models

        try:
            stale = stale_models(store, load_registry())
        except HarnessError:
            stale = {}  # without plugins no spec can be re-resolved: nothing is marked
        written = write_leaderboards(
            store,
            output,
            formats,
            family_members,
            args.include_samples,
            family_baselines,
            stale,
            renderers,
            args.cost,
            show_superseded=args.show_superseded,
        )
    for path in written:
        print(f"wrote {path}")
    left_out = getattr(store, "sample_records", [])
    if not written:
        print(
            f"no records in {store.root}" + (" other than those computed on an evaluation sample" if left_out else "")
        )
    if left_out:
        print(
            f"note: {len(left_out)} record(s) computed on an evaluation sample (max_eval_examples) left out; "
            "--include-samples shows them in sections of their own.",
            file=sys.stderr,
        )
    for path, reason in store.skipped:
        print(f"error: invalid record {path}: {reason}", file=sys.stderr)
    if store.skipped:
        print(
            f"error: {len(store.skipped)} invalid record(s), shown as `invalid` and never ranked; recompute them "
            "(harness run --overwrite) or restore them from git.",
            file=sys.stderr,
        )
    side_file_problems = getattr(store, "side_file_problems", [])
    if side_file_problems:
        print(
            f"error: {len(side_file_problems)} per-example file(s) missing or damaged, so those cells show no "
            "interval; `harness run` with the arguments that computed them recomputes those cells.",
            file=sys.stderr,
        )
    return 1 if store.skipped or side_file_problems else 0
