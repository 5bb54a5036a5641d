"""The argument parser of the ``harness`` command line: the global flags, then each command's own parser, built by
its module's ``add_parser(commands)`` (with its option groups, examples and handler)."""

from __future__ import annotations

from . import (
    catalog,
    compare,
    contamination,
    data,
    export,
    export_results,
    leaderboard,
    plot,
    publish,
    results,
    run,
    site,
    slurm_task,
    validate,
)
from .parsing import HarnessParser

# The command modules in the order `harness --help` lists their commands (catalog: list and describe; run: run and
# rescore). A new command: a module with add_parser(commands) and its handler, and a line here.
COMMAND_MODULES = (
    catalog,
    run,
    compare,
    validate,
    slurm_task,
    data,
    plot,
    site,
    leaderboard,
    contamination,
    publish,
    export,
    export_results,
    results,
)


def build_parser() -> HarnessParser:
    parser = HarnessParser(
        prog="harness",
        description="Benchmark harness for sentence-embedding methods.",
        epilog="examples:\n  harness run --models be,ce --tasks useb\n  harness list\n  harness run --help",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug output")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    parser.add_argument("--version", action="store_true", help="print the harness version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=HarnessParser, prog="harness")
    for module in COMMAND_MODULES:
        module.add_parser(commands)
    return parser


def commands() -> dict:
    """Command name -> handler, as the parser dispatches them (hidden commands included)."""
    import argparse

    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {name: subparser.get_default("handler") for name, subparser in action.choices.items()}
