"""Bi-Encoder (BE): each sentence encoded alone, pooled, compared by cosine; the model ``be``.

Thesis 4.1.2 (SBERT, Reimers & Gurevych 2019): MEAN pooling (CLS as an option), regression on scored pairs with the
MSE between cos(u, v) and the gold score (``harness.nn.CosineRegression``), the shared training loop of thesis 5.1.
Its role as a recipe's student, span inputs (``span_input``) and every deviation: docs/methods/be.md, section
"Bi-Encoder" and its ``be`` table rows.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from harness import SCORED_PAIRS, CheckpointedModule, ModelPlugin, Option, hookimpl
from harness.blocks import (
    POOLING_CHOICES,
    SCORED_PAIR_BUDGET_KEYS,
    CosineRegression,
    SentenceEncoder,
    TrainReport,
    encode_span_items,
    fit_scored_pairs,
    group_by_sentence,
    subset_text,
)

logger = logging.getLogger(__name__)

SPAN_INPUTS = ("mask", "full-mask", "subset", "sentence")  # appendix C.1 of the Sub-Sentence Encoder paper


class BiEncoder(CheckpointedModule):
    """An Embedder (and, through the core's cosine adapter, a PairScorer)."""

    def __init__(
        self,
        encoder: SentenceEncoder,
        device: str,
        batch_size: int,
        progress: bool,
        learning_rate: float,
        span_input: str = "mask",
    ):
        self.encoder = encoder.to(device)
        self.device = device
        self.batch_size = batch_size
        self.progress = progress
        self.learning_rate = learning_rate
        self.span_input = span_input

    def encode(self, texts) -> np.ndarray:
        return self.encoder.encode(texts, batch_size=self.batch_size, progress=self.progress)

    def use_runtime(self, runtime: str, cache_dir: Path | None = None) -> None:
        """``harness run --runtime``: ``encode`` and ``encode_spans`` run the transformer through ``runtime``
        ("torch" or "onnx"); training stays in torch."""
        self.encoder.use_runtime(runtime, cache_dir)

    def encode_spans(self, items) -> np.ndarray:
        """One row per ``(text, spans)`` item, as ``span_input`` says (docs/methods/be.md, "Bi-Encoder")."""
        texts, propositions = group_by_sentence(items)  # checks every item's spans, whatever the strategy
        if self.span_input == "sentence":
            return self.encode([texts[position] for position, _ in propositions])
        if self.span_input == "subset":
            return self.encode([subset_text(texts[position], spans) for position, spans in propositions])
        was_training = self.encoder.training
        self.encoder.eval()
        try:
            with self.encoder.runtime.inference(self.encoder):
                return encode_span_items(
                    items,
                    self.encoder.tokenizer,
                    self.encoder.token_states,
                    self.device,
                    self.batch_size,
                    self.encoder.max_length,
                    attention="proposition" if self.span_input == "full-mask" else "sentence",
                    progress=self.progress,
                )
        finally:
            self.encoder.train(was_training)

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

    # -- checkpoint: the encoder's weights and its pooling and token limit (harness.CheckpointedModule) -----------
    def checkpoint_module(self):
        return self.encoder

    def checkpoint_config(self) -> dict:
        return {"pooling": self.encoder.pooling, "max_length": self.encoder.max_length}

    def export_sentence_transformers(self, directory: Path) -> None:
        """``harness export``: a sentence-transformers folder (Transformer -> Pooling) whose ``encode`` equals
        ``self.encode`` (same weights, pooling and token limit)."""
        from harness.blocks import write_sentence_transformer

        encoder = self.encoder
        write_sentence_transformer(
            Path(directory), encoder.transformer, encoder.tokenizer, encoder.pooling, encoder.max_length
        )


def build(ctx) -> BiEncoder:
    encoder = SentenceEncoder.from_backbone(ctx.backbone, ctx.options["pooling"], ctx.profile.max_seq_length)
    return BiEncoder(
        encoder, ctx.device, ctx.eval_batch_size, ctx.progress, ctx.options["lr"], ctx.options["span_input"]
    )


@hookimpl
def register_models(register):
    register(
        ModelPlugin(
            name="be",
            aliases=("bi-encoder",),
            description="Bi-Encoder (SBERT): pooled single-sentence embeddings, cosine; MSE-on-cosine training",
            factory=build,
            # span_encoder: proposition tasks; every other task still gets the native embedder.
            capabilities=("embedder", "span_encoder", "trainable"),
            options={
                "pooling": Option("mean", "how token states become one vector", choices=POOLING_CHOICES),
                "lr": Option(2e-5, "AdamW learning rate (thesis 5.1)", type=float, bounds="(0, inf)"),
                "span_input": Option(
                    "mask",
                    "how encode_spans represents a proposition (Sub-Sentence Encoder "
                    "appendix C.1): mask pooling, full-mask attention, token subset, or "
                    "the whole sentence",
                    choices=SPAN_INPUTS,
                ),
            },
            training_kinds=(SCORED_PAIRS,),
            reference="Reimers & Gurevych 2019 (SBERT); thesis 4.1.2",
            model_class=BiEncoder,
            # quick: one epoch over the whole training split (docs/guide/running.md#budgets).
            budgets={"quick": {"max_train_examples": None, "max_steps": None, "epochs": 1}},
            budget_keys=SCORED_PAIR_BUDGET_KEYS,  # the student / model trains through fit_scored_pairs
        )
    )
