"""Sub-Sentence Encoder (SubEncoder): one contextual embedding per proposition of a sentence, the span encoder
``subencoder``.

Chen et al. 2023, "Sub-Sentence Encoder: Contrastive Learning of Propositional Semantic Representations"
(arXiv 2311.04335), sections 3.1-3.2 and appendix B; official code ``schen149/sub-sentence-encoder``. A proposition
is the masked MEAN of its sentence's last hidden states followed by an MLP (3.1, ``harness.nn.spans``); training is
a supervised contrastive loss over the batch's propositions (3.2, ``harness.nn.SupCon``).

Architecture, objective, training data, schedule and every deviation: docs/methods/subencoder.md, section "Sub-Sentence
Encoder" and its ``subencoder`` table rows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from harness import (
    PROPOSITION_PAIRS,
    IncompatibleError,
    InvalidOptionError,
    ModelPlugin,
    Option,
    hookimpl,
)
from harness.blocks import (
    MODEL_INPUTS,
    NetworkModel,
    SpanBatch,
    SupCon,
    TrainReport,
    config_from_profile,
    distributed,
    encode_span_items,
    fit,
    load_tokenizer,
    load_transformer,
    normalise_spans,
    pool_spans,
    sequence_limits,
    span_batch,
    tokenise_sentences,
)

logger = logging.getLogger(__name__)

PAPER_EPOCHS = 10  # appendix B
PAPER_LR = 1e-4  # appendix B: Sentence-T5 and GTR backbones
SIMCSE_LR = 5e-5  # appendix B: SimCSE backbones


class SubSentenceNetwork(nn.Module):
    """Transformer + masked mean pooling per proposition + MLP."""

    def __init__(self, transformer: nn.Module, output_dim: int = 0):
        super().__init__()
        hidden = int(transformer.config.hidden_size)
        self.transformer = transformer
        self.output_dim = output_dim or hidden
        self.mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, self.output_dim))

    def token_states(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        inputs = {key: value for key, value in features.items() if key in MODEL_INPUTS}
        return trimmed_states(self.transformer, inputs)

    def forward(self, batch: SpanBatch) -> torch.Tensor:
        """``[n_propositions, output_dim]``: one forward pass over the batch's sentences, then pooling and MLP."""
        return self.mlp(pool_spans(self.token_states(batch.features), batch.masks, batch.rows))


def trimmed_states(transformer: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``last_hidden_state`` of a padded batch ``[b, L, d]``, computed in two groups: the rows whose tokens end
    within half the width, and the others, each cut to its own longest row. A training batch pairs long sentences
    with short proposition texts; this keeps the short rows from paying the long width. Padding is masked out of
    attention, so the states of real tokens are those of one call (to float rounding); cut positions are zeros
    (never in a proposition mask)."""
    mask = inputs["attention_mask"]
    width = mask.shape[1]
    ends = (mask.ne(0) * torch.arange(1, width + 1, device=mask.device)).amax(dim=1)  # last real token + 1
    short = ends <= width // 2
    if bool(short.all()) or not bool(short.any()):
        return transformer(**inputs).last_hidden_state
    states = None
    for rows in (short.nonzero().squeeze(1), (~short).nonzero().squeeze(1)):
        cut = int(ends[rows].max())
        part = transformer(**{key: value[rows, :cut] for key, value in inputs.items()}).last_hidden_state
        if states is None:
            states = part.new_zeros(mask.shape[0], width, part.shape[-1])
        states = states.index_put((rows,), torch.nn.functional.pad(part, (0, 0, 0, width - cut)))
    return states


class SupConObjective(nn.Module):
    """The SupCon loss of the propositions of a collated batch (for :func:`harness.training.fit`)."""

    def __init__(self, network: SubSentenceNetwork, temperature: float):
        super().__init__()
        self.network = network
        self.loss = SupCon(temperature)

    def forward(self, features: dict, masks: torch.Tensor, rows: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(self.network(SpanBatch(features, masks, rows)), labels)


def positive_groups(node_count: int, links: Sequence[tuple[int, int]]) -> list[int]:
    """A label per node such that linked nodes (transitively) share one: union-find over ``links``."""
    parent = list(range(node_count))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for first, second in links:
        parent[root(first)] = root(second)
    return [root(node) for node in range(node_count)]


class PropositionPairCollator:
    """Turns a list of PropositionPair into the SupCon batch: distinct sentences, distinct propositions (by
    sentence and merged spans), and their group labels."""

    def __init__(self, tokenizer, max_length: int):
        self.tokenizer = tokenizer
        self.max_length = max_length

    def __call__(self, pairs: Sequence) -> dict:
        sentence_of: dict[str, int] = {}
        node_of: dict[tuple[str, tuple], int] = {}
        propositions: list[tuple[int, list]] = []
        links: list[tuple[int, int]] = []
        for pair_index, pair in enumerate(pairs):
            nodes = []
            for text, spans_list in ((pair.first, pair.first_propositions), (pair.second, pair.second_propositions)):
                position = sentence_of.setdefault(text, len(sentence_of))
                side = []
                for spans in spans_list:
                    merged = normalise_spans(text, spans, f"training pair {pair_index}")
                    key = (text, tuple(merged))
                    if key not in node_of:
                        node_of[key] = len(propositions)
                        propositions.append((position, merged))
                    side.append(node_of[key])
                nodes.append(side)
            links.extend((nodes[0][i], nodes[1][j]) for i, j in pair.positives)
        sentences = tokenise_sentences(self.tokenizer, list(sentence_of), self.max_length)
        batch = span_batch(self.tokenizer, sentences, propositions)
        labels = torch.tensor(positive_groups(len(propositions), links), dtype=torch.long)
        return {"features": batch.features, "masks": batch.masks, "rows": batch.rows, "labels": labels}


def learning_rate(option_value: float, backbone: str) -> float:
    """The ``lr`` option, or (0) the paper's: 5e-5 for SimCSE backbones, 1e-4 otherwise."""
    if option_value < 0:
        raise InvalidOptionError(
            f"option 'lr' of model 'subencoder' is {option_value}; give a positive rate or 0 "
            "for the paper's (1e-4, 5e-5 for SimCSE backbones)."
        )
    if option_value:
        return option_value
    return SIMCSE_LR if "simcse" in backbone.lower() else PAPER_LR


class SubEncoder(NetworkModel):
    """A span encoder (and, through the core's adapter, a sentence embedder); trainable on proposition pairs. Under
    ``--runtime onnx`` the transformer runs in ONNX Runtime, the proposition pooling and MLP in torch."""

    def __init__(
        self,
        network: SubSentenceNetwork,
        tokenizer,
        max_length: int,
        device: str,
        batch_size: int,
        progress: bool,
        backbone: str,
    ):
        super().__init__(network, device, batch_size, progress)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.backbone = backbone

    def encode_spans(self, items: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> np.ndarray:
        with self.inference():
            vectors = encode_span_items(
                items,
                self.tokenizer,
                self.network.token_states,
                self.device,
                self.batch_size,
                self.max_length,
                head=self.network.mlp,
                progress=self.progress,
            )
        return vectors.reshape(len(items), self.network.output_dim)

    def fit(self, splits, ctx) -> TrainReport:
        if distributed.active():
            raise IncompatibleError(
                "subencoder trains in one process: its SupCon labels group the propositions of "
                "a whole batch by sentence, which sharding the batch over processes would split; "
                "run it without torchrun (one GPU)."
            )
        options = ctx.options
        rate = learning_rate(options["lr"], self.backbone)
        # The options epochs / batch_size, where set, are this spec's budget (validate refuses a --set of the same
        # key); otherwise the requested budget in ctx.profile (10 paper epochs: subencoder_budget).
        config = config_from_profile(
            ctx.profile,
            ctx.seed,
            ctx.device,
            ctx.progress,
            learning_rate=rate,
            epochs=options["epochs"] or None,
            batch_size=options["batch_size"] or None,
            description="training subencoder",
        )
        counts = splits.train.counts() if hasattr(splits.train, "counts") else {"pairs": len(splits.train)}
        ctx.logger.info(
            "subencoder: %s, lr %g, %d epochs, batch %d pairs, temperature %g",
            counts,
            rate,
            config.epochs,
            config.batch_size,
            options["temperature"],
        )
        objective = SupConObjective(self.network, options["temperature"])
        pairs = list(splits.train.pairs)
        # length-grouped batches (harness.training): the longer text sets a pair's padded width; examples of one
        # sentence (segmentation pairs) share it and then a batch, where the collator reads the sentence once
        return fit(
            objective,
            pairs,
            PropositionPairCollator(self.tokenizer, self.max_length),
            config,
            lengths=[max(len(pair.first), len(pair.second)) for pair in pairs],
        )

    # -- checkpoint: the network's weights and its output size and token limit (harness.CheckpointedModule) ------
    def checkpoint_config(self) -> dict:
        return {"output_dim": self.network.output_dim, "max_length": self.max_length}


def build(ctx) -> SubEncoder:
    options = ctx.options
    if options["output_dim"] < 0:
        raise InvalidOptionError(
            "option 'output_dim' of model 'subencoder' must be 0 (the backbone's width) or a "
            f"positive size such as 64; got {options['output_dim']}."
        )
    for key in ("epochs", "batch_size"):
        if options[key] < 0:
            raise InvalidOptionError(
                f"option {key!r} of model 'subencoder' must be 0 (the profile's) or positive; got {options[key]}."
            )
    if options["temperature"] <= 0:
        raise InvalidOptionError(
            f"option 'temperature' of model 'subencoder' must be positive (the paper: 0.01); "
            f"got {options['temperature']}."
        )
    tokenizer = load_tokenizer(ctx.backbone)
    transformer = load_transformer(ctx.backbone)
    max_length = sequence_limits(ctx.backbone, tokenizer, transformer.config, ctx.profile.max_seq_length).sentence
    network = SubSentenceNetwork(transformer, options["output_dim"])
    return SubEncoder(network, tokenizer, max_length, ctx.device, ctx.eval_batch_size, ctx.progress, ctx.backbone)


def subencoder_budget(options: Mapping[str, Any], profile_name: str) -> dict[str, Any]:
    """The method's budget (``ModelPlugin.budget_for``): the paper's 10 epochs under the paper profile, and the
    options ``epochs`` / ``batch_size`` where set (a budget key of the same name is then refused: validate)."""
    budget: dict[str, Any] = {"epochs": PAPER_EPOCHS} if profile_name == "paper" else {}
    if options["epochs"]:
        budget["epochs"] = options["epochs"]
    if options["batch_size"]:
        budget["batch_size"] = options["batch_size"]
    return budget


def validate(spec: Any, registry: Any) -> None:
    """The options epochs / batch_size and a budget key of the same name (matrix entry, --set) would compete."""
    both = [key for key in ("epochs", "batch_size") if spec.options[key] and key in spec.budget_overrides]
    if both:
        raise InvalidOptionError(
            f"model {spec.label!r}: {', '.join(both)} given both as an option and as a budget "
            "(--set or the matrix entry); give each once."
        )


@hookimpl
def register_models(register):
    register(
        ModelPlugin(
            name="subencoder",
            aliases=("sub-sentence-encoder",),
            description="Sub-Sentence Encoder: one forward pass per sentence, masked mean pooling per proposition, "
            "MLP; SupCon on proposition pairs",
            factory=build,
            capabilities=("span_encoder", "trainable"),
            options={
                "output_dim": Option(
                    0,
                    "output size of the MLP; 0 = the backbone's hidden size, 64 = the paper's bottleneck",
                    type=int,
                    bounds="[0, inf)",
                ),
                "temperature": Option(
                    0.01, "SupCon temperature (paper 3.2 / appendix B)", type=float, bounds="(0, inf)"
                ),
                "lr": Option(
                    0.0,
                    "AdamW learning rate; 0 = the paper's: 1e-4, or 5e-5 for SimCSE backbones",
                    type=float,
                    bounds="[0, inf)",
                ),
                "epochs": Option(
                    0, "training epochs; 0 = the profile's (10 under the paper profile)", type=int, bounds="[0, inf)"
                ),
                "batch_size": Option(
                    0, "sentence pairs per batch; 0 = the profile's batch size", type=int, bounds="[0, inf)"
                ),
            },
            training_kinds=(PROPOSITION_PAIRS,),
            requires_training=True,
            default_train_on="propsegment-facts",
            reference="Chen et al. 2023, Sub-Sentence Encoder (arXiv 2311.04335), 3.1-3.2, appendix B",
            model_class=SubEncoder,
            budget_for=subencoder_budget,
            validate=validate,
        )
    )
