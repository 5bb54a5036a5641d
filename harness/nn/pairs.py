"""Sentence-pair inputs and length-sorted pair scoring.

- :class:`PairInputBuilder` builds the Cross-Bi-Encoder's two-segment input ``[CLS] s1 [SEP] [CLS] s2 [SEP]``
  (thesis 4.1.2 "Cross-Bi-Encoder", 4.1.3) from each sentence's own token ids, with a per-token segment label (so a
  model can pool each segment) and token types 0/1 where the backbone has two type embeddings. The domain-adaptive
  MLM (thesis 4.3.1, :mod:`harness.nn.mlm`) reads the same input, so pre-training and fine-tuning see one format.
  RoBERTa-style tokenizers use their own start/separator tokens, which Hugging Face also calls cls/sep:
  ``<s> s1 </s> <s> s2 </s>``; tokenizers without cls/sep fall back to bos/eos.
- :func:`truncate_longest_first` is Hugging Face's ``truncation="longest_first"`` on two id lists.
- :func:`distinct_pairs` and :func:`score_in_length_sorted_batches` are the scoring loop every pair scorer shares
  (Cross-Encoder, Cross-Bi-Encoder): each distinct pair once, longest first, under ``torch.inference_mode``;
  sentence-transformers' ``CrossEncoder.predict`` batches pairs the same way (without sorting).

Deviations: none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from harness.deprecation import deprecated_names
from harness.device import autocast
from harness.errors import HarnessError

from .backbone import SequenceLimits, has_two_token_types
from .encoder import length_sorted_batches, progress_bar

logger = logging.getLogger(__name__)

PADDING_SEGMENT, FIRST_SEGMENT, SECOND_SEGMENT = 0, 1, 2  # values of the per-token segment label

# The segment ids' names before they said what they hold.
__getattr__ = deprecated_names(
    __name__,
    {
        "PADDING": (__name__, "PADDING_SEGMENT"),
        "FIRST": (__name__, "FIRST_SEGMENT"),
        "SECOND": (__name__, "SECOND_SEGMENT"),
    },
)


def truncate_longest_first(first: list[int], second: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Drop tokens from the end of the longer sequence until both fit in ``budget`` (Hugging Face's
    'longest_first' truncation)."""
    first_length, second_length = len(first), len(second)
    while first_length + second_length > budget:
        if first_length >= second_length:
            first_length -= 1
        else:
            second_length -= 1
    return first[:first_length], second[:second_length]


@dataclass
class PairInputBuilder:
    """Builds ``start s1 end start s2 end`` token ids with per-token segment labels and token types."""

    tokenizer: object
    sentence_limit: int  # tokens per sentence including its two special tokens
    pair_limit: int  # tokens per pair sequence
    use_token_types: bool

    @classmethod
    def for_backbone(cls, tokenizer, config, limits: SequenceLimits) -> PairInputBuilder:
        """The builder for a backbone: its limits, and token types where it has two type embeddings."""
        return cls(tokenizer, limits.sentence, limits.pair, has_two_token_types(config))

    def __post_init__(self) -> None:
        tokenizer = self.tokenizer
        self.start_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        self.end_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        if self.start_id is None or self.end_id is None:
            raise HarnessError(
                "two-segment pair inputs ([CLS] s1 [SEP] [CLS] s2 [SEP]) need a tokenizer with a start token (cls or "
                f"bos) and a separator (sep or eos); {type(tokenizer).__name__} lacks one. Choose a BERT- or "
                "RoBERTa-style --backbone."
            )
        pad_id = tokenizer.pad_token_id
        self.pad_id = pad_id if pad_id is not None else self.end_id

    def sentence_ids(self, texts: Sequence[str]) -> dict[str, list[int]]:
        """Token ids without special tokens, each text tokenised once."""
        distinct = list(dict.fromkeys(texts))
        encoded = self.tokenizer(
            distinct, add_special_tokens=False, truncation=True, max_length=max(1, self.sentence_limit - 2)
        )["input_ids"]
        return dict(zip(distinct, encoded))

    def features(self, first: Sequence[str], second: Sequence[str]) -> list[dict[str, list[int]]]:
        """One row per pair: ``input_ids`` and ``segments`` (FIRST_SEGMENT / SECOND_SEGMENT per token)."""
        ids_of = self.sentence_ids([*first, *second])
        rows = []
        for text_a, text_b in zip(first, second):
            ids_a, ids_b = truncate_longest_first(ids_of[text_a], ids_of[text_b], self.pair_limit - 4)
            segment_a = [self.start_id, *ids_a, self.end_id]
            segment_b = [self.start_id, *ids_b, self.end_id]
            rows.append(
                {
                    "input_ids": segment_a + segment_b,
                    "segments": [FIRST_SEGMENT] * len(segment_a) + [SECOND_SEGMENT] * len(segment_b),
                }
            )
        return rows

    def collate(self, rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        """Right-padded tensors; ``segments`` is 0 on padding, 1 on segment 1, 2 on segment 2."""
        width = max(len(row["input_ids"]) for row in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        segments = torch.zeros((len(rows), width), dtype=torch.long)
        for index, row in enumerate(rows):
            input_ids[index, : len(row["input_ids"])] = torch.tensor(row["input_ids"])
            segments[index, : len(row["segments"])] = torch.tensor(row["segments"])
        batch = {"input_ids": input_ids, "attention_mask": (segments != PADDING_SEGMENT).long(), "segments": segments}
        if self.use_token_types:
            batch["token_type_ids"] = (segments == SECOND_SEGMENT).long()
        return batch


def distinct_pairs(first: Sequence[str], second: Sequence[str]) -> tuple[list[tuple[str, str]], list[int]]:
    """The distinct (first, second) pairs in order of appearance and, per input pair, its row among them."""
    if len(first) != len(second):
        raise ValueError(f"score(): {len(first)} first sentences but {len(second)} second sentences")
    row_of: dict[tuple[str, str], int] = {}
    rows = [row_of.setdefault(pair, len(row_of)) for pair in zip(first, second)]
    return list(row_of), rows


def score_in_length_sorted_batches(
    features: Sequence[dict[str, list[int]]],
    collate: Callable[[list[dict[str, list[int]]]], dict[str, torch.Tensor]],
    forward: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    device: str,
    batch_size: int,
    progress: bool,
    description: str,
) -> np.ndarray:
    """``forward`` (a padded batch -> one score per row) over per-pair token features, longest first so batches
    carry little padding; scores come back in input order."""
    scores = np.zeros(len(features), dtype=np.float32)
    lengths = [len(feature["input_ids"]) for feature in features]
    with torch.inference_mode(), progress_bar(len(features), description, progress, unit="pair") as bar:
        for batch_indices in length_sorted_batches(lengths, batch_size):
            batch = {key: value.to(device) for key, value in collate([features[i] for i in batch_indices]).items()}
            with autocast(device):
                batch_scores = forward(batch)
            scores[batch_indices] = batch_scores.float().cpu().numpy()
            bar.update(len(batch_indices))
    return scores
