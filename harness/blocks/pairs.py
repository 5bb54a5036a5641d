"""Two-segment pair inputs (``[CLS] s1 [SEP] [CLS] s2 [SEP]``) with their per-token segment ids, longest-first
truncation and length-sorted pair scoring, for models that read both sentences at once; the base of a trainable pair
scorer (:class:`TrainablePairScorer`) and of any model around one torch network (:class:`NetworkModel`).
"""

from __future__ import annotations

from harness.nn.pairs import (
    FIRST_SEGMENT,
    PADDING_SEGMENT,
    SECOND_SEGMENT,
    PairInputBuilder,
    distinct_pairs,
    score_in_length_sorted_batches,
    truncate_longest_first,
)
from harness.pair_scorer import PAIR_ORDERS, NetworkModel, TrainablePairScorer

__all__ = [
    "FIRST_SEGMENT",
    "PADDING_SEGMENT",
    "PAIR_ORDERS",
    "SECOND_SEGMENT",
    "NetworkModel",
    "PairInputBuilder",
    "TrainablePairScorer",
    "distinct_pairs",
    "score_in_length_sorted_batches",
    "truncate_longest_first",
]
