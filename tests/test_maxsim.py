"""Batched MaxSim (harness.evaluation.maxsim) against the per-pair definition (harness.maxsim), and the paths that
use it: the multi-vector pair scorer, BEIR's exact MaxSim search and CQADupStack's full-pool MaxSim ranking."""

from __future__ import annotations

import numpy as np
import pytest

from harness import maxsim
from harness.evaluation import maxsim as maxsim_module
from harness.evaluation.adapters import MultiVectorAsPairScorer, as_pair_scorer
from harness.evaluation.maxsim import MaxSimIndex, maxsim_pairs, maxsim_top_k
from harness.evaluation.search import top_k


def ragged_sets(rng: np.random.Generator, count: int, width: int = 24, longest: int = 9) -> list[np.ndarray]:
    lengths = rng.integers(1, longest + 1, size=count)
    lengths[0] = 1  # a text with a single vector
    sets = [rng.normal(size=(int(n), width)).astype(np.float32) for n in lengths]
    sets[1][0] = 0.0  # a zero vector: cosine 0 with anything, as the definition's 1e-12 floor gives
    return sets


@pytest.mark.parametrize("engine", ["fused", "sparse"])
def test_batched_pairs_equal_the_definition_on_ragged_sets(engine):
    rng = np.random.default_rng(0)
    sets = ragged_sets(rng, 60, longest=11)  # 1..11 vectors: the fused kernel's blocks of four and its remainder
    sets[2][:] = 0.0  # every vector zero: its MaxSim is 0 on either side
    first, second = rng.integers(0, 60, size=500), rng.integers(0, 60, size=500)
    first[:3], second[:3] = [2, 5, 2], [5, 2, 2]
    naive = np.array([maxsim(sets[a].astype(np.float64), sets[b].astype(np.float64)) for a, b in zip(first, second)])
    assert (naive[:3] == 0).all()
    for max_elements in (1, 50, 1 << 23):  # batches of one pair, a few pairs, everything (bounds the sparse engine)
        batched = maxsim_pairs(sets, sets, first, second, max_elements=max_elements, engine=engine)
        np.testing.assert_allclose(batched, naive, atol=1e-6, rtol=0)
    queries, documents = sets[:25], ragged_sets(rng, 25, width=24)  # two different lists, pairs in order
    naive = [maxsim(q.astype(np.float64), d.astype(np.float64)) for q, d in zip(queries, documents)]
    np.testing.assert_allclose(maxsim_pairs(queries, documents, engine=engine), naive, atol=1e-6, rtol=0)
    single = [rng.normal(size=(1, 24)) for _ in range(5)]  # only single-vector texts: plain cosine
    cosines = [float(a[0] @ b[0] / np.linalg.norm(a) / np.linalg.norm(b)) for a, b in zip(single, single[::-1])]
    np.testing.assert_allclose(maxsim_pairs(single, single[::-1], engine=engine), cosines, atol=1e-6)


def test_engines_agree_and_bad_engine_input_is_refused(monkeypatch):
    rng = np.random.default_rng(4)
    sets = ragged_sets(rng, 30)
    first, second = rng.integers(0, 30, size=200), rng.integers(0, 30, size=200)
    np.testing.assert_allclose(
        maxsim_pairs(sets, sets, first, second, engine="fused"),
        maxsim_pairs(sets, sets, first, second, engine="sparse"),
        atol=1e-6,
        rtol=0,
    )
    with pytest.raises(ValueError, match="unknown MaxSim engine 'numba'; choose one of fused, sparse"):
        maxsim_pairs(sets, sets, first, second, engine="numba")
    with pytest.raises(IndexError, match=r"document rows must lie in \[0, 30\); got 0\.\.30"):
        maxsim_pairs(sets, sets, [0, 1], [0, 30])  # the kernel has no bounds checks: refused before it runs
    with pytest.raises(IndexError, match="query rows"):
        maxsim_pairs(sets, sets, [-1], [0], engine="sparse")
    monkeypatch.setattr(maxsim_module, "_kernels", False)  # as without numba
    assert maxsim_module.default_engine() == "sparse"
    np.testing.assert_allclose(
        maxsim_pairs(sets, sets, first, second),
        maxsim_pairs(sets, sets, first, second, engine="sparse"),
        atol=0,
        rtol=0,
    )
    with pytest.raises(ValueError, match="needs numba"):
        maxsim_pairs(sets, sets, first, second, engine="fused")


def test_index_scores_and_top_k_equal_the_definition():
    rng = np.random.default_rng(1)
    queries, documents = ragged_sets(rng, 17), ragged_sets(rng, 31)
    naive = np.array([[maxsim(q.astype(np.float64), d.astype(np.float64)) for d in documents] for q in queries])
    for max_elements in (1, 300, 1 << 23):
        np.testing.assert_allclose(MaxSimIndex(documents, max_elements).scores(queries), naive, atol=1e-6, rtol=0)
    indices, scores = maxsim_top_k(queries, documents, 5)
    expected, _ = top_k(naive.astype(np.float32), 5)
    assert (indices == expected).all() and scores.shape == (17, 5)
    same, _ = maxsim_top_k(documents, documents, 3, exclude_same_index=True, max_elements=40)
    assert not (same == np.arange(31)[:, None]).any()


def test_maxsim_is_one_sided():
    query = np.array([[1.0, 0.0]])
    document = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert maxsim_pairs([query], [document])[0] == pytest.approx(1.0)
    assert maxsim_pairs([document], [query])[0] == pytest.approx(0.5)


@pytest.mark.parametrize("bad", [np.zeros((0, 4)), np.zeros(4)])
def test_a_text_without_vectors_is_refused(bad):
    with pytest.raises(ValueError, match="at least one vector"):
        maxsim_pairs([np.ones((2, 4)), bad], [np.ones((1, 4)), np.ones((1, 4))])


class CountingMultiVector:
    """A multi-vector model that records which texts it was asked to encode."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def encode_multi(self, texts):
        self.calls.append(list(texts))
        return [
            np.array([[len(word), i + 1.0, 1.0] for i, word in enumerate(text.split())] or [[0.0, 0.0, 1.0]])
            for text in texts
        ]


def test_pair_scorer_encodes_each_distinct_text_once_and_matches_the_definition():
    model = CountingMultiVector()
    scorer = as_pair_scorer(model)
    assert isinstance(scorer, MultiVectorAsPairScorer)
    first = ["a bb ccc", "dd e", "a bb ccc", "f"]
    second = ["dd e", "a bb ccc", "f", "f"]
    scores = scorer.score(first, second)
    assert len(model.calls) == 1 and sorted(model.calls[0]) == sorted({*first, *second})
    vectors = {text: model.encode_multi([text])[0] for text in {*first, *second}}
    np.testing.assert_allclose(scores, [maxsim(vectors[a], vectors[b]) for a, b in zip(first, second)], atol=1e-6)


def test_beir_search_uses_the_batched_index():
    from harness.tasks.beir import maxsim_search

    rng = np.random.default_rng(2)
    queries, documents = ragged_sets(rng, 6), ragged_sets(rng, 23)
    indices, scores = maxsim_search(queries, lambda a, b: documents[a:b], len(documents), 4, corpus_chunk=5)
    naive = np.array([[maxsim(q, d) for d in documents] for q in queries])
    expected, _ = top_k(naive.astype(np.float32), 4)
    assert (indices == expected).all()
    np.testing.assert_allclose(scores, np.take_along_axis(naive, expected, axis=1), atol=1e-6)


def test_vector_sets_are_read_without_copying_and_give_the_same_scores():
    from harness import VectorSets
    from harness.evaluation.maxsim import _RawSets

    rng = np.random.default_rng(3)
    sets = ragged_sets(rng, 40)
    stacked = VectorSets.from_stacked(np.concatenate(sets).astype(np.float32), [len(s) for s in sets])
    assert isinstance(stacked, list) and all((a == b).all() for a, b in zip(stacked, sets))
    assert _RawSets(stacked, "sparse").vectors.data_ptr() == stacked.stacked.__array_interface__["data"][0]  # no copy
    first, second = rng.integers(0, 40, size=300), rng.integers(0, 40, size=300)
    np.testing.assert_array_equal(
        maxsim_pairs(stacked, stacked, first, second), maxsim_pairs(sets, sets, first, second)
    )
    stacked.append(np.ones((2, 24), dtype=np.float32))  # no longer the blocks of its array: read as a plain list
    assert not stacked.matches_stacked()
    assert maxsim_pairs(stacked, stacked, [40], [0])[0] == pytest.approx(maxsim(stacked[40], stacked[0]), abs=1e-6)
    with pytest.raises(ValueError, match="do not split"):
        VectorSets.from_stacked(np.zeros((5, 3), dtype=np.float32), [2, 2])
