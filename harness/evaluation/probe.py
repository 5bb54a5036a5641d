"""Frozen-encoder classification probes (thesis 5.2.2 and 5.6.2) and the embedding cache they read from.

Tasks (``bws-topic``, ``20ng-*``, ``ukp-sentential``) supply the embeddings of their train / dev / test texts and
integer labels; :func:`train_probe` trains a head on the frozen embeddings (the thesis text's ``Linear`` or the
thesis code's Linear-SiLU-Linear) and reports macro-F1 on test. The head, training, epoch selection and the
embedding cache: docs/core/probes.md, section "Frozen-encoder probes".
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from sklearn.metrics import f1_score
from torch import nn

from harness.device import seed_everything
from harness.evaluation.adapters import as_embedder
from harness.evaluation.bootstrap import ExampleScores
from harness.metrics import check_finite_vectors
from harness.nn.classification import classification_head
from harness.training_loop import TrainConfig, fit

logger = logging.getLogger(__name__)

PROBE_EPOCHS = 10
PROBE_LEARNING_RATE = 1e-3
PROBE_BATCH_SIZE = 16
KEEP_CHOICES = ("best-dev", "last")
CACHED_ENCODINGS_PER_MODEL = 4  # e.g. raw and prompted texts of two probe families


def macro_f1(predicted, gold) -> float:
    """scikit-learn's macro-averaged F1 over the labels present in gold or predictions (0 for an undefined F1)."""
    return float(f1_score(gold, predicted, average="macro", zero_division=0))


class ProbeClassifier(nn.Module):
    """A linear layer (or, for the thesis code's probe, Linear-SiLU-Linear) over frozen sentence embeddings, trained
    with cross-entropy."""

    def __init__(self, dimension: int, classes: int, hidden: bool = False):
        super().__init__()
        self.linear = classification_head(dimension, classes, hidden=hidden)

    def forward(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.linear(embeddings), labels)

    @torch.inference_mode()
    def predict(self, embeddings: torch.Tensor) -> np.ndarray:
        return self.linear(embeddings).argmax(dim=-1).cpu().numpy()


@dataclass
class ProbeSplit:
    """The frozen embeddings ``[n, d]`` of one split and their integer labels ``[n]``."""

    embeddings: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        self.embeddings = np.asarray(self.embeddings, dtype=np.float32)
        self.labels = np.asarray(self.labels, dtype=np.int64)
        if self.embeddings.ndim != 2 or len(self.embeddings) != len(self.labels):
            raise ValueError(f"ProbeSplit: {self.embeddings.shape} embeddings for {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.labels)


@dataclass
class ProbeResult:
    f1_macro: float  # x100
    accuracy: float  # x100
    best_epoch: int | None
    dev_history: list[float] = field(default_factory=list)
    predictions: np.ndarray | None = None  # test predictions (label ids)
    gold: np.ndarray | None = None  # test labels (label ids)

    def scores(self) -> dict[str, float]:
        return {"f1_macro": self.f1_macro, "accuracy": self.accuracy}

    def examples(self, metric: str = "f1_macro") -> ExampleScores | None:
        """The test predictions and labels that resample ``metric`` (``f1_macro`` or ``accuracy``) for a bootstrap
        interval (harness.evaluation.bootstrap)."""
        if self.predictions is None or self.gold is None:
            return None
        if metric == "accuracy":
            return ExampleScores("mean", {"values": (self.predictions == self.gold).astype(np.float64)})
        return ExampleScores("f1_macro", {"predicted": self.predictions, "gold": self.gold})

    def details(self) -> dict[str, Any]:
        return {"best_epoch": self.best_epoch, "dev_f1_macro_history": self.dev_history}


def train_probe(
    train: ProbeSplit,
    dev: ProbeSplit | None,
    test: ProbeSplit,
    classes: int,
    *,
    seed: int,
    device: str = "cpu",
    progress: bool = False,
    hidden: bool = False,
    keep: str = "best-dev",
    epochs: int = PROBE_EPOCHS,
    learning_rate: float = PROBE_LEARNING_RATE,
    batch_size: int = PROBE_BATCH_SIZE,
    description: str = "probe",
) -> ProbeResult:
    """Train the probe on ``train``, select its epoch on ``dev`` (``keep="best-dev"``) or keep the last one, and
    score it on ``test``. The classifier's initial weights and the batches depend on ``seed`` only."""
    if keep not in KEEP_CHOICES:
        raise ValueError(f"train_probe(): keep must be one of {KEEP_CHOICES}, got {keep!r}")
    if keep == "best-dev" and dev is None:
        raise ValueError("train_probe(): keep='best-dev' needs a dev split")
    if len(train) == 0 or len(test) == 0:
        raise ValueError(f"train_probe(): empty split (train {len(train)}, test {len(test)})")
    vectors = {"train": torch.from_numpy(train.embeddings), "test": torch.from_numpy(test.embeddings)}
    labels = {"train": torch.from_numpy(train.labels)}
    if dev is not None:
        vectors["dev"] = torch.from_numpy(dev.embeddings)

    seed_everything(seed)  # the classifier's initial weights depend on the seed only
    classifier = ProbeClassifier(train.embeddings.shape[1], classes, hidden=hidden)
    config = TrainConfig(
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=seed,
        device=device,
        progress=progress,
        description=description,
    )

    def collate(rows):
        indices = torch.tensor(rows)
        return {"embeddings": vectors["train"][indices], "labels": labels["train"][indices]}

    def predict(name: str) -> np.ndarray:
        return classifier.predict(vectors[name].to(next(classifier.parameters()).device))

    report = fit(
        classifier,
        list(range(len(train))),
        collate,
        config,
        dev_score=(lambda: macro_f1(predict("dev"), dev.labels)) if keep == "best-dev" else None,
    )
    predicted = predict("test")
    return ProbeResult(
        f1_macro=100 * macro_f1(predicted, test.labels),
        accuracy=100 * float(np.mean(predicted == test.labels)),
        best_epoch=report.best_epoch,
        dev_history=report.dev_history,
        predictions=predicted,
        gold=test.labels,
    )


PROBE_VARIANTS = ("linear", "thesis-code")  # the thesis text's probe, and its code's (tasks' option ``probe``)
PROBE_SPLITS = ("train", "dev", "test")


def probe_on_texts(
    model: Any,
    texts: dict[str, Sequence[str]],
    labels: dict[str, Sequence[int]],
    classes: int,
    *,
    variant: str,
    seed: int,
    device: str = "cpu",
    progress: bool = False,
    texts_description: str = "texts",
    description: str = "probe",
) -> ProbeResult:
    """A probe task's whole protocol: the texts of the train, dev and test splits encoded in one call
    (:func:`cached_embeddings`), then :func:`train_probe` with the thesis text's probe (``variant="linear"``: a
    linear head, the best dev epoch) or its code's (``"thesis-code"``: Linear-SiLU-Linear, the last epoch)."""
    if variant not in PROBE_VARIANTS:
        raise ValueError(f"probe_on_texts(): variant must be one of {PROBE_VARIANTS}, got {variant!r}")
    embeddings = cached_embeddings(model, [text for name in PROBE_SPLITS for text in texts[name]], texts_description)
    splits, start = {}, 0
    for name in PROBE_SPLITS:
        count = len(texts[name])
        splits[name] = ProbeSplit(embeddings[start : start + count], np.asarray(labels[name]))
        start += count
    thesis_code = variant == "thesis-code"
    return train_probe(
        splits["train"],
        splits["dev"],
        splits["test"],
        classes,
        seed=seed,
        device=device,
        progress=progress,
        hidden=thesis_code,
        keep="last" if thesis_code else "best-dev",
        epochs=PROBE_EPOCHS,
        learning_rate=PROBE_LEARNING_RATE,
        batch_size=PROBE_BATCH_SIZE,
        description=description,
    )


# -- the embedding cache ---------------------------------------------------------------------------------------------
_ENCODED: weakref.WeakKeyDictionary[Any, OrderedDict[str, np.ndarray]] = weakref.WeakKeyDictionary()


def texts_key(texts: Sequence[str]) -> str:
    """A digest of a list of texts (order and content)."""
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8", "surrogatepass")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


def cached_embeddings(model: Any, texts: Sequence[str], description: str = "texts") -> np.ndarray:
    """``as_embedder(model).encode(texts)`` as float32 ``[n, d]``, computed once per model object and list of texts
    (the last :data:`CACHED_ENCODINGS_PER_MODEL` lists are kept). A model that cannot be weakly referenced is
    encoded every time."""
    key = texts_key(texts)
    try:
        cached = _ENCODED.setdefault(model, OrderedDict())
    except TypeError:  # not weak-referenceable: no reuse
        cached = OrderedDict()
    if key in cached:
        cached.move_to_end(key)
        logger.info("reusing the embeddings of %d %s", len(texts), description)
        return cached[key]
    logger.info("encoding %d %s", len(texts), description)
    vectors = np.asarray(as_embedder(model).encode(list(texts)), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ValueError(
            f"the model returned an array of shape {vectors.shape} for {len(texts)} texts; encode must "
            "return one row per text."
        )
    check_finite_vectors(vectors, f"vectors of {description}")
    cached[key] = vectors
    while len(cached) > CACHED_ENCODINGS_PER_MODEL:
        cached.popitem(last=False)
    return vectors


def clear_encoding_cache() -> None:
    """Forget every cached encoding (tests; a caller that changed a model in place)."""
    _ENCODED.clear()
