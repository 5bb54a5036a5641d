"""Backbones: loading a Hugging Face tokenizer and transformer, and the sequence limits a backbone allows.

sentence-transformers counterpart: ``models.Transformer`` (loading, ``max_seq_length`` from
``sentence_bert_config.json``). Every plugin takes its sequence limits from :func:`sequence_limits`, the one place
that knows about the position offset of RoBERTa-style models, so a single-sentence model and a pair model built on
one backbone can never disagree about what fits.

Deviations: weights are loaded from safetensors only (never pickle); the limit is capped at 512 tokens even for
backbones with a longer position table (the thesis' models are BERT-sized; a longer limit would only change budgets).
"""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.errors import HarnessError

logger = logging.getLogger(__name__)

# The inputs a transformer backbone takes from a tokenised batch (BERT-style models take all three).
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

# The hard cap on any sequence (BERT's position table).
MAX_TOKENS = 512

# Model types whose position ids start at padding_idx + 1 (fairseq's convention, kept by Hugging Face): of a table of
# N positions only N - (pad_token_id + 1) are usable. RoBERTa, XLM-R and CamemBERT are the ones this project meets;
# the others share the same embedding code.
OFFSET_POSITION_MODEL_TYPES = frozenset(
    {
        "roberta",
        "xlm-roberta",
        "xlm-roberta-xl",
        "camembert",
        "roberta-prelayernorm",
        "data2vec-text",
        "mpnet",
        "longformer",
        "ibert",
    }
)


class BackboneError(HarnessError):
    """A backbone (tokenizer or weights) that cannot be loaded."""


def load_tokenizer(path: str):
    """The backbone's fast tokenizer."""
    from transformers import AutoTokenizer

    _offline_if_unreachable(path)
    try:
        return AutoTokenizer.from_pretrained(path, use_fast=True)
    except Exception as exc:  # transformers raises many types for "not found / offline"
        raise BackboneError(
            f"could not load the tokenizer of backbone {path!r} ({type(exc).__name__}: {exc}). Pass --backbone a local "
            "folder with a Hugging Face model, or a model id this machine can download."
        ) from None


def load_transformer(path: str, auto_class: str = "AutoModel"):
    """The transformer (bare by default; e.g. ``AutoModelForMaskedLM`` on request), from safetensors weights only."""
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    auto_model = getattr(transformers, auto_class)
    _offline_if_unreachable(path)
    try:
        # float32 whatever dtype the weights were saved in (transformers' default, "auto", would keep a float16
        # checkpoint in float16): training keeps float32 weights and autocasts (a GradScaler cannot unscale float16
        # gradients), and evaluation on the CPU has no float16 kernels worth using.
        return auto_model.from_pretrained(path, use_safetensors=True, dtype=torch.float32)
    except Exception as exc:
        raise BackboneError(
            f"could not load backbone {path!r} ({type(exc).__name__}: {exc}). Pass --backbone a local folder or a "
            "Hugging Face id with safetensors weights that this machine can reach."
        ) from None


def _offline_if_unreachable(path: str) -> None:
    """A Hub id (not a local folder) is looked up only after the one reachability probe, so an unreachable Hub means
    the local cache at once instead of retries (harness.hub)."""
    if not Path(path).expanduser().exists():
        from harness.hub import hub_reachable

        hub_reachable()


@contextmanager
def quiet_transformers():
    """Silence transformers' load reports and progress bars for a moment (e.g. the expected report that a bare
    backbone has no MLM head)."""
    import transformers

    hf_logging = transformers.utils.logging
    previous = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(previous)


@dataclass(frozen=True)
class SequenceLimits:
    """Token limits of one backbone under one profile."""

    sentence: int  # one sentence with its special tokens (what a Bi-Encoder tower reads)
    pair: int  # a whole pair sequence (what a Cross-Encoder or Cross-Bi-Encoder reads)


def position_limit(tokenizer, config) -> int:
    """The longest sequence the backbone can take at all: the 512 cap, the tokenizer's limit and the usable part of
    the position table."""
    limits = [MAX_TOKENS]
    model_max_length = getattr(tokenizer, "model_max_length", None)
    if model_max_length and model_max_length < 100_000:  # tokenizers without a limit report a huge sentinel
        limits.append(int(model_max_length))
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        offset = 0
        if getattr(config, "model_type", None) in OFFSET_POSITION_MODEL_TYPES:
            offset = (getattr(config, "pad_token_id", 0) or 0) + 1
        limits.append(int(positions) - offset)
    return min(limits)


def sequence_limits(path: str, tokenizer, config, profile_limit: int | None) -> SequenceLimits:
    """The sentence limit is the smallest of: the profile's ``max_seq_length``, a sentence-transformers folder's
    ``max_seq_length`` and :func:`position_limit`. A pair gives each sentence that limit, so the pair may use twice
    it, capped by :func:`position_limit` (longer pairs are cut longest-first by the caller)."""
    backbone_limit = position_limit(tokenizer, config)
    limits = [backbone_limit]
    if profile_limit:
        limits.append(int(profile_limit))
    st_config = Path(path) / "sentence_bert_config.json"
    if st_config.is_file():
        limits.append(int(json.loads(st_config.read_text()).get("max_seq_length", MAX_TOKENS)))
    sentence = min(limits)
    return SequenceLimits(sentence=sentence, pair=min(2 * sentence, backbone_limit))


def has_two_token_types(config) -> bool:
    """Whether the backbone can mark a second segment with token type 1 (BERT yes, RoBERTa no)."""
    return int(getattr(config, "type_vocab_size", 0) or 0) >= 2
