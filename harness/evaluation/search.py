"""Top-k search over score rows, and chunked exact cosine search with bounded memory.

Reference: useb 0.0.1's CQADupStack evaluator (``torch.topk`` over a float32 cosine matrix) and sentence-
transformers' ``semantic_search`` (query chunks). Deviations: ties are broken deterministically by the lower
column index (torch.topk leaves their order unspecified); the cosine is computed in float64 from float64-normalised
vectors and rounded to float32 before ranking, which is what useb's numbers equal (tests/test_useb.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

from ..metrics import check_finite_vectors

logger = logging.getLogger(__name__)

DEFAULT_CHUNK = 256  # query rows scored at once: the score matrix held is chunk x n_documents


def top_k(score_rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Column indices and scores of the ``k`` best columns of each row, best first; ties: lower index first.

    Returns two ``[n_rows, min(k, n_columns)]`` arrays. ``-inf`` entries (masked columns) sort last; callers that
    must not return them drop them with ``np.isfinite`` on the scores.
    """
    score_rows = np.asarray(score_rows)
    if score_rows.ndim != 2:
        raise ValueError(f"top_k expects a 2-d score matrix, got shape {score_rows.shape}")
    n_columns = score_rows.shape[1]
    k = max(min(k, n_columns), 0)
    if k == 0 or score_rows.shape[0] == 0:
        return np.zeros((score_rows.shape[0], k), dtype=int), np.zeros((score_rows.shape[0], k), score_rows.dtype)
    if k < n_columns:
        # argpartition finds *some* k best; a tie at the cut could keep a higher index, so widen the cut to every
        # column tied with the k-th score. Rows are padded with a column past the end scored -inf, which sorts
        # after every real column (real -inf included: the index breaks the tie) and is never among the first k.
        # (the k-th largest is the (n - k)-th smallest: no negated copy of the rows)
        kth_scores = np.partition(score_rows, n_columns - k, axis=1)[:, n_columns - k : n_columns - k + 1]
        kept = [np.flatnonzero(row >= kth) for row, kth in zip(score_rows, kth_scores)]
        width = max(len(columns) for columns in kept)
        candidate_columns = np.array([np.pad(c, (0, width - len(c)), constant_values=n_columns) for c in kept])
        # Only the candidates are widened to float64 (not a padded float64 copy of every row: on a BEIR corpus
        # chunk that copy was most of the search's memory traffic); the padding column reads as -inf.
        real = candidate_columns < n_columns
        picked = np.take_along_axis(score_rows, np.where(real, candidate_columns, 0), axis=1).astype(np.float64)
        candidate_scores = np.where(real, picked, -np.inf)
    else:
        candidate_columns = np.tile(np.arange(n_columns), (score_rows.shape[0], 1))
        candidate_scores = score_rows
    order = np.lexsort((candidate_columns, -candidate_scores), axis=1)[:, :k]
    indices = np.take_along_axis(candidate_columns, order, axis=1)
    return indices, np.take_along_axis(score_rows, indices, axis=1)


def chunked_top_k(
    score_chunk: Callable[[int, int], np.ndarray], n_queries: int, k: int, chunk: int = DEFAULT_CHUNK
) -> tuple[np.ndarray, np.ndarray]:
    """``top_k`` over the score rows ``score_chunk(start, stop)`` returns for queries ``start:stop``, one chunk at
    a time, so only ``chunk`` rows of scores exist at once (e.g. ``lambda a, b: index.scores(queries[a:b])``)."""
    if chunk < 1:
        raise ValueError("chunk must be at least 1")
    indices, scores = [], []
    for start in range(0, n_queries, chunk):
        chunk_indices, chunk_scores = top_k(score_chunk(start, min(start + chunk, n_queries)), k)
        indices.append(chunk_indices)
        scores.append(chunk_scores)
    if not indices:
        return np.zeros((0, 0), dtype=int), np.zeros((0, 0))
    return np.concatenate(indices), np.concatenate(scores)


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length in float64; an all-zero row stays zero (its cosine with anything is 0), a NaN or
    infinite row raises :class:`harness.metrics.NonFiniteVectorsError` (it would otherwise become a zero row)."""
    matrix = check_finite_vectors(np.asarray(matrix, dtype=np.float64))
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def cosine_top_k(
    query_vectors: np.ndarray,
    doc_vectors: np.ndarray,
    k: int,
    chunk: int = DEFAULT_CHUNK,
    exclude_same_index: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices and float32 cosine scores of the ``k`` nearest documents of each query, best first.

    Exact search in query chunks: at most ``chunk x n_documents`` scores are held at once. With
    ``exclude_same_index`` (queries and documents are the same list) query ``i`` never returns document ``i``:
    its score is ``-inf`` and sorts last.
    """
    queries, docs = unit_rows(query_vectors), unit_rows(doc_vectors)
    if exclude_same_index and len(queries) != len(docs):
        raise ValueError("exclude_same_index needs as many queries as documents")

    def cosine_chunk(start: int, stop: int) -> np.ndarray:
        # float32 scores, as useb ranks and scores them (it wraps the score matrix in a float32 torch.Tensor).
        scores = (queries[start:stop] @ docs.T).astype(np.float32)
        if exclude_same_index:
            rows = np.arange(stop - start)
            scores[rows, start + rows] = -np.inf
        return scores

    return chunked_top_k(cosine_chunk, len(queries), k, chunk)
