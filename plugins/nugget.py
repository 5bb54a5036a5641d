"""Nugget: a text as a few selected token vectors (Qin & Van Durme 2023, "Nugget: Neural Agglomerative Embeddings of
Text", sections 3-4 and 6.1; table 2). A scorer picks k = ceil(r n) tokens whose last-layer states are the text's
nuggets; an autoencoding decoder that cross-attends only to them trains the scorer through the score residual (eq.
5); texts are compared by MaxSim (eq. 10, ``harness.evaluation.maxsim``).

Encoder, training, inference, the training setup, bad input and every deviation: docs/methods/nugget.md, section
"Nugget" and its ``nugget`` table rows. Under ``harness run --runtime onnx`` the encoder's inference up to the last
hidden states, the scores and the selection (the scorer hook and the type embeddings included) is one exported ONNX
graph (:meth:`NuggetEncoder.token_states`, ``harness.blocks.onnx_function``); gathering the nuggets and W^V stay
torch. Deviation there: float rounding only (docs/core/onnx-runtime.md, "ONNX Runtime").
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from harness import (
    MULTI_VECTOR_EMBEDDER,
    TRAINABLE,
    UNLABELED_SENTENCES,
    CheckpointedModule,
    HarnessError,
    IncompatibleError,
    InvalidOptionError,
    ModelPlugin,
    Option,
    VectorSets,
    hookimpl,
)
from harness.blocks import (
    CLEAN,
    DELETED,
    IGNORED_LABEL,
    OnnxFunction,
    RuntimeSwitch,
    SentenceEncoder,
    TrainingSetup,
    TransformerDecoder,
    UnlabeledCollator,
    WordDeletion,
    config_from_profile,
    curve_summary,
    fit,
    language_model_head,
    length_sorted_batches,
    model_input_names,
    onnx_function,
    progress_bar,
    require_unlabeled_source,
    scored_token_loss,
    setup_budget,
    transformer_inputs,
    usable_sentences,
)

logger = logging.getLogger(__name__)

NAME = "nugget"
PAPER_RATIOS = (0.05, 0.1, 0.15, 0.25)  # table 2
RESIDUALS = ("scores", "straight-through")

# Appendix B.1: Adam, lr 5e-5, trained to convergence; constant rate, no warm-up, no weight decay.
SETUP = TrainingSetup(
    "nugget-b.1",
    schedule="constant",
    warmup_ratio=0.0,
    weight_decay=0.0,
    budgets={"quick": {"max_steps": 40}, "paper": {"batch_size": 64}},
)


# -- selection -----------------------------------------------------------------------------------------------------
def nugget_counts(lengths: torch.Tensor, ratio: float) -> torch.Tensor:
    """k = ceil(ratio * n) per text, within [1, n]; ``lengths`` n counts real tokens (special ones included)."""
    if not 0.0 < ratio <= 1.0:
        raise InvalidOptionError(f"nugget ratio must lie in (0, 1], e.g. {PAPER_RATIOS}; got {ratio!r}.")
    if len(lengths) and int(lengths.min()) < 1:
        raise ValueError(
            "a text has no token at all, so it has no nugget; its tokenizer adds no special tokens and "
            "the text is empty"
        )
    # The tiny offset keeps float error from rounding an exact product up (0.1 * 30 = 3.0000000000000004 -> 3).
    counts = torch.ceil(lengths.double() * ratio - 1e-9).long()
    return torch.minimum(counts.clamp(min=1), lengths.long())


@dataclass
class Selection:
    positions: torch.Tensor  # [b, K] token positions of the nuggets, in text order (padding rows: 0)
    mask: torch.Tensor  # [b, K] True on real nuggets
    selected: torch.Tensor  # [b, L] True on the tokens chosen as nuggets
    counts: torch.Tensor  # [b] k of each text


def selected_tokens(scores: torch.Tensor, attention_mask: torch.Tensor, ratio: float) -> torch.Tensor:
    """``[b, L]`` True on the top k = ceil(ratio * n) tokens of each text by ``scores`` ``[b, L]``, padding never
    chosen. A token's rank is the number of real tokens of its text that score higher, or the same at an earlier
    position (a tie goes to the earlier token); the k of rank below k are chosen. Tensor operations only, no size
    read from the data into Python, so the ONNX graph traced through the scorer hook selects right for any batch."""
    real = attention_mask.bool()
    counts = nugget_counts(real.sum(dim=1), ratio)
    scores = scores.detach()
    position = torch.ones_like(attention_mask, dtype=torch.long).cumsum(dim=1)  # [b, L], the sequence axis traced
    # [b, i, j]: token j ranks before token i
    before = (scores[:, None, :] > scores[:, :, None]) | (
        (scores[:, None, :] == scores[:, :, None]) & (position[:, None, :] < position[:, :, None])
    )
    rank = (before & real[:, None, :]).to(torch.int32).sum(dim=2)
    return real & (rank < counts[:, None])


def selection_of(selected: torch.Tensor) -> Selection:
    """The nuggets ``selected`` ``[b, L]`` marks, in text order, as a :class:`Selection` of width K = max k."""
    counts = selected.sum(dim=1)
    widest = int(counts.max()) if len(counts) else 0
    length = selected.shape[1]
    # Text order: chosen positions ascending, the other slots (position past the end) last.
    ordered = torch.where(selected, torch.arange(length, device=selected.device), length).sort(dim=1).values
    mask = ordered[:, :widest] < length
    return Selection(ordered[:, :widest].masked_fill(~mask, 0), mask, selected, counts)


def select_nuggets(scores: torch.Tensor, attention_mask: torch.Tensor, ratio: float) -> Selection:
    """The top k = ceil(ratio * n) tokens of each text by ``scores`` ``[b, L]``, padding never chosen
    (:func:`selected_tokens`), in text order."""
    return selection_of(selected_tokens(scores, attention_mask, ratio))


@dataclass
class Nuggets:
    vectors: torch.Tensor  # [b, K, d] projected nugget vectors (W^V of the last layer's states)
    mask: torch.Tensor  # [b, K]
    scores: torch.Tensor  # [b, K] the scorer's value of each nugget (with gradient)
    selection: Selection


# What the ONNX graph of NuggetEncoder.token_states returns, with its dynamic axes; GRAPH_VERSION is part of the
# export's cache key: change it when token_states or the selection computes something else.
STATE_OUTPUTS = {name: {0: "batch", 1: "sequence"} for name in ("last_hidden_state", "scores", "selected")}
GRAPH_VERSION = "nugget-token-states-1"


@dataclass
class _ScorerCall:
    """What one :meth:`NuggetEncoder.token_states` call hands its scorer hook, and what the hook found."""

    attention_mask: torch.Tensor
    scorer: nn.Module
    found: tuple[torch.Tensor, torch.Tensor] | None = None


_CURRENT_CALL: contextvars.ContextVar[_ScorerCall | None] = contextvars.ContextVar("nugget_call", default=None)


class NuggetEncoder(nn.Module):
    """The transformer with the scorer at layer ``layer``, W^V and (``feedback``) the type embeddings."""

    def __init__(self, encoder: SentenceEncoder, ratio: float, layer: int, feedback: bool):
        super().__init__()
        self.transformer = encoder.transformer
        self.tokenizer = encoder.tokenizer
        self.max_length = encoder.max_length
        self.ratio = float(ratio)
        self.layer = int(layer)
        layers = getattr(getattr(self.transformer, "encoder", None), "layer", None)
        if not isinstance(layers, nn.ModuleList):
            raise IncompatibleError(
                "nugget needs a BERT- or RoBERTa-style --backbone (transformer.encoder.layer); "
                f"{type(self.transformer).__name__} has no such layer list."
            )
        if not 0 <= self.layer <= len(layers):
            raise InvalidOptionError(
                f"nugget option layer must be in 0..{len(layers)} for this backbone "
                f"({len(layers)} layers; 0 = the embedding layer); got {self.layer}."
            )
        width = self.transformer.config.hidden_size
        self.scorer = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 1))
        self.value = nn.Linear(width, width)  # W^V
        self.type_embeddings = nn.Embedding(2, width) if feedback else None  # 0: other token, 1: nugget
        if self.layer > 0:  # the bottom l layers (and the embeddings below them) are frozen
            for module in [self.transformer.embeddings, *layers[: self.layer]]:
                module.requires_grad_(False)
        self.frozen = [name for name, p in self.transformer.named_parameters() if not p.requires_grad]
        watched = self.transformer.embeddings if self.layer == 0 else layers[self.layer - 1]
        watched.register_forward_hook(self._score_and_inform)
        self.runtime = RuntimeSwitch()  # harness run --runtime: how encode_multi computes token_states

    def _score_and_inform(self, module: nn.Module, inputs: Any, output: Any) -> Any:
        """After layer l: score every token, select the nuggets, add the type embeddings (feedback)."""
        call = _CURRENT_CALL.get()
        assert call is not None, "NuggetEncoder.token_states passes the attention mask to the scorer hook"
        hidden = output[0] if isinstance(output, tuple) else output
        scores = call.scorer(hidden).squeeze(-1)  # [b, L]
        selected = selected_tokens(scores, call.attention_mask, self.ratio)
        call.found = (scores, selected)
        if self.type_embeddings is None:
            return None
        informed = hidden + self.type_embeddings(selected.long())
        return (informed, *output[1:]) if isinstance(output, tuple) else informed

    def token_states(self, features: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The last hidden states ``[b, L, d]``, the scores ``[b, L]`` and the selected tokens ``[b, L]``: the
        transformer with the scorer hook, what the ONNX graph computes (:data:`STATE_OUTPUTS`)."""
        inputs = transformer_inputs(features)
        # The mask (and this module's scorer: a replica's, under data parallelism) travels with the call: the hook
        # is registered once, on the original module, and runs for every copy of it, in its copy's thread.
        call = _ScorerCall(inputs["attention_mask"], self.scorer)
        token = _CURRENT_CALL.set(call)
        try:
            last = self.transformer(**inputs).last_hidden_state
        finally:
            _CURRENT_CALL.reset(token)
        assert call.found is not None, "the scorer hook did not run"
        scores, selected = call.found
        return last, scores, selected

    def nuggets(self, last: torch.Tensor, scores: torch.Tensor, selected: torch.Tensor) -> Nuggets:
        """The nuggets of :meth:`token_states`' output: the selected last states in text order, projected by W^V."""
        selection = selection_of(selected)
        index = selection.positions
        chosen = last.gather(1, index[..., None].expand(-1, -1, last.shape[-1]))
        return Nuggets(self.value(chosen), selection.mask, scores.gather(1, index), selection)

    def forward(self, features: dict[str, torch.Tensor]) -> Nuggets:
        return self.nuggets(*self.token_states(features))

    def use_runtime(self, runtime: str, cache_dir: Path | str | None = None) -> None:
        """Let :meth:`encode_multi` compute :meth:`token_states` through ``runtime`` ("torch" or "onnx": one
        exported graph, cached under ``cache_dir``); ``forward`` (training) always runs in torch."""
        self.runtime.use(runtime, cache_dir)

    def _exported(self) -> OnnxFunction:
        input_names = model_input_names(self.transformer)
        return onnx_function(
            self,
            lambda **inputs: self.token_states(inputs),
            input_names,
            STATE_OUTPUTS,
            self.runtime.cache_dir,
            determinants=(
                GRAPH_VERSION,
                self.transformer.config.to_json_string(),
                self.ratio,
                self.layer,
                self.type_embeddings is not None,
            ),
        )

    def encode_multi(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> list[np.ndarray]:
        """Each text's nuggets ``[k, d]`` (float32), each distinct text computed once, in length-sorted batches.

        For distinct texts the result is a :class:`harness.VectorSets`: the nuggets are written into one array, which
        batched MaxSim then reads without copying."""
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return []
        encoded = self.tokenizer(distinct, truncation=True, max_length=self.max_length, padding=False)
        features = [{key: encoded[key][i] for key in encoded} for i in range(len(distinct))]
        device = next(self.parameters()).device
        counts = nugget_counts(torch.tensor([len(f["input_ids"]) for f in features]), self.ratio).numpy()
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])
        stacked = np.zeros((int(counts.sum()), self.value.out_features), dtype=np.float32)
        # torch, or the ONNX graph of the current weights (exported once per checkpoint; the CPU only)
        states = (
            self.token_states if self.runtime.runtime == "torch" else self.runtime.session_for(self, self._exported).run
        )
        was_training = self.training
        self.eval()
        try:
            with (
                torch.inference_mode(),
                self.runtime.quiet(),
                progress_bar(len(distinct), "encoding nuggets", progress) as bar,
            ):
                for batch in length_sorted_batches([len(f["input_ids"]) for f in features], batch_size):
                    padded = self.tokenizer.pad([features[i] for i in batch], return_tensors="pt")
                    nuggets = self.nuggets(*states({key: value.to(device) for key, value in padded.items()}))
                    vectors = nuggets.vectors.float().cpu().numpy()
                    for row, index in enumerate(batch):
                        stacked[offsets[index] : offsets[index] + counts[index]] = vectors[row, : counts[index]]
                    bar.update(len(batch))
        finally:
            self.train(was_training)
        sets = VectorSets.from_stacked(stacked, counts)
        if len(distinct) == len(texts):
            return sets
        row_of = {text: row for row, text in enumerate(distinct)}
        return [sets[row_of[text]] for text in texts]


# -- training ------------------------------------------------------------------------------------------------------
class NuggetAutoencoder(nn.Module):
    """``forward(clean=..., [deleted=...])``: cross-entropy of the sentence decoded from its nuggets (eq. 5 bias)."""

    def __init__(self, nugget_encoder: NuggetEncoder, backbone: str, residual: str):
        super().__init__()
        if residual not in RESIDUALS:
            raise InvalidOptionError(f"nugget option residual must be one of {', '.join(RESIDUALS)}; got {residual!r}.")
        self.encoder = nugget_encoder
        self.decoder = TransformerDecoder.from_encoder(
            nugget_encoder.transformer, share="embeddings", backbone=backbone
        )
        self.head = language_model_head(self.decoder.language_model)
        config = self.decoder.language_model.config
        self.score_scale = 1.0 / math.sqrt(config.hidden_size // config.num_attention_heads)
        self.residual = residual
        self.history: list[dict[str, float]] = []

    def memory_bias(self, scores: torch.Tensor) -> torch.Tensor:
        """What is added to the cross-attention logits: s / sqrt(d) (eq. 5) or (s - sg(s)) / sqrt(d)."""
        if self.residual == "straight-through":
            scores = scores - scores.detach()
        return scores * self.score_scale

    def forward(self, **views: dict[str, torch.Tensor]) -> torch.Tensor:
        source = views.get(DELETED, views[CLEAN])
        nuggets = self.encoder(source)
        target = views[CLEAN]
        ids, mask = target["input_ids"], target["attention_mask"]
        hidden = self.decoder.hidden_states(
            nuggets.vectors,
            ids[:, :-1],
            nuggets.mask.long(),
            mask[:, :-1],
            memory_bias=self.memory_bias(nuggets.scores),
        )
        labels = ids[:, 1:].masked_fill(mask[:, 1:] == 0, IGNORED_LABEL)
        loss = scored_token_loss(self.head, hidden, labels)
        if self.training:
            self.history.append({"reconstruction": float(loss.detach())})
        return loss


# -- the model -----------------------------------------------------------------------------------------------------
class NuggetModel(CheckpointedModule):
    """Capabilities ``multi_vector_embedder`` and ``trainable``; the checkpoint is the nugget encoder
    (safetensors) with its settings (``nugget.json``); the decoder is dropped after training."""

    def __init__(self, ctx: Any):
        options = ctx.options
        encoder = SentenceEncoder.from_backbone(ctx.backbone, "cls", ctx.profile.max_seq_length)
        self.nugget_encoder = NuggetEncoder(encoder, options["ratio"], options["layer"], options["feedback"])
        self.nugget_encoder.to(ctx.device)
        self.options = dict(options)
        self.backbone = ctx.backbone
        self.device = ctx.device
        self.eval_batch_size = ctx.eval_batch_size
        self.progress = ctx.progress

    def encode_multi(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self.nugget_encoder.encode_multi(texts, self.eval_batch_size, self.progress)

    def use_runtime(self, runtime: str, cache_dir: Path | None = None) -> None:
        """``harness run --runtime``: ``encode_multi`` runs the encoder through ``runtime`` ("torch" or "onnx")."""
        self.nugget_encoder.use_runtime(runtime, cache_dir)

    def fit(self, splits: Any, ctx: Any) -> dict[str, Any]:
        sentences, dropped = usable_sentences(splits.train.sentences)
        if dropped:
            ctx.logger.warning("%d empty sentence(s) of %s dropped before training", dropped, splits.source)
        if not sentences:
            raise HarnessError(f"{splits.source} offers no non-empty training sentence; choose another --train-on.")
        deletion = float(self.options["deletion"])
        noise = WordDeletion(deletion, ctx.seed) if deletion > 0 else None
        views = [CLEAN, DELETED] if noise else [CLEAN]
        collate = UnlabeledCollator(self.nugget_encoder.tokenizer, self.nugget_encoder.max_length, views, noise)
        module = NuggetAutoencoder(self.nugget_encoder, self.backbone, self.options["residual"])
        config = config_from_profile(  # ctx.profile carries the requested budget (SETUP's, then the user's)
            ctx.profile,
            ctx.seed,
            ctx.device,
            ctx.progress,
            learning_rate=float(self.options["lr"]),
            schedule=SETUP.schedule,
            warmup_ratio=SETUP.warmup_ratio,
            weight_decay=SETUP.weight_decay,
            description=f"training nugget (r={self.options['ratio']}, l={self.options['layer']})",
        )
        report = fit(module, sentences, collate, config)
        self.nugget_encoder.eval()
        record = report.as_record()
        curve = curve_summary([h["reconstruction"] for h in module.history])
        record.update(
            {
                "setup": SETUP.name,
                "batch_size": config.batch_size,
                "learning_rate": config.learning_rate,
                "schedule": config.schedule,
                "sentences": len(sentences),
                "empty_sentences_dropped": dropped,
                "frozen_parameters": len(self.nugget_encoder.frozen),
                "loss_curve": {"reconstruction": curve},
            }
        )
        ctx.logger.info(
            "trained nugget: %d steps, %.1f s, %.1f sentences/s, loss %s -> %s",
            report.steps,
            report.wall_seconds,
            report.examples_per_second,
            curve.get("first"),
            curve.get("last"),
        )
        return record

    # -- checkpoint: the nugget encoder's weights and its settings (harness.CheckpointedModule) ------------------
    CONFIG_FILE = "nugget.json"  # the weights keep the default name, model.safetensors

    def checkpoint_module(self):
        return self.nugget_encoder

    def checkpoint_config(self) -> dict:
        settings = {key: self.options[key] for key in ("ratio", "layer", "feedback", "residual", "deletion")}
        return {**settings, "max_length": self.nugget_encoder.max_length}


# -- registration --------------------------------------------------------------------------------------------------
OPTIONS = {
    "ratio": Option(
        0.1,
        "compression ratio r: k = ceil(r * n) nuggets of n tokens, in (0, 1] (paper: 0.05, 0.1, "
        "0.15, 0.25; 0.1 saturates reconstruction, section 5.1)",
        type=float,
    ),
    "layer": Option(
        3, "layer l whose states the scorer reads; the embeddings and layers 1..l are frozen (paper: 3)", type=int
    ),
    "feedback": Option(True, "add selected/unselected type embeddings after layer l (section 3.3)", type=bool),
    "residual": Option(
        "scores",
        "how the scores reach the decoder's cross-attention: scores (eq. 5) or "
        "straight-through (s - sg(s), the public code)",
        choices=RESIDUALS,
    ),
    "deletion": Option(0.0, "share of words deleted from the encoder's input (0: none, the paper's AE)", type=float),
    "lr": Option(5e-5, "learning rate (appendix B.1: 5e-5)", type=float, bounds="(0, inf)"),
}


def validate(spec: Any, registry: Any) -> None:
    owner = f"model {spec.label!r}"
    options = spec.options
    ratio = options["ratio"]
    if not 0.0 < float(ratio) <= 1.0:
        raise InvalidOptionError(
            f"{owner}: option ratio must lie in (0, 1] (k = ceil(r * n) nuggets, at least one); "
            f"the paper's values are {', '.join(map(str, PAPER_RATIOS))}; got {ratio!r}."
        )
    if int(options["layer"]) < 0:
        raise InvalidOptionError(
            f"{owner}: option layer must be 0 (the embedding layer) or a layer number up to the "
            f"backbone's depth; got {options['layer']!r}."
        )
    if not 0.0 <= float(options["deletion"]) < 1.0:
        raise InvalidOptionError(
            f"{owner}: option deletion must be 0 (no deletion) or lie in (0, 1), e.g. 0.6 "
            f"(TSDAE); got {options['deletion']!r}."
        )
    if not float(options["lr"]) > 0:
        raise InvalidOptionError(f"{owner}: option lr must be positive, e.g. 5e-5; got {options['lr']!r}.")
    require_unlabeled_source(owner, spec, registry)


MODEL = ModelPlugin(
    name=NAME,
    description="Nugget: the top ceil(r*n) token vectors chosen by a learned scorer, trained as an autoencoder; "
    "compared by MaxSim",
    factory=NuggetModel,
    capabilities=(MULTI_VECTOR_EMBEDDER, TRAINABLE),
    options=OPTIONS,
    training_kinds=(UNLABELED_SENTENCES,),
    reference="Qin & Van Durme 2023 (Nugget), sections 3-4, 6.1, table 2",
    validate=validate,
    model_class=NuggetModel,
    budget_for=lambda options, profile_name: setup_budget(SETUP, profile_name),
)


@hookimpl
def register_models(register):
    register(MODEL)
