"""Pooling: token states to one vector per text.

SBERT (Reimers & Gurevych 2019, section 3; thesis 4.1.2): MEAN over the non-padding tokens (the default) or the CLS
token's state. sentence-transformers counterpart: ``models.Pooling`` (``pooling_mode_mean_tokens``,
``pooling_mode_cls_token``).

Deviations: none. MAX pooling is not offered (no method of this project uses it).
"""

from __future__ import annotations

import torch

from harness.errors import invalid_choice

POOLING_CHOICES = ("mean", "cls")  # the values a pooling option may take


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the positions where ``mask`` is 1 (padding never counts); ``[b, L, d], [b, L] -> [b, d]``."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


def cls_pool(hidden: torch.Tensor) -> torch.Tensor:
    """The first token's state (BERT's [CLS], RoBERTa's <s>)."""
    return hidden[:, 0]


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """``pooling`` is one of :data:`POOLING_CHOICES`."""
    if pooling == "mean":
        return mean_pool(hidden, mask)
    if pooling == "cls":
        return cls_pool(hidden)
    raise invalid_choice("pooling", pooling, POOLING_CHOICES)
