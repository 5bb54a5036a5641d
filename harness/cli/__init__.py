"""The ``harness`` command line: :func:`main` parses the arguments (parser.py) and calls the command's handler, one
module per command, each building its own parser and naming its handler; values given on the command line are
checked in values.py, once.

Handlers take the parsed arguments and return the exit code; a HarnessError (bad input) or an OSError (the
environment) becomes one ``error:`` line and exit code 2, an interrupt exit code 130.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ..errors import HarnessError
from .common import DEFAULT_LEADERBOARDS, DEFAULT_PUBLISHED, DEFAULT_RESULTS, configure_logging, os_error_line
from .parser import build_parser, commands

__all__ = [
    "DEFAULT_LEADERBOARDS",
    "DEFAULT_PUBLISHED",
    "DEFAULT_RESULTS",
    "build_parser",
    "commands",
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
    handler = args.handler  # set by the command's own parser (its module's add_parser)
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
