"""Training objectives, one class each (sentence-transformers' ``losses/`` split).

Two shapes:

- Objectives that own the model they train, ready for :func:`harness.training.fit` (``forward(**batch)`` returns the
  scalar loss): :class:`CosineRegression` (a two-tower encoder) and :class:`ScoreRegression` (a pair scorer).
- Criteria over vectors, with no parameters, that a method composes into its own objective (SimCSE's two dropout
  views, Noise Matching's stop-gradient, proposition pooling): :class:`InfoNCE` and :class:`SupCon`.

References:

- CosineRegression: SBERT (Reimers & Gurevych 2019, section 3, regression objective; thesis 4.1.2): the MSE between
  cos(u, v) and the gold score; sentence-transformers ``CosineSimilarityLoss``.
- ScoreRegression: thesis 4.1.2 / table 6.2 ("simple regression setting", MSE on the activated output) and
  sentence-transformers' ``CrossEncoder`` default for one label, ``BCEWithLogitsLoss`` on the raw logit (the
  AugSBERT code's choice). Both have their minimum where the activated output equals the gold score.
- InfoNCE: SimCSE (Gao et al. 2021, eq. 1; thesis 2.4.5) with in-batch negatives (and optional hard negatives);
  equal to sentence-transformers' ``MultipleNegativesRankingLoss`` with ``scale = 1 / temperature`` and its default
  ``directions=("query_to_doc",)``.
- SupCon: Khosla et al. 2020, eq. 2 (L^sup_out) on cosine similarities; the Sub-Sentence Encoder's objective
  (temperature 0.01 there).

Deviations: none.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from harness.errors import invalid_choice

logger = logging.getLogger(__name__)

REGRESSION_LOSSES = ("mse", "bce")  # ScoreRegression's losses: squared error, binary cross-entropy


class CosineRegression(nn.Module):
    """MSE between cos(u, v) and the gold score, u and v from one shared encoder (SBERT's CosineSimilarityLoss).

    ``encoder(features) -> [b, d]``; ``forward(first, second, scores)`` takes two tokenised batches and the scores.
    """

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder

    def forward(self, first: dict, second: dict, scores: torch.Tensor) -> torch.Tensor:
        cosine = torch.cosine_similarity(self.encoder(first), self.encoder(second))
        return nn.functional.mse_loss(cosine.float(), scores.float())


class ScoreRegression(nn.Module):
    """Regression of a pair scorer's one score per pair on gold scores in [0, 1].

    ``scorer(features) -> [b]`` is the score the model reports. With ``loss="mse"`` the loss is the MSE between that
    score and the gold score. With ``loss="bce"`` the scorer must also offer ``scorer.logits(features) -> [b]``, the
    value before a sigmoid, and the loss is binary cross-entropy with logits on it.
    """

    def __init__(self, scorer: nn.Module, loss: str = "mse"):
        super().__init__()
        if loss not in REGRESSION_LOSSES:
            raise invalid_choice("regression loss", loss, REGRESSION_LOSSES)
        if loss == "bce" and not callable(getattr(scorer, "logits", None)):
            raise TypeError(
                f"loss='bce' needs a scorer with a logits(features) method; {type(scorer).__name__} has none"
            )
        self.scorer = scorer
        self.loss = loss

    def forward(self, features: dict[str, torch.Tensor], scores: torch.Tensor) -> torch.Tensor:
        if self.loss == "bce":
            return nn.functional.binary_cross_entropy_with_logits(self.scorer.logits(features).float(), scores.float())
        return nn.functional.mse_loss(self.scorer(features).float(), scores.float())


def cosine_matrix(rows: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
    """``[n, d], [m, d] -> [n, m]`` cosine similarities."""
    return nn.functional.normalize(rows, dim=-1) @ nn.functional.normalize(columns, dim=-1).T


class InfoNCE(nn.Module):
    """Cross-entropy of each anchor against its own positive among all positives of the batch (and any hard
    negatives), on cosine similarities divided by ``temperature``.

    ``forward(anchors [b, d], positives [b, d], *negatives [b, d]) -> scalar``: the candidates of anchor i are every
    positive and every negative of the batch; the right one is positive i.
    """

    def __init__(self, temperature: float = 0.05):
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"InfoNCE temperature must be positive, got {temperature}")
        self.temperature = temperature

    def forward(self, anchors: torch.Tensor, positives: torch.Tensor, *negatives: torch.Tensor) -> torch.Tensor:
        candidates = torch.cat([positives, *negatives], dim=0)
        logits = cosine_matrix(anchors, candidates) / self.temperature
        targets = torch.arange(len(anchors), device=anchors.device)
        return nn.functional.cross_entropy(logits, targets)


class SupCon(nn.Module):
    """Supervised contrastive loss (Khosla et al. 2020, eq. 2, L^sup_out) on cosine similarities.

    ``forward(vectors [n, d], labels [n]) -> scalar``: for every anchor with at least one other vector of its label,
    the mean over those positives p of -log(exp(cos(i, p) / t) / sum over all a != i of exp(cos(i, a) / t)),
    averaged over those anchors. Anchors without a positive contribute nothing (a batch without any positive pair
    gives 0, with a gradient of 0).
    """

    def __init__(self, temperature: float = 0.1):
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"SupCon temperature must be positive, got {temperature}")
        self.temperature = temperature

    def forward(self, vectors: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        labels = labels.to(vectors.device).reshape(-1)
        if len(labels) != len(vectors):
            raise ValueError(f"SupCon got {len(vectors)} vectors but {len(labels)} labels")
        logits = cosine_matrix(vectors, vectors).float() / self.temperature
        self_mask = torch.eye(len(vectors), dtype=torch.bool, device=vectors.device)
        # Each row's denominator runs over every other vector: the anchor itself is left out.
        log_probability = logits - torch.logsumexp(logits.masked_fill(self_mask, float("-inf")), dim=1, keepdim=True)
        positives = (labels[:, None] == labels[None, :]) & ~self_mask
        positive_counts = positives.sum(dim=1)
        has_positive = positive_counts > 0
        if not has_positive.any():
            return vectors.sum() * 0.0
        mean_log_probability = (log_probability * positives).sum(dim=1)[has_positive] / positive_counts[has_positive]
        return -mean_log_probability.mean()
