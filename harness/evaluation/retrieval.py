"""Retrieval over a corpus that contains the queries themselves: P@1 and R@k with self-exclusion, and the same
metrics after aggregating items to larger units (sentences, documents) by their best item.

Sub-Sentence Encoder (Chen et al. 2023, arXiv 2311.04335), section 4.2.1 (table 1) and section 5.2 (table 4), and
the official ``scripts/evaluation/eval_retrieval.py``:

- every query is also a corpus item; it is removed from its own ranking (its score is -inf), nothing else is;
- P@1: the share of queries whose top-ranked item is any of their gold items;
- R@k: |gold in the top k| / |gold|, averaged over queries;
- unit level (5.2): the ``candidates`` best items of each query are retrieved, each unit (sentence, document) is
  scored by its best item among them, units are ranked by that score; gold units are the units of the gold items.
  A unit none of whose items is among the candidates is not retrieved.

Scores are cosine similarities computed as matrix products over chunks of queries (at most ``chunk x n_items``
scores exist at once); the metrics of a chunk are computed on arrays, with no loop over queries.

Deviations: the official script ranks with ``torch.argsort`` (ties in no defined order); here ties go to the lower
corpus index (:func:`harness.evaluation.search.top_k`). The official unit level takes the 21 best items (the largest
k plus one); ``candidates`` is a parameter here (tasks choose it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .search import DEFAULT_CHUNK, top_k, unit_rows

logger = logging.getLogger(__name__)

DEFAULT_KS = (1, 5, 10, 20)  # the cut-offs k of the retrieval metrics (recall@k, ...)


@dataclass(frozen=True)
class RetrievalQueries:
    """Which corpus rows are queries and which corpus rows are each query's gold."""

    rows: np.ndarray  # [n_queries] corpus row of each query (removed from its own ranking)
    gold: list[np.ndarray]  # per query, the corpus rows of its gold items (at least one, never the query itself)

    def __post_init__(self) -> None:
        if len(self.rows) != len(self.gold):
            raise ValueError(f"{len(self.rows)} query rows but {len(self.gold)} gold lists")
        for row, gold in zip(self.rows, self.gold):
            if len(gold) == 0:
                raise ValueError(f"query at corpus row {row} has no gold item")
            if row in set(np.asarray(gold).tolist()):
                raise ValueError(f"query at corpus row {row} is its own gold item")


def _metric_names(ks: Sequence[int]) -> list[str]:
    return [f"p@{k}" if k == 1 else f"r@{k}" for k in ks]


def _ranked_chunks(corpus_vectors: np.ndarray, queries: RetrievalQueries, depth: int, chunk: int):
    """Per chunk of queries: (start, the ``depth`` best corpus rows of each query by cosine, best first, the
    query's own row excluded)."""
    corpus = unit_rows(corpus_vectors)
    rows = np.asarray(queries.rows, dtype=np.int64)
    depth = min(depth, len(corpus) - 1)
    for start in range(0, len(rows), chunk):
        chunk_rows = rows[start : start + chunk]
        chunk_scores = (corpus[chunk_rows] @ corpus.T).astype(np.float32)
        chunk_scores[np.arange(len(chunk_rows)), chunk_rows] = -np.inf  # the query never retrieves itself
        yield start, top_k(chunk_scores, depth)[0]


def ranked_items(
    corpus_vectors: np.ndarray, queries: RetrievalQueries, depth: int, chunk: int = DEFAULT_CHUNK
) -> np.ndarray:
    """The ``depth`` best corpus rows of each query by cosine, best first, its own row excluded:
    ``[n_queries, min(depth, n_items - 1)]``."""
    parts = [indices for _, indices in _ranked_chunks(corpus_vectors, queries, depth, chunk)]
    return np.concatenate(parts) if parts else np.zeros((0, depth), dtype=np.int64)


def _gold_matrix(gold: Sequence[np.ndarray], width: int) -> np.ndarray:
    """``[n_queries, width]`` booleans: True where a column is gold for the query."""
    matrix = np.zeros((len(gold), width), dtype=bool)
    query_index = np.repeat(np.arange(len(gold)), [len(g) for g in gold])
    if len(query_index):
        matrix[query_index, np.concatenate([np.asarray(g, dtype=np.int64) for g in gold])] = True
    return matrix


def per_query_hit_metrics(
    hits: np.ndarray, gold_counts: np.ndarray, ks: Sequence[int] = DEFAULT_KS
) -> dict[str, np.ndarray]:
    """``hits`` ``[n_queries, depth]`` (True where the ranked item is gold, padding False), ``gold_counts``
    ``[n_queries]``: each query's P@1 and R@k as fractions (what a bootstrap interval resamples)."""
    metrics = {}
    for name, k in zip(_metric_names(ks), ks):
        if k == 1:
            metrics[name] = hits[:, :1].any(axis=1).astype(np.float64)
        else:
            metrics[name] = hits[:, :k].sum(axis=1) / gold_counts
    return metrics


def hit_metrics(hits: np.ndarray, gold_counts: np.ndarray, ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    """P@1 and R@k as fractions, averaged over queries (:func:`per_query_hit_metrics`)."""
    return {name: float(values.mean()) for name, values in per_query_hit_metrics(hits, gold_counts, ks).items()}


def retrieval_metrics(
    corpus_vectors: np.ndarray,
    queries: RetrievalQueries,
    ks: Sequence[int] = DEFAULT_KS,
    chunk: int = DEFAULT_CHUNK,
    per_query: bool = False,
) -> dict[str, float] | dict[str, np.ndarray]:
    """P@1 and R@k (fractions) of item retrieval: each query against every other corpus item (``per_query``: each
    query's values instead of their means)."""
    if len(queries.rows) == 0:
        raise ValueError("no queries to evaluate")
    hits = []
    for start, indices in _ranked_chunks(corpus_vectors, queries, max(ks), chunk):
        gold = _gold_matrix(queries.gold[start : start + len(indices)], len(corpus_vectors))
        hits.append(np.take_along_axis(gold, indices, axis=1))
    metrics = hit_metrics if not per_query else per_query_hit_metrics
    return metrics(np.concatenate(hits), np.array([len(g) for g in queries.gold]), ks)


def first_occurrences(units: np.ndarray) -> np.ndarray:
    """``[n, depth]`` unit ids in rank order -> True where a unit appears for the first time in its row (that
    position carries the unit's best score, since ranks are sorted by score)."""
    order = np.argsort(units, axis=1, kind="stable")  # equal units keep rank order: the first is the best
    sorted_units = np.take_along_axis(units, order, axis=1)
    starts = np.ones_like(sorted_units, dtype=bool)
    starts[:, 1:] = sorted_units[:, 1:] != sorted_units[:, :-1]
    first = np.zeros_like(starts)
    np.put_along_axis(first, order, starts, axis=1)
    return first


def unit_retrieval_metrics(
    corpus_vectors: np.ndarray,
    queries: RetrievalQueries,
    unit_of_item: np.ndarray,
    candidates: int,
    ks: Sequence[int] = DEFAULT_KS,
    chunk: int = DEFAULT_CHUNK,
    per_query: bool = False,
) -> dict[str, float] | dict[str, np.ndarray]:
    """P@1 and R@k (fractions) of retrieving units (sentences, documents): the ``candidates`` best items of each
    query are retrieved, each unit scored by its best item among them; gold units are those of the gold items."""
    if len(queries.rows) == 0:
        raise ValueError("no queries to evaluate")
    if candidates < max(ks):
        raise ValueError(f"candidates ({candidates}) must be at least the largest k ({max(ks)})")
    unit_of_item = np.asarray(unit_of_item, dtype=np.int64)
    gold_units = [np.unique(unit_of_item[np.asarray(g, dtype=np.int64)]) for g in queries.gold]
    n_units, depth = int(unit_of_item.max()) + 1, max(ks)
    hits = []
    for start, indices in _ranked_chunks(corpus_vectors, queries, candidates, chunk):
        units = unit_of_item[indices]
        first = first_occurrences(units)
        gold = _gold_matrix(gold_units[start : start + len(indices)], n_units)
        # Each row compacted to its distinct units in rank order; positions past the last unit are not hits.
        unit_rank = np.cumsum(first, axis=1) - 1
        chunk_hits = np.zeros((len(units), depth), dtype=bool)
        row_index, position = np.nonzero(first & (unit_rank < depth))
        chunk_hits[row_index, unit_rank[row_index, position]] = gold[row_index, units[row_index, position]]
        hits.append(chunk_hits)
    metrics = hit_metrics if not per_query else per_query_hit_metrics
    return metrics(np.concatenate(hits), np.array([len(g) for g in gold_units]), ks)
