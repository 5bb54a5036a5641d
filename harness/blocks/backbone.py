"""Loading a backbone (tokenizer and transformer) and the one rule for how many tokens a sentence or a pair may have."""

from __future__ import annotations

from harness.nn.backbone import (
    MODEL_INPUTS,
    BackboneError,
    SequenceLimits,
    has_two_token_types,
    load_tokenizer,
    load_transformer,
    position_limit,
    quiet_transformers,
    sequence_limits,
)

__all__ = [
    "MODEL_INPUTS",
    "BackboneError",
    "SequenceLimits",
    "has_two_token_types",
    "load_tokenizer",
    "load_transformer",
    "position_limit",
    "quiet_transformers",
    "sequence_limits",
]
