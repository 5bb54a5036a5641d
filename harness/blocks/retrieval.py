"""Retrieval and reranking for tasks (torch-free): BM25, top-k search, ranking and retrieval metrics, and the first
stage whose candidates a pair scorer reranks.
"""

from __future__ import annotations

from harness.evaluation.bm25 import BM25Index, bm25_tokens
from harness.evaluation.first_stage import (
    BM25_FIRST_STAGE,
    EmbedderFirstStage,
    FirstStage,
    encode_multi_once,
    encode_once,
    first_stage_from_context,
    full_pool_embedder,
    full_pool_multi_vector,
)
from harness.evaluation.ranking import rerank_metrics, stable_rank, top_list_metrics, trec_map_ndcg, trec_ranking
from harness.evaluation.retrieval import (
    DEFAULT_KS,
    RetrievalQueries,
    ranked_items,
    retrieval_metrics,
    unit_retrieval_metrics,
)
from harness.evaluation.search import chunked_top_k, cosine_top_k, top_k

__all__ = [
    "BM25Index",
    "bm25_tokens",
    "chunked_top_k",
    "cosine_top_k",
    "top_k",
    "rerank_metrics",
    "trec_ranking",
    "stable_rank",
    "top_list_metrics",
    "trec_map_ndcg",
    "DEFAULT_KS",
    "RetrievalQueries",
    "retrieval_metrics",
    "ranked_items",
    "unit_retrieval_metrics",
    "BM25_FIRST_STAGE",
    "EmbedderFirstStage",
    "FirstStage",
    "encode_multi_once",
    "encode_once",
    "first_stage_from_context",
    "full_pool_embedder",
    "full_pool_multi_vector",
]
