"""Token prediction through a language-model head, the loss family of the reconstructing objectives: TSDAE's
decoder reconstructs the original tokens from one sentence vector (Wang et al. 2021, section 3; thesis 2.4.6), MLM
predicts masked tokens (Devlin et al. 2019, section 3.1; thesis 4.2.2, table 6.10); PaSeR and Nugget decode tokens
too.

The loss is the mean cross-entropy over the positions whose label is not :data:`IGNORED_LABEL`, with logits
computed only there (:func:`scored_token_loss`); the head is the pretrained one of a Hugging Face LM
(:func:`language_model_head`), its base tied to the sentence encoder by parameter name (:func:`share_parameters`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from harness import HarnessError

IGNORED_LABEL = -100  # a token label that no loss counts (PyTorch's cross-entropy ignore_index)


def share_parameters(owner: nn.Module, source: nn.Module) -> int:
    """Make every parameter of ``owner`` that ``source`` has under the same name the very same Parameter object
    (weight tying by name, e.g. an MLM model's base onto the sentence encoder's transformer); returns how many."""
    source_parameters = dict(source.named_parameters())
    shared = 0
    for name, _ in list(owner.named_parameters()):
        if name in source_parameters:
            module_name, _, leaf = name.rpartition(".")
            module = owner.get_submodule(module_name) if module_name else owner
            setattr(module, leaf, source_parameters[name])
            shared += 1
    return shared


def language_model_head(language_model: nn.Module) -> nn.Module:
    """The prediction head of a Hugging Face LM (BERT's ``cls``, RoBERTa's ``lm_head``): the child module, other
    than the base model, that holds the output embeddings. ``head(hidden [n, d]) -> logits [n, vocabulary]``."""
    output = language_model.get_output_embeddings()
    base = language_model.base_model
    for _, child in language_model.named_children():
        if child is not base and any(module is output for module in child.modules()):
            return child
    raise HarnessError(
        f"{type(language_model).__name__} has no separate prediction head; pick a BERT- or RoBERTa-style --backbone."
    )


def scored_token_loss(head: nn.Module, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the positions whose label is not ignored; logits are computed only there."""
    scored = labels != IGNORED_LABEL
    logits = head(hidden[scored])
    return nn.functional.cross_entropy(logits.float(), labels[scored])


def transformer_inputs(features: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The entries of a batch a Hugging Face transformer takes (ids, attention mask, token types)."""
    return {key: value for key, value in features.items() if key in ("input_ids", "attention_mask", "token_type_ids")}
