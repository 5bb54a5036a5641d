"""What every command of the ``harness`` command line shares: the default folders, the logging the CLI installs,
the one-line text of an operating-system error, and the stores commands read."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from ..errors import HarnessError
from ..store_files import os_error_line  # noqa: F401  (the CLI's one line for an OSError)

DEFAULT_RESULTS = "results"  # the working store `harness run` writes to (git-ignored)
DEFAULT_PUBLISHED = "published"  # the published records `leaderboards/` is built from (committed)
DEFAULT_LEADERBOARDS = "leaderboards"


class _CliHandler(logging.StreamHandler):
    """The handler the CLI installs on the ``harness`` logger (replaced, not stacked, on every call of main)."""


def configure_logging(verbosity: int = 0) -> None:
    """Library modules log; the CLI decides what the user sees: INFO messages as plain lines on stdout (progress
    bars stay on stderr), warnings and errors on stderr; ``-v`` adds debug output, ``-q`` keeps warnings only."""
    package_logger = logging.getLogger("harness")
    for handler in [h for h in package_logger.handlers if isinstance(h, _CliHandler)]:
        package_logger.removeHandler(handler)
    level = logging.DEBUG if verbosity > 0 else logging.WARNING if verbosity < 0 else logging.INFO
    info = _CliHandler(sys.stdout)
    info.setFormatter(logging.Formatter("%(message)s"))
    info.addFilter(lambda record: record.levelno < logging.WARNING)
    problems = _CliHandler(sys.stderr)
    problems.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    problems.setLevel(logging.WARNING)
    package_logger.addHandler(info)
    package_logger.addHandler(problems)
    package_logger.setLevel(level)
    package_logger.propagate = False


def load_registry():
    """The installed plugins (built once per process) and the core's own components (the CLI registers those)."""
    from ..components import register_core_components
    from ..registry import default_registry

    return register_core_components(default_registry())


def results_dir(value: Path | None) -> Path:
    """--results, else HARNESS_RESULTS_DIR, else ./results: the working store."""
    return value or Path(os.environ.get("HARNESS_RESULTS_DIR", DEFAULT_RESULTS))


def read_store_and_output(results: Path | None, output: Path | None) -> tuple[Path, Path]:
    """What `leaderboard` and `plot` read and write: the published records into leaderboards/ by default; another
    store into its own leaderboards/ folder, so a user's tables never overwrite the committed ones by accident."""
    store = results or Path(DEFAULT_PUBLISHED)
    if output is not None:
        return store, output
    if results is None or results.resolve() == Path(DEFAULT_PUBLISHED).resolve():
        return store, Path(DEFAULT_LEADERBOARDS)
    return store, store / DEFAULT_LEADERBOARDS


def existing_store(root: Path, advice: str = "run `harness run` first or pass --results"):
    """The store at ``root`` to read from; one that does not exist is refused (with ``advice``)."""
    from ..store import Store

    store = Store(root)
    if not store.root.is_dir():
        raise HarnessError(f"no result store at {store.root}; {advice}.")
    return store
