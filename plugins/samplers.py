"""Silver-pair samplers for Augmented SBERT (Thakur et al. 2021, section 4 "Selecting sentence pairs"; thesis 2.4.7,
4.3.2, 5.3, 6.2): ``none``, ``random``, ``bm25``, ``semantic-search``, ``bm25+semantic-search``,
``semantic-search+random``, ``kde`` (thesis eq. 2.9) and ``kde-iterative`` (thesis Algorithm 1). Each sampler is a
``Component(kind="sampler", ...)``, so a third-party package can add its own and use it as
``augsbert:teacher=cbe,sampler=NAME``; the two-stage contract (``propose``, then ``select``) is the core's
(``harness.nn.sampling``).

What each sampler does and every deviation: docs/methods/augsbert.md, section "Augmented SBERT", subsection "Silver-pair
samplers".
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from harness import Component, ComponentKind, hookimpl
from harness.blocks import (
    IndexPair,
    PairSampler,
    PairSamplerProtocol,
    SamplingInput,
    bm25_tokens,
    distinct_new_pairs,
    top_k,
)

logger = logging.getLogger(__name__)

# Pair, the old name of IndexPair, keeps working until harness 0.4 (CHANGELOG.md, 0.3.0, "Deprecated").
Pair = IndexPair
__all__ = ["BUILT_IN", "GaussianKde", "Pair", "iterative_kde_selection", "kde_sampling_probabilities"]

# Bandwidth floor for a KDE whose points all have the same score (scores live in [-1, 1]).
MIN_BANDWIDTH = 1e-3


class NoSampling(PairSampler):
    """The gold pairs themselves, for the teacher to re-annotate (self-distillation / AugSBERT-None)."""

    name = "none"

    def propose(self, inputs: SamplingInput) -> list[IndexPair]:
        return list(inputs.gold_pairs)


class RandomSampling(PairSampler):
    """``top_k`` random partners per sentence (Thakur et al. 2021, "random sampling")."""

    name = "random"

    def propose(self, inputs: SamplingInput) -> list[IndexPair]:
        count = len(inputs.sentences)
        if count < 2:
            return []
        rng = inputs.rng(self.name)
        proposed: list[IndexPair] = []
        for anchor in range(count):
            # Draw a few more than needed: some draws hit the anchor itself, a gold pair or a repeat.
            partners = rng.choice(count, size=min(count, 3 * inputs.top_k + 2), replace=False)
            proposed.extend((anchor, int(partner)) for partner in partners)
        return _first_k_per_anchor(distinct_new_pairs(proposed, inputs), inputs.top_k)


def _first_k_per_anchor(pairs: list[IndexPair], k: int) -> list[IndexPair]:
    taken: dict[int, int] = {}
    kept = []
    for pair in pairs:
        if taken.get(pair[0], 0) < k:
            taken[pair[0]] = taken.get(pair[0], 0) + 1
            kept.append(pair)
    return kept


class BM25Sampling(PairSampler):
    """The ``top_k`` most similar other sentences of each sentence by Okapi BM25 (Thakur et al. 2021, "BM25")."""

    name = "bm25"

    def propose(self, inputs: SamplingInput) -> list[IndexPair]:
        from rank_bm25 import BM25Okapi

        tokenized = [bm25_tokens(text) or ["<empty>"] for text in inputs.sentences]
        if len(tokenized) < 2:
            return []
        index = BM25Okapi(tokenized)
        proposed: list[IndexPair] = []
        for anchor, query in enumerate(tokenized):
            scores = np.asarray(index.get_scores(query), dtype=np.float64)
            scores[anchor] = -np.inf
            proposed.extend((anchor, int(j)) for j in _top_indices(scores, inputs.top_k))
        return distinct_new_pairs(proposed, inputs)


def _top_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k largest finite scores, best first (ties broken by index, for determinism)."""
    indices, best = top_k(scores[None, :], k)
    return indices[0][np.isfinite(best[0])]


class SemanticSearchSampling(PairSampler):
    """The ``top_k`` nearest other sentences of each sentence by cosine of Bi-Encoder embeddings (Thakur et al.
    2021, "semantic search sampling")."""

    name = "semantic-search"
    needs_embedder = True

    def propose(self, inputs: SamplingInput) -> list[IndexPair]:
        if inputs.embed is None:
            raise ValueError("semantic-search sampling needs an embedder (inputs.embed)")
        if len(inputs.sentences) < 2:
            return []
        embeddings = np.asarray(inputs.embed(inputs.sentences), dtype=np.float32)
        embeddings /= np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
        proposed: list[IndexPair] = []
        block = 1024  # rows of the similarity matrix held at once
        for start in range(0, len(embeddings), block):
            similarities = (embeddings[start : start + block] @ embeddings.T).astype(np.float64)
            rows = np.arange(len(similarities))
            similarities[rows, start + rows] = -np.inf  # a sentence is never its own partner
            neighbours, best = top_k(similarities, inputs.top_k)
            for row in rows:
                found = neighbours[row][np.isfinite(best[row])]
                proposed.extend((start + int(row), int(j)) for j in found)
        return distinct_new_pairs(proposed, inputs)


class UnionSampling(PairSampler):
    """The union of other samplers' proposals, in order (e.g. ``bm25+semantic-search``)."""

    def __init__(self, name: str, members: tuple[str, ...]):
        self.name = name
        self.members = members

    def uses_embedder(self, inputs: SamplingInput) -> bool:
        return any(_lookup(inputs, member).uses_embedder(inputs) for member in self.members)

    def propose(self, inputs: SamplingInput) -> list[IndexPair]:
        return distinct_new_pairs(
            [pair for member in self.members for pair in _lookup(inputs, member).propose(inputs)], inputs
        )


def _lookup(inputs: SamplingInput, name: str) -> PairSampler:
    if inputs.sampler is not None:
        return inputs.sampler(name)
    return BUILT_IN[name]


class GaussianKde:
    """1-D Gaussian kernel density estimate with Scott's bandwidth, as ``scipy.stats.gaussian_kde`` computes it
    (bandwidth = sample std (ddof=1) * n ** (-1/5)), with a floor for degenerate samples."""

    def __init__(self, points: Sequence[float]):
        self.points = np.asarray(points, dtype=np.float64)
        if self.points.size == 0:
            raise ValueError("a KDE needs at least one point")
        spread = float(self.points.std(ddof=1)) if self.points.size > 1 else 0.0
        self.bandwidth = max(spread * self.points.size ** (-1.0 / 5.0), MIN_BANDWIDTH)

    def __call__(self, values: Sequence[float] | float) -> np.ndarray:
        values = np.atleast_1d(np.asarray(values, dtype=np.float64))
        out = np.empty(values.shape, dtype=np.float64)
        norm = self.points.size * self.bandwidth * math.sqrt(2.0 * math.pi)
        block = max(1, 2_000_000 // self.points.size)
        for start in range(0, values.size, block):
            offsets = (values[start : start + block, None] - self.points[None, :]) / self.bandwidth
            out[start : start + block] = np.exp(-0.5 * offsets**2).sum(axis=1) / norm
        return out


def kde_sampling_probabilities(candidate_scores: np.ndarray, gold_scores: np.ndarray) -> np.ndarray:
    """Thakur et al.'s Q(s) (thesis eq. 2.9): 1 where F_gold(s) >= F_silver(s), else F_gold(s) / F_silver(s);
    F_silver is the density of all candidate scores."""
    candidate_scores = np.asarray(candidate_scores, dtype=np.float64)
    gold_density = GaussianKde(gold_scores)(candidate_scores)
    silver_density = GaussianKde(candidate_scores)(candidate_scores)
    ratio = np.divide(gold_density, silver_density, out=np.ones_like(gold_density), where=silver_density > 0)
    return np.minimum(1.0, ratio)


def iterative_kde_selection(
    candidate_scores: np.ndarray, gold_scores: np.ndarray, rng: np.random.Generator, initial: int = 2
) -> list[int]:
    """Thesis Algorithm 1: indices of the candidates kept, in the order they were added."""
    candidate_scores = np.asarray(candidate_scores, dtype=np.float64)
    if len(candidate_scores) <= initial:
        return list(range(len(candidate_scores)))
    gold_density = GaussianKde(gold_scores)(candidate_scores)  # the gold KDE never changes: evaluate once
    order = rng.permutation(len(candidate_scores)).tolist()
    selected = order[:initial]
    remaining = order[initial:]
    silver = list(candidate_scores[selected])
    silver_kde = GaussianKde(silver)
    added = True
    while added and remaining:
        added = False
        still_remaining = []
        for index in remaining:
            if gold_density[index] > silver_kde(candidate_scores[index])[0]:
                selected.append(index)
                silver.append(candidate_scores[index])
                silver_kde = GaussianKde(silver)
                added = True
            else:
                still_remaining.append(index)
        remaining = still_remaining
    return selected


class KdeSampling(PairSampler):
    """Thakur et al. 2021 KDE sampling: random candidates kept with probability Q(s) (thesis eq. 2.9)."""

    name = "kde"
    uses_gold_scores = True
    selects_from_candidates = True
    default_candidates: tuple[str, ...] = ("random",)

    def candidate_sources(self, inputs: SamplingInput) -> tuple[str, ...]:
        return inputs.candidates or self.default_candidates

    def uses_embedder(self, inputs: SamplingInput) -> bool:
        return any(_lookup(inputs, name).uses_embedder(inputs) for name in self.candidate_sources(inputs))

    def propose(self, inputs: SamplingInput) -> list[IndexPair]:
        sources = self.candidate_sources(inputs)
        return distinct_new_pairs([pair for name in sources for pair in _lookup(inputs, name).propose(inputs)], inputs)

    def select(self, candidate_scores: np.ndarray, gold_scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if len(candidate_scores) == 0:
            return np.zeros(0, dtype=int)
        probabilities = kde_sampling_probabilities(candidate_scores, gold_scores)
        return np.flatnonzero(rng.random(len(probabilities)) < probabilities)


class IterativeKdeSampling(KdeSampling):
    """Thesis Algorithm 1 (iterative KDE) over semantic-search + random candidates."""

    name = "kde-iterative"
    default_candidates = ("semantic-search", "random")

    def select(self, candidate_scores: np.ndarray, gold_scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(iterative_kde_selection(candidate_scores, gold_scores, rng), dtype=int)


BUILT_IN: dict[str, PairSampler] = {
    sampler.name: sampler
    for sampler in (
        NoSampling(),
        RandomSampling(),
        BM25Sampling(),
        SemanticSearchSampling(),
        UnionSampling("bm25+semantic-search", ("bm25", "semantic-search")),
        UnionSampling("semantic-search+random", ("semantic-search", "random")),
        KdeSampling(),
        IterativeKdeSampling(),
    )
}


@hookimpl
def register_components(register):
    register(
        ComponentKind(
            "sampler",
            PairSamplerProtocol,
            "a silver-pair sampler: propose(inputs) -> candidate pairs, select(scores, gold_scores, rng) -> "
            "kept indices (harness.nn.sampling)",
        )
    )
    for name, sampler in BUILT_IN.items():
        register(Component("sampler", name, sampler, (type(sampler).__doc__ or "").strip().splitlines()[0]))
