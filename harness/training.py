"""Training on scored pairs (:func:`fit_scored_pairs`: regression with dev selection and seed trials), and the
shared loop's names at the path plugins have imported them from since harness 0.1 (:mod:`harness.training_loop`
holds the loop: the networks and the evaluation blocks build on it, and scored-pair training, which selects an epoch
by its dev score, builds on the evaluation blocks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from torch import nn

from .evaluation.pairs import scored_pairs_dev_score
from .training_loop import (
    GROUP_CHUNK_BATCHES,
    NonFiniteLossError,
    TrainConfig,
    TrainReport,
    clip_gradients,
    config_from_profile,
    epoch_batches,
    fit,
    fit_with_seed_trials,
    linear_schedule,
    make_adamw,
    parameter_groups,
    to_device,
    trial_seed,
)

__all__ = [
    "GROUP_CHUNK_BATCHES",
    "SCORED_PAIR_BUDGET_KEYS",
    "NonFiniteLossError",
    "TrainConfig",
    "TrainReport",
    "clip_gradients",
    "config_from_profile",
    "epoch_batches",
    "fit",
    "fit_scored_pairs",
    "fit_with_seed_trials",
    "linear_schedule",
    "make_adamw",
    "parameter_groups",
    "to_device",
    "trial_seed",
    "with_both_orders",
]


# The budget keys scored-pair training honours (ModelPlugin.budget_keys of its users): every key, seed trials included.
SCORED_PAIR_BUDGET_KEYS = (
    "epochs",
    "max_steps",
    "batch_size",
    "learning_rate",
    "max_train_examples",
    "seed_trials",
    "precision",
    "group_by_length",
)


def fit_scored_pairs(
    model: Any,
    loss_module: nn.Module,
    collate: Callable[[list[tuple[str, str, float]]], dict],
    train: Any,
    dev: Any,
    ctx: Any,
    learning_rate: float,
    description: str,
) -> TrainReport:
    """Regression on ScoredPairs ``train`` (rows are (first, second, score) tuples for ``collate``) with the
    profile's budgets; after each epoch the Spearman of ``model``'s pair scores on ``dev`` (if any) picks the best."""
    examples = list(zip(train.first, train.second, train.scores.tolist()))
    config = config_from_profile(
        ctx.profile, ctx.seed, ctx.device, ctx.progress, learning_rate=learning_rate, description=description
    )
    dev_score = (lambda: scored_pairs_dev_score(model, dev)) if dev is not None else None
    # Characters of the pair stand in for its token count when grouping batches by length (no tokenisation here).
    lengths = [len(first) + len(second) for first, second in zip(train.first, train.second)]
    trials = int(getattr(ctx.profile, "seed_trials", 1) or 1)
    if trials <= 1 or dev_score is None:  # seed trials select on dev: without dev pairs one training runs
        report = fit(loss_module, examples, collate, config, dev_score, lengths=lengths)
        report.applied_budget["seed_trials"] = 1
        return report
    return fit_with_seed_trials(loss_module, examples, collate, config, dev_score, lengths, trials)


def with_both_orders(pairs: Any) -> Any:
    """ScoredPairs with every pair also in the other order, (a, b) then (b, a), each with its score: how the thesis
    code and UKPLab's cross-encoder / AugSBERT examples train pair scorers that see the order of their input."""
    return type(pairs)(
        list(pairs.first) + list(pairs.second),
        list(pairs.second) + list(pairs.first),
        np.concatenate([pairs.scores, pairs.scores]),
    )
