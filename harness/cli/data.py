"""`harness data list|download`: datasets are ``dataset`` components, objects with ``description`` and
``download(target_dir, progress)``."""

from __future__ import annotations

import sys
from pathlib import Path

from .common import load_registry


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
