"""How objectives compose: what an objective is (:class:`Objective`, built from an :class:`ObjectiveSetup`), the
token views a batch holds, one step as the objectives see it (:class:`TrainingStep`) and the weighted sum of their
losses (:class:`ObjectiveSum`: ``primary + aux_weight * sum(auxiliaries)``, thesis 5.4.2's auxiliary terms).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from harness import Option

from ..encoder import SentenceEncoder
from .setups import CONTRASTIVE_SETUP, TrainingSetup

OBJECTIVE_KIND = "objective"  # the component kind each method plugin registers its objective under
CLEAN, DELETED = "clean", "deleted"  # token views a batch can hold
VIEWS = (CLEAN, DELETED)


@dataclass(frozen=True)
class ObjectiveSetup:
    """What an objective's ``build`` gets: the shared encoder, where it was loaded from, the model's options."""

    encoder: SentenceEncoder
    backbone: str  # the folder/id the encoder was loaded from (e.g. for a pretrained LM head)
    options: Mapping[str, Any]
    seed: int


@dataclass(frozen=True)
class Objective:
    """A training objective over a :class:`SentenceEncoder` (the object of an ``objective`` component).

    ``build(setup)`` returns a module whose ``forward(step: TrainingStep)`` is the scalar loss; its parameters
    beyond the encoder's (a decoder's cross-attention, an MLM head) are trained with it and dropped afterwards.
    ``prepare(setup)`` (optional) returns a function ``sentences -> {name: tensors}`` whose entries the collator
    adds to each batch (e.g. PaSeR's masked copies), read back with ``step.features(name)``. ``options`` are the
    objective's own options, added to its model's; ``check(options, owner)`` validates them at plan time.
    """

    name: str
    description: str
    build: Callable[[ObjectiveSetup], nn.Module]
    views: tuple[str, ...] = (CLEAN,)  # token views the batch must hold
    reads: tuple[str, ...] = ()  # model options it reads (others, if changed, are refused at plan time)
    setup: TrainingSetup = CONTRASTIVE_SETUP  # its training setup when it is trained alone
    reference: str = ""
    prepare: Callable[[ObjectiveSetup], Callable[[list[str]], dict[str, Any]]] | None = None
    options: Mapping[str, Option] = field(default_factory=dict)
    check: Callable[[Mapping[str, Any], str], None] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.views) - set(VIEWS)
        if unknown:
            raise ValueError(f"objective {self.name!r}: unknown views {sorted(unknown)}; known: {VIEWS}")


class TrainingStep:
    """One batch as the objectives see it: the token views and memoised pooled sentence vectors."""

    def __init__(self, encoder: SentenceEncoder, views: Mapping[str, dict[str, torch.Tensor]]):
        self.encoder = encoder
        self.views = views
        self._vectors: dict[tuple[str, bool], torch.Tensor] = {}

    def features(self, view: str) -> dict[str, torch.Tensor]:
        if view not in self.views:
            raise KeyError(
                f"the batch has no {view!r} view (it holds {sorted(self.views)}); an objective must list "
                "the views it reads in Objective.views"
            )
        return self.views[view]

    def sentence_vectors(self, view: str, gradient: bool = True) -> torch.Tensor:
        """Pooled vectors ``[b, d]`` of a view, computed once per step; ``gradient=False`` runs the encoder under
        ``torch.no_grad`` (a stop-gradient that also saves the backward pass; dropout still applies in training)."""
        key = (view, gradient)
        if key not in self._vectors:
            if gradient:
                self._vectors[key] = self.encoder(self.features(view))
            else:
                with torch.no_grad():
                    self._vectors[key] = self.encoder(self.features(view)).detach()
        return self._vectors[key]


class ObjectiveSum(nn.Module):
    """``forward(**views)``: the weighted sum of the objectives' losses (what :func:`harness.training.fit` needs).
    Each step's term values are kept in ``history`` for the report, and the last step's in ``last_terms`` (with
    more than one term), which ``fit`` records in the training curves (harness.curves)."""

    def __init__(self, encoder: SentenceEncoder, terms: Sequence[tuple[str, nn.Module, float]]):
        super().__init__()
        self.encoder = encoder
        self.terms = nn.ModuleDict({name: module for name, module, _ in terms})
        self.weights = {name: float(weight) for name, _, weight in terms}
        self.history: list[dict[str, float]] = []
        # The last training step's term values (the total is the step's loss): harness.training.fit records them.
        self.last_terms: dict[str, float] = {}

    def forward(self, **views: dict[str, torch.Tensor]) -> torch.Tensor:
        step = TrainingStep(self.encoder, views)
        total: torch.Tensor | None = None
        values: dict[str, float] = {}
        for name, term in self.terms.items():
            loss = term(step)
            values[name] = float(loss.detach())
            weighted = loss * self.weights[name]
            total = weighted if total is None else total + weighted
        assert total is not None
        values["total"] = float(total.detach())
        if self.training:
            self.history.append(values)
            if len(self.terms) > 1:  # one term is the step's loss itself
                self.last_terms = {name: value for name, value in values.items() if name != "total"}
        return total

    def counts(self) -> dict[str, dict[str, int]]:
        """Each term's training counts (a term module's ``counts`` dict), by term name; terms without any left out."""
        return {name: dict(term.counts) for name, term in self.terms.items() if getattr(term, "counts", None)}
