"""`harness publish`: verify chosen records of a store and copy them into the published set (harness.publish)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..errors import HarnessError
from ..profiles import PROFILES
from ..spec_grammar import split_spec_list
from . import values
from .common import DEFAULT_PUBLISHED, existing_store, load_registry, results_dir
from .parsing import WORKING_STORE, add_command, add_data_dir_option, add_results_option


def add_parser(commands) -> None:
    publish = add_command(
        commands,
        "publish",
        "verify chosen records of your store and copy them into the published set",
        (
            "harness publish --models be,ce --train-on stsb --tasks senteval --seeds 42,43,44",
            "harness publish --all --results results",
        ),
    )
    which = publish.add_argument_group("which records")
    which.add_argument(
        "--models",
        help="model specs as given to `harness run` (with --profile, --train-on, "
        "--backbone), or model keys, to publish (comma-separated)",
    )
    which.add_argument(
        "--profile",
        default=None,
        help=f"as given to `harness run`: {', '.join(PROFILES)} (default quick for --models; "
        "else: records of this profile)",
    )
    which.add_argument(
        "--train-on",
        default=None,
        help="as given to `harness run`, e.g. stsb (without --models: records trained on it; `none`: untrained ones)",
    )
    which.add_argument("--backbone", default=None, help="as given to `harness run` (default: the profile's)")
    which.add_argument("--tasks", help="task names or families to publish (comma-separated)")
    which.add_argument("--seeds", default=None, help="seeds to publish (comma-separated)")
    which.add_argument("--all", action="store_true", help="publish every valid record of the store")
    where = publish.add_argument_group("from where to where")
    add_results_option(where, f"store to publish from ({WORKING_STORE})")
    where.add_argument(
        "--to", type=Path, default=Path(DEFAULT_PUBLISHED), help=f"the published set (default ./{DEFAULT_PUBLISHED})"
    )
    checks = publish.add_argument_group("checks")
    checks.add_argument("--overwrite", action="store_true", help="replace published records of the same cells")
    checks.add_argument(
        "--trust-unsigned",
        action="store_true",
        help="accept records written by harness 0.1 (no content checksum) after the other checks, and sign them",
    )
    add_data_dir_option(checks, "datasets to verify the records' dataset checksums against (or HARNESS_DATA_DIR)")
    publish.set_defaults(handler=cmd_publish)


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
