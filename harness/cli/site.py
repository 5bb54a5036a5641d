"""`harness site`: one static results site from a store (harness.leaderboard.site), optionally served locally."""

from __future__ import annotations

import logging
from pathlib import Path

from ..errors import HarnessError
from .common import DEFAULT_PUBLISHED, DEFAULT_RESULTS, existing_store, load_registry
from .parsing import add_command, add_data_dir_option, add_results_option

logger = logging.getLogger(__name__)
DEFAULT_PORT = 8000


def add_parser(commands) -> None:
    site = add_command(
        commands,
        "site",
        "build one static results site (every table, compare any two rows, the examples behind a difference)",
        (
            "harness site --to site --serve",
            f"harness site --to my-site --results {DEFAULT_RESULTS}",
            "harness site --serve my-site",
        ),
    )
    site.add_argument(
        "--to", type=Path, default=None, help="folder to write the site into (created); without it --serve DIR serves"
    )
    add_results_option(
        site,
        f"store to build from (default ./{DEFAULT_PUBLISHED}; e.g. --results {DEFAULT_RESULTS} for your own runs)",
    )
    add_data_dir_option(
        site,
        "folder with datasets the examples view reads texts from (default: the one each record names, else "
        "HARNESS_DATA_DIR / the bundled data); texts of other data than a record's are withheld",
    )
    site.add_argument(
        "--matrix",
        type=Path,
        action="append",
        default=None,
        help="a matrix file whose paper table joins the index (as `harness leaderboard --matrix FILE --formats html` "
        "renders it); repeat for several",
    )
    site.add_argument(
        "--include-samples",
        action="store_true",
        help="as for `harness leaderboard`: show records computed on an evaluation sample, in sections of their own",
    )
    serve = site.add_argument_group("serving")
    serve.add_argument(
        "--serve",
        nargs="?",
        const=True,
        default=None,
        type=Path,
        metavar="DIR",
        help="serve the site on http://127.0.0.1:PORT until Ctrl-C (Python's http.server): with --to, the site just "
        "built; --serve DIR alone serves a site built before, without building",
    )
    serve.add_argument("--port", type=int, default=None, help="port for --serve (default 8000)")
    site.set_defaults(handler=cmd_site)


def cmd_site(args) -> int:
    from ..leaderboard.site import build_site
    from ..run.overlap import OverlapDeriver

    if args.port is not None and not args.serve:
        raise HarnessError("--port is the port of --serve; add --serve or leave --port out")
    if args.port is not None and not 0 < args.port < 65536:
        raise HarnessError(f"--port {args.port} is not a port; give one from 1 to 65535")
    if isinstance(args.serve, Path):
        if args.to is not None:
            raise HarnessError(
                f"--serve {args.serve} serves a built site and --to builds one; give --to DIR --serve to build "
                "and serve, or --serve DIR alone"
            )
        return _serve(args.serve, args.port)
    if args.to is None:
        raise HarnessError("give --to DIR to build a site there, or --serve DIR to serve one built before")
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
    # which test pairs a trained row saw, found as `harness contamination` measures (the examples view marks them)
    seen_positions = OverlapDeriver(registry, store, data_dir).seen_positions if registry is not None else None
    report = build_site(
        store,
        args.to,
        registry,
        family_members,
        args.include_samples,
        progress=logger.info,
        matrices=matrices,
        data_dir=data_dir,
        seen_positions=seen_positions,
    )
    logger.info(
        "wrote %s: %d files, %.1f MB of data (its pages read their data through a web server: `harness site "
        "--serve %s`, or `python -m http.server -d %s`)",
        report.folder,
        report.files,
        report.bytes / 1e6,
        report.folder,
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
        _serve(args.to, args.port)
    return 1 if store.skipped or report.problems else 0


def _serve(folder: Path, port: int | None) -> int:
    """Serve a built site (refused, one line, for a folder that is not one) until Ctrl-C."""
    from ..leaderboard.site import SITE_MARKERS, serve

    if not all((Path(folder) / marker).is_file() for marker in SITE_MARKERS):
        raise HarnessError(f"--serve {folder} is not a harness site; build one with `harness site --to {folder}`")
    try:
        serve(Path(folder), port or DEFAULT_PORT)
    except KeyboardInterrupt:
        logger.info("stopped serving %s", folder)
    except OSError as exc:
        raise HarnessError(f"cannot serve on port {port or DEFAULT_PORT} ({exc}); pass --port N") from exc
    return 0
