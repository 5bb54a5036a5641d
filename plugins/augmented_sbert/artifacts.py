"""What the ``augsbert`` recipe keeps on disk: the teacher's scores and the domain-adapted MLM checkpoint in the
store's shared cache (``ctx.cache``, :class:`harness.cache.ArtifactCache`; thesis 4.3.1, 5.6.1), and the silver-pair
artifact of thesis figure 6.4 (format: :mod:`harness.nn.silver_pairs`; Thakur et al. 2021 section 4).

Cache entries are named after everything that determines them, so students that differ only after the scoring
(DomainSBERT / FullDomainSBERT, Prompted / Hidden) share one MLM checkpoint, one teacher and one scoring. The names
(``teacher-scores-<key>.npy``, ``domain-mlm-<key>/seed-<seed>``) and keys are those of earlier releases.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness import HarnessError, ScoredPairs, as_pair_scorer
from harness.blocks import BERT_MASKING, Masking, PairTopics, write_silver_pairs

from .options import mlm_masking

MLM_CACHE_KIND = "domain-mlm"  # folders of domain-adapted backbones: <cache>/domain-mlm-<key>/seed-<seed>
SCORE_CACHE_KIND = "teacher-scores"  # <cache>/teacher-scores-<key>.npy: a teacher's scores of one pair list


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


def cached_teacher_scores(ctx, teacher, teacher_text: str, first: list[str], second: list[str]) -> np.ndarray:
    """The teacher's scores of the pairs, kept in the store's shared cache under the teacher's weights, its spec and
    the pairs' texts. A teacher whose weights cannot be read (no torch module among its attributes) scores every
    time; so does a context without a cache."""
    scorer = as_pair_scorer(teacher)
    fingerprint = weights_fingerprint(teacher)
    if ctx.cache is None or fingerprint is None:
        return np.asarray(scorer.score(first, second), dtype=np.float64)
    cache = ctx.cache
    made_from = {
        "teacher": teacher_text,
        "class": type(teacher).__qualname__,
        "weights": fingerprint,
        "max_seq_length": ctx.profile.max_seq_length,
        "pairs": cache.content_key([first, second], 64),
    }
    path = cache.entry_path(SCORE_CACHE_KIND, made_from, suffix=".npy")
    # Checksummed by the core and tied to made_from: an edited, damaged or swapped file is scored again, never used.
    scores, from_cache = cache.array_entry(
        path,
        lambda: np.asarray(scorer.score(first, second), dtype=np.float64),
        lambda scores: scores.shape == (len(first),) and bool(np.isfinite(scores).all()),
        what="augmented sbert teacher scores",
        made_from=made_from,
    )
    if from_cache:
        ctx.logger.info("augmented sbert: %d teacher scores from %s", len(first), path)
    return scores


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


def mlm_directory(
    ctx, first: list[str], second: list[str], topics: PairTopics | None = None, masking: Masking = BERT_MASKING
) -> Path:
    """The domain-adapted backbone's folder in the store's shared cache, named after everything that determines it
    (backbone and, for a local folder, its files' checksum; pairs, their topic prompts, budgets, lr, seed): every
    student with the same MLM inputs finds it."""
    cache = ctx.cache
    if cache is None:
        raise HarnessError(
            "recipe augsbert with teacher_mlm=true keeps its MLM checkpoint in the store's cache folder, and this "
            "context has none; run it through `harness run` (or give the RecipeContext a cache_dir)."
        )
    payload = {
        "backbone": ctx.backbone,
        "pairs": cache.content_key([first, second], 64),
        "profile": ctx.profile.as_record(),
        "mlm_lr": ctx.options["mlm_lr"],
        "seed": ctx.seed,
    }
    if topics is not None:  # only then: the key of a plain MLM checkpoint stays what it was
        payload["topics"] = cache.content_key([list(topics.first), list(topics.second), topics.delimiter], 64)
    if masking != BERT_MASKING:  # likewise
        payload["masking"] = masking.as_record()
    if ctx.backbone_content is not None:  # a local folder: its files, not its path, name the MLM copy (likewise)
        payload["backbone_content"] = ctx.backbone_content
    return cache.folder(MLM_CACHE_KIND, payload) / f"seed-{ctx.seed}"


def write_silver_artifact(ctx, pairs: SilverPairs, gold_source: str) -> Path | None:
    """Step 7: every candidate with its teacher score and whether it was kept, for thesis figure 6.4."""
    if ctx.artifact_dir is None:
        return None
    options = ctx.options
    fields = {
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
    }
    return write_silver_pairs(
        Path(ctx.artifact_dir), fields, pairs.candidates, pairs.candidate_scores, pairs.kept.tolist()
    )
