"""The shared evaluation layer (harness.evaluation) against naive computations and its reference libraries."""
from __future__ import annotations

import numpy as np
import pytest

from harness.evaluation.bm25 import BM25Index, bm25_tokens
from harness.evaluation.search import chunked_top_k, cosine_top_k, top_k

CORPUS = [
    "How do I install Ubuntu on a USB stick?",
    "Wifi does not work after upgrading Ubuntu",
    "wifi wifi driver missing",
    "Install a printer driver",
    "",
    "QGIS crashes when opening a shapefile",
    "How to reproject a shapefile in QGIS?",
]
QUERIES = ["ubuntu wifi", "install install driver", "shapefile qgis reproject", "no such words", ""]


# -- BM25 -------------------------------------------------------------------------------------------------------------
def test_bm25_tokens_are_lower_cased_words():
    assert bm25_tokens("Wi-Fi, QGIS's 3.10!") == ["wi", "fi", "qgis", "s", "3", "10"]


def test_bm25_scores_equal_rank_bm25():
    from rank_bm25 import BM25Okapi

    reference = BM25Okapi([bm25_tokens(document) for document in CORPUS])
    scores = BM25Index(CORPUS).scores(QUERIES)
    assert scores.shape == (len(QUERIES), len(CORPUS))
    for query, row in zip(QUERIES, scores):
        np.testing.assert_allclose(row, reference.get_scores(bm25_tokens(query)), rtol=1e-12, atol=1e-12)


def test_bm25_from_tokens_and_parameters_equal_rank_bm25():
    from rank_bm25 import BM25Okapi

    tokenized = [bm25_tokens(document) or ["<empty>"] for document in CORPUS]
    reference = BM25Okapi(tokenized, k1=1.2, b=0.5)
    index = BM25Index.from_tokens(tokenized, k1=1.2, b=0.5)
    for tokens, row in zip(tokenized, index.token_scores(tokenized)):
        np.testing.assert_allclose(row, reference.get_scores(tokens), rtol=1e-12, atol=1e-12)


# -- top-k search -----------------------------------------------------------------------------------------------------
def naive_top_k(row: np.ndarray, k: int) -> list[int]:
    return sorted(range(len(row)), key=lambda column: (-row[column], column))[:k]


@pytest.mark.parametrize("k", [1, 3, 7, 50])
def test_top_k_equals_a_stable_sort_with_ties(k):
    rng = np.random.default_rng(1)
    score_rows = rng.integers(0, 4, size=(40, 23)).astype(np.float32)  # many ties, also at the cut
    score_rows[5, 2] = -np.inf
    indices, scores = top_k(score_rows, k)
    assert indices.shape == scores.shape == (40, min(k, 23))
    for row, row_indices, row_scores in zip(score_rows, indices, scores):
        assert row_indices.tolist() == naive_top_k(row, k)
        np.testing.assert_array_equal(row_scores, row[row_indices])


def test_top_k_puts_masked_columns_last():
    indices, scores = top_k(np.array([[-np.inf, 1.0, -np.inf, 0.5]]), 4)
    assert indices.tolist() == [[1, 3, 0, 2]]
    assert np.isinf(scores[0, 2:]).all()


def test_top_k_of_no_rows():
    indices, scores = top_k(np.zeros((0, 5)), 3)
    assert indices.shape == scores.shape == (0, 3)


@pytest.mark.parametrize("chunk", [1, 4, 256])
def test_cosine_top_k_in_chunks_equals_the_dense_computation(chunk):
    rng = np.random.default_rng(2)
    queries, docs = rng.normal(size=(11, 8)), rng.normal(size=(30, 8))
    docs[3] = 0  # a zero vector has cosine 0 with everything
    docs[7] = docs[9]  # a tie
    doc_norms = np.linalg.norm(docs, axis=1, keepdims=True)
    unit_docs = docs / np.where(doc_norms > 0, doc_norms, 1.0)
    dense = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit_docs.T
    indices, scores = cosine_top_k(queries, docs, 5, chunk=chunk)
    for row, row_indices, row_scores in zip(dense.astype(np.float32), indices, scores):
        assert row_indices.tolist() == naive_top_k(row, 5)
        assert scores.dtype == np.float32
        np.testing.assert_allclose(row_scores, row[row_indices], rtol=1e-6)


def test_cosine_top_k_can_exclude_each_query_itself():
    vectors = np.random.default_rng(3).normal(size=(9, 4))
    indices, scores = cosine_top_k(vectors, vectors, 3, chunk=2, exclude_same_index=True)
    assert all(row not in indices[row].tolist() for row in range(9))
    assert np.isfinite(scores).all()


def test_chunked_top_k_asks_for_bounded_chunks():
    asked = []

    def score_chunk(start: int, stop: int) -> np.ndarray:
        asked.append((start, stop))
        return BM25Index(CORPUS).scores(QUERIES[start:stop])

    indices, _ = chunked_top_k(score_chunk, len(QUERIES), 2, chunk=2)
    assert asked == [(0, 2), (2, 4), (4, 5)]
    assert indices.tolist() == top_k(BM25Index(CORPUS).scores(QUERIES), 2)[0].tolist()
