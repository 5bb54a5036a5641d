"""`harness export`: write one trained model as a sentence-transformers folder; harness/export.py does the work
(the model's own export method, the checkpoint from the store, a model card)."""

from __future__ import annotations

from ..errors import HarnessError
from ..spec_grammar import split_spec_list
from . import values
from .common import load_registry, results_dir


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
