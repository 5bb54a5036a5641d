"""Cost columns of the leaderboard tables (``harness leaderboard --cost``): what a row's cells cost, from the
``cost`` objects of its records (harness.run.cost). Opt-in: without ``--cost`` no table changes.

Per row: ``train s`` the training wall time of its checkpoint (mean over seeds; 0 untrained), ``eval s`` the
evaluation wall time of all its cells (per seed, mean over seeds), ``items/s`` the pairs or sentences scored per
second over all its cells, the peak resident and GPU memory (MiB, the largest of its records) and the parameter
count (millions). Times are measurements of one machine: ``measured on`` names it (the records' ``hardware``: CPU
model or GPU name and cores, never a host name). Rows whose records predate cost measurement show ``-``.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

COST_HEADER = ("train s", "eval s", "items/s", "peak RSS MiB", "peak GPU MiB", "params M", "measured on")
COST_CSV_HEADER = (
    "cost_training_seconds",
    "cost_evaluation_seconds",
    "cost_items_per_second",
    "cost_peak_rss_mib",
    "cost_peak_gpu_mib",
    "cost_parameters_millions",
    "cost_measured_on",
)
MIB = 1024 * 1024
COST_NOTE = (
    "Cost columns (--cost): `train s` training wall time of the row's checkpoint (mean over seeds, 0 untrained); "
    "`eval s` evaluation wall time of the row's cells (per seed, mean over seeds); `items/s` test pairs or sentences "
    "scored per second; peak resident and GPU memory in MiB; parameters in millions. Times are of the machine named "
    "in `measured on`; `-`: the records predate cost measurement."
)


@dataclass
class RowCost:
    training_seconds: float | None
    evaluation_seconds: float | None
    items_per_second: float | None
    peak_rss_mib: float | None
    peak_gpu_mib: float | None
    parameters_millions: float | None
    measured_on: str

    def fields(self) -> list[str]:
        """The csv's values (empty: unknown)."""
        return [
            _number(self.training_seconds, ".1f"),
            _number(self.evaluation_seconds, ".1f"),
            _number(self.items_per_second, ".1f"),
            _number(self.peak_rss_mib, ".0f"),
            _number(self.peak_gpu_mib, ".0f"),
            _number(self.parameters_millions, ".2f"),
            self.measured_on,
        ]

    def texts(self) -> list[str]:
        """The markdown/LaTeX cells (``-``: unknown)."""
        return [value or "-" for value in self.fields()]


def _number(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def row_cost(row: Any) -> RowCost:
    """The cost of a leaderboard row (:class:`harness.leaderboard.tables.Row`) from its records' ``cost`` objects."""
    costs: dict[tuple[str, int], dict] = getattr(row, "costs", {})
    by_seed: dict[int, list[dict]] = defaultdict(list)
    for (_, seed), cost in costs.items():
        by_seed[seed].append(cost)

    def known(values: list[Any]) -> list[float]:
        return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]

    training = known([max(known([c.get("training_seconds") for c in items]) or [None]) for items in by_seed.values()])
    evaluation = [sum(known([c.get("evaluation_seconds") for c in items])) for items in by_seed.values()]
    pooled = [
        c
        for items in by_seed.values()
        for c in items
        if known([c.get("items")]) and known([c.get("evaluation_seconds")])
    ]
    seconds = sum(float(c["evaluation_seconds"]) for c in pooled)
    rss = known([c.get("peak_rss_bytes") for items in by_seed.values() for c in items])
    gpu = known([c.get("peak_gpu_bytes") for items in by_seed.values() for c in items])
    parameters = known([c.get("parameters") for items in by_seed.values() for c in items])
    return RowCost(
        statistics.mean(training) if training else None,
        statistics.mean(evaluation) if by_seed else None,
        sum(float(c["items"]) for c in pooled) / seconds if pooled and seconds > 0 else None,
        max(rss) / MIB if rss else None,
        max(gpu) / MIB if gpu else None,
        max(parameters) / 1e6 if parameters else None,
        "; ".join(sorted(getattr(row, "hardware", set()))) if by_seed else "",
    )
