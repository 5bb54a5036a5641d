"""Supervised topic classifier: a sentence encoder fine-tuned through a classification head on topic labels, then
used as an embedder; the model ``classifier`` (thesis 5.6.1, the "Classifier" rows of tables 6.14-6.17).

The encoder pools its token states (as the Bi-Encoder ``be``), a head maps the pooled vector to the topic labels,
encoder and head train together with cross-entropy (``harness.nn.SentenceClassification``), and the head is dropped
afterwards. Options, heads, budgets and every deviation: docs/methods/topic-distillation.md, section "Topic
distillation", subsection "Classifier" and its "Classifier" table row.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from harness import LABELED_SENTENCES, CheckpointedModule, DataFileError, ModelPlugin, Option, hookimpl
from harness.blocks import (
    DEFAULT_DELIMITER,
    POOLING_CHOICES,
    SentenceClassification,
    SentenceEncoder,
    TopicPromptError,
    TrainReport,
    classification_head,
    config_from_profile,
    fit,
    length_sorted_batches,
    macro_f1,
    prompted_texts,
)

logger = logging.getLogger(__name__)

INPUTS = ("raw", "prompted")
HEADS = ("linear", "thesis-code")
HEAD_DROPOUT = 0.1  # the thesis code's classifier dropout (RoBERTa's hidden_dropout_prob)


class TopicClassifier(CheckpointedModule):
    """An Embedder whose encoder was fine-tuned through a topic classification head (dropped after training)."""

    def __init__(self, encoder: SentenceEncoder, device: str, batch_size: int, progress: bool, options: dict):
        self.encoder = encoder.to(device)
        self.device = device
        self.batch_size = batch_size
        self.progress = progress
        self.options = options
        self.labels: list[str] = []

    def encode(self, texts) -> np.ndarray:
        return self.encoder.encode(texts, batch_size=self.batch_size, progress=self.progress)

    def use_runtime(self, runtime: str, cache_dir: Path | None = None) -> None:
        """``harness run --runtime``: ``encode`` runs through ``runtime`` ("torch" or "onnx"); training stays in
        torch."""
        self.encoder.use_runtime(runtime, cache_dir)

    def training_texts(self, sentences: list[str], labels: list[str], source: str) -> list[str]:
        """The texts the classifier reads: the sentences, or (input=prompted) each with its own topic prompt."""
        if self.options["input"] == "raw":
            return list(sentences)
        try:
            return prompted_texts(labels, sentences, self.options["delimiter"], f"the sentences of {source!r}")
        except TopicPromptError as exc:
            raise DataFileError(
                f"model classifier:input=prompted, training source {source!r}: {exc} (model option delimiter=CHARACTER)"
            ) from None

    def fit(self, splits, ctx) -> TrainReport:
        train, dev = splits.train, splits.dev
        rows = list(dict.fromkeys(zip(train.sentences, train.labels)))  # duplicate (text, label) rows once
        self.labels = sorted({label for _, label in rows})
        if len(self.labels) < 2:
            raise DataFileError(
                f"model classifier: training source {splits.source!r} has {len(self.labels)} topic "
                "label(s) in its train split; a classifier needs at least two."
            )
        label_ids = {label: index for index, label in enumerate(self.labels)}
        texts = self.training_texts([text for text, _ in rows], [label for _, label in rows], splits.source)
        examples = [(text, label_ids[label]) for text, (_, label) in zip(texts, rows)]

        hidden = self.options["head"] == "thesis-code"
        head = classification_head(
            self.encoder.transformer.config.hidden_size,
            len(self.labels),
            hidden=hidden,
            dropout=HEAD_DROPOUT if hidden else 0.0,
        )
        objective = SentenceClassification(self.encoder, head)
        tokenize = self.encoder.tokenize

        def collate(batch):
            batch_texts, batch_labels = zip(*batch)
            return {"features": tokenize(batch_texts), "labels": torch.tensor(batch_labels)}

        config = config_from_profile(
            ctx.profile,
            ctx.seed,
            ctx.device,
            ctx.progress,
            learning_rate=self.options["lr"],
            description="training classifier",
        )
        dev_score = None
        if dev is not None and len(dev) and config.epochs > 1:
            known = [i for i, label in enumerate(dev.labels) if label in label_ids]
            dev_texts = self.training_texts(
                [dev.sentences[i] for i in known], [dev.labels[i] for i in known], splits.source
            )
            dev_gold = np.array([label_ids[dev.labels[i]] for i in known])
            dev_score = lambda: macro_f1(self._predict(objective, dev_texts), dev_gold)  # noqa: E731
        return fit(objective, examples, collate, config, dev_score, lengths=[len(text) for text, _ in examples])

    def _predict(self, objective: SentenceClassification, texts: list[str]) -> np.ndarray:
        """Arg-max labels of ``texts``, in length-sorted batches."""
        predicted = np.zeros(len(texts), dtype=np.int64)
        lengths = [len(text) for text in texts]
        device = next(objective.parameters()).device
        for batch in length_sorted_batches(lengths, self.batch_size):
            features = {k: v.to(device) for k, v in self.encoder.tokenize([texts[i] for i in batch]).items()}
            predicted[batch] = objective.predict(features)
        return predicted

    # -- checkpoint: the encoder's weights, its settings and the topic labels (harness.CheckpointedModule) -------
    def checkpoint_module(self):
        return self.encoder

    def checkpoint_config(self) -> dict:
        return {
            "pooling": self.encoder.pooling,
            "max_length": self.encoder.max_length,
            "labels": self.labels,
            "input": self.options["input"],
            "head": self.options["head"],
        }

    def restore_checkpoint_config(self, config: dict) -> None:
        self.labels = config.get("labels", [])

    def export_sentence_transformers(self, directory: Path) -> None:
        """``harness export``: the fine-tuned encoder as a sentence-transformers folder (Transformer -> Pooling)."""
        from harness.blocks import write_sentence_transformer

        encoder = self.encoder
        write_sentence_transformer(
            Path(directory), encoder.transformer, encoder.tokenizer, encoder.pooling, encoder.max_length
        )


def build(ctx) -> TopicClassifier:
    encoder = SentenceEncoder.from_backbone(ctx.backbone, ctx.options["pooling"], ctx.profile.max_seq_length)
    return TopicClassifier(encoder, ctx.device, ctx.eval_batch_size, ctx.progress, dict(ctx.options))


@hookimpl
def register_models(register):
    register(
        ModelPlugin(
            name="classifier",
            aliases=("topic-classifier",),
            description="supervised topic classifier (thesis 5.6.1): the encoder fine-tuned with a classification "
            "head and cross-entropy on labeled sentences, then used as an embedder",
            factory=build,
            capabilities=("embedder", "trainable"),
            options={
                "input": Option(
                    "raw",
                    "raw sentences (thesis 'Classifier Original') or '{topic} ¥ {sentence}' "
                    "(thesis 'Classifier Prompted')",
                    choices=INPUTS,
                ),
                "head": Option(
                    "linear", "linear: Linear(d, classes); thesis-code: Linear-SiLU-Dropout-Linear", choices=HEADS
                ),
                "pooling": Option("mean", "how token states become one vector (as be)", choices=POOLING_CHOICES),
                "lr": Option(2e-5, "AdamW learning rate (the thesis code's)", type=float, bounds="(0, inf)"),
                "delimiter": Option(DEFAULT_DELIMITER, "topic delimiter of input=prompted", type=str),
            },
            training_kinds=(LABELED_SENTENCES,),
            requires_training=True,
            default_train_on="20ng-topic",
            model_class=TopicClassifier,
            budgets={
                "quick": {"max_steps": 125},
                "paper": {"epochs": 5, "batch_size": 16},
            },
            reference="thesis 5.6.1, tables 6.14-6.17 (Classifier rows)",
        )
    )
