"""Domain-adaptive MLM pre-training of a teacher on the target sentence pairs (thesis 4.3.1, 5.4.3, 5.6.1).

Before a Cross-(Bi-)Encoder teacher is fine-tuned on a source task, masked language modelling continues on the very
pairs it will annotate, in the pairwise format the Cross-Bi-Encoder reads: ``[CLS] s1 [SEP] [CLS] s2 [SEP]`` (for
tokenizers without CLS/SEP, e.g. RoBERTa, each sentence keeps its own ``<s> ... </s>``). The adapted checkpoint is
saved as an ordinary Hugging Face backbone folder (safetensors; the encoder without the MLM head) and used as the
teacher's backbone; during the teacher's
fine-tuning its embedding layer is frozen (``freeze_embedding_layer``, called by teachers that declare the option
``freeze_embeddings``), "to avoid moving too far away from what we learned in pre-training". DomainSBERT starts the
student from the base checkpoint, FullDomainSBERT from this MLM checkpoint (``plugins/augmented_sbert.py``).

Input: built by the Cross-Bi-Encoder's ``PairInputBuilder`` (plugins/cross_bi_encoder.py), so pre-training and
fine-tuning see the same format, segment ids (0/1 where the backbone has two token types, else all 0) and length
limits. Masking: BERT's recipe, 15% of the content tokens (never a segment's CLS/SEP, never padding; at least one
per pair), of which 80% become the mask token, 10% a random token and 10% stay unchanged.

Deviations: the thesis used batch 64, lr 3e-5 and 12.5K steps (5.4.3) or 5 epochs (5.6.1); here lr 3e-5 (option
``mlm_lr``) with the profile's batch size, epochs and step cap. A backbone without an MLM head (e.g.
all-MiniLM-L6-v2, a bare ``BertModel``) gets a freshly initialised head whose decoder is tied to the word embeddings.
"""
from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from harness.encoding import load_tokenizer, load_transformer
from harness.store import atomic_write_json, build_checkpoint, checkpoint_complete
from harness.training import config_from_profile, fit
from harness.plugins.cross_bi_encoder import PairInputBuilder
from harness.plugins.cross_encoder import pair_sequence_limits

MASK_PROBABILITY = 0.15


def pairwise_features(tokenizer, first: Sequence[str], second: Sequence[str], backbone: str, config,
                      profile_limit: int | None) -> tuple[PairInputBuilder, list[dict[str, list[int]]]]:
    """``[CLS] s1 [SEP] [CLS] s2 [SEP]`` built by the Cross-Bi-Encoder's own input builder, so the MLM sees exactly
    the teacher's input format, segment ids and length limits."""
    sentence_limit, pair_limit = pair_sequence_limits(backbone, tokenizer, config, profile_limit)
    two_segments = int(getattr(config, "type_vocab_size", 0) or 0) >= 2
    builder = PairInputBuilder(tokenizer, sentence_limit, pair_limit, two_segments)
    return builder, builder.features(first, second)


def maskable_positions(segments: torch.Tensor) -> torch.Tensor:
    """True on the content tokens of each segment: not padding (segment 0), not a segment's first or last token
    (its CLS/SEP or <s>/</s>)."""
    previous = nn.functional.pad(segments[:, :-1], (1, 0), value=0)
    following = nn.functional.pad(segments[:, 1:], (0, 1), value=0)
    boundary = (segments != previous) | (segments != following)
    return (segments != 0) & ~boundary


def mask_tokens(
    input_ids: torch.Tensor, maskable: torch.Tensor, mask_token_id: int, vocab_size: int,
    generator: torch.Generator, probability: float = MASK_PROBABILITY,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking: returns (masked input ids, labels with -100 where nothing is predicted)."""
    chosen = (torch.rand(input_ids.shape, generator=generator) < probability) & maskable
    # A pair with no masked token would contribute nothing (and a batch of them a NaN loss): mask one token.
    for row in torch.nonzero(~chosen.any(dim=1) & maskable.any(dim=1)).flatten().tolist():
        candidates = torch.nonzero(maskable[row]).flatten()
        chosen[row, candidates[torch.randint(len(candidates), (1,), generator=generator)]] = True
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    masked = input_ids.clone()
    draw = torch.rand(input_ids.shape, generator=generator)
    to_mask_token = chosen & (draw < 0.8)
    to_random = chosen & (draw >= 0.8) & (draw < 0.9)
    masked[to_mask_token] = mask_token_id
    masked[to_random] = torch.randint(vocab_size, (int(to_random.sum()),), generator=generator)
    return masked, labels


class MaskedLanguageModeling(nn.Module):
    """Wraps a ``*ForMaskedLM`` model so that ``forward(**batch)`` returns the MLM loss (what the shared loop needs)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, labels, token_type_ids=None) -> torch.Tensor:
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, **extra).loss


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


@contextmanager
def quiet_transformers():
    """Silence transformers' load reports and progress bars for a moment."""
    import transformers

    logging = transformers.utils.logging
    previous = logging.get_verbosity()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(previous)


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


def train_domain_mlm(
    backbone: str, first: Sequence[str], second: Sequence[str], output_dir: Path, *, profile, seed: int,
    device: str, progress: bool = False, learning_rate: float = 3e-5,
) -> dict:
    """MLM on the pairs, starting from ``backbone``; writes a Hugging Face folder into ``output_dir``."""
    tokenizer = load_tokenizer(backbone)
    with quiet_transformers():  # a bare backbone has no MLM head: its fresh initialisation is expected
        model = load_transformer(backbone, auto_class="AutoModelForMaskedLM")
    if tokenizer.mask_token_id is None:
        raise ValueError(f"backbone {backbone!r} has no mask token; it cannot be trained with MLM")
    builder, features = pairwise_features(tokenizer, first, second, backbone, model.config, profile.max_seq_length)
    generator = torch.Generator().manual_seed(seed)

    def collate(rows: list[dict]) -> dict[str, torch.Tensor]:
        batch = builder.collate(rows)
        segments = batch.pop("segments")
        batch["input_ids"], batch["labels"] = mask_tokens(
            batch["input_ids"], maskable_positions(segments), tokenizer.mask_token_id, len(tokenizer), generator
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
        "base_backbone": backbone, "pairs": len(features), "learning_rate": learning_rate, "seed": seed,
        "report": report.as_record(),
    }
    atomic_write_json(output_dir / "domain_mlm.json", record)
    return record


def domain_adapted_backbone(directory: Path, backbone: str, first: Sequence[str], second: Sequence[str], *,
                            profile, seed: int, device: str, progress: bool = False,
                            learning_rate: float = 3e-5, log=print) -> Path:
    """The MLM-adapted checkpoint in ``directory``, trained now unless a complete one is already there."""
    directory = Path(directory)
    if checkpoint_complete(directory):
        log(f"  loading domain-adapted (MLM) backbone {directory}")
        return directory
    log(f"  domain-adaptive MLM of {backbone} on {len(first)} target pairs (seed {seed})")
    build_checkpoint(directory, lambda temporary: train_domain_mlm(
        backbone, first, second, temporary, profile=profile, seed=seed, device=device, progress=progress,
        learning_rate=learning_rate,
    ))
    return directory


def read_record(directory: Path) -> dict:
    return json.loads((Path(directory) / "domain_mlm.json").read_text())
