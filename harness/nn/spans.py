"""Propositions as token masks: character spans to token masks, masked span pooling, and an encoding loop that runs
one forward pass per distinct sentence however many propositions that sentence carries.

Sub-Sentence Encoder (Chen et al. 2023, arXiv 2311.04335), section 3.1 (a proposition is the masked MEAN of its
sentence's last hidden states) and appendix C.1 (mask pooling, full mask, token subset: :func:`encode_span_items`
with ``attention="sentence"`` or ``"proposition"``, and :func:`subset_text`). How spans become masks and every
deviation from the official code: docs/methods/subencoder.md, section "Sub-Sentence Encoder", subsection "Span masks"
and the table row "span masks".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from harness.device import autocast
from harness.errors import HarnessError

from .encoder import length_sorted_batches, progress_bar

logger = logging.getLogger(__name__)

Span = tuple[int, int]
SpanItem = tuple[str, Sequence[Span]]  # a proposition: its sentence and its character spans
ATTENTION_CHOICES = ("sentence", "proposition")


class SpanError(HarnessError):
    """A proposition whose character spans cannot be read (outside the sentence, empty, none at all)."""


def _describe(text: str, where: str) -> str:
    shown = text if len(text) <= 60 else text[:57] + "..."
    return f"{where} (sentence {shown!r}, {len(text)} characters)"


def normalise_spans(text: str, spans: Sequence[Span], where: str = "item") -> list[Span]:
    """The spans sorted and with overlapping or touching ones merged; a SpanError naming ``where`` for a span
    outside ``text``, an empty span, or no span at all."""
    if isinstance(spans, (str, bytes)) or not isinstance(spans, Sequence):
        raise SpanError(f"{_describe(text, where)}: spans must be a list of (start, end) pairs, got {spans!r}.")
    if not spans:
        raise SpanError(
            f"{_describe(text, where)}: a proposition needs at least one (start, end) span; give the "
            f"whole sentence as [(0, {len(text)})] to encode all of it."
        )
    checked: list[Span] = []
    for span in spans:
        try:
            start, end = span
        except (TypeError, ValueError):
            raise SpanError(f"{_describe(text, where)}: span {span!r} is not a (start, end) pair.") from None
        if (
            isinstance(start, bool)
            or isinstance(end, bool)
            or not isinstance(start, (int, np.integer))
            or not isinstance(end, (int, np.integer))
        ):
            raise SpanError(f"{_describe(text, where)}: span {span!r} must hold two integer character offsets.")
        start, end = int(start), int(end)
        if start < 0 or end > len(text) or start > end:
            raise SpanError(
                f"{_describe(text, where)}: span ({start}, {end}) lies outside the sentence; offsets "
                f"must satisfy 0 <= start < end <= {len(text)}."
            )
        if start == end and text:
            raise SpanError(
                f"{_describe(text, where)}: span ({start}, {end}) is empty; drop it or give the "
                "characters it should cover."
            )
        checked.append((start, end))
    checked.sort()
    merged = [checked[0]]
    for start, end in checked[1:]:
        last_start, last_end = merged[-1]
        if start <= last_end:  # overlapping or touching: the mask is the union anyway
            merged[-1] = (last_start, max(last_end, end))
        else:
            merged.append((start, end))
    return merged


def token_mask(offsets: np.ndarray, special_tokens: np.ndarray, spans: Sequence[Span]) -> np.ndarray:
    """Boolean mask over the tokens of one tokenised sentence: ``offsets`` ``[L, 2]`` (the tokenizer's offset
    mapping), ``special_tokens`` ``[L]`` (1 for special tokens and padding). A token is in the mask when its
    character range overlaps one of ``spans``."""
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
    starts, ends = offsets[:, 0], offsets[:, 1]
    inside = np.zeros(len(offsets), dtype=bool)
    for start, end in spans:
        inside |= (starts < end) & (ends > start)
    return inside & (ends > starts) & ~np.asarray(special_tokens, dtype=bool)


def subset_text(text: str, spans: Sequence[Span]) -> str:
    """The proposition's characters as a text of its own (appendix C.1 "token subset"): its merged spans joined by
    single spaces."""
    return " ".join(text[start:end].strip() for start, end in normalise_spans(text, spans)).strip()


@dataclass
class TokenisedSentence:
    """One sentence tokenised once, with its offsets (for building masks) and special-token marks."""

    features: dict[str, list[int]]
    offsets: np.ndarray
    special_tokens: np.ndarray

    def __len__(self) -> int:
        return len(self.features["input_ids"])


def tokenise_sentences(tokenizer, texts: Sequence[str], max_length: int) -> list[TokenisedSentence]:
    """Each text tokenised (truncated to ``max_length`` tokens, unpadded) with its offset mapping; needs a fast
    tokenizer."""
    if not getattr(tokenizer, "is_fast", False):
        raise HarnessError(
            f"span encoding needs a fast tokenizer (offset mappings); {type(tokenizer).__name__} "
            "is not one. Use a backbone with a tokenizer.json."
        )
    encoded = tokenizer(
        list(texts),
        truncation=True,
        max_length=max_length,
        padding=False,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
    )
    sentences = []
    for row in range(len(texts)):
        features = {key: encoded[key][row] for key in encoded if key not in ("offset_mapping", "special_tokens_mask")}
        sentences.append(
            TokenisedSentence(
                features,
                np.asarray(encoded["offset_mapping"][row]).reshape(-1, 2),
                np.asarray(encoded["special_tokens_mask"][row]),
            )
        )
    return sentences


@dataclass
class SpanBatch:
    """Padded sentences plus one mask row per proposition: ``masks[p]`` covers ``features`` row ``rows[p]``."""

    features: dict[str, torch.Tensor]  # the tokenizer's padded batch (input_ids, attention_mask, ...)
    masks: torch.Tensor  # [n_propositions, L] float, 1 on the proposition's tokens
    rows: torch.Tensor  # [n_propositions] long: the features row of each proposition's sentence

    def to(self, device: str | torch.device) -> SpanBatch:
        return SpanBatch(
            {k: v.to(device) for k, v in self.features.items()}, self.masks.to(device), self.rows.to(device)
        )


def span_batch(
    tokenizer,
    sentences: Sequence[TokenisedSentence],
    propositions: Sequence[tuple[int, Sequence[Span]]],
    attention: str = "sentence",
) -> SpanBatch:
    """A batch of the given tokenised ``sentences`` and ``propositions`` ``(sentence position, merged spans)``.

    With ``attention="sentence"`` each sentence is one row, read once, however many propositions it has. With
    ``attention="proposition"`` each proposition is its own row whose attention mask is the proposition's tokens
    plus the special tokens (appendix C.1 "full mask")."""
    if attention not in ATTENTION_CHOICES:
        raise ValueError(f"attention must be one of {ATTENTION_CHOICES}, got {attention!r}")
    padded = tokenizer.pad([sentence.features for sentence in sentences], return_tensors="pt")
    width = padded["input_ids"].shape[1]
    masks = np.zeros((len(propositions), width), dtype=np.float32)
    for index, (position, spans) in enumerate(propositions):
        sentence = sentences[position]
        masks[index, : len(sentence)] = token_mask(sentence.offsets, sentence.special_tokens, spans)
    masks_tensor = torch.from_numpy(masks)
    sentence_rows = torch.tensor([position for position, _ in propositions], dtype=torch.long)
    if attention == "sentence":
        return SpanBatch(dict(padded), masks_tensor, sentence_rows)
    # One row per proposition: the sentence's tokens, attending only to the proposition and the special tokens.
    features = {key: value[sentence_rows] for key, value in padded.items()}
    special = torch.zeros_like(masks_tensor)
    for index, (position, _) in enumerate(propositions):
        length = len(sentences[position])
        special[index, :length] = torch.from_numpy(sentences[position].special_tokens[:length].astype(np.float32))
    features["attention_mask"] = ((masks_tensor + special) > 0).to(padded["attention_mask"].dtype)
    return SpanBatch(features, masks_tensor, torch.arange(len(propositions)))


def pool_spans(states: torch.Tensor, masks: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Masked MEAN of ``states`` ``[b, L, d]``: proposition p averages row ``rows[p]`` over ``masks[p]``
    ``[P, L]``; a mask without any token gives the zero vector. ``[P, d]``."""
    weights = masks.to(states.dtype)
    weights = weights / weights.sum(dim=1, keepdim=True).clamp(min=1.0)
    return torch.einsum("pl,pld->pd", weights, states[rows])


def group_by_sentence(items: Sequence[SpanItem]) -> tuple[list[str], list[tuple[int, list[Span]]]]:
    """The distinct sentences of ``items`` in order of first appearance, and per item ``(sentence position,
    merged spans)``. Span problems raise a SpanError naming the item's index."""
    position_of: dict[str, int] = {}
    propositions = []
    for index, item in enumerate(items):
        try:
            text, spans = item
        except (TypeError, ValueError):
            raise SpanError(f"item {index}: expected (text, [(start, end), ...]), got {item!r}.") from None
        if not isinstance(text, str):
            raise SpanError(f"item {index}: the sentence must be a str, got {type(text).__name__}.")
        merged = normalise_spans(text, spans, f"item {index}")
        propositions.append((position_of.setdefault(text, len(position_of)), merged))
    return list(position_of), propositions


def encode_span_items(
    items: Sequence[SpanItem],
    tokenizer,
    token_states: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    device: str,
    batch_size: int,
    max_length: int,
    head: Callable[[torch.Tensor], torch.Tensor] | None = None,
    attention: str = "sentence",
    progress: bool = False,
    description: str = "encoding propositions",
) -> np.ndarray:
    """One float32 row per item ``(text, spans)``, in input order.

    Items are grouped by sentence; each distinct sentence is tokenised once and, with ``attention="sentence"``,
    read by ONE call of ``token_states`` (batches of ``batch_size`` sentences, sorted by length) however many of
    its propositions the items hold. Each proposition is the masked mean of its tokens' states, passed through
    ``head`` (e.g. the SubEncoder's MLP) when given. A proposition with no token left after truncation is the zero
    vector. With ``attention="proposition"`` (appendix C.1 "full mask") every proposition is its own row.
    """
    if not items:
        return np.zeros((0, 0), dtype=np.float32)
    texts, propositions = group_by_sentence(items)
    sentences = tokenise_sentences(tokenizer, texts, max_length)
    by_sentence: dict[int, list[int]] = {}
    for index, (position, _) in enumerate(propositions):
        by_sentence.setdefault(position, []).append(index)
    if attention == "sentence":
        units = [(position, by_sentence[position]) for position in range(len(texts))]
    else:
        units = [(position, [index]) for index, (position, _) in enumerate(propositions)]
    outputs: list[torch.Tensor | None] = [None] * len(items)
    empty = 0
    with torch.inference_mode(), progress_bar(len(items), description, progress, unit="proposition") as bar:
        for batch_units in length_sorted_batches([len(sentences[position]) for position, _ in units], batch_size):
            positions = [units[u][0] for u in batch_units]
            local_of = {position: local for local, position in enumerate(dict.fromkeys(positions))}
            members = [index for u in batch_units for index in units[u][1]]
            batch = span_batch(
                tokenizer,
                [sentences[p] for p in local_of],
                [(local_of[propositions[index][0]], propositions[index][1]) for index in members],
                attention,
            ).to(device)
            with autocast(device):
                pooled = pool_spans(token_states(batch.features), batch.masks, batch.rows)
                vectors = head(pooled) if head is not None else pooled
            has_tokens = batch.masks.sum(dim=1) > 0
            vectors = (vectors.float() * has_tokens[:, None]).cpu()
            empty += int((~has_tokens).sum())
            for row, index in enumerate(members):
                outputs[index] = vectors[row]
            bar.update(len(members))
    if empty:
        logger.warning(
            "%d of %d propositions have no token within the %d-token limit (cut off by truncation or "
            "covering only spaces); they are encoded as zero vectors",
            empty,
            len(items),
            max_length,
        )
    return torch.stack(outputs).numpy()  # type: ignore[arg-type]


def whole_sentence_items(texts: Sequence[str]) -> list[SpanItem]:
    """Each text as one proposition covering all of it (how a span encoder embeds sentences)."""
    return [(text, [(0, len(text))]) for text in texts]
