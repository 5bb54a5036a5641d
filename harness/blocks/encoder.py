"""From tokens to sentence vectors: MEAN and CLS pooling, :class:`SentenceEncoder` (transformer + pooling) and the
length-sorted, de-duplicated encoding loop with its progress bar.
"""

from __future__ import annotations

from harness.nn.encoder import SentenceEncoder, encode_distinct, length_sorted_batches
from harness.nn.pooling import POOLING_CHOICES, cls_pool, mean_pool, pool
from harness.progress import progress_bar

__all__ = [
    "POOLING_CHOICES",
    "cls_pool",
    "mean_pool",
    "pool",
    "SentenceEncoder",
    "encode_distinct",
    "length_sorted_batches",
    "progress_bar",
]
