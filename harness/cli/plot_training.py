"""`harness plot training --models ... --train-on ...`: the training curves of a store's trained models as one PNG
(harness.leaderboard.training_plot), read with :func:`harness.load_training_curves`."""

from __future__ import annotations

from pathlib import Path

from ..errors import HarnessError
from . import values
from .common import existing_store, read_store_and_output, results_dir
from .values import split_spec_list


def add_arguments(plot) -> None:
    """The options `plot training` takes beside --results and --output."""
    plot.add_argument("--models", default=None, help="model labels or names (comma-separated)")
    plot.add_argument("--train-on", default=None, help="training sources (comma-separated)")
    plot.add_argument("--seeds", default=None, help="seeds (comma-separated; default every seed)")


def refuse_training_options(args) -> None:
    """Another plot given --models, --train-on or --seeds: one line, rather than options silently ignored."""
    given = [
        flag
        for flag, value in (("--models", args.models), ("--train-on", args.train_on), ("--seeds", args.seeds))
        if value
    ]
    if given:
        raise HarnessError(
            f"{', '.join(given)}: only `harness plot training` takes them; drop them for plot {args.name}."
        )


def cmd_plot_training(args) -> int:
    from ..curves import load_training_curves
    from ..leaderboard.training_plot import FILE_NAME, plot_training_curves

    root, output = read_store_and_output(args.results if args.results is not None else results_dir(None), args.output)
    existing_store(root)
    seeds = values.seeds(args.seeds) if args.seeds else None
    frame = load_training_curves(
        root, models=split_spec_list(args.models) or None, train_on=split_spec_list(args.train_on) or None, seeds=seeds
    )
    for path, why in frame.attrs["skipped"]:
        print(f"skipped {path}: {why}")
    if frame.empty:
        chosen = ", ".join(
            f"{name} {value}" for name, value in (("--models", args.models), ("--train-on", args.train_on)) if value
        )
        raise HarnessError(
            f"no training curves in {root}{' for ' + chosen if chosen else ''}: train a model there with "
            "`harness run --train-on ...` (checkpoints trained before curves were kept have none)."
        )
    print(f"wrote {plot_training_curves(frame, Path(output) / FILE_NAME)}")
    return 0
