"""`harness plot NAME`: plots are ``plot`` components, callables ``(results_dir, output_dir) -> written paths``."""

from __future__ import annotations

from pathlib import Path

from . import plot_training
from .common import (
    DEFAULT_LEADERBOARDS,
    DEFAULT_PUBLISHED,
    DEFAULT_RESULTS,
    load_registry,
    read_store_and_output,
    results_dir,
)
from .parsing import add_command, add_results_option

# The plot of the committed tables reads the published records, as `harness leaderboard` does; every other plot draws
# what a run left (e.g. silver pairs), so it reads the working store and writes into its leaderboards/, never into
# the tracked leaderboards/.
PUBLISHED_PLOTS = ("leaderboard",)


def add_parser(commands) -> None:
    plot = add_command(
        commands,
        "plot",
        "draw a plot that a plugin offers, from stored results and artifacts",
        ("harness plot leaderboard", "harness plot training --models ce --train-on stsb", "harness plot cost"),
    )
    plot.add_argument(
        "name", help="plot name: training (the store's training curves) or one of `harness list`'s plot components"
    )
    add_results_option(
        plot,
        f"store to read (default: for `plot leaderboard` ./{DEFAULT_PUBLISHED}, the published "
        f"records, as `harness leaderboard`; for every other plot your working store, "
        f"./{DEFAULT_RESULTS} or HARNESS_RESULTS_DIR)",
    )
    plot.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"folder for the PNG files (default ./{DEFAULT_LEADERBOARDS} for the published records, "
        "else <results>/leaderboards)",
    )
    plot_training.add_arguments(plot.add_argument_group("plot training"))
    plot.set_defaults(handler=cmd_plot)


def cmd_plot(args) -> int:
    if args.name == "training":  # the store's training curves (harness.cli.plot_training), not a component
        from .plot_training import cmd_plot_training

        return cmd_plot_training(args)
    from .plot_training import refuse_training_options

    refuse_training_options(args)
    draw = load_registry().component("plot", args.name)
    results = args.results if args.results is not None or args.name in PUBLISHED_PLOTS else results_dir(None)
    root, output = read_store_and_output(results, args.output)
    for path in draw(root, output):
        print(f"wrote {path}")
    return 0
