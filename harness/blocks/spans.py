"""Spans inside sentences: normalised character spans, span batches, span pooling, and the items a span encoder
encodes.
"""

from __future__ import annotations

from harness.nn.spans import (
    SpanBatch,
    SpanError,
    encode_span_items,
    group_by_sentence,
    normalise_spans,
    pool_spans,
    span_batch,
    subset_text,
    tokenise_sentences,
    whole_sentence_items,
)

__all__ = [
    "SpanBatch",
    "SpanError",
    "encode_span_items",
    "group_by_sentence",
    "normalise_spans",
    "pool_spans",
    "span_batch",
    "subset_text",
    "tokenise_sentences",
    "whole_sentence_items",
]
