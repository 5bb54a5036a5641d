"""Composable unsupervised objectives and what they are built from: :func:`objective_model` (a new method in about 70
lines), the transformer decoder built from an encoder, MLM masking and heads, word-deletion noise, and the
classification head with its cross-entropy objective.
"""

from __future__ import annotations

from harness.nn.classification import SentenceClassification, classification_head
from harness.nn.decoder import DecoderOutput, TransformerDecoder
from harness.nn.mlm import (
    BERT_MASKING,
    THESIS_CODE_MASKING,
    Masking,
    PairTopics,
    domain_adapted_backbone,
    freeze_embedding_layer,
    load_masked_lm,
    mask_tokens,
    maskable_positions,
)
from harness.nn.noise import DELETION_RATIO, WordDeletion, check_deletion_ratio, delete_words, split_words
from harness.nn.objectives import (
    CLEAN,
    CONTRASTIVE_SETUP,
    DELETED,
    IGNORED_LABEL,
    OBJECTIVE_KIND,
    Objective,
    ObjectiveSetup,
    TrainingSetup,
    TrainingStep,
    UnlabeledCollator,
    curve_summary,
    in_batch_contrastive,
    language_model_head,
    objective_hooks,
    objective_model,
    require_unlabeled_source,
    scored_token_loss,
    setup_budget,
    share_parameters,
    transformer_inputs,
    usable_sentences,
)

__all__ = [
    "CLEAN",
    "DELETED",
    "IGNORED_LABEL",
    "OBJECTIVE_KIND",
    "CONTRASTIVE_SETUP",
    "Objective",
    "ObjectiveSetup",
    "TrainingSetup",
    "TrainingStep",
    "UnlabeledCollator",
    "curve_summary",
    "in_batch_contrastive",
    "language_model_head",
    "objective_hooks",
    "objective_model",
    "scored_token_loss",
    "setup_budget",
    "share_parameters",
    "transformer_inputs",
    "usable_sentences",
    "require_unlabeled_source",
    "DecoderOutput",
    "TransformerDecoder",
    "BERT_MASKING",
    "THESIS_CODE_MASKING",
    "Masking",
    "PairTopics",
    "domain_adapted_backbone",
    "freeze_embedding_layer",
    "load_masked_lm",
    "mask_tokens",
    "maskable_positions",
    "DELETION_RATIO",
    "WordDeletion",
    "check_deletion_ratio",
    "delete_words",
    "split_words",
    "SentenceClassification",
    "classification_head",
]
