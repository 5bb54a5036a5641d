"""Okapi BM25 as a model: an index over a corpus that scores many queries at once.

Reference: ``rank_bm25``'s ``BM25Okapi`` (k1 1.5, b 0.75, epsilon 0.25: a negative idf is floored at epsilon times
the mean idf). The idf and parameters are taken from a ``BM25Okapi`` built on the same tokens, and the scores equal
``BM25Okapi.get_scores`` (tests/test_evaluation.py) up to floating-point summation order. Deviation: scoring is one
sparse matrix product per batch of queries instead of rank_bm25's Python loop over every document per query token.

Tokens are lower-cased ``\\w+`` words (:func:`bm25_tokens`), the tokenisation useb's CQADupStack first stage and
the BM25 pair sampler share.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse

logger = logging.getLogger(__name__)

_WORD = re.compile(r"\w+")


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased ``\\w+`` words of ``text`` (Unicode word characters)."""
    return _WORD.findall(text.lower())


class BM25Index:
    """rank_bm25's Okapi BM25 over ``documents`` (strings, tokenised by :func:`bm25_tokens`).

    ``scores(queries)`` returns the dense ``[n_queries, n_documents]`` score matrix; callers holding many queries
    score them in chunks (``harness.evaluation.search.chunked_top_k``) so memory stays bounded.
    """

    def __init__(self, documents: Sequence[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self._build([bm25_tokens(document) for document in documents], k1, b, epsilon)

    @classmethod
    def from_tokens(
        cls, tokenized_documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
    ) -> BM25Index:
        """An index over already tokenised documents (for callers with their own tokenisation)."""
        index = cls.__new__(cls)
        index._build([list(tokens) for tokens in tokenized_documents], k1, b, epsilon)
        return index

    def _build(self, tokenized_documents: list[list[str]], k1: float, b: float, epsilon: float) -> None:
        from rank_bm25 import BM25Okapi

        if not tokenized_documents:
            raise ValueError("BM25Index needs at least one document")
        # rank_bm25 computes the idf (with its epsilon floor) and the document statistics; we keep its numbers.
        reference = BM25Okapi(tokenized_documents, k1=k1, b=b, epsilon=epsilon)
        self.document_count = len(tokenized_documents)
        self.vocabulary: dict[str, int] = {term: column for column, term in enumerate(reference.idf)}
        rows, columns, weights = [], [], []
        for row, (frequencies, length) in enumerate(zip(reference.doc_freqs, reference.doc_len)):
            length_norm = reference.k1 * (1 - reference.b + reference.b * length / reference.avgdl)
            for term, frequency in frequencies.items():
                rows.append(row)
                columns.append(self.vocabulary[term])
                weights.append(reference.idf[term] * frequency * (reference.k1 + 1) / (frequency + length_norm))
        # [vocabulary, documents]: a query's term counts times this is its score row.
        self.term_weights = sparse.csr_matrix(
            (weights, (rows, columns)), shape=(self.document_count, len(self.vocabulary))
        ).T.tocsr()
        logger.debug("BM25 index: %d documents, %d terms", self.document_count, len(self.vocabulary))

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """``[n_queries, n_documents]`` float64 scores of each query string against every document."""
        return self.token_scores([bm25_tokens(query) for query in queries])

    def token_scores(self, tokenized_queries: Sequence[Sequence[str]]) -> np.ndarray:
        """Like :meth:`scores` for tokenised queries; a repeated query token counts as often as it occurs, and a
        token outside the corpus adds nothing, as in rank_bm25."""
        rows, columns = [], []
        for row, tokens in enumerate(tokenized_queries):
            for term in tokens:
                column = self.vocabulary.get(term)
                if column is not None:
                    rows.append(row)
                    columns.append(column)
        term_counts = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, columns)), shape=(len(tokenized_queries), len(self.vocabulary))
        )
        return np.asarray((term_counts @ self.term_weights).todense())
