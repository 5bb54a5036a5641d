"""The adapters that let most models run on most tasks, and the per-pair similarity definitions they use.

- a span encoder serves as an embedder (a whole sentence as one proposition spanning all of it);
- an embedder serves as a pair scorer by cosine, a multi-vector embedder by one-sided MaxSim
  (:func:`harness.evaluation.maxsim.maxsim_pairs`, batched).

``harness.as_embedder``, ``harness.as_pair_scorer``, ``harness.cosine_rows`` and ``harness.maxsim`` (the public
names) are these. MaxSim's definition and its reference (ColBERT section 3.3 with the sum replaced by a mean, as
Nugget's eq. 10) are in :mod:`harness.evaluation.maxsim`. Deviations: none.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..capabilities import Embedder, MultiVectorEmbedder, PairScorer, SpanEncoder, checked_vectors
from ..metrics import check_finite_vectors


def cosine_rows(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two [n, d] arrays (zero vectors give 0, not NaN); a NaN or infinite vector
    raises :class:`harness.metrics.NonFiniteVectorsError` (its similarity is undefined, not 0)."""
    first = check_finite_vectors(np.asarray(first, dtype=np.float64))
    second = check_finite_vectors(np.asarray(second, dtype=np.float64))
    norms = np.linalg.norm(first, axis=1) * np.linalg.norm(second, axis=1)
    dots = np.einsum("ij,ij->i", first, second)
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def maxsim(query_vectors: np.ndarray, document_vectors: np.ndarray) -> float:
    """One-sided MaxSim averaged over query vectors: (1/I) sum_i max_j cos(q_i, d_j).

    The per-pair reference definition; many pairs are scored with :func:`harness.evaluation.maxsim.maxsim_pairs`
    (batched, the same numbers)."""
    check_finite_vectors(query_vectors)
    check_finite_vectors(document_vectors)
    q = query_vectors / np.maximum(np.linalg.norm(query_vectors, axis=1, keepdims=True), 1e-12)
    d = document_vectors / np.maximum(np.linalg.norm(document_vectors, axis=1, keepdims=True), 1e-12)
    return float((q @ d.T).max(axis=1).mean())


class SpanEncoderAsEmbedder:
    """Encodes a whole sentence as one proposition spanning all of it."""

    def __init__(self, model: SpanEncoder):
        self.model = model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.encode_spans([(text, [(0, len(text))]) for text in texts])


class EmbedderAsPairScorer:
    """Cosine of the two embeddings; every distinct text is encoded once."""

    def __init__(self, model: Embedder):
        self.model = model

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        distinct = list(dict.fromkeys([*first, *second]))
        row_of = {text: row for row, text in enumerate(distinct)}
        embeddings = checked_vectors(self.model.encode(distinct), len(distinct), f"{type(self.model).__name__}.encode")
        return cosine_rows(embeddings[[row_of[t] for t in first]], embeddings[[row_of[t] for t in second]])


class MultiVectorAsPairScorer:
    """One-sided MaxSim of the first text's vectors against the second's; every distinct text is encoded once and
    all pairs are scored at once (:func:`harness.evaluation.maxsim.maxsim_pairs`)."""

    def __init__(self, model: MultiVectorEmbedder):
        self.model = model

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        distinct = list(dict.fromkeys([*first, *second]))
        row_of = {text: row for row, text in enumerate(distinct)}
        vectors = self.model.encode_multi(distinct)
        if not isinstance(vectors, list):
            vectors = list(vectors)
        from .maxsim import maxsim_pairs  # imports torch: only when a multi-vector model is scored

        return maxsim_pairs(vectors, vectors, [row_of[a] for a in first], [row_of[b] for b in second])


def as_embedder(model: object) -> Embedder:
    """``model`` as an Embedder: itself when it is one, else an adapter over its other capability (a span encoder
    encodes whole sentences); IncompatibleError when it has none that can."""
    if isinstance(model, Embedder):
        return model
    if isinstance(model, SpanEncoder):
        return SpanEncoderAsEmbedder(model)
    raise TypeError(f"{type(model).__name__} is not an embedder")


def as_pair_scorer(model: object) -> PairScorer:
    """The model's own ``score`` when it has one (cross-encoders), else cosine / MaxSim over its embeddings."""
    if isinstance(model, PairScorer):
        return model
    if isinstance(model, MultiVectorEmbedder):
        return MultiVectorAsPairScorer(model)
    return EmbedderAsPairScorer(as_embedder(model))
