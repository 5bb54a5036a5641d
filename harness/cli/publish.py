"""`harness publish`: verify chosen records of a store and copy them into the published set (harness.publish)."""
from __future__ import annotations

import sys

from ..errors import HarnessError
from ..spec_grammar import split_spec_list
from . import values
from .common import existing_store, load_registry, results_dir


def cmd_publish(args) -> int:
    from ..publish import Selection, publish
    from ..store import Store

    registry = load_registry()
    if not (args.models or args.tasks or args.seeds or args.all):
        raise HarnessError("choose what to publish: --models, --tasks and/or --seeds, or --all for every record.")
    selection = Selection(split_spec_list(args.models), split_spec_list(args.tasks),
                          values.seeds(args.seeds, default=[]))
    source = existing_store(results_dir(args.results), "pass the store to publish from with --results")
    result = publish(source, Store(args.to), selection, registry=registry,
                     data_dir=values.checked_data_dir(args.data_dir), overwrite=args.overwrite,
                     trust_unsigned=args.trust_unsigned, log=print)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
