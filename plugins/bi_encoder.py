"""Bi-Encoder (BE): each sentence encoded alone, pooled, compared by cosine.

Thesis 4.1.2 (SBERT, Reimers & Gurevych 2019): MEAN pooling over non-padding tokens (CLS pooling as an option);
regression training on scored pairs with the MSE between cos(u, v) and the gold score in [0, 1]
(sentence-transformers' CosineSimilarityLoss, ``harness.nn.CosineRegression``); the shared training loop of thesis
5.1 (AdamW 2e-5, 10% linear warm-up, per-epoch dev Spearman, best epoch kept). Without a training source it evaluates
its backbone as is.

As a student of a training recipe (e.g. Augmented SBERT, ``augsbert:teacher=cbe``) it offers
``fit_scored_pairs(train, dev, ctx)`` (the ``ScoredPairLearner`` protocol); the recipe starts it from another
checkpoint through its context's ``build_student(backbone=...)``.

Deviations: none in the method. Budgets (epochs, training-set size, max sequence length) come from the profile.
"""
from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_model, save_model

from harness import SCORED_PAIRS, ModelPlugin, Option, hookimpl
from harness.nn import POOLING_CHOICES, CosineRegression, SentenceEncoder
from harness.training import TrainReport, fit_scored_pairs

logger = logging.getLogger(__name__)


class BiEncoder:
    """An Embedder (and, through the core's cosine adapter, a PairScorer)."""

    def __init__(self, encoder: SentenceEncoder, device: str, batch_size: int, progress: bool, learning_rate: float):
        self.encoder = encoder.to(device)
        self.device = device
        self.batch_size = batch_size
        self.progress = progress
        self.learning_rate = learning_rate

    def encode(self, texts) -> np.ndarray:
        return self.encoder.encode(texts, batch_size=self.batch_size, progress=self.progress)

    def fit(self, splits, ctx) -> TrainReport:
        return self.fit_scored_pairs(splits.train, splits.dev, ctx)

    def fit_scored_pairs(self, train, dev, ctx, description: str = "training be") -> TrainReport:
        """MSE-on-cosine regression on ScoredPairs ``train``; ``dev`` (or None) selects the best epoch."""
        tokenize = self.encoder.tokenize

        def collate(rows):
            first, second, scores = zip(*rows)
            return {"first": tokenize(first), "second": tokenize(second), "scores": torch.tensor(scores)}

        objective = CosineRegression(self.encoder)
        return fit_scored_pairs(self, objective, collate, train, dev, ctx, self.learning_rate, description)

    def fit_pairs(self, train, dev, ctx, description: str = "training be") -> TrainReport:
        """Deprecated (harness 0.1): use ``fit_scored_pairs``."""
        warnings.warn("BiEncoder.fit_pairs is deprecated; use fit_scored_pairs", DeprecationWarning, stacklevel=2)
        return self.fit_scored_pairs(train, dev, ctx, description)

    def save(self, directory: Path) -> None:
        save_model(self.encoder, str(Path(directory) / "model.safetensors"))
        (Path(directory) / "config.json").write_text(
            json.dumps({"pooling": self.encoder.pooling, "max_length": self.encoder.max_length})
        )

    def load(self, directory: Path) -> None:
        load_model(self.encoder, str(Path(directory) / "model.safetensors"), device=str(self.device))


def build(ctx) -> BiEncoder:
    encoder = SentenceEncoder.from_backbone(ctx.backbone, ctx.options["pooling"], ctx.profile.max_seq_length)
    return BiEncoder(encoder, ctx.device, ctx.eval_batch_size, ctx.progress, ctx.options["lr"])


@hookimpl
def register_models(register):
    register(
        ModelPlugin(
            name="be",
            aliases=("bi-encoder",),
            description="Bi-Encoder (SBERT): pooled single-sentence embeddings, cosine; MSE-on-cosine training",
            factory=build,
            capabilities=("embedder", "trainable"),
            options={
                "pooling": Option("mean", "how token states become one vector", choices=POOLING_CHOICES),
                "lr": Option(2e-5, "AdamW learning rate (thesis 5.1)", type=float),
            },
            training_kinds=(SCORED_PAIRS,),
            reference="Reimers & Gurevych 2019 (SBERT); thesis 4.1.2",
            model_class=BiEncoder,
        )
    )
