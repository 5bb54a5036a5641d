"""Batched MaxSim for multi-vector embeddings: pair scoring (:func:`maxsim_pairs`) and exact search with bounded
memory.

Definition (Khattab & Zaharia 2020, ColBERT section 3.3, with the sum replaced by a mean as Nugget does: Qin & Van
Durme 2023, eq. 10): m(q, d) = (1/I) sum_i max_j cos(q_i, d_j), one-sided. :func:`harness.maxsim` is the per-pair
reference; this module computes the same numbers for many pairs at once. The engines, memory bounds and measured
speed-ups: docs/core/maxsim.md, section "MaxSim" and the table row "MaxSim (multi-vector models)".
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Sequence

import numpy as np
import torch

from ..capabilities import VectorSets
from ..metrics import check_finite_vectors
from .search import top_k

logger = logging.getLogger(__name__)

# Similarities held at once (float32): 2^23 = 32 MB, the bound for MaxSimIndex chunks and search blocks.
DEFAULT_MAX_ELEMENTS = 1 << 23

ENGINES = ("fused", "sparse")
_kernels = None  # harness.evaluation.maxsim_kernels once imported, False when numba is unavailable
# numba's default threading layer (workqueue, where OpenMP and TBB are missing) aborts the process when two Python
# threads launch parallel kernels at once; the kernel is short, so launches are serialised.
_kernel_lock = threading.Lock()


def _fused_kernels():
    """The numba kernels module, or None when numba cannot be imported (the warning says so once)."""
    global _kernels
    if _kernels is None:
        try:
            from . import maxsim_kernels

            _kernels = maxsim_kernels
        except ImportError as error:
            logger.warning(
                "numba is not usable (%s): MaxSim pairs use the slower sampled sparse product; "
                "`pip install numba` for the fused kernel",
                error,
            )
            _kernels = False
    return _kernels or None


def default_engine() -> str:
    """The engine :func:`maxsim_pairs` uses when none is named: ``fused`` when numba imports, else ``sparse``."""
    return "fused" if _fused_kernels() is not None else "sparse"


def _checked_sets(vector_sets: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The sets as 2-d arrays; refuses a set without vectors and sets of different widths."""
    checked = [vectors if type(vectors) is np.ndarray else np.asarray(vectors) for vectors in vector_sets]
    shapes = [vectors.shape for vectors in checked]  # checked in bulk first: the common case has no error
    if not all(len(shape) == 2 and shape[0] > 0 for shape in shapes) or len({shape[-1] for shape in shapes}) > 1:
        width = None
        for position, shape in enumerate(shapes):
            if len(shape) != 2 or shape[0] == 0:
                raise ValueError(
                    f"multi-vector embedding {position} has shape {shape}; MaxSim needs at least one "
                    "vector per text ([k, d] with k >= 1)"
                )
            if width is None:
                width = shape[1]
            elif shape[1] != width:
                raise ValueError(f"multi-vector embedding {position} has width {shape[1]}, the others {width}")
    return checked


def unit_rows(matrix: np.ndarray) -> torch.Tensor:
    """Rows scaled to unit length, float32 (an all-zero row stays zero; a NaN or infinite one raises
    NonFiniteVectorsError)."""
    rows = torch.tensor(check_finite_vectors(np.asarray(matrix, dtype=np.float32)))  # a copy: normalised in place
    norms = torch.linalg.vector_norm(rows, dim=1, keepdim=True)
    return rows.div_(norms.clamp_min_(torch.finfo(torch.float32).tiny))  # a zero row stays zero


class _StackedSets:
    """Unit vector sets stacked into one ``[total + 1, d]`` tensor (the last row is zero, for padding) with each
    set's offset and length."""

    def __init__(self, vector_sets: Sequence[np.ndarray]):
        checked = _checked_sets(vector_sets)
        self.lengths = np.array([len(s) for s in checked], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)
        width = checked[0].shape[1] if checked else 0
        # Normalised in one pass over all vectors; one zero row at the end that padding positions gather.
        stacked = (
            np.concatenate([*checked, np.zeros((1, width), dtype=np.float32)])
            if checked
            else np.zeros((1, 0), dtype=np.float32)
        )
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


class _RawSets:
    """Vector sets stacked as they are into one C-contiguous ``[total, d]`` float32 array (one copy, none for a
    :class:`~harness.capabilities.VectorSets` that still matches its array; no normalisation) with each set's offset
    and length, and the inverse norm of every row, computed by ``engine`` (0-norm rows get a finite inverse, so
    their cosines are 0 exactly)."""

    def __init__(self, vector_sets: Sequence[np.ndarray], engine: str):
        if (
            isinstance(vector_sets, VectorSets)
            and vector_sets.matches_stacked()
            and vector_sets.stacked.dtype == np.float32
            and (vector_sets.lengths > 0).all()
        ):
            # Already one array (e.g. Nugget's encode_multi): used as it is, no copy.
            stacked, self.lengths = vector_sets.stacked, vector_sets.lengths.astype(np.int64, copy=False)
        else:
            checked = _checked_sets(vector_sets)
            self.lengths = np.array([vectors.shape[0] for vectors in checked], dtype=np.int64)
            stacked = np.concatenate(checked, dtype=np.float32) if checked else np.zeros((0, 0), dtype=np.float32)
        self.offsets = np.zeros(len(self.lengths), dtype=np.int64)
        np.cumsum(self.lengths[:-1], out=self.offsets[1:])
        self.width = stacked.shape[1] if len(self.lengths) else 0
        # A NaN vector would be skipped by the fused kernel's max and poison the sparse one's: refused for both.
        self.stacked = np.ascontiguousarray(check_finite_vectors(stacked))
        if engine == "fused":
            self.inverse_norms = _fused_kernels().inverse_norms(self.stacked)
        else:
            norms = torch.linalg.vector_norm(torch.from_numpy(self.stacked), dim=1)
            self.inverse_norms = torch.reciprocal(norms.clamp_min_(torch.finfo(torch.float32).tiny)).numpy()

    @property
    def vectors(self) -> torch.Tensor:
        return torch.from_numpy(self.stacked)

    def __len__(self) -> int:
        return len(self.lengths)


def _concatenated_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`` without a Python loop."""
    ends = np.cumsum(counts)
    return np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - counts, counts) + np.repeat(starts, counts)


def _chunk_bounds(sizes: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive ``[start, stop)`` runs of ``sizes`` whose sum stays within ``budget`` (at least one item each)."""
    bounds, start = [], 0
    ends = np.cumsum(sizes)
    while start < len(sizes):
        limit = (ends[start - 1] if start else 0) + budget
        stop = max(start + 1, int(np.searchsorted(ends, limit, side="right")))
        bounds.append((start, stop))
        start = stop
    return bounds


def _block_scores(
    queries: _RawSets, documents: _RawSets, query_rows: np.ndarray, document_rows: np.ndarray
) -> np.ndarray:
    """MaxSim of distinct pairs sorted by (query row, document row), as one sampled matrix product.

    The similarities needed are the blocks (query i's vectors) x (document j's vectors) of the full vector-by-vector
    product; they form a sparse pattern (CSR: rows are query vectors, each row holds the columns of every document
    its query is paired with, in document order), and ``torch.sparse.sampled_addmm`` computes exactly those dot
    products without gathering any vector. Each (query vector, pair) segment is one run of the row: its max, then the
    mean over the query's vectors."""
    query_lengths, document_lengths = queries.lengths[query_rows], documents.lengths[document_rows]
    group_starts = np.flatnonzero(np.r_[True, query_rows[1:] != query_rows[:-1]])  # pairs of one query text
    group_queries = query_rows[group_starts]
    group_pairs = np.diff(np.r_[group_starts, len(query_rows)])
    group_heights = queries.lengths[group_queries]  # its vectors: the group's rows
    pair_columns = _concatenated_ranges(documents.offsets[document_rows], document_lengths)
    pair_column_starts = np.zeros(len(query_rows), dtype=np.int64)
    np.cumsum(document_lengths[:-1], out=pair_column_starts[1:])
    group_widths = np.add.reduceat(document_lengths, group_starts)  # columns in each of the group's rows
    group_column_starts = pair_column_starts[group_starts]
    # Entries in CSR order: group by group, each of the group's rows repeating the group's columns.
    entry_counts = group_heights * group_widths
    entry_group = np.repeat(np.arange(len(group_starts)), entry_counts)
    within = _concatenated_ranges(np.zeros(len(group_starts), dtype=np.int64), entry_counts)
    widths = group_widths[entry_group]
    columns = pair_columns[group_column_starts[entry_group] + within % widths]
    first_vector = int(queries.offsets[query_rows[0]])
    last_vector = int(queries.offsets[query_rows[-1]] + query_lengths[-1])
    rows = queries.offsets[group_queries][entry_group] + within // widths - first_vector
    row_starts = np.zeros(last_vector - first_vector + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=last_vector - first_vector), out=row_starts[1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR support is in beta" and the invariant-check notice
        # Zeros, not empty: sampled_addmm adds beta * these values, and 0 * a NaN left in fresh memory is NaN.
        pattern = torch.sparse_csr_tensor(
            torch.from_numpy(row_starts),
            torch.from_numpy(columns),
            torch.zeros(len(columns)),
            size=(last_vector - first_vector, len(documents.vectors)),
        )
        dots = (
            torch.sparse.sampled_addmm(
                pattern, queries.vectors[first_vector:last_vector], documents.vectors.T, beta=0.0
            )
            .values()
            .numpy()
        )
    cosines = dots * queries.inverse_norms[rows + first_vector] * documents.inverse_norms[columns]
    # Segments (group, query vector, pair) in entry order: each is one pair's columns in one row.
    segment_counts = group_heights * group_pairs
    segment_group = np.repeat(np.arange(len(group_starts)), segment_counts)
    step = _concatenated_ranges(np.zeros(len(group_starts), dtype=np.int64), segment_counts)
    pairs_here = group_pairs[segment_group]
    segment_pair = group_starts[segment_group] + step % pairs_here
    entry_starts = np.zeros(len(group_starts), dtype=np.int64)
    np.cumsum(entry_counts[:-1], out=entry_starts[1:])
    segment_starts = (
        entry_starts[segment_group]
        + step // pairs_here * group_widths[segment_group]
        + pair_column_starts[segment_pair]
        - group_column_starts[segment_group]
    )
    best = np.maximum.reduceat(cosines, segment_starts)
    return np.bincount(segment_pair, weights=best, minlength=len(query_rows)) / query_lengths


def maxsim_pairs(
    query_sets: Sequence[np.ndarray],
    document_sets: Sequence[np.ndarray],
    query_rows: Sequence[int] | None = None,
    document_rows: Sequence[int] | None = None,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
    engine: str | None = None,
) -> np.ndarray:
    """MaxSim of pairs ``(query_sets[query_rows[p]], document_sets[document_rows[p]])`` as float64 ``[n_pairs]``.

    Without rows, pair ``p`` is ``(query_sets[p], document_sets[p])``. Passing the same list as both sets with row
    indices lets each distinct text's vectors be stacked once. ``engine``: ``fused`` or ``sparse`` (docs/core/maxsim.md,
    "MaxSim"); None picks :func:`default_engine`. ``max_elements`` bounds the similarities the ``sparse`` engine
    holds at once (the fused one holds none). With ``sparse`` a pair that occurs several times is scored once.
    """
    if max_elements < 1:
        raise ValueError("max_elements must be at least 1")
    if engine is None:
        engine = default_engine()
    elif engine not in ENGINES:
        raise ValueError(f"unknown MaxSim engine {engine!r}; choose one of {', '.join(ENGINES)}")
    elif engine == "fused" and _fused_kernels() is None:
        raise ValueError("the fused MaxSim engine needs numba (`pip install numba`); or use engine='sparse'")
    queries = _RawSets(query_sets, engine)
    documents = queries if document_sets is query_sets else _RawSets(document_sets, engine)
    # Contiguous int64 rows: the kernel is compiled (once per process) for exactly these array types.
    query_rows = (
        np.arange(len(queries)) if query_rows is None else np.ascontiguousarray(query_rows, dtype=np.int64).reshape(-1)
    )
    document_rows = (
        np.arange(len(documents))
        if document_rows is None
        else np.ascontiguousarray(document_rows, dtype=np.int64).reshape(-1)
    )
    if len(query_rows) != len(document_rows):
        raise ValueError(f"{len(query_rows)} query rows but {len(document_rows)} document rows")
    if len(query_rows) and queries.width != documents.width:
        raise ValueError(f"query vectors have width {queries.width}, document vectors {documents.width}")
    if len(query_rows) == 0:
        return np.zeros(0, dtype=np.float64)
    for rows, sets, role in ((query_rows, queries, "query"), (document_rows, documents, "document")):
        if rows.min() < 0 or rows.max() >= len(sets):  # the fused kernel reads memory without bounds checks
            raise IndexError(f"{role} rows must lie in [0, {len(sets)}); got {rows.min()}..{rows.max()}")
    if engine == "fused":
        import numba

        kernels = _fused_kernels()
        # Pairs of one query text run one after another, so its vectors are still in cache (~10% faster on random
        # pairs); scores go back to the caller's order.
        order = np.argsort(query_rows, kind="stable")
        scores = np.empty(len(query_rows), dtype=np.float64)
        with _kernel_lock:
            numba.set_num_threads(max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS)))
            scores[order] = kernels.pair_scores(
                queries.stacked,
                queries.inverse_norms,
                queries.offsets,
                queries.lengths,
                documents.stacked,
                documents.inverse_norms,
                documents.offsets,
                documents.lengths,
                query_rows[order],
                document_rows[order],
            )
        return scores
    # Distinct pairs in (query, document) order: the CSR pattern needs each row's columns sorted and unique.
    distinct, pair_of = np.unique(query_rows * len(documents) + document_rows, return_inverse=True)
    distinct_queries, distinct_documents = distinct // len(documents), distinct % len(documents)
    scores = np.zeros(len(distinct), dtype=np.float64)
    similarities = queries.lengths[distinct_queries] * documents.lengths[distinct_documents]
    with torch.inference_mode():
        for start, stop in _chunk_bounds(similarities, max_elements):
            scores[start:stop] = _block_scores(
                queries, documents, distinct_queries[start:stop], distinct_documents[start:stop]
            )
    return scores[pair_of.reshape(-1)]


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


def maxsim_top_k(
    query_sets: Sequence[np.ndarray],
    document_sets: Sequence[np.ndarray] | MaxSimIndex,
    k: int,
    exclude_same_index: bool = False,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> tuple[np.ndarray, np.ndarray]:
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
