"""Cross-Encoder (CE): both sentences in one input, full cross-attention, a regression head on the CLS state; the
model ``ce``.

Thesis 4.1.2 ("Cross-Encoder"), 5.2.1 and table 6.2. The input format, the activation (option ``activation``), the
two heads (option ``head``: the thesis text's ``linear`` by default, the thesis code's ``sentence-transformers``),
the loss, pair orders, export and every deviation: docs/methods/ce.md, section "Cross-Encoder" and its ``ce`` table
rows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from harness import SCORED_PAIRS, InvalidOptionError, ModelPlugin, Option, hookimpl, invalid_choice
from harness.blocks import (
    PAIR_ORDERS,
    REGRESSION_LOSSES,
    SCORED_PAIR_BUDGET_KEYS,
    ScoreRegression,
    TrainablePairScorer,
    freeze_embedding_layer,
    load_tokenizer,
    load_transformer,
    sequence_limits,
)

logger = logging.getLogger(__name__)

ACTIVATIONS = ("sigmoid", "tanh", "none")
LOSSES = ("auto", *REGRESSION_LOSSES)  # the head's own; mse on the activated score; bce with logits on the logit
HEADS = ("linear", "sentence-transformers")
HEAD_LOSS = {"linear": "mse", "sentence-transformers": "bce"}
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def resolved_loss(head: str, loss: str) -> str:
    return HEAD_LOSS[head] if loss == "auto" else loss


class CrossEncoderNetwork(nn.Module):
    """Transformer + ``Dropout -> Linear(d, 1)`` on the first token's last hidden state (``head=linear``), with
    Hugging Face's pooler ``Linear(d, d) -> tanh`` in front for ``head=sentence-transformers``."""

    def __init__(self, transformer: nn.Module, activation: str, head: str = "linear"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise invalid_choice("option 'activation' of model 'ce'", activation, ACTIVATIONS)
        if head not in HEADS:
            raise invalid_choice("option 'head' of model 'ce'", head, HEADS)
        config = transformer.config
        std = getattr(config, "initializer_range", 0.02)
        self.transformer = transformer
        self.activation = activation
        self.head_kind = head
        self.pooler: nn.Module | None = None
        if head == "sentence-transformers":
            dense = nn.Linear(config.hidden_size, config.hidden_size)
            pretrained = getattr(getattr(transformer, "pooler", None), "dense", None)
            if isinstance(pretrained, nn.Linear):  # BERT's pretrained pooler, as BertForSequenceClassification
                dense.load_state_dict(pretrained.state_dict())
            else:
                nn.init.normal_(dense.weight, std=std)
                nn.init.zeros_(dense.bias)
            self.pooler = nn.Sequential(dense, nn.Tanh())
        self.dropout = nn.Dropout(getattr(config, "hidden_dropout_prob", 0.1))
        self.head = nn.Linear(config.hidden_size, 1)
        nn.init.normal_(self.head.weight, std=std)
        nn.init.zeros_(self.head.bias)

    def logits(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {key: value for key, value in features.items() if key in MODEL_INPUTS}
        cls_state = self.transformer(**inputs).last_hidden_state[:, 0]
        if self.pooler is not None:
            cls_state = self.pooler(cls_state)
        return self.head(self.dropout(cls_state)).squeeze(-1).float()

    def activate(self, logits: torch.Tensor) -> torch.Tensor:
        if self.activation == "sigmoid":
            return torch.sigmoid(logits)
        if self.activation == "tanh":
            return torch.tanh(logits)
        return logits

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.activate(self.logits(features))


class CrossEncoder(TrainablePairScorer):
    """A PairScorer: ``score(first, second)`` gives the activated head output for each pair; trained by regression
    on ScoredPairs (MSE on the activated score, or BCE on the logit)."""

    name = "ce"

    def __init__(
        self,
        network: CrossEncoderNetwork,
        tokenizer,
        max_length: int,
        device: str,
        batch_size: int,
        progress: bool,
        learning_rate: float,
        loss: str,
        pair_orders: str = "both",
    ):
        if loss not in LOSSES:
            raise invalid_choice("option 'loss' of model 'ce'", loss, LOSSES)
        loss = resolved_loss(network.head_kind, loss)
        if loss == "bce" and network.activation != "sigmoid" and network.head_kind == "linear":
            raise InvalidOptionError(
                f"model 'ce': loss=bce with head=linear needs activation=sigmoid (got activation="
                f"{network.activation}); use loss=mse with tanh or none, or head=sentence-transformers."
            )
        super().__init__(network, device, batch_size, progress, learning_rate, pair_orders)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.loss = loss

    def tokenize_pairs(self, first: Sequence[str], second: Sequence[str], padding: bool) -> dict:
        return self.tokenizer(
            list(first),
            list(second),
            truncation="longest_first",
            max_length=self.max_length,
            padding=padding,
            return_tensors="pt" if padding else None,
        )

    def pair_features(self, first: Sequence[str], second: Sequence[str]) -> list[dict]:
        encoded = self.tokenize_pairs(first, second, padding=False)
        return [{key: encoded[key][i] for key in encoded} for i in range(len(first))]

    def collate_features(self, features: list[dict]) -> dict[str, torch.Tensor]:
        return self.tokenizer.pad(features, return_tensors="pt")

    def training_batch(self, first: Sequence[str], second: Sequence[str]) -> dict[str, torch.Tensor]:
        # A plain dict, so the training loop's to_device reaches the tensors (BatchEncoding is not a dict).
        return dict(self.tokenize_pairs(first, second, padding=True))

    def score_objective(self) -> ScoreRegression:
        return ScoreRegression(self.network, self.loss)

    # -- checkpoint: the network's weights and its settings (harness.CheckpointedModule) -------------------------
    def checkpoint_config(self) -> dict:
        return {
            "activation": self.network.activation,
            "loss": self.loss,
            "max_length": self.max_length,
            "head": self.network.head_kind,
            "pair_orders": self.pair_orders,
        }

    def export_cross_encoder(self, directory: Path) -> None:
        """``harness export``: a sentence-transformers CrossEncoder folder (Transformer -> CLS -> Linear ->
        activation) whose ``predict`` equals ``self.score`` (same weights, pair encoding and token limit)."""
        from harness import IncompatibleError
        from harness.blocks import write_cross_encoder

        network = self.network
        if network.pooler is not None:
            raise IncompatibleError(
                "harness export writes Cross-Encoders with head=linear only; this model has "
                "head=sentence-transformers (its weights stay in the store's checkpoints/ folder)."
            )
        write_cross_encoder(
            Path(directory), network.transformer, self.tokenizer, network.head, network.activation, self.max_length
        )


def build(ctx) -> CrossEncoder:
    tokenizer = load_tokenizer(ctx.backbone)
    transformer = load_transformer(ctx.backbone)
    limits = sequence_limits(ctx.backbone, tokenizer, transformer.config, ctx.profile.max_seq_length)
    network = CrossEncoderNetwork(transformer, ctx.options["activation"], ctx.options["head"])
    if ctx.options.get("freeze_embeddings"):
        freeze_embedding_layer(transformer)
    return CrossEncoder(
        network,
        tokenizer,
        limits.pair,
        ctx.device,
        ctx.eval_batch_size,
        ctx.progress,
        ctx.options["lr"],
        ctx.options["loss"],
        ctx.options["pair_orders"],
    )


@hookimpl
def register_models(register):
    register(
        ModelPlugin(
            name="ce",
            aliases=("cross-encoder",),
            description="Cross-Encoder: [CLS] s1 [SEP] s2 [SEP], CLS -> Linear -> activation; a pair scorer",
            factory=build,
            capabilities=("pair_scorer", "trainable"),
            options={
                "activation": Option("sigmoid", "head activation (thesis table 6.2)", choices=ACTIVATIONS),
                "loss": Option(
                    "auto",
                    "auto: the head's own (linear: mse, sentence-transformers: bce); mse on the "
                    "activated score; bce with logits on the raw logit",
                    choices=LOSSES,
                ),
                "head": Option(
                    "linear",
                    "linear: Dropout -> Linear on CLS (thesis text); sentence-transformers: "
                    "HF pooler dense+tanh first, BCE on the logit, activation at prediction only "
                    "(thesis code)",
                    choices=HEADS,
                ),
                "pair_orders": Option(
                    "both",
                    "train on (a, b) and (b, a) (thesis code, UKPLab examples) or on the given order",
                    choices=PAIR_ORDERS,
                ),
                "lr": Option(2e-5, "AdamW learning rate (thesis 5.1)", type=float, bounds="(0, inf)"),
                "freeze_embeddings": Option(
                    False,
                    "freeze the embedding layer during training (Augmented SBERT after domain MLM, thesis 4.3.1)",
                    type=bool,
                ),
            },
            training_kinds=(SCORED_PAIRS,),
            requires_training=True,
            model_class=CrossEncoder,
            # quick: 360 steps of batch 16 over the whole split (both orders), as many examples as one epoch of
            # STS-B, the budget sentence-transformers' CrossEncoder reaches 75.55 with here
            # (docs/guide/running.md#budgets).
            budgets={"quick": {"max_train_examples": None, "max_steps": 360, "epochs": 1}},
            budget_keys=SCORED_PAIR_BUDGET_KEYS,  # the student / model trains through fit_scored_pairs
            reference="thesis 4.1.2, 5.2.1, table 6.2; Thakur et al. 2021 (AugSBERT)",
        )
    )
