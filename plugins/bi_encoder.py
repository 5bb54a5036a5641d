"""Bi-Encoder (BE): each sentence encoded alone, pooled, compared by cosine.

Thesis 4.1.2 (SBERT, Reimers & Gurevych 2019): MEAN pooling over non-padding tokens (CLS pooling as an option);
regression training on scored pairs with the MSE between cos(u, v) and the gold score in [0, 1]
(sentence-transformers' CosineSimilarityLoss); the shared training loop of thesis 5.1 (AdamW 2e-5, 10% linear
warm-up, per-epoch dev Spearman, best epoch kept). Without a training source it evaluates its backbone as is.

Deviations: none in the method. Budgets (epochs, training-set size, max sequence length) come from the profile.

With ``teacher=...`` the Bi-Encoder is the student of Augmented SBERT (options ``sampler``, ``mode``, ...):
training is delegated to plugins/augmented_sbert.py, which calls ``fit_pairs`` on gold and/or silver pairs.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_model, save_model
from torch import nn

from harness import SCORED_PAIRS, UNLABELED_SENTENCES, ModelPlugin, Option, hookimpl
from harness.encoding import POOLING_CHOICES, SentenceEncoder
from harness.training import fit_scored_pairs
from harness.plugins import augmented_sbert


class CosineRegression(nn.Module):
    """MSE between cos(u, v) and the gold score (SBERT CosineSimilarityLoss)."""

    def __init__(self, encoder: SentenceEncoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, first: dict, second: dict, scores: torch.Tensor) -> torch.Tensor:
        cosine = torch.cosine_similarity(self.encoder(first), self.encoder(second))
        return nn.functional.mse_loss(cosine.float(), scores.float())


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

    def fit(self, splits, ctx):
        if ctx.options.get("teacher"):
            # Augmented SBERT: the pipeline samples and annotates silver pairs, then calls fit_pairs.
            return augmented_sbert.distill(self, splits, ctx)
        return self.fit_pairs(splits.train, splits.dev, ctx)

    def fit_pairs(self, train, dev, ctx, description: str = "training be"):
        """MSE-on-cosine regression on ScoredPairs ``train``; ``dev`` (or None) selects the best epoch."""
        tokenize = self.encoder.tokenize

        def collate(rows):
            first, second, scores = zip(*rows)
            return {"first": tokenize(first), "second": tokenize(second), "scores": torch.tensor(scores)}

        return fit_scored_pairs(
            self, CosineRegression(self.encoder), collate, train, dev, ctx, self.learning_rate, description
        )

    def save(self, directory: Path) -> None:
        save_model(self.encoder, str(Path(directory) / "model.safetensors"))
        (Path(directory) / "config.json").write_text(
            json.dumps({"pooling": self.encoder.pooling, "max_length": self.encoder.max_length})
        )

    def load(self, directory: Path) -> None:
        load_model(self.encoder, str(Path(directory) / "model.safetensors"), device=str(self.device))


def build(ctx) -> BiEncoder:
    encoder = SentenceEncoder.from_backbone(ctx.backbone, ctx.options["pooling"], ctx.profile.max_seq_length)
    return BiEncoder(encoder, ctx.device, ctx.profile.eval_batch_size, ctx.progress, ctx.options["lr"])


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
                **augmented_sbert.OPTIONS,  # distillation from a teacher (plugins/augmented_sbert.py)
            },
            validate=augmented_sbert.validate,
            # Unlabeled sentences only as the target of Augmented SBERT domain transfer (validate refuses the rest).
            training_kinds=(SCORED_PAIRS, UNLABELED_SENTENCES),
            reference="Reimers & Gurevych 2019 (SBERT); thesis 4.1.2",
        )
    )
