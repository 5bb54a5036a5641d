"""Masked language modelling: masking, an MLM head for a bare backbone, a frozen embedding layer, and the
domain-adaptive MLM of thesis 4.3.1.

Masking follows BERT (Devlin et al. 2019, section 3.1 / appendix A.1: 15%, 80/10/10, :data:`BERT_MASKING`) or the
thesis code's topic MLM (20%, mask token only, :data:`THESIS_CODE_MASKING`); topic prompts are protected (thesis
4.4.3). The masking rules, the head, the frozen embeddings and the domain-adaptive MLM: docs/methods/augsbert.md,
section "Augmented SBERT", subsection "Masked language modelling" and the table row "domain-adaptive MLM"; the
objective: docs/methods/unsupervised.md, the table row "`mlm` objective".
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from harness.checkpoints import build_checkpoint, checkpoint_complete
from harness.errors import HarnessError
from harness.files import atomic_write_json
from harness.store_files import read_store_text
from harness.training_loop import config_from_profile, fit

from .backbone import load_tokenizer, load_transformer, quiet_transformers, sequence_limits
from .objectives import language_model_head, scored_token_loss
from .pairs import PADDING_SEGMENT, PairInputBuilder
from .topic_prompts import DEFAULT_DELIMITER, TopicPromptBuilder

logger = logging.getLogger(__name__)

MASK_PROBABILITY = 0.15


@dataclass(frozen=True)
class Masking:
    """Which tokens MLM predicts and what it puts in their place: ``probability`` of the maskable tokens are
    predicted; of those, ``mask_share`` become the mask token, ``random_share`` a random token, the rest stay."""

    probability: float = MASK_PROBABILITY
    mask_share: float = 0.8
    random_share: float = 0.1

    def as_record(self) -> dict:
        return {"probability": self.probability, "mask_share": self.mask_share, "random_share": self.random_share}


BERT_MASKING = Masking()  # Devlin et al. 2019: 15%, 80/10/10
THESIS_CODE_MASKING = Masking(0.2, 1.0, 0.0)  # the thesis code's topic MLM: 20%, the mask token only
RECORD_FILE = "domain_mlm.json"  # written into every domain-adapted backbone folder


class MaskedLanguageModelError(HarnessError):
    """A backbone that cannot be trained with MLM (its tokenizer has no mask token)."""


def maskable_positions(segments: torch.Tensor, protected: torch.Tensor | None = None) -> torch.Tensor:
    """True on the content tokens of each segment: not padding (segment 0), not a segment's first or last token
    (its CLS/SEP or <s>/</s>), and not a ``protected`` token (a bool tensor of the same shape; e.g. the topic and
    delimiter tokens of a topic prompt, :class:`harness.nn.topic_prompts.TopicPromptBuilder`'s ``topic_mask``,
    which thesis 4.4.3 never masks)."""
    previous = nn.functional.pad(segments[:, :-1], (1, 0), value=PADDING_SEGMENT)
    following = nn.functional.pad(segments[:, 1:], (0, 1), value=PADDING_SEGMENT)
    boundary = (segments != previous) | (segments != following)
    maskable = (segments != PADDING_SEGMENT) & ~boundary
    if protected is not None:
        if protected.shape != segments.shape:
            raise ValueError(
                f"maskable_positions(): protected has shape {tuple(protected.shape)}, segments {tuple(segments.shape)}"
            )
        maskable &= ~protected.bool()
    return maskable


def mask_tokens(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    generator: torch.Generator,
    probability: float = MASK_PROBABILITY,
    masking: Masking | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking (or ``masking``'s rates, which then replace ``probability``): returns (masked input ids, labels
    with -100 where nothing is predicted)."""
    masking = masking or Masking(probability)
    chosen = (torch.rand(input_ids.shape, generator=generator) < masking.probability) & maskable
    # A pair with no masked token would contribute nothing (and a batch of them a NaN loss): mask one token.
    for row in torch.nonzero(~chosen.any(dim=1) & maskable.any(dim=1)).flatten().tolist():
        candidates = torch.nonzero(maskable[row]).flatten()
        chosen[row, candidates[torch.randint(len(candidates), (1,), generator=generator)]] = True
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    masked = input_ids.clone()
    draw = torch.rand(input_ids.shape, generator=generator)
    to_mask_token = chosen & (draw < masking.mask_share)
    to_random = chosen & (draw >= masking.mask_share) & (draw < masking.mask_share + masking.random_share)
    masked[to_mask_token] = mask_token_id
    masked[to_random] = torch.randint(vocab_size, (int(to_random.sum()),), generator=generator)
    return masked, labels


class MaskedLanguageModeling(nn.Module):
    """Wraps a ``*ForMaskedLM`` model so that ``forward(**batch)`` returns the MLM loss (what the shared loop needs).
    Logits are computed only at the masked positions: the loss of the model's own ``labels=`` path (mean
    cross-entropy over the predicted tokens) without a ``[tokens, vocabulary]`` logit matrix for the ~85% of tokens
    that are not scored (about half of a step's work for a 30K vocabulary and a small encoder)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.head = language_model_head(model)

    def forward(self, input_ids, attention_mask, labels, token_type_ids=None) -> torch.Tensor:
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        hidden = self.model.base_model(input_ids=input_ids, attention_mask=attention_mask, **extra).last_hidden_state
        return scored_token_loss(self.head, hidden, labels)


def load_masked_lm(path: str) -> nn.Module:
    """The backbone at ``path`` with an MLM head: its own if the checkpoint has one, else a fresh head (initialised
    by the model class, consuming torch's global RNG) whose output projection is tied to the word embeddings."""
    with quiet_transformers():  # a bare backbone has no MLM head: the report of its fresh initialisation is expected
        return load_transformer(path, auto_class="AutoModelForMaskedLM")


def freeze_embedding_layer(transformer: nn.Module) -> int:
    """Stop gradients into the embedding layer (word, position and token-type embeddings and their LayerNorm) of a
    Hugging Face transformer; returns the number of frozen parameters."""
    base = getattr(transformer, getattr(transformer, "base_model_prefix", ""), transformer)
    embeddings = getattr(base, "embeddings", None)
    if embeddings is None:
        embeddings = transformer.get_input_embeddings()
    frozen = 0
    for parameter in embeddings.parameters():
        parameter.requires_grad_(False)
        frozen += parameter.numel()
    return frozen


def pairwise_features(
    tokenizer, first: Sequence[str], second: Sequence[str], backbone: str, config, profile_limit: int | None
) -> tuple[PairInputBuilder, list[dict[str, list[int]]]]:
    """``[CLS] s1 [SEP] [CLS] s2 [SEP]`` rows built by the Cross-Bi-Encoder's input builder, with its limits."""
    builder = PairInputBuilder.for_backbone(
        tokenizer, config, sequence_limits(backbone, tokenizer, config, profile_limit)
    )
    return builder, builder.features(first, second)


def adapted_encoder(backbone: str, mlm_model: nn.Module) -> nn.Module:
    """The backbone's bare architecture holding the MLM-trained encoder weights; the MLM head is dropped and the
    pooler (which an MLM model lacks, and which no pooling model here uses) stays the backbone's, so the folder loads
    as a plain backbone with no missing or unexpected weights."""
    with quiet_transformers():
        bare = load_transformer(backbone)
    missing, unexpected = bare.load_state_dict(mlm_model.base_model.state_dict(), strict=False)
    if unexpected or any(not key.startswith("pooler.") for key in missing):
        raise RuntimeError(f"MLM weights do not fit {backbone!r}: missing {missing}, unexpected {unexpected}")
    return bare


@dataclass(frozen=True)
class PairTopics:
    """The topic label of each side of every MLM pair, and the delimiter that ends a topic (thesis 4.4.3)."""

    first: Sequence[str]
    second: Sequence[str]
    delimiter: str = DEFAULT_DELIMITER


def topic_pairwise_features(
    tokenizer,
    first: Sequence[str],
    second: Sequence[str],
    topics: PairTopics,
    backbone: str,
    config,
    profile_limit: int | None,
) -> tuple[TopicPromptBuilder, list[dict[str, list]]]:
    """``[CLS] t1 [T] s1 [SEP] [CLS] t2 [T] s2 [SEP]`` rows with their ``topic_mask``, with the pair limits of
    :func:`pairwise_features`."""
    limits = sequence_limits(backbone, tokenizer, config, profile_limit)
    builder = TopicPromptBuilder.for_backbone(tokenizer, config, limits, topics.delimiter)
    return builder, builder.pair_features(topics.first, first, topics.second, second)


def train_domain_mlm(
    backbone: str,
    first: Sequence[str],
    second: Sequence[str],
    output_dir: Path,
    *,
    profile,
    seed: int,
    device: str,
    progress: bool = False,
    learning_rate: float = 3e-5,
    topics: PairTopics | None = None,
    masking: Masking = BERT_MASKING,
) -> dict:
    """MLM on the pairs (``first[i]``, ``second[i]``), starting from ``backbone``; writes a Hugging Face backbone
    folder into ``output_dir`` and returns the record it also stores there (:data:`RECORD_FILE`). With ``topics``
    every sentence is prompted with its topic, and topic and delimiter tokens are never masked."""
    tokenizer = load_tokenizer(backbone)
    model = load_masked_lm(backbone)
    if tokenizer.mask_token_id is None:
        raise MaskedLanguageModelError(
            f"backbone {backbone!r} has no mask token, so it cannot be trained with MLM; choose a --backbone whose "
            "tokenizer has one (BERT- or RoBERTa-style)."
        )
    if topics is None:
        builder, features = pairwise_features(tokenizer, first, second, backbone, model.config, profile.max_seq_length)
    else:
        builder, features = topic_pairwise_features(
            tokenizer, first, second, topics, backbone, model.config, profile.max_seq_length
        )
    generator = torch.Generator().manual_seed(seed)

    def collate(rows: list[dict]) -> dict[str, torch.Tensor]:
        batch = builder.collate(rows)
        segments = batch.pop("segments")
        protected = batch.pop("topic_mask", None)
        batch["input_ids"], batch["labels"] = mask_tokens(
            batch["input_ids"],
            maskable_positions(segments, protected),
            tokenizer.mask_token_id,
            len(tokenizer),
            generator,
            masking=masking,
        )
        return batch

    train_config = config_from_profile(
        profile, seed, device, progress, learning_rate=learning_rate, description="domain MLM"
    )
    report = fit(MaskedLanguageModeling(model), features, collate, train_config)
    output_dir = Path(output_dir)
    adapted_encoder(backbone, model).save_pretrained(str(output_dir), safe_serialization=True)
    tokenizer.save_pretrained(str(output_dir))
    # Keep the backbone's sentence-transformers length limit, so the adapted model is read with the same limit.
    st_config = Path(backbone) / "sentence_bert_config.json"
    if st_config.is_file():
        shutil.copy(st_config, output_dir / "sentence_bert_config.json")
    record = {
        "base_backbone": backbone,
        "pairs": len(features),
        "learning_rate": learning_rate,
        "seed": seed,
        "report": report.as_record(),
        "masking": masking.as_record(),
    }
    if topics is not None:
        record["topic_prompts"] = {"delimiter": topics.delimiter, "topic_tokens_masked": False}
    atomic_write_json(output_dir / RECORD_FILE, record)
    return record


def domain_adapted_backbone(
    directory: Path,
    backbone: str,
    first: Sequence[str],
    second: Sequence[str],
    *,
    profile,
    seed: int,
    device: str,
    progress: bool = False,
    learning_rate: float = 3e-5,
    topics: PairTopics | None = None,
    masking: Masking = BERT_MASKING,
) -> Path:
    """The MLM-adapted backbone folder ``directory``, trained now unless a complete one is already there. The
    caller names the folder after everything that determines the result (backbone, pairs, budgets, lr, seed)."""
    directory = Path(directory)
    if checkpoint_complete(directory):
        logger.info("loading domain-adapted (MLM) backbone %s", directory)
        return directory
    logger.info("domain-adaptive MLM of %s on %d target pairs (seed %d)", backbone, len(first), seed)
    build_checkpoint(
        directory,
        lambda temporary: train_domain_mlm(
            backbone,
            first,
            second,
            temporary,
            profile=profile,
            seed=seed,
            device=device,
            progress=progress,
            learning_rate=learning_rate,
            topics=topics,
            masking=masking,
        ),
    )
    return directory


def read_record(directory: Path) -> dict:
    """The :data:`RECORD_FILE` of a domain-adapted backbone folder."""
    return json.loads(read_store_text(Path(directory) / RECORD_FILE, directory))  # in the store's cache: no FIFO
