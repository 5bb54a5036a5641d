"""From tokens to sentence vectors: MEAN and CLS pooling, :class:`SentenceEncoder` (transformer + pooling) and the
length-sorted, de-duplicated encoding loop with its progress bar.
"""
from __future__ import annotations

from harness.nn.encoder import MODEL_INPUTS, SentenceEncoder, encode_distinct, length_sorted_batches, progress_bar
from harness.nn.pooling import POOLING_CHOICES, cls_pool, mean_pool, pool

__all__ = [
    "POOLING_CHOICES", "cls_pool", "mean_pool", "pool", "MODEL_INPUTS", "SentenceEncoder", "encode_distinct",
    "length_sorted_batches", "progress_bar",
]
