"""`harness plot NAME`: plots are ``plot`` components, callables ``(results_dir, output_dir) -> written paths``."""

from __future__ import annotations

from .common import load_registry, read_store_and_output, results_dir

# The plot of the committed tables reads the published records, as `harness leaderboard` does; every other plot draws
# what a run left (e.g. silver pairs), so it reads the working store and writes into its leaderboards/, never into
# the tracked leaderboards/.
PUBLISHED_PLOTS = ("leaderboard",)


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
