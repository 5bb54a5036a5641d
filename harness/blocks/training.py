"""The shared training loop: :func:`fit` (epochs or steps, AdamW with warm-up, autocast, DistributedDataParallel under
torchrun), :func:`fit_scored_pairs` and their settings.
"""

from __future__ import annotations

from harness.training import (
    SCORED_PAIR_BUDGET_KEYS,
    NonFiniteLossError,
    TrainConfig,
    TrainReport,
    config_from_profile,
    fit,
    fit_scored_pairs,
    make_adamw,
    with_both_orders,
)

__all__ = [
    "SCORED_PAIR_BUDGET_KEYS",
    "NonFiniteLossError",
    "TrainConfig",
    "TrainReport",
    "config_from_profile",
    "fit",
    "fit_scored_pairs",
    "make_adamw",
    "with_both_orders",
]
