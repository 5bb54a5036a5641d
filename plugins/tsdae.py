"""TSDAE, Transformer-based Sequential Denoising Auto-Encoder (Wang et al. 2021, section 3; thesis 2.4.6, 5.4.1,
tables 6.9 and 6.10).

60% of the words of a sentence are deleted (option ``ratio``; :mod:`harness.nn.noise`), the damaged sentence is
encoded and pooled (CLS by default, the paper's choice; MEAN as an option), and a decoder reconstructs the original
sentence from that single vector with cross-entropy (teacher forcing: tokens 0..t-2 predict tokens 1..t-1). The
decoder (:class:`harness.nn.TransformerDecoder`) has the encoder's architecture with cross-attention added, all its
weights tied to the encoder's (the same tensors), the output projection tied to the word embeddings, and its
cross-attention's only memory is the one pooled vector. The language-model head comes from the backbone when the
checkpoint has one (as sentence-transformers loads it), else it is freshly initialised. After training only the
encoder is kept. Training setup (thesis 5.4.1, the TSDAE paper): AdamW lr 3e-5, constant, no warm-up, no weight
decay; the paper profile's budget is batch 8 and 100K steps.

sentence-transformers counterpart: ``DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)`` with
``DenoisingAutoEncoderDataset``; tests/test_unsupervised.py checks the same deletion noise (same draws, same texts),
the same loss at step 0 (within 1e-4) on fixed noise and training curves that agree.

``tsdae:aux=nm`` (thesis "TSDAE + NM") adds Noise Matching on the same deleted view; as every combination it is
trained in the contrastive setup of thesis 5.4.2 (10% warm-up, linear decay, weight decay 0.01), as the thesis code
does.

Deviations:
- Deletion tokenises each text as one line (no Punkt sentence splitting, which needs an NLTK data download); see
  :mod:`harness.nn.noise`.
- Logits are computed only at real target tokens; sentence-transformers computes them everywhere and ignores
  padding in the loss. The loss is the same. (Like sentence-transformers, the decoder's self-attention gets only
  the causal mask when the tokenizer pads on the right; a left-padding tokenizer also gets the padding mask.)
- For a backbone without a language-model head (e.g. all-MiniLM-L6-v2, a bare ``BertModel``), the head
  (``cls.predictions.transform``) is randomly initialised, as in sentence-transformers.
- The thesis code (``TsdaeModel``) passes the pooled vectors as ``encoder_hidden_states`` of shape [1, batch, d], so
  each sentence's decoder attends to every sentence vector of the batch; the paper and sentence-transformers give
  each sentence its own vector only, as here. This may explain part of the gap between the thesis' replication
  (52.9 average, table 6.10) and the paper (55.2, table 6.9).
"""
from __future__ import annotations

import torch
from torch import nn

from harness import hookimpl
from harness.blocks import (
    CLEAN,
    DELETED,
    IGNORED_LABEL,
    REPLICATION_SETUP,
    Objective,
    ObjectiveSetup,
    TrainingStep,
    TransformerDecoder,
    language_model_head,
    objective_model,
    scored_token_loss,
)

NAME = "tsdae"


class DenoisingReconstruction(nn.Module):
    """Cross-entropy of the original sentence decoded from the pooled vector of its deleted copy."""

    def __init__(self, setup: ObjectiveSetup):
        super().__init__()
        self.decoder = TransformerDecoder.from_encoder(setup.encoder.transformer, share="all",
                                                       backbone=setup.backbone)
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


OBJECTIVE = Objective(
    name=NAME,
    description="TSDAE: reconstruct the sentence from the pooled vector of its 60%-deleted copy",
    build=DenoisingReconstruction,
    views=(CLEAN, DELETED),
    reads=("ratio",),
    setup=REPLICATION_SETUP,
    reference="Wang et al. 2021 (TSDAE); thesis 2.4.6, 5.4.1",
)

COMPONENT, MODEL = objective_model(
    OBJECTIVE,
    description="TSDAE denoising auto-encoder (60% word deletion, tied decoder on the pooled vector)",
    reference="Wang et al. 2021 (TSDAE); thesis 2.4.6, 5.4.1, tables 6.9-6.10",
)


@hookimpl
def register_components(register):
    register(COMPONENT)


@hookimpl
def register_models(register):
    register(MODEL)
