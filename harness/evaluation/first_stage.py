"""First-stage retrieval for models that only score pairs (cross-encoders): the candidates they rerank.

- ``bm25``: :class:`~harness.evaluation.bm25.BM25Index` (rank_bm25's Okapi BM25, k1 1.5, b 0.75) over the pool;
  the ``k`` best documents per query.
- anything else is a model spec text (e.g. ``be``) that the evaluation context builds through the runner
  (``EvalContext.embedder``: same checkpoint cache, same device, no process-global registry); the ``k`` nearest
  documents by cosine of its embeddings.

Reference: the retrieve-then-rerank setting of sentence-transformers' ``retrieve_rerank`` examples and of BEIR's
reranking evaluation (BM25 top 100). useb defines no first stage (its CQADupStack protocol is for embedders only);
this is the harness' extension, recorded in ``EvalResult.details``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from harness.capabilities import Embedder, MultiVectorEmbedder, PairScorer, SpanEncoder
from harness.deprecation import deprecated_names
from harness.errors import IncompatibleError
from harness.evaluation.adapters import as_embedder
from harness.evaluation.bm25 import BM25Index
from harness.evaluation.search import DEFAULT_CHUNK, chunked_top_k, cosine_top_k

logger = logging.getLogger(__name__)

BM25_FIRST_STAGE = "bm25"  # the first-stage option value that selects BM25 (beside BM25Index, the index itself)

__getattr__ = deprecated_names(__name__, {"BM25": (__name__, "BM25_FIRST_STAGE")})  # read as the index's name


class FirstStage(Protocol):
    """The candidates a pair scorer reranks: ``candidates(queries, pool, k)`` gives each query's best ``k``."""

    name: str  # as the user gave it (the task option's value)
    description: str  # what actually ran, for EvalResult.details

    def candidates(self, queries: Sequence[str], pool: Sequence[str], k: int) -> np.ndarray:
        """``[n_queries, min(k, len(pool))]`` pool indices per query, best first."""


class BM25FirstStage:
    name = BM25_FIRST_STAGE
    description = "bm25 (rank_bm25 BM25Okapi, k1 1.5, b 0.75)"

    def candidates(self, queries: Sequence[str], pool: Sequence[str], k: int) -> np.ndarray:
        index = BM25Index(pool)
        indices, _ = chunked_top_k(
            lambda start, stop: index.scores(queries[start:stop]), len(queries), k, DEFAULT_CHUNK
        )
        return indices


class EmbedderFirstStage:
    """A first stage from an embedder: each query's ``k`` nearest pool documents by cosine."""

    def __init__(self, name: str, embedder: Embedder):
        self.name = name
        self.embedder = embedder
        self.description = f"embedder {name} (cosine)"

    def candidates(self, queries: Sequence[str], pool: Sequence[str], k: int) -> np.ndarray:
        vectors = encode_once(self.embedder, [*queries, *pool])
        indices, _ = cosine_top_k(vectors[: len(queries)], vectors[len(queries) :], k)
        return indices


def _distinct_rows(texts: Sequence[str]) -> tuple[list[str], list[int]]:
    """The distinct texts in first-seen order and, per input text, its row among them."""
    distinct = list(dict.fromkeys(texts))
    row_of = {text: row for row, text in enumerate(distinct)}
    return distinct, [row_of[text] for text in texts]


def encode_once(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embeddings of ``texts`` with each distinct text encoded once (duplicate titles are common in forums)."""
    distinct, rows = _distinct_rows(texts)
    return np.asarray(embedder.encode(distinct))[rows]


def encode_multi_once(model: MultiVectorEmbedder, texts: Sequence[str]) -> list[np.ndarray]:
    """Multi-vector embeddings of ``texts`` with each distinct text encoded once."""
    distinct, rows = _distinct_rows(texts)
    vector_sets = list(model.encode_multi(distinct))
    return [vector_sets[row] for row in rows]


def full_pool_multi_vector(model: Any) -> MultiVectorEmbedder | None:
    """The multi-vector model to rank a whole pool with by MaxSim (:mod:`harness.evaluation.maxsim`), or None when
    the model scores pairs itself or embeds single vectors (those take the other paths)."""
    if isinstance(model, (PairScorer, Embedder, SpanEncoder)):
        return None
    return model if isinstance(model, MultiVectorEmbedder) else None


def full_pool_embedder(model: Any) -> Embedder | None:
    """The embedder to rank a whole pool with, or None for a model that scores pairs itself (cross-encoders),
    which then reranks a first stage's candidates."""
    if isinstance(model, PairScorer):
        return None
    if isinstance(model, (Embedder, SpanEncoder)):
        return as_embedder(model)
    return None


def first_stage_from_context(name: str, ctx: Any, task_name: str) -> FirstStage:
    """``bm25``, or the embedder the evaluation context builds for the model spec ``name``."""
    if name == BM25_FIRST_STAGE:
        return BM25FirstStage()
    build_embedder = getattr(ctx, "embedder", None)
    if build_embedder is None:
        raise IncompatibleError(
            f"task {task_name!r}: first_stage={name!r} needs an embedder built by the runner, but this evaluation "
            f"context has none; run it through `harness run`, or use first_stage={BM25_FIRST_STAGE}."
        )
    model = build_embedder(name)
    if not isinstance(model, (Embedder, SpanEncoder)):
        raise IncompatibleError(
            f"task {task_name!r}: first_stage={name!r} is a model that cannot embed texts; give an embedder spec "
            f"(e.g. be) or {BM25_FIRST_STAGE}."
        )
    logger.info("task %s: first stage %s", task_name, name)
    return EmbedderFirstStage(name, as_embedder(model))
