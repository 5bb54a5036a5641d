"""Two-segment pair inputs (``[CLS] s1 [SEP] [CLS] s2 [SEP]``) with their per-token segment ids, longest-first
truncation and length-sorted pair scoring, for models that read both sentences at once.
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

__all__ = [
    "FIRST_SEGMENT",
    "PADDING_SEGMENT",
    "SECOND_SEGMENT",
    "PairInputBuilder",
    "distinct_pairs",
    "score_in_length_sorted_batches",
    "truncate_longest_first",
]
