"""Composable unsupervised objectives over one sentence encoder, and the embedder they train.

Thesis 2.4.5 (SimCSE), 2.4.6 (TSDAE), 4.2 (Noise Matching, MLM combinations), 5.4.1/5.4.2 (training setups) and
table 6.10. Each method plugin registers its objective as a component of kind ``objective`` (an :class:`Objective`)
and a model built by :func:`objective_model`; the option ``aux`` adds weighted auxiliary objectives, so a new
combination is a spec (``mlm:aux=simcse``), not a module. The loss is ``primary + aux_weight * sum(auxiliaries)``.

How a step runs, the training setups and budgets, training data, ``init``, the report and the deviations:
docs/methods/unsupervised.md, section "Unsupervised objectives".

One job per module (every name is importable from this package as well):

- :mod:`~harness.nn.objectives.setups`: training setups (thesis 5.4.1, 5.4.2) and their budgets per profile.
- :mod:`~harness.nn.objectives.composition`: the ``Objective`` contract, the token views, ``TrainingStep`` and
  ``ObjectiveSum``.
- :mod:`~harness.nn.objectives.batches`: the collator of unlabeled sentences and the sentences kept.
- :mod:`~harness.nn.objectives.contrastive`: the in-batch contrastive criterion (SimCSE, Noise Matching).
- :mod:`~harness.nn.objectives.token_prediction`: token prediction through a language-model head (TSDAE, MLM).
- :mod:`~harness.nn.objectives.options`: the objective models' options, their plan-time check, what a spec trains.
- :mod:`~harness.nn.objectives.embedder`: ``ObjectiveEmbedder`` and the registration (``objective_model``).
"""

from __future__ import annotations

from typing import Any

from .batches import UnlabeledCollator, usable_sentences
from .composition import CLEAN, DELETED, OBJECTIVE_KIND, VIEWS, Objective, ObjectiveSetup, ObjectiveSum, TrainingStep
from .contrastive import DIRECTIONS, in_batch_contrastive
from .embedder import (
    POOLING_FILE,
    EmbedderSettings,
    ObjectiveEmbedder,
    curve_summary,
    dev_pair_score,
    objective_hooks,
    objective_model,
)
from .options import (
    ALWAYS_READ,
    AUX_SEPARATOR,
    aux_names,
    check_selection,
    objective_budget,
    objective_options,
    require_unlabeled_source,
    resolve_objectives,
    training_setup,
    validate_objective_spec,
)
from .setups import CONTRASTIVE_SETUP, TrainingSetup, budget_overrides, setup_budget
from .token_prediction import (
    IGNORED_LABEL,
    language_model_head,
    scored_token_loss,
    share_parameters,
    transformer_inputs,
)

__all__ = [
    "ALWAYS_READ",
    "AUX_SEPARATOR",
    "CLEAN",
    "CONTRASTIVE_SETUP",
    "DELETED",
    "DIRECTIONS",
    "IGNORED_LABEL",
    "OBJECTIVE_KIND",
    "POOLING_FILE",
    "VIEWS",
    "EmbedderSettings",
    "Objective",
    "ObjectiveEmbedder",
    "ObjectiveSetup",
    "ObjectiveSum",
    "TrainingSetup",
    "TrainingStep",
    "UnlabeledCollator",
    "aux_names",
    "budget_overrides",
    "check_selection",
    "curve_summary",
    "dev_pair_score",
    "in_batch_contrastive",
    "language_model_head",
    "objective_budget",
    "objective_hooks",
    "objective_model",
    "objective_options",
    "resolve_objectives",
    "scored_token_loss",
    "setup_budget",
    "share_parameters",
    "training_setup",
    "transformer_inputs",
    "usable_sentences",
    "require_unlabeled_source",
    "validate_objective_spec",
]


def __getattr__(name: str) -> Any:
    """The thesis 5.4.1 setup moved into the tsdae plugin (harness 0.3); its old names resolve for one version."""
    if name not in ("REPLICATION_SETUP", "SETUPS"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    import warnings

    warnings.warn(
        f"harness.nn.objectives.{name} is deprecated and goes in the next version: the thesis 5.4.1 setup "
        "is the tsdae plugin's SETUP now (define a method's own TrainingSetup in its plugin)",
        DeprecationWarning,
        stacklevel=2,
    )
    replication = importlib.import_module("harness.plugins.tsdae").SETUP  # the one object, not a copy
    if name == "REPLICATION_SETUP":
        return replication
    return {setup.name: setup for setup in (replication, CONTRASTIVE_SETUP)}
