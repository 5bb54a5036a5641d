"""TSDAE, Transformer-based Sequential Denoising Auto-Encoder (Wang et al. 2021, section 3; thesis 2.4.6, 5.4.1,
tables 6.9 and 6.10): the objective ``tsdae`` and its embedder. Words of a sentence are deleted, the damaged
sentence is encoded and pooled, and a decoder tied to the encoder reconstructs the original from that one vector.

The method, its training setup (thesis 5.4.1) and every deviation: docs/methods/tsdae.md, section "TSDAE" and its
``tsdae`` table rows.
"""

from __future__ import annotations

import torch
from torch import nn

from harness.blocks import (
    CLEAN,
    CONTRASTIVE_SETUP,
    DELETED,
    IGNORED_LABEL,
    Objective,
    ObjectiveSetup,
    TrainingSetup,
    TrainingStep,
    TransformerDecoder,
    language_model_head,
    objective_hooks,
    scored_token_loss,
)

NAME = "tsdae"


class DenoisingReconstruction(nn.Module):
    """Cross-entropy of the original sentence decoded from the pooled vector of its deleted copy."""

    def __init__(self, setup: ObjectiveSetup):
        super().__init__()
        self.decoder = TransformerDecoder.from_encoder(setup.encoder.transformer, share="all", backbone=setup.backbone)
        self.head = language_model_head(self.decoder.language_model)
        # With right padding a causal mask alone keeps every real token from seeing padding, and padding positions
        # are never scored: no padding mask is needed, so attention takes its faster causal-only path.
        self.right_padded = getattr(setup.encoder.tokenizer, "padding_side", "right") == "right"

    def reconstruction_loss(self, memory: torch.Tensor, target: dict[str, torch.Tensor]) -> torch.Tensor:
        """Teacher-forced cross-entropy of ``target`` given one memory vector per sentence ``[b, d]``."""
        ids, mask = target["input_ids"], target["attention_mask"]
        hidden = self.decoder.language_model.base_model(
            input_ids=ids[:, :-1],
            attention_mask=None if self.right_padded else mask[:, :-1],
            encoder_hidden_states=memory[:, None],
            encoder_attention_mask=torch.ones(memory.shape[0], 1, dtype=mask.dtype, device=mask.device),
            use_cache=False,
        ).last_hidden_state
        labels = ids[:, 1:].masked_fill(mask[:, 1:] == 0, IGNORED_LABEL)
        return scored_token_loss(self.head, hidden, labels)

    def forward(self, step: TrainingStep) -> torch.Tensor:
        return self.reconstruction_loss(step.sentence_vectors(DELETED), step.features(CLEAN))


# Thesis 5.4.1, the TSDAE replication's setup (batch 8, 100K steps, constant learning rate); only TSDAE alone trains
# in it: every combination with another objective takes the core's CONTRASTIVE_SETUP (thesis 5.4.2). The quick
# budget is the one every objective shares.
SETUP = TrainingSetup(
    "thesis-5.4.1",
    schedule="constant",
    warmup_ratio=0.0,
    weight_decay=0.0,
    budgets={"quick": CONTRASTIVE_SETUP.budgets["quick"], "paper": {"batch_size": 8, "max_steps": 100_000}},
)

OBJECTIVE = Objective(
    name=NAME,
    description="TSDAE: reconstruct the sentence from the pooled vector of its 60%-deleted copy",
    build=DenoisingReconstruction,
    views=(CLEAN, DELETED),
    reads=("ratio",),
    setup=SETUP,
    reference="Wang et al. 2021 (TSDAE); thesis 2.4.6, 5.4.1",
)

register_components, register_models = objective_hooks(
    OBJECTIVE,
    description="TSDAE denoising auto-encoder (60% word deletion, tied decoder on the pooled vector)",
    reference="Wang et al. 2021 (TSDAE); thesis 2.4.6, 5.4.1, tables 6.9-6.10",
)
