"""Ranking metrics of one query, as the references compute them (all return fractions; tasks scale by 100).

- :func:`stable_rank` and :func:`rerank_metrics`: useb 0.0.1's reranking evaluator (AskUbuntu; ``useb/evaluators/
  askubuntu.py``, after Lei et al. 2016): candidates sorted by descending score with ties in their given order;
  AP = mean of the precisions at the ranks of the gold candidates found (0 when none is among the candidates), MRR
  without cut-off, MRR@10, P@1, P@5.
- :func:`trec_ranking` and :func:`trec_map_ndcg`: trec_eval's ``map`` and ``ndcg`` (pytrec_eval, which useb's
  SciDocs evaluator calls): scores compared as float32, ties by descending document id; AP divides by every
  relevant qrel (level >= 1), retrieved or not; nDCG gains are the levels, discount log2(rank + 1), ideal ranking
  over all qrels.
- :func:`top_list_metrics`: useb's CQADupStack evaluator (as mteb's retrieval evaluator in spirit): scikit-learn's
  ``average_precision_score`` of the hits of a top list against their scores (0 without a hit), and nDCG@k with
  binary gains against ``relevant_count`` ideal hits.

Deviation: none in the numbers (tests/test_useb.py compares with useb and pytrec_eval); an AskUbuntu query whose gold
is not among its candidates scores 0 instead of failing useb's assertion.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.metrics import average_precision_score

logger = logging.getLogger(__name__)

NDCG_CUTOFF = 10


def stable_rank(candidates: Sequence[str], scores: Sequence[float]) -> list[str]:
    """Candidates by descending score; equal scores keep their given order (useb's ``rank_by_score``)."""
    order = sorted(range(len(candidates)), key=lambda i: -float(scores[i]))
    return [candidates[i] for i in order]


def rerank_metrics(gold: set[str], ranking: Sequence[str]) -> dict[str, float]:
    """useb's reranking metrics of one ranked candidate list: ``map`` (AP), ``mrr``, ``mrr@10``, ``p@1``, ``p@5``."""
    precisions_at_hits: list[float] = []
    first_hit_rank = None
    for rank, candidate in enumerate(ranking, start=1):
        if candidate in gold:
            precisions_at_hits.append((len(precisions_at_hits) + 1) / rank)
            first_hit_rank = first_hit_rank or rank
    reciprocal_rank = 1.0 / first_hit_rank if first_hit_rank else 0.0
    return {
        "map": float(np.mean(precisions_at_hits)) if precisions_at_hits else 0.0,
        "p@1": len(set(ranking[:1]) & gold) / max(len(ranking[:1]), 1),
        "p@5": len(set(ranking[:5]) & gold) / max(len(ranking[:5]), 1),
        "mrr": reciprocal_rank,
        "mrr@10": reciprocal_rank if first_hit_rank and first_hit_rank <= 10 else 0.0,
    }


def trec_ranking(doc_ids: Sequence[str], scores: Sequence[float]) -> list[str]:
    """trec_eval's order: score as float32 descending, ties by document id descending (``comp_sim_docno``)."""
    float32_scores = np.asarray(scores, dtype=np.float32).tolist()
    return [doc for _, doc in sorted(zip(float32_scores, doc_ids), reverse=True)]


def trec_map_ndcg(qrel: Mapping[str, int], doc_ids: Sequence[str], scores: Sequence[float]) -> tuple[float, float]:
    """trec_eval's ``map`` and ``ndcg`` of one query (relevant: level >= 1; gain: the level; log2(rank + 1))."""
    ranking = trec_ranking(doc_ids, scores)
    relevant_total = sum(1 for level in qrel.values() if level >= 1)
    hits, precision_sum, dcg = 0, 0.0, 0.0
    for index, doc in enumerate(ranking):
        level = qrel.get(doc, 0)
        if level >= 1:
            hits += 1
            precision_sum += hits / (index + 1)
        if level > 0:
            dcg += level / np.log2(index + 2)
    ideal_levels = sorted((level for level in qrel.values() if level > 0), reverse=True)
    ideal_dcg = sum(level / np.log2(index + 2) for index, level in enumerate(ideal_levels))
    average_precision = precision_sum / relevant_total if relevant_total else 0.0
    return average_precision, (dcg / ideal_dcg if ideal_dcg > 0 else 0.0)


def top_list_metrics(
    hits: Sequence[int], scores: Sequence[float], relevant_count: int, ndcg_cutoff: int = NDCG_CUTOFF
) -> tuple[float, float | None]:
    """useb's CQADupStack metrics of one query's top list (sorted by descending score): scikit-learn's average
    precision of hits vs scores (0 without a hit), and nDCG@``ndcg_cutoff`` against ``relevant_count`` ideal hits
    (None when the query has no gold)."""
    hits = list(hits)
    average_precision = float(average_precision_score(hits, list(scores))) if 1 in hits else 0.0

    def dcg(relevances: Sequence[int]) -> float:
        return sum(relevance / np.log2(i + 2) for i, relevance in enumerate(relevances[:ndcg_cutoff]))

    ndcg = dcg(hits) / dcg([1] * relevant_count) if relevant_count > 0 else None
    return average_precision, ndcg
