"""The embedder the objectives train (:class:`ObjectiveEmbedder`, capabilities ``embedder`` and ``trainable``) and
the component and model plugin a method module registers for its objective (:func:`objective_model`,
:func:`objective_hooks`): the training loop's settings from the setup and the profile, SimCSE's checkpoint selection
on dev pairs (option ``select_every``), the training report, and checkpoints that any model reads as ``--backbone``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.torch import load_model
from torch import nn

from harness import (  # the contract's front door: a building block depends on no private core module
    SCORED_PAIRS,
    UNLABELED_SENTENCES,
    Component,
    HarnessError,
    IncompatibleError,
    ModelPlugin,
    hookimpl,
)
from harness.training_loop import config_from_profile, fit

from ...files import atomic_write_text
from ..backbone import quiet_transformers
from ..encoder import SentenceEncoder
from ..noise import WordDeletion
from .batches import UnlabeledCollator, usable_sentences
from .composition import CLEAN, DELETED, OBJECTIVE_KIND, Objective, ObjectiveSetup, ObjectiveSum
from .options import objective_budget, objective_options, resolve_objectives, training_setup, validate_objective_spec

POOLING_FILE = "pooling.json"  # written next to the Hugging Face files of a checkpoint


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
        atomic_write_text(
            directory / POOLING_FILE,
            json.dumps({"pooling": self.encoder.pooling, "max_length": self.encoder.max_length}),
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
