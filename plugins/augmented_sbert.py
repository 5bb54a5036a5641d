"""Augmented SBERT as a training recipe: distil a pair-scoring teacher (Cross-Encoder, Cross-Bi-Encoder, ...) into a
student that learns from scored pairs (the Bi-Encoder ``be`` by default).

Thakur et al. 2021 (AugSBERT); thesis 2.4.7, 4.3 (4.3.1 domain-adaptive MLM, 4.3.2 iterative KDE), 5.3, 5.5, 6.1-6.4,
tables 6.3-6.8 and 6.11-6.13. The recipe ``augsbert`` is written like a model spec; the run's ``--train-on`` names
the gold source and the core's option ``student`` the model that is trained (default ``be``):

    harness run --models augsbert:teacher=cbe,sampler=kde-iterative --train-on bws-cross-topic --tasks bws-cross-topic
    harness run --models augsbert:teacher=cbe,mode=domain-transfer,teacher_train_on=stsb --train-on bws-cross-topic ...
    harness run --models "augsbert:student=be:pooling=cls,teacher=cbe" --train-on stsb --tasks stsb

Pipeline (``train``):
1. Target sentences: the distinct sentences of the gold source's train pairs and the gold pairs between them; or,
   in domain transfer, the sentences of a source that offers only unlabeled sentences (e.g. a USEB domain, for the
   DomainSBERT / FullDomainSBERT rows of table 6.10, with ``sampler=semantic-search+random`` as in thesis 5.4.3).
2. A sampler (components of kind ``sampler``, plugins/samplers.py; option ``sampler``) proposes candidate pairs
   (``top_k`` per sentence).
3. Optional domain adaptation (``teacher_mlm=true``, thesis 4.3.1, ``harness.nn.mlm``): MLM on the candidate pairs in
   the pairwise format, then the teacher is fine-tuned from that checkpoint with its embedding layer frozen (the
   teacher's option ``freeze_embeddings``). ``student_from_mlm=true`` starts the student from the MLM checkpoint
   too: DomainSBERT = ``teacher_mlm=true``; FullDomainSBERT = ``teacher_mlm=true,student_from_mlm=true``. The MLM
   checkpoint lives in the store's shared cache (``ctx.cache_dir``) under a key of everything that determines it, so
   DomainSBERT and FullDomainSBERT share one MLM checkpoint, and so one teacher. Masking (option ``mlm_masking``):
   BERT's 15% with 80/10/10 for ``topics=original``; the topic settings default to the thesis code's 20% with the
   mask token only (the thesis text states no rate); either can be chosen for any setting.
4. The teacher comes from ``ctx.trained_model(teacher, train_on=...)``, so its checkpoint is cached and shared by
   every cell (and by a plain ``ce``/``cbe`` row trained on the same source), and scores every candidate.
5. The sampler keeps a subset (KDE samplers compare with the gold score distribution; others keep all); at most
   ``max_silver`` pairs (default: the profile's training-set budget) survive, a seeded uniform subsample.
6. The student (``ctx.build_student()``) trains with its own objective through ``fit_scored_pairs`` (the
   ``ScoredPairLearner`` protocol; the Bi-Encoder's is MSE on cosine) on
   - ``mode=semi-supervised`` (default): gold + silver; teacher trained on the gold source (thesis 5.5, tables 6.12,
     6.13). Option ``gold_labels``: ``teacher`` (default; thesis 5.5 and its code) re-annotates the gold train pairs
     with the teacher, so the student learns the teacher's scores on gold + silver pairs (AugSBERT-None =
     ``sampler=none``: the teacher's scores on the gold pairs only); ``gold`` keeps the true gold scores for the gold
     pairs (and, with ``sampler=none``, adds the teacher-labelled duplicates: the harness' behaviour before 0.3);
   - ``mode=self-distillation``: silver only; teacher trained on the gold source (label regularisation, tables 6.4,
     6.5; with ``sampler=none`` the teacher re-annotates the gold pairs);
   - ``mode=domain-transfer``: silver only; teacher trained on ``teacher_train_on`` (e.g. stsb), so the target's gold
     scores are never used for training (Thakur's unsupervised scenario; tables 6.7, 6.8, 6.10).
   The target's dev split (if any) selects the best epoch, as in every thesis experiment (5.1).
7. Silver pairs, their teacher scores and the gold scores are written to ``<ctx.artifact_dir>/silver_pairs.json``
   (one record per candidate with a ``kept`` flag); the ``silver-density`` plot (plugins/silver_density.py) draws
   thesis figure 6.4 from these files.

Topic distillation (thesis 4.4, 5.6, tables 6.14-6.17; option ``topics``, domain transfer only): the target is a
source's labeled sentences (``--train-on 20ng-topic``: the train documents with their parent group; ``bws-topic``;
``ukp-sentential-topic``), each with its topic label t. The sampler pairs the raw sentences (the same candidate pairs
in every setting; thesis 5.6.1: semantic search + random search, ``sampler=semantic-search+random``, 4 + 4 per
document for 20 Newsgroups, 2 + 2 for arguments: ``top_k=4`` / ``2``). ``topics=original``: nothing changes;
``prompted``: the MLM pre-trains on ``[CLS] t1 [T] x1 [SEP] [CLS] t2 [T] x2 [SEP]`` without ever masking a topic or
delimiter token (``harness.nn.mlm.PairTopics``), the teacher scores ((t1, x1), (t2, x2)) as ``"t ¥ x"`` texts, and
the student learns ``("t1 ¥ x1", "t2 ¥ x2", s)``; ``hidden``: MLM and teacher as ``prompted`` (one shared MLM
checkpoint, teacher and scoring), the student learns ``(x1, x2, s)`` and never reads a topic or the delimiter (a
FullDomainSBERT-Hidden student starts from the prompted MLM checkpoint, as in the thesis code). When a source offers
unlabeled sentences first (``20ng-topic``), the labels come from the same source's labeled sentences, cut to the
same budget. A label or sentence that contains the delimiter is one error naming the source and the option
``delimiter``. ``max_sentences`` caps the target sentences (a seeded subsample; the quick matrix's cut). The teacher's
scores are cached in the store's shared cache under its weights and the pair texts, so students that differ only
after the scoring (DomainSBERT / FullDomainSBERT, Prompted / Hidden) score once. Deviations here: the thesis code drew
its pairs with BM25 + random on the prompted texts (its text says semantic search); a sentence with several labels
keeps its first (counted as ``sentences_with_several_topics``); with no scored dev pairs the student keeps its last
epoch.

Thesis-code details that are defaults here: samplers propose ``top_k=5`` partners per sentence; semantic search
(also for the KDE candidates) embeds with a Bi-Encoder fine-tuned on the teacher's gold pairs
(``search_model=fine-tuned``; ``pretrained`` uses the backbone as is); the KDE samplers fit the gold density on the
teacher's scores of the gold pairs (``kde_fit=teacher``; ``gold`` fits it on the gold labels); the teachers ``ce``
and ``cbe`` train on both pair orders (their option ``pair_orders``). No sampler pairs two sentences that both occur
in the target's dev or test pairs (the task's ``held_out_sentences``; in-topic BWS shares sentences between train
and test pairs): such pairs are dropped and counted in the report.

Deviations: teacher scores are used as they come (a sigmoid CE gives (0, 1), a CBE a cosine in [-1, 1]: the thesis'
point about score ranges, so nothing is rescaled). The silver set is capped at the profile's training budget unless
``max_silver`` says otherwise (the thesis used all sampled pairs). KDE samplers need the target's gold scores and so
are refused in domain transfer. Semantic-search sampling embeds with a ``be`` of the run's backbone (fine-tuned on
the teacher's source, or pretrained), whatever the student is. The thesis allowed pairs of held-out sentences (its
samplers saw every sentence of the train pairs); the harness does not, since such a pair can be a test pair. A
teacher (or student) spec given as an option value carries at most one option of its own
(``teacher=ce:activation=tanh`` works; a second would be read as a recipe
option).

Before harness 0.2 this recipe was spelled as options of the Bi-Encoder (``be:teacher=cbe,...``); the options, their
defaults and the numbers are unchanged, the spec (and so its store key) is new.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness import (
    LABELED_SENTENCES,
    PAIR_SCORER,
    SCORED_PAIRS,
    TRAINABLE,
    UNLABELED_SENTENCES,
    DataFileError,
    HarnessError,
    IncompatibleError,
    InvalidOptionError,
    Option,
    RecipePlugin,
    ScoredPairLearner,
    ScoredPairs,
    as_pair_scorer,
    atomic_write_text,
    cached_bytes,
    close_matches_hint,
    hookimpl,
)
from harness.blocks import (
    BERT_MASKING,
    DEFAULT_DELIMITER,
    SCORED_PAIR_BUDGET_KEYS,
    THESIS_CODE_MASKING,
    Masking,
    PairTopics,
    SamplingInput,
    TopicPromptError,
    check_delimiter,
    check_topic,
    domain_adapted_backbone,
)

logger = logging.getLogger(__name__)

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
SEARCH_ENCODER = "be"  # the Bi-Encoder that embeds sentences for semantic-search sampling (Thakur et al. 2021)
# The silver-pair artifact; plugins/silver_density.py reads files of this name (it keeps its own copy of the name,
# since no plugin imports another) and recognises them by ARTIFACT_KIND.
ARTIFACT = "silver_pairs.json"
ARTIFACT_KIND = "augmented-sbert-silver-pairs"
ARTIFACT_VERSION = 1
MLM_CACHE_PREFIX = "domain-mlm-"  # cache folders of domain-adapted backbones: <cache_dir>/domain-mlm-<key>/seed-<seed>
SCORE_CACHE_PREFIX = "teacher-scores-"  # <cache_dir>/teacher-scores-<key>.npy: a teacher's scores of one pair list

OPTIONS: dict[str, Option] = {
    "teacher": Option("", "pair-scoring teacher to distil from, a model spec such as ce or cbe (required)"),
    "sampler": Option("none", "silver-pair sampler (components of kind 'sampler', e.g. bm25, kde-iterative)"),
    "mode": Option(SEMI_SUPERVISED, "student data: gold+silver, silver only (teacher on the gold source), or "
                   "silver only with a teacher trained on teacher_train_on", choices=MODES),
    "teacher_train_on": Option("", "domain-transfer only: the task whose gold pairs train the teacher, e.g. stsb"),
    "top_k": Option(5, "partners per sentence for random / bm25 / semantic-search sampling (thesis code: 5)",
                    type=int, bounds="[1, inf)"),
    "gold_labels": Option("teacher", "semi-supervised: the student learns the teacher's scores of the gold pairs "
                          "(thesis 5.5) or their true gold scores", choices=("teacher", "gold")),
    "kde_fit": Option("teacher", "kde samplers: fit the gold density on the teacher's scores of the gold pairs "
                      "(thesis code) or on the gold labels", choices=("teacher", "gold")),
    "candidates": Option("", "kde samplers: proposal samplers for the candidates joined by '+', e.g. "
                         "semantic-search+random (empty: the sampler's default)"),
    "search_model": Option("fine-tuned", "semantic search with a be fine-tuned on the teacher's training source "
                           "(thesis, Thakur et al.) or the backbone as is", choices=SEARCH_MODELS),
    "max_silver": Option(-1, "cap on silver pairs (seeded subsample); -1: the profile's training budget, "
                         "0: no cap", type=int, bounds="[-1, inf)"),
    "teacher_mlm": Option(False, "domain-adaptive MLM of the teacher on the candidate pairs, then fine-tuning with "
                          "frozen embeddings (thesis 4.3.1; DomainSBERT)", type=bool),
    "student_from_mlm": Option(False, "the student starts from the MLM checkpoint (FullDomainSBERT)", type=bool),
    "mlm_lr": Option(3e-5, "learning rate of the domain-adaptive MLM (thesis 5.4.3)", type=float,
                     bounds="(0, inf)"),
    # Added in harness 0.3: at their defaults they stay out of the spec hash, so earlier specs keep their results.
    "topics": Option(ORIGINAL, "topic distillation (thesis 4.4, 5.6; sources with labeled sentences, domain "
                     "transfer): original: no topics; prompted: MLM, teacher and student read '{topic} ¥ {sentence}'; "
                     "hidden: MLM and teacher read the prompts, the student the raw sentences",
                     choices=TOPIC_SETTINGS, hash_default=False),
    "delimiter": Option(DEFAULT_DELIMITER, "topic delimiter of topics=prompted/hidden (thesis: the yen sign); refused "
                        "if a sentence or topic label contains it", type=str, hash_default=False),
    "max_sentences": Option(0, "target sentences kept before pairing (seeded subsample; 0: all); the quick "
                            "matrices' cut", type=int, hash_default=False, bounds="[0, inf)"),
    # Added in harness 0.4 (issue 22): auto keeps BERT's masking for topics=original; with topics=prompted/hidden it
    # now means the thesis code's (20%, [MASK] only), so those specs with teacher_mlm=true get new hashes.
    "mlm_masking": Option(AUTO_MASKING, "teacher_mlm masking: bert (15%, 80/10/10), thesis-code (20%, the mask "
                          "token only; the thesis code's topic MLM) or auto (thesis-code with topics=prompted/hidden, "
                          "else bert)", choices=(AUTO_MASKING, *MASKINGS), hash_default=False,
                          hash_when=lambda options: bool(options["teacher_mlm"]) and options["topics"] != ORIGINAL),
}


# -- plan-time checks ------------------------------------------------------------------------------------------------
def teacher_spec_text(options: dict[str, Any], frozen_embeddings: bool) -> str:
    """The teacher's spec; after domain MLM its embedding layer is frozen (thesis 4.3.1)."""
    text = options["teacher"]
    if frozen_embeddings:
        text += ("," if ":" in text else ":") + "freeze_embeddings=true"
    return text


def validate(spec, registry) -> None:
    """Refuse, before anything trains, a distillation that cannot work; the message says what would."""
    # Spec resolution is the core's; the public API has no name for it yet, so the recipe borrows the runner's.
    from harness import get_profile, resolve_model_spec

    options = spec.options
    target_has_gold = SCORED_PAIRS in _offered_kinds(registry, spec.train_on)
    if not options["teacher"]:
        raise InvalidOptionError(
            f"recipe {spec.name!r} distils a teacher into its student; add teacher=ce or teacher=cbe (any "
            f"pair-scoring model: {', '.join(_pair_scorers(registry, trainable=True)) or '(none installed)'}), "
            f"e.g. {spec.name}:teacher=cbe,sampler=bm25."
        )
    profile = get_profile(spec.profile)
    teacher = resolve_model_spec(registry, options["teacher"], profile, spec.backbone)
    if teacher.recipe:
        raise IncompatibleError(
            f"teacher {options['teacher']!r} is itself a recipe (a distilled model); use a plain teacher such as "
            "ce or cbe."
        )
    teacher_plugin = registry.model(teacher.name)
    if PAIR_SCORER not in _reachable(teacher_plugin.capabilities):
        raise IncompatibleError(
            f"teacher {options['teacher']!r} cannot score sentence pairs (it offers "
            f"{', '.join(teacher_plugin.capabilities)}); use a pair scorer: {', '.join(_pair_scorers(registry))}."
        )
    if TRAINABLE not in teacher_plugin.capabilities or SCORED_PAIRS not in teacher_plugin.training_kinds:
        raise IncompatibleError(
            f"teacher {options['teacher']!r} cannot be trained on scored pairs; use one of: "
            f"{', '.join(_pair_scorers(registry, trainable=True))}."
        )

    mode = options["mode"]
    if mode == DOMAIN_TRANSFER and not options["teacher_train_on"]:
        raise IncompatibleError(
            f"{spec.label}: mode=domain-transfer trains the teacher on another task; add teacher_train_on=TASK, "
            f"e.g. {spec.name}:teacher={options['teacher']},mode=domain-transfer,teacher_train_on=stsb."
        )
    if mode != DOMAIN_TRANSFER and options["teacher_train_on"]:
        raise IncompatibleError(
            f"{spec.label}: teacher_train_on only applies to mode=domain-transfer (mode={mode} trains the teacher "
            "on the --train-on source); add mode=domain-transfer or drop teacher_train_on."
        )
    if options["teacher_train_on"]:
        _check_scored_pair_source(registry, options["teacher_train_on"], "teacher_train_on")

    sampler = registry.component("sampler", options["sampler"])  # unknown names: close matches and the list
    candidate_names = [n for n in options["candidates"].split("+") if n] if options["candidates"] else []
    if candidate_names and not _selects_from_candidates(sampler):
        raise InvalidOptionError(
            f"{spec.label}: candidates=... only applies to samplers that select among candidates "
            f"({', '.join(_selection_samplers(registry))}); sampler {options['sampler']!r} proposes its own pairs."
        )
    for name in candidate_names:
        if _selects_from_candidates(registry.component("sampler", name)):
            selecting = _selection_samplers(registry)
            proposal_samplers = [n for n in registry.component_names("sampler") if n not in selecting]
            raise InvalidOptionError(
                f"{spec.label}: candidates must be proposal samplers; {name!r} selects among candidates itself. "
                f"Use some of: {', '.join(proposal_samplers)}."
            )
    if not target_has_gold and mode != DOMAIN_TRANSFER:
        raise IncompatibleError(
            f"{spec.label}: {spec.train_on!r} offers sentences but no scored pairs, so mode={mode} has no gold pairs "
            "to train the teacher on; use mode=domain-transfer,teacher_train_on=stsb (or another scored-pair source)."
        )
    if not target_has_gold and options["sampler"] == "none":
        raise IncompatibleError(
            f"{spec.label}: sampler none re-annotates gold pairs, and {spec.train_on!r} has none; pair its sentences "
            "with sampler=semantic-search+random (thesis 5.4.3), semantic-search, bm25 or random."
        )
    if getattr(sampler, "uses_gold_scores", False) and mode == DOMAIN_TRANSFER:
        raise IncompatibleError(
            f"{spec.label}: sampler {options['sampler']!r} matches the target's gold score distribution, which "
            "domain transfer must not use; choose mode=semi-supervised or a sampler such as bm25, "
            "semantic-search, random or none."
        )
    if options["top_k"] < 1:
        raise InvalidOptionError(f"{spec.label}: top_k must be at least 1, got {options['top_k']}.")
    if options["max_silver"] < -1:
        raise InvalidOptionError(f"{spec.label}: max_silver is -1 (profile budget), 0 (no cap) or a positive cap.")
    if options["student_from_mlm"] and not options["teacher_mlm"]:
        raise IncompatibleError(
            f"{spec.label}: student_from_mlm=true starts the student from the teacher's domain-adapted MLM "
            "checkpoint; add teacher_mlm=true (FullDomainSBERT) or drop student_from_mlm."
        )
    if options["teacher_mlm"] and "freeze_embeddings" not in teacher_plugin.options:
        able = [name for name, plugin in sorted(registry.models.items()) if "freeze_embeddings" in plugin.options]
        raise IncompatibleError(
            f"{spec.label}: teacher_mlm=true fine-tunes the teacher with a frozen embedding layer, but teacher "
            f"{teacher.name!r} has no option freeze_embeddings; use a teacher that has it: "
            f"{', '.join(able) or '(none)'}."
        )
    if options["teacher_mlm"]:
        resolve_model_spec(registry, teacher_spec_text(options, True), profile, spec.backbone)
    if options["max_sentences"] < 0:
        raise InvalidOptionError(f"{spec.label}: max_sentences is 0 (all target sentences) or a positive cap.")
    if options["max_sentences"] and target_has_gold:
        raise IncompatibleError(
            f"{spec.label}: max_sentences cuts the sentences of a source without gold pairs; {spec.train_on!r} has "
            "gold pairs, so cut those instead (--set max_train_examples=N)."
        )
    validate_topics(spec, registry)


def validate_topics(spec, registry) -> None:
    """Topic distillation needs labeled sentences, domain transfer and a usable delimiter (thesis 4.4, 5.6)."""
    options = spec.options
    topics = options["topics"]
    if topics == ORIGINAL:
        if options["delimiter"] != DEFAULT_DELIMITER:
            raise InvalidOptionError(f"{spec.label}: delimiter only applies to topics=prompted or topics=hidden.")
        return
    try:
        check_delimiter(options["delimiter"], [])
    except TopicPromptError as exc:
        raise InvalidOptionError(f"{spec.label}: option delimiter: {exc}") from None
    if spec.train_on is None:
        return  # the core asks for --train-on
    if LABELED_SENTENCES not in _offered_kinds(registry, spec.train_on):
        labeled = sorted(name for name, plugin in registry.tasks.items()
                         if LABELED_SENTENCES in plugin.metadata.training_kinds)
        raise IncompatibleError(
            f"{spec.label}: topics={topics} distils the topic labels of labeled sentences, and {spec.train_on!r} "
            f"offers none; train on a source that does: {', '.join(labeled) or '(none installed)'}."
        )
    if options["mode"] != DOMAIN_TRANSFER:
        raise IncompatibleError(
            f"{spec.label}: topics={topics} pairs the labeled sentences and scores them with a teacher trained on "
            "another source (thesis 5.6.1: a CBE trained on STS-B); add mode=domain-transfer,teacher_train_on=stsb."
        )


def _reachable(capabilities) -> set[str]:
    from harness import reachable_capabilities  # what the core's adapters make of them

    return reachable_capabilities(capabilities)


def _pair_scorers(registry, trainable: bool = False) -> list[str]:
    return sorted(
        name for name, plugin in registry.models.items()
        if PAIR_SCORER in plugin.capabilities
        and (not trainable or (TRAINABLE in plugin.capabilities and SCORED_PAIRS in plugin.training_kinds))
    )


def _selects_from_candidates(sampler) -> bool:
    return bool(getattr(sampler, "selects_from_candidates", False))


def _selection_samplers(registry) -> list[str]:
    names = registry.component_names("sampler")
    return [name for name in names if _selects_from_candidates(registry.component("sampler", name))]


def _offered_kinds(registry, source: str | None) -> tuple[str, ...]:
    """Training kinds the (single-task) source offers; () for none or a family (the core refuses both)."""
    from harness import resolve_task_specs

    if source is None:
        return ()
    specs = resolve_task_specs(registry, source)
    return registry.task(specs[0].name).metadata.training_kinds if len(specs) == 1 else ()


def _check_scored_pair_source(registry, source: str, option: str) -> None:
    from harness import resolve_task_specs

    specs = resolve_task_specs(registry, source)
    sources = sorted(n for n, p in registry.tasks.items() if SCORED_PAIRS in p.metadata.training_kinds)
    if len(specs) != 1:
        raise IncompatibleError(f"{option}={source!r} names a task family; name one task of it: "
                                f"{', '.join(s.name for s in specs)}.")
    if SCORED_PAIRS not in registry.task(specs[0].name).metadata.training_kinds:
        raise IncompatibleError(
            f"{option}={source!r} offers no scored sentence pairs to train a teacher on; sources that would work: "
            f"{', '.join(sources) or '(none installed)'}.{close_matches_hint(source, sources)}"
        )


# -- the pipeline ----------------------------------------------------------------------------------------------------
@dataclass
class DistillationReport:
    """The student's TrainReport plus what the pipeline did (stored in training.json and in cell records)."""

    student: Any
    details: dict = field(default_factory=dict)

    def as_record(self) -> dict:
        record = self.student.as_record() if hasattr(self.student, "as_record") else dict(self.student)
        return {**record, "augmented_sbert": self.details}


@dataclass
class SilverPairs:
    """Step 1-5 of the pipeline: the target sentences, the candidates with their teacher scores, what was kept."""

    sentences: list[str]
    gold: ScoredPairs
    candidates: list[tuple[int, int]]
    candidate_scores: np.ndarray
    kept: np.ndarray  # indices into candidates, ascending unless the sampler ordered them
    teacher_text: str
    teacher_source: str
    mlm_dir: Path | None
    gold_teacher_scores: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the teacher on the gold pairs
    held_out_count: int = 0  # target sentences that also occur in dev/test pairs
    held_out_pairs_dropped: int = 0  # proposed pairs of two such sentences, dropped
    # Topic distillation: each sentence's topic label, and the texts the student reads (prompted or raw).
    topics: list[str] | None = None
    student_sentences: list[str] | None = None
    sentences_with_several_topics: int = 0

    @property
    def gold_with_teacher_scores(self) -> ScoredPairs:
        return ScoredPairs(list(self.gold.first), list(self.gold.second), self.gold_teacher_scores)

    @property
    def silver(self) -> ScoredPairs:
        """The kept pairs as the student reads them (topic-prompted under topics=prompted), teacher-scored."""
        texts = self.student_sentences if self.student_sentences is not None else self.sentences
        first = [texts[self.candidates[i][0]] for i in self.kept]
        second = [texts[self.candidates[i][1]] for i in self.kept]
        return ScoredPairs(first, second, self.candidate_scores[self.kept])


def train(splits, ctx) -> tuple[Any, DistillationReport]:
    """Augmented SBERT on the gold source in ``splits``; returns (the trained student, the report)."""
    options = ctx.options
    mode = options["mode"]
    gold_source = ctx.train_on or splits.source
    started = time.perf_counter()

    pairs = annotate_silver_pairs(splits, ctx)
    silver = pairs.silver
    artifact = write_silver_artifact(ctx, pairs, gold_source)
    # FullDomainSBERT: the student starts from the MLM-adapted encoder (saved without its MLM head).
    student_backbone = str(pairs.mlm_dir) if options["student_from_mlm"] else None
    student = ctx.build_student(backbone=student_backbone) if student_backbone else ctx.build_student()
    if not isinstance(student, ScoredPairLearner):
        raise IncompatibleError(
            f"recipe augsbert: student {ctx.student!r} ({type(student).__name__}) has no fit_scored_pairs(train, dev, "
            "ctx), so it cannot learn from silver pairs; use a student such as be."
        )
    train_pairs = student_pairs(pairs, mode, options["gold_labels"], options["sampler"])
    ctx.logger.info("augmented sbert: %d silver pairs kept; student trains on %d pairs (%s)", len(silver),
                    len(train_pairs), mode)
    preparation_seconds = time.perf_counter() - started
    # Only scored pairs can select the student's epoch; a labeled source's dev sentences cannot.
    report = student.fit_scored_pairs(train_pairs, splits.dev if splits.kind == SCORED_PAIRS else None, ctx)
    details = {
        "mode": mode, "teacher": pairs.teacher_text, "teacher_train_on": pairs.teacher_source,
        "gold_source": gold_source, "sampler": options["sampler"], "candidates": len(pairs.candidates),
        "silver": len(silver), "gold": len(pairs.gold), "student": ctx.student, "student_examples": len(train_pairs),
        "domain_mlm_backbone": str(pairs.mlm_dir) if pairs.mlm_dir else None,
        "student_from_mlm": options["student_from_mlm"], "silver_artifact": str(artifact) if artifact else None,
        "preparation_seconds": round(preparation_seconds, 3),
        "gold_labels": options["gold_labels"] if mode == SEMI_SUPERVISED else None,
        "kde_fit": options["kde_fit"], "top_k": options["top_k"], "search_model": options["search_model"],
        "held_out_sentences": pairs.held_out_count,
        "held_out_pairs_dropped": pairs.held_out_pairs_dropped,
        "target_sentences": len(pairs.sentences),
    }
    if options["topics"] != ORIGINAL:
        details.update(topics=options["topics"], delimiter=options["delimiter"],
                       topic_labels=sorted(set(pairs.topics or ())),
                       sentences_with_several_topics=pairs.sentences_with_several_topics)
    return student, DistillationReport(report, details)


def student_pairs(pairs: "SilverPairs", mode: str, gold_labels: str, sampler: str) -> ScoredPairs:
    """What the student learns from. Semi-supervised: the gold pairs (with the teacher's scores, thesis 5.5, or
    their gold scores) plus the silver pairs; with ``sampler=none`` and teacher labels, the silver pairs are the
    re-annotated gold pairs themselves, so they are not added twice. Otherwise: the silver pairs only."""
    silver = pairs.silver
    if mode != SEMI_SUPERVISED:
        return silver
    if gold_labels == "gold":
        return _concat(pairs.gold, silver)
    if sampler == "none":
        return silver
    return _concat(pairs.gold_with_teacher_scores, silver)


def annotate_silver_pairs(splits, ctx) -> SilverPairs:
    """Steps 1-5: target sentences, candidate pairs, optional domain MLM, teacher scores, the kept silver pairs."""
    options = ctx.options
    gold_source = ctx.train_on or splits.source
    teacher_source = options["teacher_train_on"] or gold_source
    if splits.kind in (UNLABELED_SENTENCES, LABELED_SENTENCES):
        # Domain transfer into target sentences (validate allows nothing else): no gold pairs or scores.
        gold = ScoredPairs([], [], np.zeros(0, dtype=np.float32))
        sentences = cut_sentences(list(dict.fromkeys(splits.train.sentences)), options["max_sentences"], ctx.seed)
    else:
        gold = splits.train
        sentences = gold.sentences()
    topics, several_topics = (None, 0) if options["topics"] == ORIGINAL else target_topics(splits, ctx, sentences)
    row_of = {text: row for row, text in enumerate(sentences)}
    gold_pairs = [(row_of[a], row_of[b]) for a, b in zip(gold.first, gold.second)]
    sampler = ctx.component("sampler", options["sampler"])
    candidate_names = tuple(n for n in options["candidates"].split("+") if n) or None

    search_model: dict[str, Any] = {}

    def embed(texts):
        # Built on first use: only semantic-search sampling needs a Bi-Encoder.
        if "model" not in search_model:
            search_source = teacher_source if options["search_model"] == "fine-tuned" else None
            search_model["model"] = ctx.trained_model(SEARCH_ENCODER, train_on=search_source)
        return search_model["model"].encode(texts)

    held_out_texts = getattr(splits, "held_out_sentences", frozenset())
    held_out = frozenset(row for text, row in row_of.items() if text in held_out_texts or text.strip() in
                         held_out_texts)
    inputs = SamplingInput(
        sentences=sentences, gold_pairs=gold_pairs, top_k=options["top_k"], seed=ctx.seed, embed=embed,
        sampler=lambda name: ctx.component("sampler", name), candidates=candidate_names, held_out=held_out,
    )
    candidates = sampler.propose(inputs)
    if inputs.dropped_held_out_pairs:
        ctx.logger.info("augmented sbert: %d proposed pairs joined two sentences of dev/test pairs; dropped",
                        len(inputs.dropped_held_out_pairs))
    if not candidates:
        raise IncompatibleError(
            f"sampler {options['sampler']!r} found no candidate pairs among {len(sentences)} target sentences of "
            f"{gold_source!r}; use a larger training source or another sampler."
        )
    first = [sentences[i] for i, _ in candidates]
    second = [sentences[j] for _, j in candidates]
    ctx.logger.info("augmented sbert: %d candidate pairs from sampler %s (%d target sentences of %s)",
                    len(candidates), options["sampler"], len(sentences), gold_source)

    # Topic distillation (thesis 4.4.3, 5.6.1): MLM and teacher read ((t1, s1), (t2, s2)); the pairs themselves are
    # the same as without topics (proposed on the raw sentences).
    mlm_topics = None
    teacher_texts = student_texts = sentences
    if topics is not None:
        mlm_topics = PairTopics([topics[i] for i, _ in candidates], [topics[j] for _, j in candidates],
                                options["delimiter"])
        prefixes = {topic: f"{topic} {options['delimiter']}" for topic in set(topics)}
        teacher_texts = [f"{prefixes[topic]} {sentence}" for topic, sentence in zip(topics, sentences)]
        student_texts = teacher_texts if options["topics"] == PROMPTED else sentences
    mlm_dir = None
    if options["teacher_mlm"]:
        masking = mlm_masking(options)
        mlm_dir = domain_adapted_backbone(
            _mlm_directory(ctx, first, second, mlm_topics, masking), ctx.backbone, first, second,
            profile=ctx.profile, seed=ctx.seed, device=ctx.device, progress=ctx.progress,
            learning_rate=options["mlm_lr"], topics=mlm_topics, masking=masking,
        )
    teacher_text = teacher_spec_text(options, frozen_embeddings=options["teacher_mlm"])
    teacher = ctx.trained_model(teacher_text, train_on=teacher_source,
                                backbone=str(mlm_dir) if mlm_dir is not None else None)
    scorer = as_pair_scorer(teacher)
    candidate_scores = cached_teacher_scores(
        ctx, teacher, teacher_text, [teacher_texts[i] for i, _ in candidates], [teacher_texts[j] for _, j in candidates]
    )
    # The teacher re-annotates the gold train pairs (thesis 5.5): the student's labels for them (gold_labels=teacher)
    # and the reference density of the KDE samplers (kde_fit=teacher, as the thesis code fits it).
    needs_gold_scores = len(gold) > 0 and (
        (options["mode"] == SEMI_SUPERVISED and options["gold_labels"] == "teacher")
        or (getattr(sampler, "uses_gold_scores", False) and options["kde_fit"] == "teacher"))
    if needs_gold_scores and list(candidates) == list(gold_pairs):  # sampler none: the candidates are the gold pairs
        gold_teacher_scores = candidate_scores.copy()
    elif needs_gold_scores:
        gold_teacher_scores = np.asarray(scorer.score(list(gold.first), list(gold.second)), dtype=np.float64)
    else:
        gold_teacher_scores = np.zeros(0)
    reference = gold_teacher_scores if options["kde_fit"] == "teacher" else gold.scores

    selection_rng = np.random.default_rng([ctx.seed, 7])
    kept = np.asarray(sampler.select(candidate_scores, reference, selection_rng), dtype=int)
    limit = _silver_limit(options["max_silver"], ctx.profile)
    if limit is not None and len(kept) > limit:
        kept = np.sort(np.random.default_rng([ctx.seed, 11]).choice(kept, size=limit, replace=False))
    return SilverPairs(sentences, gold, candidates, candidate_scores, kept, teacher_text, teacher_source, mlm_dir,
                       gold_teacher_scores, len(held_out), len(inputs.dropped_held_out_pairs), topics,
                       student_texts if topics is not None else None, several_topics)


def cached_teacher_scores(ctx, teacher, teacher_text: str, first: list[str], second: list[str]) -> np.ndarray:
    """The teacher's scores of the pairs, kept in the store's shared cache under the teacher's weights, its spec and
    the pairs' texts: students that differ only after the scoring (DomainSBERT and FullDomainSBERT, Prompted and
    Hidden) score once. A teacher whose weights cannot be read (no torch module among its attributes) scores every
    time."""
    scorer = as_pair_scorer(teacher)
    fingerprint = weights_fingerprint(teacher)
    if ctx.cache_dir is None or fingerprint is None:
        return np.asarray(scorer.score(first, second), dtype=np.float64)
    key = _content_key({"teacher": teacher_text, "class": type(teacher).__qualname__, "weights": fingerprint,
                        "max_seq_length": ctx.profile.max_seq_length, "pairs": _content_key([first, second], 64)})
    path = Path(ctx.cache_dir) / f"{SCORE_CACHE_PREFIX}{key}.npy"

    def compute() -> bytes:
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(scorer.score(first, second), dtype=np.float64))
        return buffer.getvalue()

    def holds_the_scores(content: bytes) -> bool:
        try:
            scores = np.load(io.BytesIO(content), allow_pickle=False)
        except (ValueError, OSError, EOFError):
            return False
        return scores.shape == (len(first),) and bool(np.isfinite(scores).all())

    # Checksummed by the core (harness.store.cached_bytes): an edited or damaged file is scored again, never used.
    content, from_cache = cached_bytes(path, compute, holds_the_scores, what="augmented sbert teacher scores")
    if from_cache:
        ctx.logger.info("augmented sbert: %d teacher scores from %s", len(first), path)
    return np.load(io.BytesIO(content), allow_pickle=False)


def weights_fingerprint(model) -> str | None:
    """sha256 over the state dicts of the torch modules a model object holds (e.g. the Cross-Bi-Encoder's network),
    or None if it holds none."""
    import torch

    modules = [value for value in vars(model).values() if isinstance(value, torch.nn.Module)]
    if not modules:
        return None
    digest = hashlib.sha256()
    for module in modules:
        for name, tensor in module.state_dict().items():
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().float().contiguous().numpy().tobytes())
    return digest.hexdigest()


def cut_sentences(sentences: list[str], limit: int, seed: int) -> list[str]:
    """At most ``limit`` (0: all) of the target sentences, a seeded subsample in their original order."""
    if not limit or len(sentences) <= limit:
        return sentences
    keep = np.sort(np.random.default_rng([seed, 13]).choice(len(sentences), size=limit, replace=False))
    return [sentences[i] for i in keep]


def target_topics(splits, ctx, sentences: list[str]) -> tuple[list[str], int]:
    """The topic label of every target sentence, from the source's labeled sentences (the splits themselves, or the
    same source's labeled sentences when it offered unlabeled ones first), and how many sentences carry several
    labels (e.g. a message cross-posted to two newsgroups; the first label is kept). A label or sentence that
    contains the delimiter is refused with the source's name and what to do."""
    options = ctx.options
    source = ctx.train_on or splits.source
    setting = f"recipe augsbert, topics={options['topics']}, training source {source!r}"
    if splits.kind == LABELED_SENTENCES:
        labeled = splits.train
    else:
        labeled = ctx.training_data(source, LABELED_SENTENCES).train
    topic_of: dict[str, str] = {}
    several: set[str] = set()
    for sentence, label in zip(labeled.sentences, labeled.labels):
        if topic_of.setdefault(sentence, label) != label:
            several.add(sentence)
    unlabeled = [sentence for sentence in sentences if sentence not in topic_of]
    if unlabeled:
        raise DataFileError(
            f"{setting}: {len(unlabeled)} of its {len(sentences)} sentences have no topic label (e.g. "
            f"{unlabeled[0][:60]!r}); its labeled and unlabeled sentences must be the same texts."
        )
    delimiter = options["delimiter"]
    try:
        for label in dict.fromkeys(topic_of[sentence] for sentence in sentences):
            check_topic(label, delimiter)
        check_delimiter(delimiter, sentences, f"the sentences of {source!r}")
    except TopicPromptError as exc:
        raise DataFileError(f"{setting}: {exc} (recipe option delimiter=CHARACTER)") from None
    return [topic_of[sentence].strip() for sentence in sentences], len(several & set(sentences))


def _silver_limit(max_silver: int, profile) -> int | None:
    if max_silver == 0:
        return None
    if max_silver > 0:
        return max_silver
    return profile.max_train_examples


def _concat(gold: ScoredPairs, silver: ScoredPairs) -> ScoredPairs:
    return ScoredPairs(gold.first + silver.first, gold.second + silver.second,
                       np.concatenate([gold.scores, silver.scores.astype(np.float32)]))


def _content_key(payload: Any, length: int = 16) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def mlm_masking(options: dict[str, Any]) -> Masking:
    """The teacher MLM's masking: option mlm_masking, ``auto`` being the thesis code's for the topic settings."""
    name = options["mlm_masking"]
    if name == AUTO_MASKING:
        name = "bert" if options["topics"] == ORIGINAL else "thesis-code"
    return MASKINGS[name]


def _mlm_directory(ctx, first: list[str], second: list[str], topics: PairTopics | None = None,
                   masking: Masking = BERT_MASKING) -> Path:
    """The domain-adapted backbone's folder in the store's shared cache, named after everything that determines it
    (backbone and, for a local folder, its files' checksum; pairs, their topic prompts, budgets, lr, seed): every
    student with the same MLM inputs finds it (DomainSBERT and FullDomainSBERT share one MLM checkpoint, and so one
    teacher checkpoint; so do the Prompted and Hidden settings of topic distillation)."""
    if ctx.cache_dir is None:
        raise HarnessError(
            "recipe augsbert with teacher_mlm=true keeps its MLM checkpoint in the store's cache folder, and this "
            "context has none; run it through `harness run` (or give the RecipeContext a cache_dir)."
        )
    payload = {
        "backbone": ctx.backbone, "pairs": _content_key([first, second], 64), "profile": ctx.profile.as_record(),
        "mlm_lr": ctx.options["mlm_lr"], "seed": ctx.seed,
    }
    if topics is not None:  # only then: the key of a plain MLM checkpoint stays what it was
        payload["topics"] = _content_key([list(topics.first), list(topics.second), topics.delimiter], 64)
    if masking != BERT_MASKING:  # likewise
        payload["masking"] = masking.as_record()
    if ctx.backbone_content is not None:  # a local folder: its files, not its path, name the MLM copy (likewise)
        payload["backbone_content"] = ctx.backbone_content
    key = _content_key(payload)
    return Path(ctx.cache_dir) / f"{MLM_CACHE_PREFIX}{key}" / f"seed-{ctx.seed}"


def write_silver_artifact(ctx, pairs: SilverPairs, gold_source: str) -> Path | None:
    """Step 7: every candidate with its teacher score and whether it was kept, for thesis figure 6.4."""
    if ctx.artifact_dir is None:
        return None
    options = ctx.options
    kept_set = set(pairs.kept.tolist())
    payload = {
        "artifact": ARTIFACT_KIND,
        "version": ARTIFACT_VERSION,
        "mode": options["mode"],
        "sampler": options["sampler"],
        "candidate_samplers": options["candidates"] or None,
        "teacher": pairs.teacher_text,
        "teacher_train_on": pairs.teacher_source,
        "gold_source": gold_source,
        "teacher_mlm": options["teacher_mlm"],
        "mlm_masking": mlm_masking(options).as_record() if options["teacher_mlm"] else None,
        "domain_mlm_backbone": str(pairs.mlm_dir) if pairs.mlm_dir else None,
        "student": ctx.student,
        "backbone": ctx.backbone,
        "profile": ctx.profile.name,
        "seed": ctx.seed,
        "top_k": options["top_k"],
        "gold_scores": [round(float(s), 6) for s in pairs.gold.scores],
        "gold_teacher_scores": [round(float(s), 6) for s in pairs.gold_teacher_scores],
        "kde_fit": options["kde_fit"],
        "topics": options["topics"],
        "topic_labels": pairs.topics,  # per sentence (topics=prompted/hidden), else null
        "sentences": pairs.sentences,
        # One row per candidate: index of the first and second sentence, teacher score, kept as silver (0/1).
        "columns": ["first", "second", "teacher_score", "kept"],
        "pairs": [[i, j, round(float(score), 6), int(row in kept_set)]
                  for row, ((i, j), score) in enumerate(zip(pairs.candidates, pairs.candidate_scores))],
    }
    path = Path(ctx.artifact_dir) / ARTIFACT
    atomic_write_text(path, json.dumps(payload, separators=(",", ":")) + "\n")
    return path


@hookimpl
def register_recipes(register):
    register(RecipePlugin(
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
        reference="Thakur et al. 2021 (AugSBERT); thesis 2.4.7, 4.3, 5.3, 5.5, tables 6.3-6.8, 6.10-6.13",
    ))
