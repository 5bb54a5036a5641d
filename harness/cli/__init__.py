"""The ``harness`` command line: :func:`main` parses the arguments (parser.py) and calls the command's handler
through :data:`COMMANDS`, one module per command; values given on the command line are checked in values.py, once.

Handlers take the parsed arguments and return the exit code; a HarnessError (bad input) or an OSError (the
environment) becomes one ``error:`` line and exit code 2, an interrupt exit code 130.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from ..errors import HarnessError
from .catalog import cmd_describe, cmd_list
from .common import DEFAULT_LEADERBOARDS, DEFAULT_PUBLISHED, DEFAULT_RESULTS, configure_logging, os_error_line
from .compare import cmd_compare
from .contamination import cmd_contamination
from .data import cmd_data
from .export import cmd_export
from .export_results import cmd_export_results
from .leaderboard import cmd_leaderboard
from .parser import build_parser
from .plot import cmd_plot
from .publish import cmd_publish
from .results import cmd_results
from .run import cmd_rescore, cmd_run
from .site import cmd_site
from .slurm_task import cmd_slurm_task
from .validate import cmd_validate

# Command name -> handler. A new command: its parser in parser.py, a module with its handler, a line here.
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "list": cmd_list,
    "describe": cmd_describe,
    "run": cmd_run,
    "rescore": cmd_rescore,
    "compare": cmd_compare,
    "contamination": cmd_contamination,
    "validate": cmd_validate,
    "data": cmd_data,
    "plot": cmd_plot,
    "leaderboard": cmd_leaderboard,
    "publish": cmd_publish,
    "export": cmd_export,
    "export-results": cmd_export_results,
    "slurm-task": cmd_slurm_task,
    "results": cmd_results,
    "site": cmd_site,
}

__all__ = [
    "COMMANDS",
    "DEFAULT_LEADERBOARDS",
    "DEFAULT_PUBLISHED",
    "DEFAULT_RESULTS",
    "build_parser",
    "configure_logging",
    "main",
    "os_error_line",
]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(1 if args.verbose else -1 if args.quiet else 0)
    if args.version:
        from .. import PLUGIN_API_VERSION, __version__

        print(f"harness {__version__} (plugin API {PLUGIN_API_VERSION})")
        return 0
    if args.command is None:
        parser.print_help()
        return 0
    handler = COMMANDS.get(args.command)
    if handler is None:
        parser.error(f"unknown command {args.command!r}")
    try:
        code = handler(args)
        sys.stdout.flush()  # inside the try: a reader that stopped reading is met here, not at interpreter exit
        return code
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader stopped reading (`harness list | head`): its choice, not an error. Later writes go nowhere, so
        # the interpreter's final flush cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # the environment, not the input: a full disk, a folder that cannot be written
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: finished cells are stored; run the same command again to resume.", file=sys.stderr)
        return 130
