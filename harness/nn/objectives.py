"""Composable unsupervised objectives over one sentence encoder, and the embedder they train.

Thesis 2.4.5 (SimCSE), 2.4.6 (TSDAE), 4.2 (Noise Matching, MLM combinations), 5.4.1/5.4.2 (training setups) and
table 6.10. Each method plugin registers its objective as a component of kind ``objective`` (an :class:`Objective`)
and a model built by :func:`objective_model`; the option ``aux`` adds weighted auxiliary objectives, so a new
combination is a spec (``mlm:aux=simcse``), not a module. The loss is ``primary + aux_weight * sum(auxiliaries)``.

How a step runs, the training setups and budgets, training data, ``init``, the report and the deviations:
docs/fidelity.md, section "Unsupervised objectives".
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model
from torch import nn

from harness import (  # the contract's front door: a building block depends on no private core module
    SCORED_PAIRS,
    UNLABELED_SENTENCES,
    Component,
    HarnessError,
    IncompatibleError,
    InvalidOptionError,
    ModelPlugin,
    Option,
    hookimpl,
)
from harness.training import config_from_profile, fit

from ..distributed import gather_with_grad
from .backbone import quiet_transformers
from .encoder import SentenceEncoder
from .noise import DELETION_RATIO, WordDeletion, check_deletion_ratio
from .pooling import POOLING_CHOICES

logger = logging.getLogger(__name__)

OBJECTIVE_KIND = "objective"  # the component kind each method plugin registers its objective under
CLEAN, DELETED = "clean", "deleted"  # token views a batch can hold
VIEWS = (CLEAN, DELETED)
IGNORED_LABEL = -100  # a token label that no loss counts (PyTorch's cross-entropy ignore_index)
POOLING_FILE = "pooling.json"  # written next to the Hugging Face files of a checkpoint


# -- training setups -----------------------------------------------------------------------------------------------
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


# -- objectives ----------------------------------------------------------------------------------------------------
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


# -- batches -------------------------------------------------------------------------------------------------------
class UnlabeledCollator:
    """Sentences -> the token views the objectives need. ``noise`` makes the deleted copy of a sentence."""

    def __init__(
        self,
        tokenizer,
        max_length: int,
        views: Sequence[str],
        noise: Callable[[str], str] | None = None,
        extras: Sequence[Callable[[list[str]], dict[str, Any]]] = (),
    ):
        if DELETED in views and noise is None:
            raise ValueError("a deleted view needs a noise function")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.views = tuple(dict.fromkeys(views))
        self.noise = noise
        self.extras = tuple(extras)  # objectives' own batch entries (Objective.prepare)

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        return dict(
            self.tokenizer(list(texts), truncation=True, max_length=self.max_length, padding=True, return_tensors="pt")
        )

    def __call__(self, sentences: list[str]) -> dict[str, dict[str, torch.Tensor]]:
        batch = {CLEAN: self.tokenize(sentences)}
        if DELETED in self.views:
            batch[DELETED] = self.tokenize([self.noise(sentence) for sentence in sentences])  # type: ignore[misc]
        for extra in self.extras:
            batch.update(extra(sentences))
        return batch


def usable_sentences(sentences: Sequence[str]) -> tuple[list[str], int]:
    """Stripped sentences without the empty ones, and how many were dropped."""
    kept = [text.strip() for text in sentences if isinstance(text, str) and text.strip()]
    return kept, len(sentences) - len(kept)


# -- parameter sharing and language-model heads --------------------------------------------------------------------
def share_parameters(owner: nn.Module, source: nn.Module) -> int:
    """Make every parameter of ``owner`` that ``source`` has under the same name the very same Parameter object
    (weight tying by name, e.g. an MLM model's base onto the sentence encoder's transformer); returns how many."""
    source_parameters = dict(source.named_parameters())
    shared = 0
    for name, _ in list(owner.named_parameters()):
        if name in source_parameters:
            module_name, _, leaf = name.rpartition(".")
            module = owner.get_submodule(module_name) if module_name else owner
            setattr(module, leaf, source_parameters[name])
            shared += 1
    return shared


def language_model_head(language_model: nn.Module) -> nn.Module:
    """The prediction head of a Hugging Face LM (BERT's ``cls``, RoBERTa's ``lm_head``): the child module, other
    than the base model, that holds the output embeddings. ``head(hidden [n, d]) -> logits [n, vocabulary]``."""
    output = language_model.get_output_embeddings()
    base = language_model.base_model
    for _, child in language_model.named_children():
        if child is not base and any(module is output for module in child.modules()):
            return child
    raise HarnessError(
        f"{type(language_model).__name__} has no separate prediction head; pick a BERT- or RoBERTa-style --backbone."
    )


def scored_token_loss(head: nn.Module, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the positions whose label is not ignored; logits are computed only there."""
    scored = labels != IGNORED_LABEL
    logits = head(hidden[scored])
    return nn.functional.cross_entropy(logits.float(), labels[scored])


def transformer_inputs(features: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The entries of a batch a Hugging Face transformer takes (ids, attention mask, token types)."""
    return {key: value for key, value in features.items() if key in ("input_ids", "attention_mask", "token_type_ids")}


# -- the contrastive criterion the contrastive objectives share ----------------------------------------------------
DIRECTIONS = ("one", "both")


def in_batch_contrastive(
    anchors: torch.Tensor, positives: torch.Tensor, temperature: float, directions: str
) -> torch.Tensor:
    """InfoNCE over in-batch negatives on cosine / temperature (SimCSE eq. 1, thesis eq. 2.7): anchor i must pick
    positive i among all positives. ``directions="both"`` adds the transposed term (positive i picks anchor i), as
    the thesis code sums both; ``"one"`` is sentence-transformers' MultipleNegativesRankingLoss with
    ``scale = 1 / temperature``.

    In a distributed training step (harness.distributed) the candidates are those of the whole global batch, as on one
    device (SimCSE's and the thesis' in-batch negatives are the batch's): this rank's anchors pick among every rank's
    positives (and, with "both", this rank's positives among every rank's anchors), gathered with their gradients;
    the mean over this rank's rows is weighted into the global mean by the training loop."""
    all_positives, offset = gather_with_grad(positives)
    logits = nn.functional.normalize(anchors, dim=-1) @ nn.functional.normalize(all_positives, dim=-1).T
    logits = logits.float() / temperature
    targets = torch.arange(offset, offset + len(anchors), device=anchors.device)
    loss = nn.functional.cross_entropy(logits, targets)
    if directions == "both":
        all_anchors, _ = gather_with_grad(anchors)
        reverse = nn.functional.normalize(positives, dim=-1) @ nn.functional.normalize(all_anchors, dim=-1).T
        loss = loss + nn.functional.cross_entropy(reverse.float() / temperature, targets)
    return loss


# -- options, validation and budgets -------------------------------------------------------------------------------
AUX_SEPARATOR = "+"


def objective_options(lr: float = 3e-5) -> dict[str, Option]:
    """The options every objective model has (one set, so any objective can be an auxiliary of any model)."""
    return {
        "pooling": Option(
            "cls", "how token states become the sentence vector (the thesis reports both)", choices=POOLING_CHOICES
        ),
        "lr": Option(lr, "AdamW learning rate (thesis 5.4: 3e-5)", type=float, bounds="(0, inf)"),
        "aux": Option("", "auxiliary objectives added to this one, joined by '+', e.g. simcse or nm", type=str),
        "aux_weight": Option(
            1.0,
            "weight of each auxiliary loss (thesis code: 1, the contrastive term summed over both directions)",
            type=float,
            bounds="[0, inf)",
        ),
        "temperature": Option(0.05, "contrastive temperature tau (scale 1/tau = 20)", type=float, bounds="(0, inf)"),
        "directions": Option(
            "both",
            "contrastive term: one (anchor -> positive, SimCSE eq. 1) or both (plus the "
            "transposed term, the thesis code)",
            choices=DIRECTIONS,
        ),
        "ratio": Option(
            DELETION_RATIO, "word-deletion ratio of the noised view, in (0, 1)", type=float, bounds="(0, 1)"
        ),
        "mlm_probability": Option(
            0.2,
            "share of tokens masked for MLM (thesis code: 0.2, all replaced by [MASK])",
            type=float,
            bounds="(0, 1)",
        ),
        "init": Option("", "start from this unsupervised model spec trained on the same source (e.g. mlm)", type=str),
        # Added in harness 0.3: at their defaults they stay out of the spec hash.
        "select_every": Option(
            0,
            "checkpoint selection: score the dev pairs of select_on every this many steps and "
            "keep the best step (SimCSE: 250 on STS-B dev); 0: keep the last step",
            type=int,
            hash_default=False,
        ),
        "select_on": Option(
            "",
            "the task whose scored-pair dev split select_every scores (cosine, Spearman)",
            type=str,
            hash_default=False,
        ),
        "mlp_head": Option(
            False,
            "contrastive term through a training-only MLP (Linear + tanh) on the pooled "
            "vector (SimCSE's unsupervised setting; thesis code: none)",
            type=bool,
            hash_default=False,
        ),
    }


ALWAYS_READ = ("pooling", "lr", "aux", "init", "select_every", "select_on")


def aux_names(options: Mapping[str, Any]) -> list[str]:
    text = str(options.get("aux") or "").strip()
    return [name.strip() for name in text.split(AUX_SEPARATOR)] if text else []


def _objective(lookup: Callable[[str, str], Any], name: str) -> Objective:
    objective = lookup(OBJECTIVE_KIND, name)
    if not isinstance(objective, Objective):
        raise HarnessError(
            f"component {name!r} of kind {OBJECTIVE_KIND!r} is a {type(objective).__name__}, not a "
            "harness.nn.objectives.Objective; this is a bug in the plugin that registered it."
        )
    return objective


def resolve_objectives(lookup: Callable[[str, str], Any], primary: str, options: Mapping[str, Any]) -> list[Objective]:
    """The primary objective followed by the auxiliaries of ``options["aux"]``."""
    return [_objective(lookup, name) for name in [primary, *aux_names(options)]]


def training_setup(objectives: Sequence[Objective]) -> TrainingSetup:
    """An objective alone keeps its own setup; every combination is trained in the contrastive setup (thesis
    5.4.2: only the TSDAE replication ran with the 5.4.1 setup)."""
    return objectives[0].setup if len(objectives) == 1 else CONTRASTIVE_SETUP


def validate_objective_spec(primary: str) -> Callable[[Any, Any], None]:
    """The plan-time check of an objective model's spec (ModelPlugin.validate)."""

    def validate(spec: Any, registry: Any) -> None:
        owner = f"model {spec.label!r}"
        options = spec.options
        known = registry.component_names(OBJECTIVE_KIND)
        names = aux_names(options)
        for name in names:
            if name not in known:
                raise InvalidOptionError(
                    f"{owner}: aux objective {name!r} is not registered; known objectives: "
                    f"{', '.join(known)} (join several with '+')."
                )
        if primary in names or len(set(names)) != len(names):
            raise InvalidOptionError(f"{owner}: aux={options['aux']!r} repeats an objective; name each one once.")
        objectives = [registry.component(OBJECTIVE_KIND, name) for name in [primary, *names]]
        if any(o.views for o in objectives) and DELETED in {v for o in objectives for v in o.views}:
            check_deletion_ratio(options["ratio"], f"{owner}, option ratio")
        if "mlm_probability" in {r for o in objectives for r in o.reads} and not 0 < options["mlm_probability"] < 1:
            raise InvalidOptionError(
                f"{owner}: mlm_probability must lie in (0, 1), e.g. 0.2; got {options['mlm_probability']!r}."
            )
        if not options["temperature"] > 0:
            raise InvalidOptionError(f"{owner}: temperature must be positive, e.g. 0.05; got {options['temperature']}.")
        if not options["lr"] > 0:
            raise InvalidOptionError(f"{owner}: lr must be positive, e.g. 3e-5; got {options['lr']}.")
        check_selection(options, owner, registry)
        plugin = registry.model(spec.name)
        for objective in objectives:
            lacking = sorted(set(objective.options) - set(plugin.options))
            if lacking:
                raise InvalidOptionError(
                    f"{owner}: objective {objective.name!r} needs its own options "
                    f"({', '.join(lacking)}), which this model lacks; train it as the primary "
                    f"objective ({objective.name}:aux=...)."
                )
            if objective.check is not None:
                objective.check(options, owner)
        read = (
            set(ALWAYS_READ)
            | {r for o in objectives for r in (*o.reads, *o.options)}
            | ({"aux_weight"} if names else set())
        )
        ignored = sorted(
            key for key, option in plugin.options.items() if key not in read and options[key] != option.default
        )
        if ignored:
            readers = {key: [n for n in known if key in registry.component(OBJECTIVE_KIND, n).reads] for key in ignored}
            hint = "; ".join(f"{key} is read by {', '.join(readers[key]) or 'aux objectives only'}" for key in ignored)
            raise InvalidOptionError(
                f"{owner}: option(s) {', '.join(ignored)} have no effect on objectives "
                f"{', '.join(o.name for o in objectives)} ({hint}); drop them or add the "
                "objective with aux=...."
            )
        if spec.train_on is None:
            sources = sorted(
                name for name, task in registry.tasks.items() if UNLABELED_SENTENCES in task.metadata.training_kinds
            )
            raise IncompatibleError(
                f"{owner} learns from unlabeled sentences; add --train-on TASK "
                f"({', '.join(sources)}) or --train-on self (each task's own train sentences)."
            )
        init = str(options.get("init") or "").strip()
        if init:
            from harness.options import parse_spec_text

            init_name, init_options = parse_spec_text(init)
            models = [n for n in known if n in registry.models]
            if init_name not in models:
                raise InvalidOptionError(
                    f"{owner}: init={init!r} must name an unsupervised objective model "
                    f"({', '.join(models)}), trained on the same source."
                )
            if init_options.get("init"):
                raise InvalidOptionError(f"{owner}: init={init!r} itself has an init; chain at most one level.")

    return validate


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


def objective_budget(objective: Objective) -> Callable[[Mapping[str, Any], str], dict]:
    """``ModelPlugin.budget_for`` of an objective model: the budget of the training setup it trains in (its own
    alone, the contrastive one in any combination, as :func:`training_setup`)."""

    def budget_for(options: Mapping[str, Any], profile_name: str) -> dict[str, Any]:
        setup = CONTRASTIVE_SETUP if aux_names(options) else objective.setup
        return setup_budget(setup, profile_name)

    return budget_for


def check_selection(options: Mapping[str, Any], owner: str, registry: Any) -> None:
    """Options select_every / select_on: a non-negative step count, and a task that offers scored-pair dev data."""
    every, source = int(options["select_every"]), str(options["select_on"]).strip()
    if every < 0:
        raise InvalidOptionError(
            f"{owner}: select_every must be 0 (keep the last step) or a step count, e.g. 250; got {every}."
        )
    if every == 0:
        return
    offering = sorted(name for name, task in registry.tasks.items() if SCORED_PAIRS in task.metadata.training_kinds)
    if source.split(":")[0] not in offering:
        raise InvalidOptionError(
            f"{owner}: select_every={every} scores the dev pairs of select_on, which must name "
            f"a task with scored-pair dev data ({', '.join(offering)}); got {source!r}."
        )


def dev_pair_score(encoder: SentenceEncoder, dev: Any, batch_size: int) -> Callable[[], float]:
    """Spearman rho of the cosine of the encoder's vectors on the dev pairs (constant scores count as 0)."""
    from harness.metrics import ConstantPredictionError, spearman

    def score() -> float:
        first = encoder.encode(dev.first, batch_size=batch_size, progress=False)
        second = encoder.encode(dev.second, batch_size=batch_size, progress=False)
        cosine = (first * second).sum(axis=1) / np.maximum(
            np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1), 1e-12
        )
        try:
            return spearman(cosine, dev.scores)
        except ConstantPredictionError:
            return 0.0

    return score


def curve_summary(values: Sequence[float], buckets: int = 10) -> dict[str, Any]:
    """First/last 10% means, minimum and ``buckets`` bucket means of a per-step loss curve."""
    if not values:
        return {}
    array = np.asarray(values, dtype=np.float64)
    tenth = max(1, len(array) // 10)
    return {
        "first": round(float(array[:tenth].mean()), 5),
        "last": round(float(array[-tenth:].mean()), 5),
        "min": round(float(array.min()), 5),
        "buckets": [round(float(chunk.mean()), 5) for chunk in np.array_split(array, min(buckets, len(array)))],
    }


# -- the embedder --------------------------------------------------------------------------------------------------
@dataclass
class EmbedderSettings:
    primary: str
    options: dict[str, Any]
    device: str
    eval_batch_size: int
    progress: bool
    label: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class ObjectiveEmbedder:
    """A sentence encoder trained with one or more objectives (capabilities ``embedder`` and ``trainable``).

    The checkpoint is a Hugging Face folder (weights, config, tokenizer) plus ``pooling.json``, so it can also be
    given to any model as ``--backbone``.
    """

    def __init__(self, encoder: SentenceEncoder, backbone: str, settings: EmbedderSettings):
        self.encoder = encoder.to(settings.device)
        self.backbone = backbone
        self.settings = settings

    @classmethod
    def from_context(cls, ctx: Any, primary: str) -> ObjectiveEmbedder:
        encoder = SentenceEncoder.from_backbone(ctx.backbone, ctx.options["pooling"], ctx.profile.max_seq_length)
        settings = EmbedderSettings(
            primary, dict(ctx.options), ctx.device, ctx.eval_batch_size, ctx.progress, label=primary
        )
        return cls(encoder, ctx.backbone, settings)

    # -- embedder ------------------------------------------------------------------------------------------------
    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.encoder.encode(texts, batch_size=self.settings.eval_batch_size, progress=self.settings.progress)

    def use_runtime(self, runtime: str, cache_dir: Path | None = None) -> None:
        """``harness run --runtime``: ``encode`` runs through ``runtime`` ("torch" or "onnx"); training stays in
        torch (:meth:`SentenceEncoder.use_runtime`)."""
        self.encoder.use_runtime(runtime, cache_dir)

    @property
    def transformer(self) -> nn.Module:
        """The encoder's transformer, e.g. for a model that starts from these weights (option ``init``)."""
        return self.encoder.transformer

    # -- training ------------------------------------------------------------------------------------------------
    def build_objective(self, objectives: Sequence[Objective], seed: int) -> ObjectiveSum:
        options = self.settings.options
        setup = ObjectiveSetup(self.encoder, self.backbone, options, seed)
        terms = [(objectives[0].name, objectives[0].build(setup), 1.0)]
        terms += [(o.name, o.build(setup), float(options["aux_weight"])) for o in objectives[1:]]
        return ObjectiveSum(self.encoder, terms)

    def collator(self, objectives: Sequence[Objective], seed: int) -> UnlabeledCollator:
        views = [view for objective in objectives for view in objective.views]
        noise = WordDeletion(self.settings.options["ratio"], seed) if DELETED in views else None
        setup = ObjectiveSetup(self.encoder, self.backbone, self.settings.options, seed)
        extras = [objective.prepare(setup) for objective in objectives if objective.prepare is not None]
        return UnlabeledCollator(self.encoder.tokenizer, self.encoder.max_length, [CLEAN, *views], noise, extras)

    def start_from(self, init: str, ctx: Any) -> None:
        """Load the transformer weights of the model ``init`` trained on the same source (shared checkpoint)."""
        other = ctx.trained_model(init, train_on=ctx.train_on)
        source = getattr(other, "transformer", None)
        if not isinstance(source, nn.Module):
            raise IncompatibleError(f"init={init!r}: that model exposes no transformer weights to start from.")
        missing, unexpected = self.encoder.transformer.load_state_dict(source.state_dict(), strict=False)
        if missing or unexpected:
            raise IncompatibleError(
                f"init={init!r}: its weights do not fit this backbone (missing {missing[:3]}, "
                f"unexpected {unexpected[:3]}); use the same --backbone for both."
            )
        ctx.logger.info("starting from the weights of %s trained on %s", init, ctx.train_on)

    def fit(self, splits: Any, ctx: Any) -> dict[str, Any]:
        options = self.settings.options
        sentences, dropped = usable_sentences(splits.train.sentences)
        if dropped:
            ctx.logger.warning("%d empty sentence(s) of %s dropped before training", dropped, splits.source)
        if not sentences:
            raise HarnessError(f"{splits.source} offers no non-empty training sentence; choose another --train-on.")
        init = str(options.get("init") or "").strip()
        if init:
            self.start_from(init, ctx)
        objectives = resolve_objectives(ctx.component, self.settings.primary, options)
        setup = training_setup(objectives)
        module = self.build_objective(objectives, ctx.seed)
        collate = self.collator(objectives, ctx.seed)
        names = "+".join(o.name for o in objectives)
        config = config_from_profile(  # ctx.profile carries the requested budget (setup's, then the user's)
            ctx.profile,
            ctx.seed,
            ctx.device,
            ctx.progress,
            learning_rate=float(options["lr"]),
            schedule=setup.schedule,
            warmup_ratio=setup.warmup_ratio,
            weight_decay=setup.weight_decay,
            description=f"training {names} ({options['pooling']})",
        )
        every = int(options.get("select_every") or 0)
        dev_score = None
        if every:
            dev = ctx.training_data(str(options["select_on"]), SCORED_PAIRS).dev
            if dev is None:
                raise IncompatibleError(
                    f"select_on={options['select_on']!r} offers no dev pairs to select on; name "
                    "another task or set select_every=0."
                )
            dev_score = dev_pair_score(self.encoder, dev, self.settings.eval_batch_size)
        report = fit(module, sentences, collate, config, dev_score, dev_every_steps=every or None)
        self.encoder.eval()
        history = module.history
        record = report.as_record()
        record.update(
            {
                "objectives": [o.name for o in objectives],
                "weights": module.weights,
                "setup": setup.name,
                "batch_size": config.batch_size,
                "learning_rate": config.learning_rate,
                "schedule": config.schedule,
                "sentences": len(sentences),
                "empty_sentences_dropped": dropped,
                "loss_curve": {name: curve_summary([h[name] for h in history]) for name in history[0]}
                if history
                else {},
                "counts": module.counts(),
            }
        )
        if every:
            record["selection"] = {
                "every_steps": every,
                "on": options["select_on"],
                "best_step": report.best_step,
                "best_dev_spearman": report.best_dev_score,
            }
        ctx.logger.info(
            "trained %s: %d steps, %.1f s, %.1f sentences/s, loss %s -> %s",
            names,
            report.steps,
            report.wall_seconds,
            report.examples_per_second,
            record["loss_curve"].get("total", {}).get("first"),
            record["loss_curve"].get("total", {}).get("last"),
        )
        return record

    # -- checkpoints -----------------------------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        directory = Path(directory)
        with quiet_transformers():  # no "Writing model shards" bar per checkpoint
            self.encoder.transformer.save_pretrained(str(directory), safe_serialization=True)
        self.encoder.tokenizer.save_pretrained(str(directory))
        (directory / POOLING_FILE).write_text(
            json.dumps({"pooling": self.encoder.pooling, "max_length": self.encoder.max_length})
        )
        # Keep a sentence-transformers length limit, so the folder read as --backbone gets the same limit.
        st_config = Path(self.backbone) / "sentence_bert_config.json"
        if st_config.is_file():
            shutil.copy(st_config, directory / "sentence_bert_config.json")

    def load(self, directory: Path) -> None:
        load_model(
            self.encoder.transformer, str(Path(directory) / "model.safetensors"), device=str(self.settings.device)
        )


def objective_model(
    objective: Objective, *, description: str, reference: str, lr: float = 3e-5
) -> tuple[Component, ModelPlugin]:
    """The component and the model plugin a method module registers for ``objective``."""
    component = Component(OBJECTIVE_KIND, objective.name, objective, objective.description)
    plugin = ModelPlugin(
        name=objective.name,
        description=description,
        factory=lambda ctx: ObjectiveEmbedder.from_context(ctx, objective.name),
        capabilities=("embedder", "trainable"),
        options={**objective_options(lr), **objective.options},
        training_kinds=(UNLABELED_SENTENCES,),
        reference=reference,
        validate=validate_objective_spec(objective.name),
        model_class=ObjectiveEmbedder,
        budget_for=objective_budget(objective),
    )
    return component, plugin


def objective_hooks(
    objective: Objective, *, description: str, reference: str, lr: float = 3e-5
) -> tuple[Callable[[Callable], None], Callable[[Callable], None]]:
    """The two hook implementations of a method module that offers one objective: ``register_components`` (the
    objective as a component) and ``register_models`` (its model, :func:`objective_model`). A method module binds
    them to those names, which is all its registration needs::

        register_components, register_models = objective_hooks(OBJECTIVE, description="...", reference="...")
    """
    component, plugin = objective_model(objective, description=description, reference=reference, lr=lr)

    @hookimpl
    def register_components(register: Callable) -> None:
        register(component)

    @hookimpl
    def register_models(register: Callable) -> None:
        register(plugin)

    return register_components, register_models
