"""The ``leaderboard`` plot (``harness plot leaderboard``): per task family a bar chart of every model's main score
per task, with the standard deviation over seeds as error bars (PNG), next to the tables ``harness leaderboard``
writes. Drawn by :func:`harness.leaderboard_views.plot_leaderboards` from the same tables as the markdown, so the
numbers agree; this module only registers it, as every plot is a ``plot`` component."""
from __future__ import annotations

from pathlib import Path

from harness import Component, hookimpl


def draw_leaderboards(results_dir: Path, output_dir: Path) -> list[Path]:
    from harness.leaderboard_views import plot_leaderboards

    return plot_leaderboards(Path(results_dir), Path(output_dir))


@hookimpl
def register_components(register):
    register(Component("plot", "leaderboard", draw_leaderboards,
                       "per family: bar chart of main scores with std over seeds as error bars (PNG)"))
