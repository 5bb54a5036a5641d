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
    if not (args.models or args.tasks or args.seeds or args.all or args.profile or args.train_on):
        raise HarnessError("choose what to publish: --models, --tasks and/or --seeds, or --all for every record.")
    source = existing_store(results_dir(args.results), "pass the store to publish from with --results")
    models = split_spec_list(args.models)
    if models:  # specs as `harness run` resolves them: the records that command wrote, not every variant of a name
        selection = Selection(
            tasks=split_spec_list(args.tasks),
            seeds=values.seeds(args.seeds, default=[]),
            model_keys=[_model_key(registry, source, text, args) for text in models],
        )
    else:
        selection = Selection(
            tasks=split_spec_list(args.tasks),
            seeds=values.seeds(args.seeds, default=[]),
            profile=args.profile,
            train_on=args.train_on,
        )
    result = publish(
        source,
        Store(args.to),
        selection,
        registry=registry,
        data_dir=values.checked_data_dir(args.data_dir),
        overwrite=args.overwrite,
        trust_unsigned=args.trust_unsigned,
        log=print,
    )
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _model_key(registry, source, text: str, args) -> str:
    """The store key of a model spec as `harness run --models TEXT` (same --profile, --train-on, --backbone) names
    it; a model key of the store (``be-3f2a9c1b7d4e``) as it is."""
    from ..profiles import get_profile
    from ..spec import resolve_model_spec

    if (source.root / text).is_dir() and text.rsplit("-", 1)[-1].isalnum() and "-" in text:
        return text
    return resolve_model_spec(registry, text, get_profile(args.profile or "quick"), args.backbone, args.train_on).key
