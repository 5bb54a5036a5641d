"""`harness export`: write one trained model as a sentence-transformers folder; harness/export.py does the work
(the model's own export method, the checkpoint from the store, a model card)."""

from __future__ import annotations

from pathlib import Path

from ..errors import HarnessError
from ..profiles import PROFILES
from ..spec_grammar import split_spec_list
from . import values
from .common import load_registry, results_dir
from .parsing import WORKING_STORE, add_command, add_results_option


def add_parser(commands) -> None:
    export = add_command(
        commands,
        "export",
        "write a trained model as a sentence-transformers folder (with a model card)",
        ("harness export --models ce --train-on stsb --to exported/ce-stsb",),
    )
    model = export.add_argument_group("the model (named as for `harness run`)")
    model.add_argument("--models", required=True, help="one model spec, named as for `harness run`, e.g. be")
    model.add_argument("--seeds", default=None, help="the one seed of the trained model (default 42)")
    model.add_argument("--backbone", default=None, help="as given to `harness run` (default: the profile's)")
    model.add_argument("--profile", default="quick", help=f"as given to `harness run`: {', '.join(PROFILES)}")
    model.add_argument("--train-on", default=None, help="as given to `harness run`, e.g. stsb")
    add_results_option(model, f"the store holding its checkpoint ({WORKING_STORE})")
    output = export.add_argument_group("output")
    output.add_argument("--to", type=Path, required=True, help="the folder to write (new or empty)")
    output.add_argument("--device", default="cpu", help="device to load the model on while exporting")
    export.set_defaults(handler=cmd_export)


def cmd_export(args) -> int:
    from ..export import ExportRequest, export_model

    registry = load_registry()
    seeds = values.seeds(args.seeds)
    if len(seeds) != 1:
        raise HarnessError(f"export writes one trained model: give one seed (--seeds {seeds[0]}), not {len(seeds)}.")
    specs = split_spec_list(args.models)
    if len(specs) != 1:
        raise HarnessError(f"export writes one model: give one spec to --models, not {len(specs)}.")
    report = export_model(
        registry,
        ExportRequest(
            spec=specs[0],
            to=args.to,
            seed=seeds[0],
            profile=values.profile_name(args.profile),
            backbone=args.backbone,
            train_on=args.train_on,
            results_dir=results_dir(args.results),
            device=args.device,
        ),
    )
    print(
        f"wrote {report.directory} ({report.format} folder of {report.label}, seed {seeds[0]}; model card "
        f"with {len(report.scores)} stored scores)"
    )
    return 0
