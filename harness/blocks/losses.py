"""Losses over sentence vectors and pair scores (the sentence-transformers ``losses/`` of harness): cosine and score
regression, InfoNCE, SupCon.
"""

from __future__ import annotations

from harness.nn.losses import REGRESSION_LOSSES, CosineRegression, InfoNCE, ScoreRegression, SupCon, cosine_matrix

__all__ = [
    "REGRESSION_LOSSES",
    "CosineRegression",
    "InfoNCE",
    "ScoreRegression",
    "SupCon",
    "cosine_matrix",
]
