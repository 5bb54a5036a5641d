"""Cross-Bi-Encoder (CBE): one cross-attention pass over both sentences, two MEAN poolings, cosine.

Thesis 2.4.2.2, 4.1.2 ("Cross-Bi-Encoder") and 4.1.3: the pair is fed as ``[CLS] s1 [SEP] [CLS] s2 [SEP]`` (note the
second CLS), every token attends to both sentences, and "MEAN pooling from the first [CLS] token to the first [SEP]
token, and from the second [CLS] token to the second [SEP] token" gives u and v; the score is cos(u, v) in [-1, 1].
Training is the Bi-Encoder's: MSE between cos(u, v) and the gold score in [0, 1] (SBERT CosineSimilarityLoss), with
the shared loop of thesis 5.1 (AdamW 2e-5, 10% linear warm-up then decay, per-epoch dev Spearman, best epoch kept).

Choices (documented here and in docs/fidelity.md):
- Segment pooling includes both boundary tokens ("from the first [CLS] to the first [SEP]"), which is exactly what the
  Bi-Encoder's MEAN pooling covers for a single sentence ``[CLS] s [SEP]``; the thesis motivates the CBE as mimicking
  that pooling. ``segment_pooling=content`` pools only the sentence's own tokens instead.
- The input ids are built here from each sentence's own token ids (``add_special_tokens=False``), so the segment
  boundaries are exact. BERT-style tokenizers use their ``cls``/``sep`` tokens; RoBERTa-style ones their own
  equivalents, which Hugging Face also calls cls/sep: ``<s> s1 </s> <s> s2 </s>`` (not RoBERTa's native pair format
  ``<s> s1 </s></s> s2 </s>``, which has no second start token). Tokenizers without cls/sep fall back to bos/eos.
- Token types: 0 for segment 1 and 1 for segment 2 when the backbone has at least two type embeddings (BERT), as in
  BERT's own pair encoding; otherwise all 0 (RoBERTa has one type embedding). Position ids run over the whole pair.
- Sequence length: each sentence gets the profile's ``max_seq_length`` (with its two special tokens), as in the
  Bi-Encoder; if the pair exceeds the backbone's position table, the longer sentence is cut first.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from safetensors.torch import load_model, save_model
from torch import nn

from harness import SCORED_PAIRS, HarnessError, ModelPlugin, Option, hookimpl
from harness.encoding import load_tokenizer, load_transformer, mean_pool
from harness.errors import invalid_choice
from harness.training import TrainReport, fit_scored_pairs
from harness.plugins.cross_encoder import distinct_pairs, pair_sequence_limits, score_in_length_sorted_batches

SEGMENT_POOLING = ("boundaries", "content")
PADDING, FIRST, SECOND = 0, 1, 2  # values of the per-token segment label


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

    def __post_init__(self) -> None:
        tokenizer = self.tokenizer
        self.start_id = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
        self.end_id = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
        if self.start_id is None or self.end_id is None:
            raise HarnessError(
                "model 'cbe' needs a tokenizer with a start token (cls or bos) and a separator (sep or eos); "
                f"{type(tokenizer).__name__} has neither. Choose a BERT- or RoBERTa-style --backbone."
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
        ids_of = self.sentence_ids([*first, *second])
        rows = []
        for text_a, text_b in zip(first, second):
            ids_a, ids_b = truncate_longest_first(ids_of[text_a], ids_of[text_b], self.pair_limit - 4)
            segment_a = [self.start_id, *ids_a, self.end_id]
            segment_b = [self.start_id, *ids_b, self.end_id]
            rows.append(
                {
                    "input_ids": segment_a + segment_b,
                    "segments": [FIRST] * len(segment_a) + [SECOND] * len(segment_b),
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
        batch = {"input_ids": input_ids, "attention_mask": (segments != PADDING).long(), "segments": segments}
        if self.use_token_types:
            batch["token_type_ids"] = (segments == SECOND).long()
        return batch


def segment_masks(segments: torch.Tensor, segment_pooling: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Pooling masks of segment 1 and segment 2 ([b, L], 1 where a token is pooled)."""
    first = segments == FIRST
    second = segments == SECOND
    if segment_pooling == "content":
        # Drop each segment's first and last position: its start and end tokens.
        positions = torch.arange(segments.shape[1], device=segments.device).expand_as(segments)
        for mask in (first, second):
            start = torch.where(mask, positions, segments.shape[1]).min(dim=1, keepdim=True).values
            end = torch.where(mask, positions, -1).max(dim=1, keepdim=True).values
            mask &= (positions != start) & (positions != end)
    elif segment_pooling != "boundaries":
        raise invalid_choice("option 'segment_pooling' of model 'cbe'", segment_pooling, SEGMENT_POOLING)
    return first.long(), second.long()


class CrossBiEncoderNetwork(nn.Module):
    def __init__(self, transformer: nn.Module, segment_pooling: str):
        super().__init__()
        if segment_pooling not in SEGMENT_POOLING:
            raise invalid_choice("option 'segment_pooling' of model 'cbe'", segment_pooling, SEGMENT_POOLING)
        self.transformer = transformer
        self.segment_pooling = segment_pooling

    def embed_pair(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = {key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in batch}
        hidden = self.transformer(**inputs).last_hidden_state
        first_mask, second_mask = segment_masks(batch["segments"], self.segment_pooling)
        return mean_pool(hidden, first_mask), mean_pool(hidden, second_mask)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        first, second = self.embed_pair(batch)
        return torch.cosine_similarity(first.float(), second.float(), dim=-1)


class CosineRegression(nn.Module):
    """MSE between the pair's cosine and the gold score (the Bi-Encoder's objective)."""

    def __init__(self, network: CrossBiEncoderNetwork):
        super().__init__()
        self.network = network

    def forward(self, batch: dict[str, torch.Tensor], scores: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(self.network(batch), scores.float())


class CrossBiEncoder:
    """A PairScorer whose score is a cosine in [-1, 1]."""

    def __init__(
        self,
        network: CrossBiEncoderNetwork,
        inputs: PairInputBuilder,
        device: str,
        batch_size: int,
        progress: bool,
        learning_rate: float,
    ):
        self.network = network.to(device)
        self.network.eval()
        self.inputs = inputs
        self.device = device
        self.batch_size = batch_size
        self.progress = progress
        self.learning_rate = learning_rate

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        pairs, rows = distinct_pairs(first, second)
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        features = self.inputs.features([a for a, _ in pairs], [b for _, b in pairs])
        was_training = self.network.training
        self.network.eval()
        try:
            scores = score_in_length_sorted_batches(
                features, self.inputs.collate, self.network, self.device, self.batch_size, self.progress,
                "scoring pairs (cbe)",
            )
        finally:
            self.network.train(was_training)
        return scores[rows]

    def fit(self, splits, ctx) -> TrainReport:
        train = splits.train

        def collate(rows):
            first, second, scores = zip(*rows)
            return {"batch": self.inputs.collate(self.inputs.features(first, second)), "scores": torch.tensor(scores)}

        return fit_scored_pairs(
            self, CosineRegression(self.network), collate, train, splits.dev, ctx, self.learning_rate, "training cbe"
        )

    def save(self, directory: Path) -> None:
        save_model(self.network, str(Path(directory) / "model.safetensors"))
        (Path(directory) / "config.json").write_text(
            json.dumps(
                {
                    "segment_pooling": self.network.segment_pooling,
                    "sentence_limit": self.inputs.sentence_limit,
                    "pair_limit": self.inputs.pair_limit,
                    "token_types": self.inputs.use_token_types,
                }
            )
        )

    def load(self, directory: Path) -> None:
        load_model(self.network, str(Path(directory) / "model.safetensors"), device=str(self.device))
        self.network.eval()


def build(ctx) -> CrossBiEncoder:
    tokenizer = load_tokenizer(ctx.backbone)
    transformer = load_transformer(ctx.backbone)
    config = transformer.config
    sentence_limit, pair_limit = pair_sequence_limits(ctx.backbone, tokenizer, config, ctx.profile.max_seq_length)
    inputs = PairInputBuilder(tokenizer, sentence_limit, pair_limit, (getattr(config, "type_vocab_size", 0) or 0) >= 2)
    network = CrossBiEncoderNetwork(transformer, ctx.options["segment_pooling"])
    if ctx.options.get("freeze_embeddings"):
        from harness.plugins.domain_mlm import freeze_embedding_layer  # here: domain_mlm imports this module

        freeze_embedding_layer(transformer)
    return CrossBiEncoder(network, inputs, ctx.device, ctx.profile.eval_batch_size, ctx.progress, ctx.options["lr"])


@hookimpl
def register_models(register):
    register(
        ModelPlugin(
            name="cbe",
            aliases=("cross-bi-encoder",),
            description="Cross-Bi-Encoder: [CLS] s1 [SEP] [CLS] s2 [SEP], two MEAN poolings, cosine; a pair scorer",
            factory=build,
            capabilities=("pair_scorer", "trainable"),
            options={
                "segment_pooling": Option(
                    "boundaries", "pool each segment from its CLS to its SEP (thesis) or only its own tokens",
                    choices=SEGMENT_POOLING,
                ),
                "lr": Option(2e-5, "AdamW learning rate (thesis 5.1)", type=float),
                "freeze_embeddings": Option(
                    False, "freeze the embedding layer during training (Augmented SBERT after domain MLM, thesis "
                    "4.3.1)", type=bool,
                ),
            },
            training_kinds=(SCORED_PAIRS,),
            requires_training=True,
            default_train_on="stsb",
            reference="thesis 2.4.2.2, 4.1.2, 4.1.3, tables 6.3-6.8",
        )
    )
