"""`harness site`: one static results site from a store (harness.leaderboard.site), optionally served locally."""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import HarnessError
from .common import DEFAULT_PUBLISHED, existing_store, load_registry

logger = logging.getLogger(__name__)
DEFAULT_PORT = 8000


def cmd_site(args) -> int:
    from ..leaderboard.site import build_site, serve

    if args.port is not None and not args.serve:
        raise HarnessError("--port is the port of --serve; add --serve or leave --port out")
    if args.port is not None and not 0 < args.port < 65536:
        raise HarnessError(f"--port {args.port} is not a port; give one from 1 to 65535")
    store = existing_store(args.results or Path(DEFAULT_PUBLISHED))
    data_dir = getattr(args, "data_dir", None)
    if data_dir is not None and not Path(data_dir).is_dir():
        raise HarnessError(f"--data-dir {data_dir}: no such folder; give the folder with the datasets")
    try:
        registry = load_registry()
        family_members = registry.families()
    except HarnessError as exc:  # the tables need no plugins; the examples' texts do
        logger.warning("no plugins (%s): the examples view shows example positions, not texts", exc)
        registry, family_members = None, {}
    matrices = tuple(args.matrix or ())
    for path in matrices:
        if not Path(path).is_file():
            raise HarnessError(f"--matrix {path}: no such matrix file; name one under matrices/")
    report = build_site(
        store,
        args.to,
        registry,
        family_members,
        args.include_samples,
        progress=logger.info,
        matrices=matrices,
        data_dir=data_dir,
    )
    logger.info(
        "wrote %s: %d files, %.1f MB of data (open %s through a web server: `harness site --to %s --serve`)",
        report.folder,
        report.files,
        report.bytes / 1e6,
        report.folder / "index.html",
        report.folder,
    )
    left_out = getattr(store, "sample_records", [])
    if left_out:
        logger.warning(
            "note: %d record(s) computed on an evaluation sample (max_eval_examples) left out; --include-samples "
            "shows them in sections of their own.",
            len(left_out),
        )
    for path, reason in store.skipped:
        logger.error("invalid record %s: %s", path, reason)
    for problem in report.problems:
        logger.error("no interval: %s", problem)
    if args.serve:
        try:
            serve(Path(args.to), args.port or DEFAULT_PORT)
        except KeyboardInterrupt:
            logger.info("stopped serving %s", args.to)
        except OSError as exc:
            raise HarnessError(f"cannot serve on port {args.port or DEFAULT_PORT} ({exc}); pass --port N") from exc
    return 1 if store.skipped or report.problems else 0
