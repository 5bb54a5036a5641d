"""`harness data list|download`: datasets are ``dataset`` components, objects with ``description`` and
``download(target_dir, progress)``."""

from __future__ import annotations

import sys
from pathlib import Path

from .common import load_registry
from .parsing import add_command, add_data_dir_option


def add_parser(commands) -> None:
    data = add_command(
        commands,
        "data",
        "list or download datasets that plugins offer",
        ("harness data list", "harness data download NAME --data-dir data"),
    )
    data_commands = data.add_subparsers(dest="data_command", metavar="ACTION")
    data_commands.add_parser("list", help="datasets that can be downloaded, and where they would go")
    download = data_commands.add_parser("download", help="download, verify and unpack a dataset")
    download.add_argument("name", help="a dataset of `harness data list`")
    add_data_dir_option(download, "target folder (default: HARNESS_DATA_DIR, else ~/.cache/harness/data)")
    data.set_defaults(handler=cmd_data)


def cmd_data(args) -> int:
    from ..data import default_download_dir

    registry = load_registry()
    if args.data_command in (None, "list"):
        names = registry.component_names("dataset")
        target = default_download_dir()
        print(f"data dir: {target}")
        for name in names:
            source = registry.component("dataset", name)
            print(f"  {name:<14} {getattr(source, 'description', '')}")
        if not names:
            print("  (no plugin offers downloadable datasets)")
        return 0
    source = registry.component("dataset", args.name)
    target = args.data_dir or default_download_dir()
    for path in source.download(Path(target), progress=sys.stderr.isatty()):
        print(f"ready: {path}")
    return 0
