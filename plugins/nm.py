"""Noise Matching (NM), the thesis' own objective (thesis 4.2.3, figure 4.1, 5.4.2, table 6.10).

Like SimCSE, but the positive of a sentence x is its noised copy T(x), x with 60% of its words deleted (option
``ratio``; :mod:`harness.nn.noise`, the deletion of TSDAE), and a stop-gradient is applied to the representation of
the original: h_i = sg(f(x_i)). Only the noised view is pulled towards its original (a subsequence of x should be
close to x, not x close to its subsequence); the other sentences of the batch are the negatives. Cosine over a
temperature (``temperature``, 0.05), pooling CLS (default) or MEAN.

The original view is encoded under ``torch.no_grad`` in training mode, as the thesis code (``NmModel``) does: dropout
still applies to it, and no gradient can reach the encoder through it (tests/test_unsupervised.py checks both).
As an auxiliary (``mlm:aux=nm``, ``tsdae:aux=nm``) the same term is added with weight ``aux_weight``; with ``tsdae``
the deleted view is encoded once and serves both terms, as in the thesis code (``NmTsdaeModel``).

Deviations:
- ``directions=both`` (default) sums the term and its transpose, as the thesis code does; the thesis text (eq. 2.7
  with x+ = T(x)) states one direction (``directions=one``).
- Deletion keeps at least one word but, unlike the thesis code (``delete_at_least_one``), does not force at least one
  deletion in a sentence where the draw deleted none (sentence-transformers' rule, shared with ``tsdae``); with
  ratio 0.6 this changes only sentences of one to three words, rarely.
"""

from __future__ import annotations

import torch
from torch import nn

from harness.blocks import (
    CLEAN,
    DELETED,
    Objective,
    ObjectiveSetup,
    TrainingStep,
    in_batch_contrastive,
    objective_hooks,
)

NAME = "nm"


class NoiseMatching(nn.Module):
    """InfoNCE between sg(f(x)) and f(T(x)) over the batch."""

    def __init__(self, setup: ObjectiveSetup):
        super().__init__()
        self.temperature = float(setup.options["temperature"])
        self.directions = str(setup.options["directions"])

    def views(self, step: TrainingStep) -> tuple[torch.Tensor, torch.Tensor]:
        """(original vectors without gradient, noised vectors with gradient)."""
        return step.sentence_vectors(CLEAN, gradient=False), step.sentence_vectors(DELETED)

    def forward(self, step: TrainingStep) -> torch.Tensor:
        original, noised = self.views(step)
        return in_batch_contrastive(original, noised, self.temperature, self.directions)


OBJECTIVE = Objective(
    name=NAME,
    description="Noise Matching: the deleted copy T(x) is pulled to sg(f(x)), in-batch negatives",
    build=NoiseMatching,
    views=(CLEAN, DELETED),
    reads=("temperature", "directions", "ratio"),
    reference="thesis 4.2.3, figure 4.1",
)

register_components, register_models = objective_hooks(
    OBJECTIVE,
    description="Noise Matching (thesis 4.2.3): deletion-noised view matched to the stop-gradient original",
    reference="thesis 4.2.3, figure 4.1, 5.4.2, table 6.10",
)
