"""The ``augsbert`` pipeline (Thakur et al. 2021, sections 3-4; thesis 4.3, 4.4, 5.5, 5.6): target sentences,
candidate pairs from a sampler, optional domain-adaptive MLM, teacher scores, the kept silver pairs, and the student
trained on them. The steps and every deviation from the thesis are in docs/methods/augsbert.md ("Augmented SBERT").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness import (
    LABELED_SENTENCES,
    SCORED_PAIRS,
    UNLABELED_SENTENCES,
    DataFileError,
    IncompatibleError,
    ScoredPairLearner,
    ScoredPairs,
    as_pair_scorer,
)
from harness.blocks import (
    PairTopics,
    SamplingInput,
    TopicPromptError,
    check_delimiter,
    check_topic,
    domain_adapted_backbone,
)

from .artifacts import SilverPairs, cached_teacher_scores, mlm_directory, write_silver_artifact
from .options import ORIGINAL, PROMPTED, SEMI_SUPERVISED, mlm_masking, teacher_spec_text


@dataclass
class DistillationReport:
    """The student's TrainReport plus what the pipeline did (stored in training.json and in cell records)."""

    student: Any
    details: dict = field(default_factory=dict)

    def as_record(self) -> dict:
        record = self.student.as_record() if hasattr(self.student, "as_record") else dict(self.student)
        return {**record, "augmented_sbert": self.details}


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
    if ctx.report_training_data is not None:  # measured against test sets with the sources (harness.contamination)
        ctx.report_training_data("augsbert student pairs (silver and gold)", train_pairs)
    ctx.logger.info(
        "augmented sbert: %d silver pairs kept; student trains on %d pairs (%s)", len(silver), len(train_pairs), mode
    )
    preparation_seconds = time.perf_counter() - started
    # Only scored pairs can select the student's epoch; a labeled source's dev sentences cannot.
    report = student.fit_scored_pairs(train_pairs, splits.dev if splits.kind == SCORED_PAIRS else None, ctx)
    details = {
        "mode": mode,
        "teacher": pairs.teacher_text,
        "teacher_train_on": pairs.teacher_source,
        "gold_source": gold_source,
        "sampler": options["sampler"],
        "candidates": len(pairs.candidates),
        "silver": len(silver),
        "gold": len(pairs.gold),
        "student": ctx.student,
        "student_examples": len(train_pairs),
        "domain_mlm_backbone": str(pairs.mlm_dir) if pairs.mlm_dir else None,
        "student_from_mlm": options["student_from_mlm"],
        "silver_artifact": str(artifact) if artifact else None,
        "preparation_seconds": round(preparation_seconds, 3),
        "gold_labels": options["gold_labels"] if mode == SEMI_SUPERVISED else None,
        "kde_fit": options["kde_fit"],
        "top_k": options["top_k"],
        "search_model": options["search_model"],
        "held_out_sentences": pairs.held_out_count,
        "held_out_pairs_dropped": pairs.held_out_pairs_dropped,
        "target_sentences": len(pairs.sentences),
    }
    if options["topics"] != ORIGINAL:
        details.update(
            topics=options["topics"],
            delimiter=options["delimiter"],
            topic_labels=sorted(set(pairs.topics or ())),
            sentences_with_several_topics=pairs.sentences_with_several_topics,
        )
    return student, DistillationReport(report, details)


def student_pairs(pairs: SilverPairs, mode: str, gold_labels: str, sampler: str) -> ScoredPairs:
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
            search_model["model"] = ctx.trained_model(options["search_encoder"], train_on=search_source)
        return search_model["model"].encode(texts)

    held_out_texts = getattr(splits, "held_out_sentences", frozenset())
    held_out = frozenset(
        row for text, row in row_of.items() if text in held_out_texts or text.strip() in held_out_texts
    )
    inputs = SamplingInput(
        sentences=sentences,
        gold_pairs=gold_pairs,
        top_k=options["top_k"],
        seed=ctx.seed,
        embed=embed,
        sampler=lambda name: ctx.component("sampler", name),
        candidates=candidate_names,
        held_out=held_out,
    )
    candidates = sampler.propose(inputs)
    if inputs.dropped_held_out_pairs:
        ctx.logger.info(
            "augmented sbert: %d proposed pairs joined two sentences of dev/test pairs; dropped",
            len(inputs.dropped_held_out_pairs),
        )
    if not candidates:
        raise IncompatibleError(
            f"sampler {options['sampler']!r} found no candidate pairs among {len(sentences)} target sentences of "
            f"{gold_source!r}; use a larger training source or another sampler."
        )
    first = [sentences[i] for i, _ in candidates]
    second = [sentences[j] for _, j in candidates]
    ctx.logger.info(
        "augmented sbert: %d candidate pairs from sampler %s (%d target sentences of %s)",
        len(candidates),
        options["sampler"],
        len(sentences),
        gold_source,
    )

    # Topic distillation (thesis 4.4.3, 5.6.1): MLM and teacher read ((t1, s1), (t2, s2)); the pairs themselves are
    # the same as without topics (proposed on the raw sentences).
    mlm_topics = None
    teacher_texts = student_texts = sentences
    if topics is not None:
        mlm_topics = PairTopics(
            [topics[i] for i, _ in candidates], [topics[j] for _, j in candidates], options["delimiter"]
        )
        prefixes = {topic: f"{topic} {options['delimiter']}" for topic in set(topics)}
        teacher_texts = [f"{prefixes[topic]} {sentence}" for topic, sentence in zip(topics, sentences)]
        student_texts = teacher_texts if options["topics"] == PROMPTED else sentences
    mlm_dir = None
    if options["teacher_mlm"]:
        masking = mlm_masking(options)
        mlm_dir = domain_adapted_backbone(
            mlm_directory(ctx, first, second, mlm_topics, masking),
            ctx.backbone,
            first,
            second,
            profile=ctx.profile,
            seed=ctx.seed,
            device=ctx.device,
            progress=ctx.progress,
            learning_rate=options["mlm_lr"],
            topics=mlm_topics,
            masking=masking,
        )
    teacher_text = teacher_spec_text(options, frozen_embeddings=options["teacher_mlm"])
    teacher = ctx.trained_model(
        teacher_text, train_on=teacher_source, backbone=str(mlm_dir) if mlm_dir is not None else None
    )
    scorer = as_pair_scorer(teacher)
    candidate_scores = cached_teacher_scores(
        ctx, teacher, teacher_text, [teacher_texts[i] for i, _ in candidates], [teacher_texts[j] for _, j in candidates]
    )
    # The teacher re-annotates the gold train pairs (thesis 5.5): the student's labels for them (gold_labels=teacher)
    # and the reference density of the KDE samplers (kde_fit=teacher, as the thesis code fits it).
    needs_gold_scores = len(gold) > 0 and (
        (options["mode"] == SEMI_SUPERVISED and options["gold_labels"] == "teacher")
        or (getattr(sampler, "uses_gold_scores", False) and options["kde_fit"] == "teacher")
    )
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
    return SilverPairs(
        sentences,
        gold,
        candidates,
        candidate_scores,
        kept,
        teacher_text,
        teacher_source,
        mlm_dir,
        gold_teacher_scores,
        len(held_out),
        len(inputs.dropped_held_out_pairs),
        topics,
        student_texts if topics is not None else None,
        several_topics,
    )


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
    return ScoredPairs(
        gold.first + silver.first,
        gold.second + silver.second,
        np.concatenate([gold.scores, silver.scores.astype(np.float32)]),
    )
