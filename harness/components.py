"""The components the core itself offers (the ``leaderboard`` plot, the built-in leaderboard formats), registered by
the CLI.

The registry only collects what plugins register; whoever builds a registry for a user (the CLI's entry) adds the
core's own components with :func:`register_core_components`, handing them what they read from the registry (the
families' task order) so that no rendering module reaches back to the registry.
"""

from __future__ import annotations

from pathlib import Path

from .plugin_api import Component
from .registry import CORE_PACKAGE, Registry


def core_components(registry: Registry) -> list[Component]:
    """What the core offers as components (plugins cannot draw it: it reads the leaderboard tables)."""

    def plot_leaderboard(results_dir: Path, output_dir: Path) -> list[Path]:
        from .leaderboard import stale_models
        from .leaderboard.plots import plot_leaderboards  # matplotlib and the statistics only when drawn
        from .store import Store

        # The registry orders the columns as the families register their tasks, and names the superseded models
        # (left out, as in the tables).
        superseded = stale_models(Store(results_dir), registry)
        return plot_leaderboards(results_dir, output_dir, registry.families(), tuple(superseded))

    def plot_cost(results_dir: Path, output_dir: Path) -> list[Path]:
        from .leaderboard.cost_plot import plot_cost as draw  # matplotlib only when drawn

        return draw(results_dir, output_dir, registry.families())

    from .leaderboard.formats import BUILTIN_FORMATS, LEADERBOARD_FORMAT

    return [
        Component(
            "plot",
            "leaderboard",
            plot_leaderboard,
            "per family: bar chart of main scores with std over seeds as error bars (PNG)",
        ),
        Component(
            "plot",
            "cost",
            plot_cost,
            "per family: average score against evaluation time, training time and size, Pareto front marked (PNG; "
            "records that carry cost)",
        ),
        *(
            Component(LEADERBOARD_FORMAT, name, renderer, renderer.description)
            for name, renderer in BUILTIN_FORMATS.items()
        ),
    ]


def register_core_components(registry: Registry) -> Registry:
    """Add the core's components to ``registry`` (once: a registry that has them is returned as it is); a plugin
    that registered one of their names is refused by the registry's duplicate-name rule."""
    for item in core_components(registry):
        if registry.origin.get((item.kind, item.name)) != CORE_PACKAGE:
            registry.add(item, CORE_PACKAGE)
    return registry
