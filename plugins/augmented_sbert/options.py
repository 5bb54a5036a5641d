"""The ``augsbert`` recipe's options and their meaning (Thakur et al. 2021, sections 3-5; thesis 4.3, 4.4, 5.3-5.6).

docs/methods/augsbert.md (section "Augmented SBERT") explains every option's thesis source and the deviations.
"""

from __future__ import annotations

from typing import Any

from harness import Option
from harness.blocks import BERT_MASKING, DEFAULT_DELIMITER, THESIS_CODE_MASKING, Masking

SEMI_SUPERVISED = "semi-supervised"
SELF_DISTILLATION = "self-distillation"
DOMAIN_TRANSFER = "domain-transfer"
MODES = (SEMI_SUPERVISED, SELF_DISTILLATION, DOMAIN_TRANSFER)
SEARCH_MODELS = ("fine-tuned", "pretrained")
# Topic distillation (thesis 4.4, 5.6): what teacher and student read of a sentence's topic label.
ORIGINAL, PROMPTED, HIDDEN = "original", "prompted", "hidden"
TOPIC_SETTINGS = (ORIGINAL, PROMPTED, HIDDEN)
AUTO_MASKING = "auto"
MASKINGS = {"bert": BERT_MASKING, "thesis-code": THESIS_CODE_MASKING}  # option mlm_masking (teacher_mlm=true)

OPTIONS: dict[str, Option] = {
    "teacher": Option("", "pair-scoring teacher to distil from, a model spec such as ce or cbe (required)"),
    "sampler": Option("none", "silver-pair sampler (components of kind 'sampler', e.g. bm25, kde-iterative)"),
    "mode": Option(
        SEMI_SUPERVISED,
        "student data: gold+silver, silver only (teacher on the gold source), or "
        "silver only with a teacher trained on teacher_train_on",
        choices=MODES,
    ),
    "teacher_train_on": Option("", "domain-transfer only: the task whose gold pairs train the teacher, e.g. stsb"),
    "top_k": Option(
        5,
        "partners per sentence for random / bm25 / semantic-search sampling (thesis code: 5)",
        type=int,
        bounds="[1, inf)",
    ),
    "gold_labels": Option(
        "teacher",
        "semi-supervised: the student learns the teacher's scores of the gold pairs "
        "(thesis 5.5) or their true gold scores",
        choices=("teacher", "gold"),
    ),
    "kde_fit": Option(
        "teacher",
        "kde samplers: fit the gold density on the teacher's scores of the gold pairs "
        "(thesis code) or on the gold labels",
        choices=("teacher", "gold"),
    ),
    "candidates": Option(
        "",
        "kde samplers: proposal samplers for the candidates joined by '+', e.g. "
        "semantic-search+random (empty: the sampler's default)",
    ),
    "search_model": Option(
        "fine-tuned",
        "semantic search with search_encoder fine-tuned on the teacher's training "
        "source (thesis, Thakur et al.) or the backbone as is",
        choices=SEARCH_MODELS,
    ),
    "max_silver": Option(
        -1,
        "cap on silver pairs (seeded subsample); -1: the profile's training budget, 0: no cap",
        type=int,
        bounds="[-1, inf)",
    ),
    "teacher_mlm": Option(
        False,
        "domain-adaptive MLM of the teacher on the candidate pairs, then fine-tuning with "
        "frozen embeddings (thesis 4.3.1; DomainSBERT)",
        type=bool,
    ),
    "student_from_mlm": Option(False, "the student starts from the MLM checkpoint (FullDomainSBERT)", type=bool),
    "mlm_lr": Option(3e-5, "learning rate of the domain-adaptive MLM (thesis 5.4.3)", type=float, bounds="(0, inf)"),
    # Added in harness 0.3: at their defaults they stay out of the spec hash, so earlier specs keep their results.
    "topics": Option(
        ORIGINAL,
        "topic distillation (thesis 4.4, 5.6; sources with labeled sentences, domain "
        "transfer): original: no topics; prompted: MLM, teacher and student read '{topic} ¥ {sentence}'; "
        "hidden: MLM and teacher read the prompts, the student the raw sentences",
        choices=TOPIC_SETTINGS,
        hash_default=False,
    ),
    "delimiter": Option(
        DEFAULT_DELIMITER,
        "topic delimiter of topics=prompted/hidden (thesis: the yen sign); refused "
        "if a sentence or topic label contains it",
        type=str,
        hash_default=False,
    ),
    "max_sentences": Option(
        0,
        "target sentences kept before pairing (seeded subsample; 0: all); the quick matrices' cut",
        type=int,
        hash_default=False,
        bounds="[0, inf)",
    ),
    # Added in harness 0.3: auto keeps BERT's masking for topics=original; with topics=prompted/hidden it
    # now means the thesis code's (20%, [MASK] only), so those specs with teacher_mlm=true get new hashes.
    "mlm_masking": Option(
        AUTO_MASKING,
        "teacher_mlm masking: bert (15%, 80/10/10), thesis-code (20%, the mask "
        "token only; the thesis code's topic MLM) or auto (thesis-code with topics=prompted/hidden, "
        "else bert)",
        choices=(AUTO_MASKING, *MASKINGS),
        hash_default=False,
        hash_when=lambda options: bool(options["teacher_mlm"]) and options["topics"] != ORIGINAL,
    ),
    # Added in harness 0.3: the search encoder was the Bi-Encoder ``be`` without a way to choose another;
    # at its default it stays out of the spec hash, so published specs keep their keys.
    "search_encoder": Option(
        "be",
        "the model spec that embeds sentences for semantic-search sampling (Thakur et "
        "al. 2021: a bi-encoder), fine-tuned on the teacher's source unless "
        "search_model=pretrained",
        type=str,
        hash_default=False,
    ),
}


def teacher_spec_text(options: dict[str, Any], frozen_embeddings: bool) -> str:
    """The teacher's spec; after domain MLM its embedding layer is frozen (thesis 4.3.1)."""
    text = options["teacher"]
    if frozen_embeddings:
        text += ("," if ":" in text else ":") + "freeze_embeddings=true"
    return text


def mlm_masking(options: dict[str, Any]) -> Masking:
    """The teacher MLM's masking: option mlm_masking, ``auto`` being the thesis code's for the topic settings."""
    name = options["mlm_masking"]
    if name == AUTO_MASKING:
        name = "bert" if options["topics"] == ORIGINAL else "thesis-code"
    return MASKINGS[name]
