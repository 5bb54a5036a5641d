"""Batched MaxSim for multi-vector embeddings: pair scoring and exact search with bounded memory.

Definition (Khattab & Zaharia 2020, ColBERT section 3.3, with the sum replaced by a mean as Nugget does: Qin & Van
Durme 2023, eq. 10): for a query with vectors q_1..q_I and a document with vectors d_1..d_J,

    m(q, d) = (1/I) sum_i max_j cos(q_i, d_j)

It is one-sided (the query's vectors look for their best match in the document). :func:`harness.maxsim` is the
per-pair reference; this module computes the same numbers for many pairs at once:

- :func:`maxsim_pairs`: scores of given (query set, document set) pairs. The distinct sets are normalised once and
  grouped by their number of vectors; pairs are grouped by their two lengths (I, J), so each group is gathered in
  whole blocks and scored by batched matrix products ``[pairs, I, d] x [pairs, d, J]`` with no padding, in batches
  of at most ``max_elements`` similarities.
- :class:`MaxSimIndex`: a set of documents stacked into one ``[all vectors, d]`` matrix; ``scores(queries)`` is
  ``[n_queries, n_documents]``, computed in query chunks (one matrix product per chunk, then the max over each
  document's block of columns), so at most ``max_elements`` similarities exist at once.
- :func:`maxsim_top_k`: exact top-k search over an index (ties: lower document index, as
  :func:`harness.evaluation.search.top_k`).

Every vector is scaled to unit length once (float32) (a zero vector stays zero: its cosine with
anything is 0, as in :func:`harness.maxsim`); the similarities are float32 products. tests/test_maxsim.py checks
equality with the per-pair definition to 1e-6 on ragged sets, including sets of a single vector.

Bad input: a text with no vector at all has no MaxSim (the mean over zero query vectors, or the max over zero
document vectors, is undefined); it is refused with a ValueError naming the text's position. Sets of different
widths are refused likewise.
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import torch

from .search import top_k

logger = logging.getLogger(__name__)

# Similarities held at once (float32): 2^23 = 32 MB, the bound for MaxSimIndex chunks and search blocks.
DEFAULT_MAX_ELEMENTS = 1 << 23
# Pair batches are kept small enough that their gathered vectors stay in the CPU caches (measured fastest on
# benchmarks/maxsim_speed.py); max_elements still bounds them.
PAIR_BATCH_ELEMENTS = 1 << 14


def _checked_sets(vector_sets: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The sets as 2-d arrays; refuses a set without vectors and sets of different widths."""
    checked: list[np.ndarray] = []
    width = None
    for position, vectors in enumerate(vector_sets):
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[0] == 0:
            raise ValueError(f"multi-vector embedding {position} has shape {vectors.shape}; MaxSim needs at least one "
                             "vector per text ([k, d] with k >= 1)")
        if width is None:
            width = vectors.shape[1]
        elif vectors.shape[1] != width:
            raise ValueError(f"multi-vector embedding {position} has width {vectors.shape[1]}, the others {width}")
        checked.append(vectors)
    return checked


def unit_rows(matrix: np.ndarray) -> torch.Tensor:
    """Rows scaled to unit length, float32 (an all-zero row stays zero)."""
    rows = torch.tensor(np.asarray(matrix, dtype=np.float32))  # a copy: normalised in place
    norms = torch.linalg.vector_norm(rows, dim=1, keepdim=True)
    return rows.div_(norms.clamp_min_(torch.finfo(torch.float32).tiny))  # a zero row stays zero


def unit_vector_sets(vector_sets: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Each set ``[k_i, d]`` with rows scaled to unit length (float32; zero rows stay zero); refuses empty sets and
    mixed widths."""
    return [unit_rows(vectors).numpy() for vectors in _checked_sets(vector_sets)]


class _StackedSets:
    """Unit vector sets stacked into one ``[total + 1, d]`` tensor (the last row is zero, for padding) with each
    set's offset and length."""

    def __init__(self, vector_sets: Sequence[np.ndarray]):
        checked = _checked_sets(vector_sets)
        self.lengths = np.array([len(s) for s in checked], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        width = checked[0].shape[1] if checked else 0
        # Normalised in one pass over all vectors; one zero row at the end that padding positions gather.
        stacked = np.concatenate([*checked, np.zeros((1, width), dtype=np.float32)]) if checked else \
            np.zeros((1, 0), dtype=np.float32)
        self.vectors = unit_rows(stacked)
        self.padding_row = len(stacked) - 1

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def width(self) -> int:
        return int(self.vectors.shape[1])

    def padded(self, rows: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Sets ``rows`` as ``[len(rows), max length, d]`` (padding rows are zero) and the ``[len(rows), max length]``
        mask of real vectors."""
        lengths = self.lengths[rows]
        longest = int(lengths.max()) if len(rows) else 0
        positions = np.arange(longest)[None, :]
        real = positions < lengths[:, None]
        index = np.where(real, self.offsets[rows][:, None] + positions, self.padding_row)
        gathered = torch.index_select(self.vectors, 0, torch.from_numpy(index.reshape(-1)))
        return gathered.view(len(rows), longest, self.width), torch.from_numpy(real)


class _LengthBuckets:
    """Unit vector sets grouped by their number of vectors: per length k a ``[texts of length k, k, d]`` tensor, so a
    group of pairs with the same two lengths is gathered in whole blocks and needs no padding or mask."""

    def __init__(self, vector_sets: Sequence[np.ndarray]):
        checked = _checked_sets(vector_sets)
        self.lengths = np.array([len(vectors) for vectors in checked], dtype=np.int64)
        self.width = checked[0].shape[1] if checked else 0
        self.slot = np.zeros(len(checked), dtype=np.int64)  # each set's row in its bucket
        self.buckets: dict[int, torch.Tensor] = {}
        for length in np.unique(self.lengths).tolist():
            members = np.flatnonzero(self.lengths == length)
            self.slot[members] = np.arange(len(members))
            bucket = torch.from_numpy(np.stack([checked[i] for i in members]).astype(np.float32, copy=False))
            norms = torch.linalg.vector_norm(bucket, dim=2, keepdim=True)
            self.buckets[length] = bucket.div_(norms.clamp_min_(torch.finfo(torch.float32).tiny))  # zero rows stay 0

    def __len__(self) -> int:
        return len(self.lengths)

    def gather(self, length: int, rows: np.ndarray) -> torch.Tensor:
        return torch.index_select(self.buckets[length], 0, torch.from_numpy(self.slot[rows]))


def maxsim_pairs(query_sets: Sequence[np.ndarray], document_sets: Sequence[np.ndarray],
                 query_rows: Sequence[int] | None = None, document_rows: Sequence[int] | None = None,
                 max_elements: int = DEFAULT_MAX_ELEMENTS) -> np.ndarray:
    """MaxSim of pairs ``(query_sets[query_rows[p]], document_sets[document_rows[p]])`` as float64 ``[n_pairs]``.

    Without rows, pair ``p`` is ``(query_sets[p], document_sets[p])``. Passing the same list as both sets with row
    indices lets each distinct text's vectors be normalised and stored once.
    """
    if max_elements < 1:
        raise ValueError("max_elements must be at least 1")
    query_buckets = _LengthBuckets(query_sets)
    document_buckets = query_buckets if document_sets is query_sets else _LengthBuckets(document_sets)
    query_rows = np.arange(len(query_buckets)) if query_rows is None else np.asarray(query_rows, dtype=np.int64)
    document_rows = np.arange(len(document_buckets)) if document_rows is None else \
        np.asarray(document_rows, dtype=np.int64)
    if len(query_rows) != len(document_rows):
        raise ValueError(f"{len(query_rows)} query rows but {len(document_rows)} document rows")
    if len(query_rows) and query_buckets.width != document_buckets.width:
        raise ValueError(f"query vectors have width {query_buckets.width}, document vectors {document_buckets.width}")
    scores = np.zeros(len(query_rows), dtype=np.float64)
    if len(query_rows) == 0:
        return scores
    query_lengths, document_lengths = query_buckets.lengths[query_rows], document_buckets.lengths[document_rows]
    # Pairs grouped by their two lengths: each group is one batched product without padding.
    group_key = query_lengths * (int(document_lengths.max()) + 1) + document_lengths
    order = np.argsort(group_key, kind="stable")
    bounds = np.flatnonzero(np.diff(group_key[order])) + 1
    with torch.inference_mode():
        for group in np.split(order, bounds):
            query_length, document_length = int(query_lengths[group[0]]), int(document_lengths[group[0]])
            size = max(1, min(max_elements, PAIR_BATCH_ELEMENTS) // (query_length * document_length))
            for start in range(0, len(group), size):
                batch = group[start : start + size]
                query_vectors = query_buckets.gather(query_length, query_rows[batch])  # [b, I, d]
                document_vectors = document_buckets.gather(document_length, document_rows[batch])  # [b, J, d]
                best = torch.bmm(query_vectors, document_vectors.transpose(1, 2)).amax(dim=2)  # [b, I]
                scores[batch] = best.double().mean(dim=1).numpy()
    return scores


class MaxSimIndex:
    """Documents' vector sets, searchable by MaxSim: ``scores(query_sets) -> [n_queries, n_documents]``."""

    def __init__(self, document_sets: Sequence[np.ndarray], max_elements: int = DEFAULT_MAX_ELEMENTS):
        if max_elements < 1:
            raise ValueError("max_elements must be at least 1")
        self.documents = _StackedSets(document_sets)
        self.max_elements = max_elements
        # Column block starts of each document in the stacked matrix (without the padding row).
        self.starts = self.documents.offsets

    def __len__(self) -> int:
        return len(self.documents)

    def _chunk_scores(self, queries: _StackedSets, rows: np.ndarray) -> np.ndarray:
        query_vectors, query_mask = queries.padded(rows)  # [c, I, d]
        chunk, longest, _ = query_vectors.shape
        document_matrix = self.documents.vectors[: self.documents.padding_row]  # [total, d]
        similarities = (query_vectors.reshape(chunk * longest, -1) @ document_matrix.T).numpy()  # [c*I, total]
        best = np.maximum.reduceat(similarities, self.starts, axis=1).reshape(chunk, longest, -1)  # [c, I, n_docs]
        best[~query_mask.numpy()] = 0.0
        return best.sum(axis=1, dtype=np.float64) / query_mask.numpy().sum(axis=1, keepdims=True)

    def scores(self, query_sets: Sequence[np.ndarray]) -> np.ndarray:
        """``[n_queries, n_documents]`` float64 MaxSim scores, computed in query chunks of bounded size."""
        queries = _StackedSets(query_sets)
        if len(queries) == 0 or len(self) == 0:
            return np.zeros((len(queries), len(self)), dtype=np.float64)
        if queries.width != self.documents.width:
            raise ValueError(f"query vectors have width {queries.width}, document vectors {self.documents.width}")
        total_columns = int(self.documents.lengths.sum())
        order = np.argsort(-queries.lengths, kind="stable")  # similar lengths share a chunk: little padding
        result = np.zeros((len(queries), len(self)), dtype=np.float64)
        start = 0
        with torch.inference_mode():
            while start < len(order):
                longest = int(queries.lengths[order[start]])
                size = max(1, self.max_elements // max(longest * total_columns, 1))
                rows = order[start : start + size]
                result[rows] = self._chunk_scores(queries, rows)
                start += size
        return result


def maxsim_top_k(query_sets: Sequence[np.ndarray], document_sets: Sequence[np.ndarray] | MaxSimIndex, k: int,
                 exclude_same_index: bool = False,
                 max_elements: int = DEFAULT_MAX_ELEMENTS) -> tuple[np.ndarray, np.ndarray]:
    """Indices and float32 MaxSim scores of the ``k`` best documents of each query, best first (ties: lower index).

    With ``exclude_same_index`` (queries and documents are the same list) query ``i`` never returns document ``i``.
    """
    index = document_sets if isinstance(document_sets, MaxSimIndex) else MaxSimIndex(document_sets, max_elements)
    if exclude_same_index and len(query_sets) != len(index):
        raise ValueError("exclude_same_index needs as many queries as documents")
    indices, scores = [], []
    # Query chunks are bounded inside MaxSimIndex.scores; this outer loop bounds the float scores kept for top_k.
    block = max(1, max_elements // max(len(index), 1))
    for start in range(0, len(query_sets), block):
        stop = min(start + block, len(query_sets))
        block_scores = index.scores(query_sets[start:stop]).astype(np.float32)
        if exclude_same_index:
            rows = np.arange(stop - start)
            block_scores[rows, start + rows] = -np.inf
        block_indices, block_top = top_k(block_scores, k)
        indices.append(block_indices)
        scores.append(block_top)
    if not indices:
        return np.zeros((0, 0), dtype=int), np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(indices), np.concatenate(scores)
