"""Deprecated (harness 0.2): the building blocks moved to :mod:`harness.nn`; this module re-exports them so that
third-party plugins written against harness 0.1 keep working. New code imports from ``harness.nn``.

Moved: ``load_tokenizer``, ``load_transformer``, ``BackboneError`` (:mod:`harness.nn.backbone`); ``mean_pool``,
``pool``, ``POOLING_CHOICES`` (:mod:`harness.nn.pooling`); ``SentenceEncoder``, ``encode_distinct``,
``length_sorted_batches``, ``progress_bar`` (:mod:`harness.nn.encoder`). ``max_sequence_length`` is now
``harness.nn.sequence_limits(...).sentence``.
"""
from __future__ import annotations

from .nn.backbone import BackboneError, load_tokenizer, load_transformer, sequence_limits
from .nn.encoder import SentenceEncoder, encode_distinct, length_sorted_batches, progress_bar
from .nn.pooling import POOLING_CHOICES, mean_pool, pool

__all__ = [
    "BackboneError", "POOLING_CHOICES", "SentenceEncoder", "encode_distinct", "length_sorted_batches",
    "load_tokenizer", "load_transformer", "max_sequence_length", "mean_pool", "pool", "progress_bar",
]


def max_sequence_length(path: str, tokenizer, config, profile_limit: int | None) -> int:
    """Deprecated: ``harness.nn.sequence_limits(path, tokenizer, config, profile_limit).sentence``."""
    return sequence_limits(path, tokenizer, config, profile_limit).sentence
