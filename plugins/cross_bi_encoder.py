"""Cross-Bi-Encoder (CBE): one cross-attention pass over both sentences, two MEAN poolings, cosine; the model ``cbe``.

Thesis 2.4.2.2, 4.1.2 ("Cross-Bi-Encoder") and 4.1.3: the pair is fed as ``[CLS] s1 [SEP] [CLS] s2 [SEP]``, each
sentence's segment is MEAN-pooled and the score is cos(u, v) in [-1, 1]; training is the Bi-Encoder's (MSE on the
cosine, shared loop of thesis 5.1). Segment pooling, pair orders, lengths, RoBERTa's input and every deviation:
docs/methods/cbe.md, section "Cross-Bi-Encoder" and its ``cbe`` table rows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import nn

from harness import SCORED_PAIRS, ModelPlugin, Option, hookimpl, invalid_choice
from harness.blocks import (
    FIRST_SEGMENT,
    PAIR_ORDERS,
    SCORED_PAIR_BUDGET_KEYS,
    SECOND_SEGMENT,
    PairInputBuilder,
    TrainablePairScorer,
    freeze_embedding_layer,
    load_tokenizer,
    load_transformer,
    mean_pool,
    sequence_limits,
)

logger = logging.getLogger(__name__)

SEGMENT_POOLING = ("boundaries", "content")
# FIRST and SECOND, the old names of FIRST_SEGMENT and SECOND_SEGMENT, keep working until harness 0.4 (CHANGELOG.md,
# 0.3.0, "Deprecated").
FIRST, SECOND = FIRST_SEGMENT, SECOND_SEGMENT
__all__ = ["CrossBiEncoder", "CrossBiEncoderNetwork", "FIRST", "SECOND", "SEGMENT_POOLING", "segment_masks"]


def segment_masks(segments: torch.Tensor, segment_pooling: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Pooling masks of segment 1 and segment 2 ([b, L], 1 where a token is pooled)."""
    first = segments == FIRST_SEGMENT
    second = segments == SECOND_SEGMENT
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
    """Transformer over the two-segment pair, MEAN pooling per segment; ``forward`` is cos(u, v)."""

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


class CrossBiEncoder(TrainablePairScorer):
    """A PairScorer whose score is a cosine in [-1, 1]; trained with MSE between the pair's cosine and the gold score
    (the Bi-Encoder's objective)."""

    name = "cbe"

    def __init__(
        self,
        network: CrossBiEncoderNetwork,
        inputs: PairInputBuilder,
        device: str,
        batch_size: int,
        progress: bool,
        learning_rate: float,
        pair_orders: str = "both",
    ):
        super().__init__(network, device, batch_size, progress, learning_rate, pair_orders)
        self.inputs = inputs

    def pair_features(self, first: Sequence[str], second: Sequence[str]) -> list[dict]:
        return self.inputs.features(first, second)

    def collate_features(self, features: list[dict]) -> dict[str, torch.Tensor]:
        return self.inputs.collate(features)

    def training_batch(self, first: Sequence[str], second: Sequence[str]) -> dict[str, torch.Tensor]:
        return self.inputs.collate(self.inputs.features(first, second))

    # -- checkpoint: the network's weights and its settings (harness.CheckpointedModule) -------------------------
    def checkpoint_config(self) -> dict:
        return {
            "segment_pooling": self.network.segment_pooling,
            "sentence_limit": self.inputs.sentence_limit,
            "pair_limit": self.inputs.pair_limit,
            "token_types": self.inputs.use_token_types,
            "pair_orders": self.pair_orders,
        }


def build(ctx) -> CrossBiEncoder:
    tokenizer = load_tokenizer(ctx.backbone)
    transformer = load_transformer(ctx.backbone)
    config = transformer.config
    inputs = PairInputBuilder.for_backbone(
        tokenizer, config, sequence_limits(ctx.backbone, tokenizer, config, ctx.profile.max_seq_length)
    )
    network = CrossBiEncoderNetwork(transformer, ctx.options["segment_pooling"])
    if ctx.options.get("freeze_embeddings"):
        freeze_embedding_layer(transformer)
    return CrossBiEncoder(
        network, inputs, ctx.device, ctx.eval_batch_size, ctx.progress, ctx.options["lr"], ctx.options["pair_orders"]
    )


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
                    "boundaries",
                    "pool each segment from its CLS to its SEP (thesis) or only its own tokens",
                    choices=SEGMENT_POOLING,
                ),
                "lr": Option(2e-5, "AdamW learning rate (thesis 5.1)", type=float, bounds="(0, inf)"),
                "freeze_embeddings": Option(
                    False,
                    "freeze the embedding layer during training (Augmented SBERT after domain MLM, thesis 4.3.1)",
                    type=bool,
                ),
                "pair_orders": Option(
                    "both", "train on (a, b) and (b, a) (thesis code) or on the given order", choices=PAIR_ORDERS
                ),
            },
            training_kinds=(SCORED_PAIRS,),
            requires_training=True,
            model_class=CrossBiEncoder,
            # quick: two epochs over both pair orders of the whole split (STS-B: 1438 steps, dev picks the epoch);
            # its two-segment pooling starts far from the backbone's single-sentence embeddings, and one epoch
            # (81.79 on STS-B test) stays below the untrained be (82.03) (docs/guide/running.md#budgets).
            budgets={"quick": {"max_train_examples": None, "max_steps": None, "epochs": 2}},
            budget_keys=SCORED_PAIR_BUDGET_KEYS,  # the student / model trains through fit_scored_pairs
            reference="thesis 2.4.2.2, 4.1.2, 4.1.3, tables 6.3-6.8",
        )
    )
