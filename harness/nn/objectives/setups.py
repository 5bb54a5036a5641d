"""Training setups: the optimiser hyper-parameters that belong to a method, not to a profile (thesis 5.4.1, 5.4.2),
with their budgets per profile.

Thesis 5.4.2 is the contrastive setup (:data:`CONTRASTIVE_SETUP`: linear schedule, 10% warm-up, weight decay 0.01,
batch 64 and 12.5K steps under the paper profile); a method's own setup (tsdae's 5.4.1, paser's, nugget's) lives in
its plugin. The setup's budget sits between the profile and the user's keys (:func:`setup_budget`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TrainingSetup:
    """Optimiser hyper-parameters that belong to the method (the same under every profile)."""

    name: str
    schedule: str  # "constant" or "linear" (harness.training)
    warmup_ratio: float
    weight_decay: float
    # Budget per profile name (batch_size, max_steps, epochs); profiles change budgets, never the method.
    budgets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


# Quick: 40 steps of batch 16, so the quick matrix (14 specs x 2 seeds, each evaluated on ~37K sentences) fits in
# about an hour on 2 CPU cores; the evaluation, not the training, is most of that time.
_QUICK_BUDGET = {"max_steps": 40}
# Thesis 5.4.2 (batch 64, 12.5K steps). It stays in the core, unlike a method's own setup (tsdae's 5.4.1, paser's,
# nugget's live in their plugins): it is the default setup of an Objective (simcse, nm, mlm train in it) and the
# setup every combination of objectives trains in (training_setup).
CONTRASTIVE_SETUP = TrainingSetup(
    "thesis-5.4.2",
    schedule="linear",
    warmup_ratio=0.1,
    weight_decay=0.01,
    budgets={"quick": _QUICK_BUDGET, "paper": {"batch_size": 64, "max_steps": 12_500}},
)


def setup_budget(setup: TrainingSetup, profile_name: str) -> dict[str, Any]:
    """The setup's budget under a profile (``setup.budgets[profile_name]``); a step budget without an epoch count
    gets ``epochs: None`` (as many epochs as max_steps needs, as Hugging Face's ``max_steps`` does). It sits
    between the profile and the matrix entry / ``--set`` (harness.profiles.requested_budget), so a user's epochs or
    max_steps always win over it."""
    budget = dict(setup.budgets.get(profile_name, {}))
    if "max_steps" in budget and "epochs" not in budget:
        budget["epochs"] = None
    return budget


def budget_overrides(profile: Any, setup: TrainingSetup, examples: int) -> dict[str, Any]:
    """Deprecated in harness 0.3, removed in 0.4 (0.2.0 shipped it undeprecated): declare the setup's budget as
    ``ModelPlugin.budget_for`` (:func:`setup_budget`) and train with ``ctx.profile``, which then carries it below the
    user's keys. This returns the setup's budget as it always did (batch_size, max_steps, epochs raised so that
    max_steps is reached on ``examples``)."""
    import warnings

    warnings.warn(
        "harness.nn.objectives.budget_overrides is deprecated: declare ModelPlugin.budget_for "
        "(setup_budget) and read ctx.profile",
        DeprecationWarning,
        stacklevel=2,
    )
    budget = dict(setup.budgets.get(profile.name, {}))
    batch_size = int(budget.get("batch_size", profile.batch_size))
    max_steps = budget.get("max_steps", profile.max_steps)
    epochs = int(budget.get("epochs", profile.epochs or 1))
    if max_steps is not None and "max_steps" in budget:
        epochs = max(epochs, math.ceil(int(max_steps) * batch_size / max(1, examples)))
    return {"batch_size": batch_size, "max_steps": max_steps, "epochs": epochs}
