"""Classification over sentence embeddings: a classification head and the cross-entropy objective of a sentence
encoder fine-tuned with it.

- :func:`classification_head`: ``Linear(d, classes)`` (``hidden=False``), or ``Linear(d, d) -> SiLU -> [Dropout]
  -> Linear(d, classes)`` (``hidden=True``), the head of the thesis code's sentence-embedding classifier
  (``RobertaForSentenceEmbeddingClassification``: MEAN pooling, dense, SiLU, dropout, classifier) and of its
  frozen-encoder probe (no dropout there). The frozen-encoder probes (:mod:`harness.evaluation.probe`) and the
  supervised topic classifier (thesis 5.6.1, ``plugins/topic_classifier.py``) build their heads here.
- :class:`SentenceClassification`: a :class:`~harness.nn.encoder.SentenceEncoder` plus a head; ``forward`` is the
  cross-entropy of the pooled embeddings' logits (what the shared training loop needs), ``predict`` the arg-max label.
  sentence-transformers counterpart: ``SoftmaxLoss`` without its pair features (one sentence, one label).

Deviations: none (the building blocks of the methods that use them).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def classification_head(dimension: int, classes: int, hidden: bool = False, dropout: float = 0.0) -> nn.Module:
    """A linear head, or the hidden-layer head Linear-SiLU-(Dropout)-Linear; no dropout module when ``dropout`` is
    0, so a head without dropout has the parameter names (and the initial weights, for one seed) it always had."""
    if not hidden:
        return nn.Linear(dimension, classes)
    layers: list[nn.Module] = [nn.Linear(dimension, dimension), nn.SiLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    layers.append(nn.Linear(dimension, classes))
    return nn.Sequential(*layers)


class SentenceClassification(nn.Module):
    """A sentence encoder (``forward(features) -> [b, d]``) fine-tuned through a classification head with
    cross-entropy; ``forward(features, labels)`` is the loss."""

    def __init__(self, encoder: nn.Module, head: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.head = head

    def logits(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.encoder(features))

    def forward(self, features: dict[str, torch.Tensor], labels: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(self.logits(features).float(), labels)

    @torch.inference_mode()
    def predict(self, features: dict[str, torch.Tensor]) -> np.ndarray:
        return self.logits(features).argmax(dim=-1).cpu().numpy()
