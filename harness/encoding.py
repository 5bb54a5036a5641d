"""Shared transformer building blocks for model plugins: backbone loading, pooling and fast batched encoding.

Encoding computes each distinct text once per call, tokenizes once, sorts by token length so batches carry little
padding, and runs under ``torch.inference_mode`` (plus autocast on CUDA).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
from torch import nn

from .device import autocast
from .errors import HarnessError, invalid_choice

POOLING_CHOICES = ("mean", "cls")


class BackboneError(HarnessError):
    pass


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path, use_fast=True)
    except Exception as exc:  # transformers raises many types for "not found / offline"
        raise BackboneError(
            f"could not load the tokenizer of backbone {path!r} ({type(exc).__name__}: {exc}). Pass --backbone a local "
            "folder with a Hugging Face model, or a model id this machine can download."
        ) from None


def load_transformer(path: str, auto_class: str = "AutoModel"):
    """The transformer (bare by default; e.g. ``AutoModelForMaskedLM`` on request), from safetensors weights only."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    AutoModel = getattr(transformers, auto_class)

    try:
        return AutoModel.from_pretrained(path, use_safetensors=True)
    except Exception as exc:
        raise BackboneError(
            f"could not load backbone {path!r} ({type(exc).__name__}: {exc}). Pass --backbone a local folder or a "
            "Hugging Face id with safetensors weights that this machine can reach."
        ) from None


def max_sequence_length(path: str, tokenizer, config, profile_limit: int | None) -> int:
    """The smallest of: the profile's limit, a sentence-transformers config's limit, the tokenizer's and the
    position-embedding table's."""
    limits = [512]
    if profile_limit:
        limits.append(profile_limit)
    st_config = Path(path) / "sentence_bert_config.json"
    if st_config.is_file():
        limits.append(int(json.loads(st_config.read_text()).get("max_seq_length", 512)))
    if getattr(tokenizer, "model_max_length", None) and tokenizer.model_max_length < 100_000:
        limits.append(int(tokenizer.model_max_length))
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        # RoBERTa-style models reserve padding_idx + 1 positions.
        offset = (getattr(config, "pad_token_id", 0) or 0) + 1 if config.model_type in ("roberta", "xlm-roberta") else 0
        limits.append(int(positions) - offset)
    return min(limits)


def mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the positions where ``mask`` is 1 (padding never counts)."""
    weights = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


def pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    if pooling == "mean":
        return mean_pool(hidden, mask)
    if pooling == "cls":
        return hidden[:, 0]
    raise invalid_choice("pooling", pooling, POOLING_CHOICES)


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices in batches of similar length, longest first (so memory problems show up at once)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def progress_bar(total: int, description: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=description, disable=not enabled, leave=False, unit="text")


def encode_distinct(
    texts: Sequence[str],
    tokenizer,
    forward: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    device: str,
    batch_size: int,
    max_length: int,
    progress: bool = False,
    description: str = "encoding",
) -> np.ndarray:
    """Run ``forward`` (token batch -> [b, d]) over every distinct text once; rows come back in input order."""
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return np.zeros((0, 0), dtype=np.float32)
    encoded = tokenizer(distinct, truncation=True, max_length=max_length, padding=False)
    features = [{key: encoded[key][i] for key in encoded.keys()} for i in range(len(distinct))]
    lengths = [len(feature["input_ids"]) for feature in features]
    outputs: list[torch.Tensor | None] = [None] * len(distinct)
    with torch.inference_mode(), progress_bar(len(distinct), description, progress) as bar:
        for batch_indices in length_sorted_batches(lengths, batch_size):
            batch = tokenizer.pad([features[i] for i in batch_indices], return_tensors="pt")
            batch = {key: value.to(device) for key, value in batch.items()}
            with autocast(device):
                vectors = forward(batch)
            vectors = vectors.float().cpu()
            for row, index in enumerate(batch_indices):
                outputs[index] = vectors[row]
            bar.update(len(batch_indices))
    matrix = torch.stack(outputs).numpy()  # type: ignore[arg-type]
    if len(distinct) == len(texts):
        if distinct == list(texts):
            return matrix
    row_of = {text: row for row, text in enumerate(distinct)}
    return matrix[[row_of[text] for text in texts]]


class SentenceEncoder(nn.Module):
    """A transformer plus pooling: the Bi-Encoder's tower, reused by every plugin that embeds single texts."""

    def __init__(self, transformer: nn.Module, tokenizer, pooling: str = "mean", max_length: int = 128):
        super().__init__()
        if pooling not in POOLING_CHOICES:
            raise invalid_choice("pooling", pooling, POOLING_CHOICES)
        self.transformer = transformer
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_length = max_length

    @classmethod
    def from_backbone(cls, path: str, pooling: str = "mean", profile_limit: int | None = None) -> "SentenceEncoder":
        tokenizer = load_tokenizer(path)
        transformer = load_transformer(path)
        limit = max_sequence_length(path, tokenizer, transformer.config, profile_limit)
        return cls(transformer, tokenizer, pooling, limit)

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        return self.tokenizer(
            list(texts), truncation=True, max_length=self.max_length, padding=True, return_tensors="pt"
        )

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {k: v for k, v in features.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
        hidden = self.transformer(**inputs).last_hidden_state
        return pool(hidden, features["attention_mask"], self.pooling)

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        device = str(next(self.parameters()).device)
        was_training = self.training
        self.eval()
        try:
            return encode_distinct(
                texts, self.tokenizer, self.forward, device, batch_size, self.max_length, progress
            )
        finally:
            self.train(was_training)
