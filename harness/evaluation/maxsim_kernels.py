"""Fused MaxSim pair kernel (numba): gather, dot products, row maxima and the mean in one pass per pair.

:func:`harness.evaluation.maxsim.maxsim_pairs` uses it when numba imports (a dependency of the package; the
sampled sparse-dense product path remains for a platform without numba). Why a kernel: a pair of Nugget texts needs
only a few dozen 384-d dot products, so any formulation built from library calls (padded gathers, a sampled sparse
product plus segment reductions) spends more time moving indices and intermediate similarities than multiplying;
here every similarity lives in a register and only the pair's score is written.

- Work is split over pairs (``prange``): each pair is independent, so the result does not depend on the thread count.
- Query vectors are taken four at a time against each document vector (four dot products share one pass over the
  document vector's memory), then one at a time for the rest.
- Dot products accumulate in float32 with reassociation allowed (``fastmath`` reassoc/contract only, so the loop
  vectorises; NaN and infinity keep their IEEE meaning). Cosine = dot x both inverse norms; a zero vector has
  inverse norm 0, so its cosine is exactly 0, as in :func:`harness.maxsim`.
- Compiled on the first call in each process (about 4 s on the project's 2-core machine). Numba's on-disk cache
  (``cache=True``) is not used: its index and code files are pickles, and the project loads no pickle from disk.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

_FLAGS = {"reassoc", "contract"}


@njit(parallel=True, fastmath=_FLAGS)
def inverse_norms(vectors):  # pragma: no cover - compiled; covered through maxsim_pairs in tests/test_maxsim.py
    """``1 / ||row||`` of every row of a float32 ``[n, d]`` matrix, 0 for an all-zero row."""
    inverse = np.empty(vectors.shape[0], dtype=np.float32)
    for row in prange(vectors.shape[0]):
        total = np.float32(0.0)
        for k in range(vectors.shape[1]):
            total += vectors[row, k] * vectors[row, k]
        inverse[row] = np.float32(1.0) / np.sqrt(total) if total > 0 else np.float32(0.0)
    return inverse


@njit(parallel=True, fastmath=_FLAGS)
def pair_scores(
    query_vectors,
    query_inverse_norms,
    query_offsets,
    query_lengths,
    document_vectors,
    document_inverse_norms,
    document_offsets,
    document_lengths,
    query_rows,
    document_rows,
):  # pragma: no cover - compiled; covered through maxsim_pairs in tests/test_maxsim.py
    """MaxSim of pair ``p`` = (set ``query_rows[p]``, set ``document_rows[p]``) as float64 ``[n_pairs]``; set ``s``
    is rows ``offsets[s] : offsets[s] + lengths[s]`` of its matrix."""
    width = query_vectors.shape[1]
    scores = np.empty(query_rows.shape[0], dtype=np.float64)
    for pair in prange(query_rows.shape[0]):
        first_query = query_offsets[query_rows[pair]]
        query_count = query_lengths[query_rows[pair]]
        first_document = document_offsets[document_rows[pair]]
        document_count = document_lengths[document_rows[pair]]
        total = 0.0
        row = first_query
        end = first_query + query_count
        while row + 4 <= end:  # four query vectors per pass over each document vector
            best0 = best1 = best2 = best3 = -np.inf
            for column in range(first_document, first_document + document_count):
                dot0 = dot1 = dot2 = dot3 = np.float32(0.0)
                for k in range(width):
                    value = document_vectors[column, k]
                    dot0 += query_vectors[row, k] * value
                    dot1 += query_vectors[row + 1, k] * value
                    dot2 += query_vectors[row + 2, k] * value
                    dot3 += query_vectors[row + 3, k] * value
                scale = document_inverse_norms[column]
                best0 = max(best0, dot0 * query_inverse_norms[row] * scale)
                best1 = max(best1, dot1 * query_inverse_norms[row + 1] * scale)
                best2 = max(best2, dot2 * query_inverse_norms[row + 2] * scale)
                best3 = max(best3, dot3 * query_inverse_norms[row + 3] * scale)
            total += best0 + best1 + best2 + best3
            row += 4
        while row < end:
            best = -np.inf
            for column in range(first_document, first_document + document_count):
                dot = np.float32(0.0)
                for k in range(width):
                    dot += query_vectors[row, k] * document_vectors[column, k]
                best = max(best, dot * query_inverse_norms[row] * document_inverse_norms[column])
            total += best
            row += 1
        scores[pair] = total / query_count
    return scores
