"""`harness plot NAME`: plots are ``plot`` components, callables ``(results_dir, output_dir) -> written paths``."""
from __future__ import annotations

from .common import load_registry, read_store_and_output


def cmd_plot(args) -> int:
    draw = load_registry().component("plot", args.name)
    root, output = read_store_and_output(args.results, args.output)
    for path in draw(root, output):
        print(f"wrote {path}")
    return 0
