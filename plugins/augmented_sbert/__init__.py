"""Augmented SBERT as a training recipe ``augsbert``: distil a pair-scoring teacher (Cross-Encoder, Cross-Bi-Encoder,
...) into a student that learns from scored pairs (the Bi-Encoder ``be`` by default). Thakur et al. 2021 (AugSBERT);
thesis 2.4.7, 4.3 (domain-adaptive MLM, iterative KDE), 4.4 (topic distillation), 5.3-5.6, tables 6.3-6.8, 6.10-6.17.

    harness run --models augsbert:teacher=cbe,sampler=kde-iterative --train-on bws-cross-topic --tasks bws-cross-topic

Modules: :mod:`.options` (options and their constants), :mod:`.validation` (plan-time checks), :mod:`.pipeline`
(the seven steps), :mod:`.artifacts` (cache entries and the silver-pair file). The pipeline, its thesis-code
defaults and every deviation from the papers are described in docs/methods/augsbert.md, section "Augmented SBERT".
"""

from __future__ import annotations

from harness import LABELED_SENTENCES, SCORED_PAIRS, UNLABELED_SENTENCES, RecipePlugin, hookimpl
from harness.blocks import SCORED_PAIR_BUDGET_KEYS

from .artifacts import cached_teacher_scores, mlm_directory, weights_fingerprint, write_silver_artifact
from .options import OPTIONS, mlm_masking, teacher_spec_text
from .pipeline import DistillationReport, SilverPairs, annotate_silver_pairs, student_pairs, train
from .validation import validate, validate_topics

__all__ = [
    "OPTIONS",
    "DistillationReport",
    "SilverPairs",
    "annotate_silver_pairs",
    "cached_teacher_scores",
    "mlm_directory",
    "mlm_masking",
    "student_pairs",
    "teacher_spec_text",
    "train",
    "validate",
    "validate_topics",
    "weights_fingerprint",
    "write_silver_artifact",
]


def teacher_source(options, train_on):
    """Besides its source, the recipe's teacher trains on the gold pairs of teacher_train_on (default: the source);
    for records whose training did not record its provenance (harness.contamination)."""
    return [(options["teacher_train_on"] or train_on, (SCORED_PAIRS,), options["teacher"])]


@hookimpl
def register_recipes(register):
    register(
        RecipePlugin(
            name="augsbert",
            aliases=("augmented-sbert",),
            description="Augmented SBERT: a pair-scoring teacher labels sampled silver pairs; the student learns from "
            "gold + silver (or silver only)",
            train=train,
            options=OPTIONS,
            # Unlabeled and labeled sentences only as the target of domain transfer (validate refuses the rest);
            # topics=prompted/hidden read the labels (of the same source's labeled sentences if it offers both).
            training_kinds=(SCORED_PAIRS, UNLABELED_SENTENCES, LABELED_SENTENCES),
            student_kinds=(SCORED_PAIRS,),
            default_student="be",
            validate=validate,
            # quick: the student sees every gold / silver pair of the source, as the plain Bi-Encoder does.
            budgets={"quick": {"max_train_examples": None, "max_steps": None, "epochs": 1}},
            budget_keys=SCORED_PAIR_BUDGET_KEYS,  # the student / model trains through fit_scored_pairs
            training_sources=teacher_source,
            reference="Thakur et al. 2021 (AugSBERT); thesis 2.4.7, 4.3, 5.3, 5.5, tables 6.3-6.8, 6.10-6.13",
        )
    )
