"""Masked language modelling as a sentence-embedding objective, alone or combined (thesis 2.4.6, 4.2.2, 5.4.2,
tables 6.9 and 6.10).

MLM on the training sentences themselves, through the sentence encoder's own transformer: an MLM head (the
backbone's, or a fresh one tied to the word embeddings for a bare checkpoint such as all-MiniLM-L6-v2) sits on the
encoder, whose weights are the MLM model's base (the same tensors), so what MLM learns is what the pooled embedding
(CLS by default, or MEAN) is computed from. Alone it is the "MLM" row of the TSDAE paper (table 6.9); with a
contrastive auxiliary it is "MLM + SimCSE" (``mlm:aux=simcse``) and "MLM + NM" (``mlm:aux=nm``) of table 6.10, the
contrastive term weighted by ``aux_weight`` (default 1, the thesis code's sum).

Masking follows the thesis code (``apply_masking``, "uniform masking without random/same word prediction", Wettig et
al. 2022): each non-special, non-padding token is masked with probability ``mlm_probability`` (0.2) and always
replaced by the mask token; the loss is the cross-entropy at the masked positions. The input is the clean sentence.

Deviations:
- One masked token per batch is forced when the draw masked none (the thesis code would then produce a NaN loss).
- Logits are computed only at masked positions (same loss, less work).
"""

from __future__ import annotations

import torch
from torch import nn

from harness.blocks import (
    CLEAN,
    IGNORED_LABEL,
    Objective,
    ObjectiveSetup,
    TrainingStep,
    language_model_head,
    load_masked_lm,
    objective_hooks,
    scored_token_loss,
    share_parameters,
    transformer_inputs,
)

NAME = "mlm"


class MaskedLanguageModelling(nn.Module):
    """MLM loss of the clean sentences through the encoder's transformer and an MLM head."""

    def __init__(self, setup: ObjectiveSetup):
        super().__init__()
        tokenizer = setup.encoder.tokenizer
        if tokenizer.mask_token_id is None:
            from harness import IncompatibleError

            raise IncompatibleError(
                "the backbone's tokenizer has no mask token, so it cannot learn MLM; choose a "
                "BERT- or RoBERTa-style --backbone."
            )
        encoder = setup.encoder.transformer
        model = load_masked_lm(setup.backbone).to(next(encoder.parameters()).device)
        share_parameters(model.base_model, encoder)
        model.get_output_embeddings().weight = encoder.get_input_embeddings().weight
        self.model = model
        self.head = language_model_head(model)
        self.probability = float(setup.options["mlm_probability"])
        self.mask_token_id = int(tokenizer.mask_token_id)
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
        self.generator = torch.Generator().manual_seed(setup.seed + 1)

    def mask(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(masked ids, labels): uniform masking of the maskable tokens, at least one per batch."""
        maskable = attention_mask.bool() & ~torch.isin(ids, self.special_ids.to(ids.device))
        draw = torch.rand(ids.shape, generator=self.generator).to(ids.device)
        chosen = (draw < self.probability) & maskable
        if not chosen.any() and maskable.any():
            candidates = torch.nonzero(maskable.flatten()).flatten()
            pick = candidates[torch.randint(len(candidates), (1,), generator=self.generator).to(ids.device)]
            chosen.view(-1)[pick] = True
        labels = ids.masked_fill(~chosen, IGNORED_LABEL)
        return ids.masked_fill(chosen, self.mask_token_id), labels

    def forward(self, step: TrainingStep) -> torch.Tensor:
        features = transformer_inputs(step.features(CLEAN))
        masked, labels = self.mask(features["input_ids"], features["attention_mask"])
        hidden = self.model.base_model(**{**features, "input_ids": masked}).last_hidden_state
        return scored_token_loss(self.head, hidden, labels)


OBJECTIVE = Objective(
    name=NAME,
    description="MLM on the training sentences (20% uniform masking) through the sentence encoder",
    build=MaskedLanguageModelling,
    views=(CLEAN,),
    reads=("mlm_probability",),
    reference="Devlin et al. 2019; thesis 4.2.2, 5.4.2 (MLM + SimCSE, MLM + NM)",
)

register_components, register_models = objective_hooks(
    OBJECTIVE,
    description="masked language modelling through the sentence encoder; with aux=simcse/nm the thesis' MLM + X",
    reference="thesis 4.2.2, 5.4.2, tables 6.9-6.10",
)
