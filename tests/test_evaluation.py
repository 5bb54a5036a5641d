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


# -- ranking metrics --------------------------------------------------------------------------------------------------
from harness.evaluation.ranking import (  # noqa: E402
    rerank_metrics,
    stable_rank,
    top_list_metrics,
    trec_map_ndcg,
    trec_ranking,
)


def random_queries(seed: int, count: int = 30):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        size = int(rng.integers(1, 25))
        doc_ids = [f"d{index:02d}" for index in rng.permutation(40)[:size]]
        scores = np.round(rng.random(size), 1)  # many exact ties
        gold = {doc for doc in doc_ids if rng.random() < 0.25} | ({"absent"} if rng.random() < 0.3 else set())
        yield doc_ids, scores, gold


def test_stable_rank_keeps_the_given_order_of_ties():
    for doc_ids, scores, _ in random_queries(0):
        expected = [doc_ids[i] for i in sorted(range(len(doc_ids)), key=lambda i: (-scores[i], i))]
        assert stable_rank(doc_ids, scores) == expected


def test_rerank_metrics_equal_their_definitions():
    for doc_ids, scores, gold in random_queries(1):
        ranking = stable_rank(doc_ids, scores)
        hit_ranks = [rank for rank, doc in enumerate(ranking, start=1) if doc in gold]
        precisions = [len(gold & set(ranking[:rank])) / rank for rank in hit_ranks]
        metrics = rerank_metrics(gold, ranking)
        assert metrics["map"] == pytest.approx(sum(precisions) / len(precisions) if precisions else 0.0)
        assert metrics["mrr"] == pytest.approx(1 / hit_ranks[0] if hit_ranks else 0.0)
        assert metrics["mrr@10"] == pytest.approx(1 / hit_ranks[0] if hit_ranks and hit_ranks[0] <= 10 else 0.0)
        assert metrics["p@1"] == pytest.approx(len(gold & set(ranking[:1])) / 1)
        assert metrics["p@5"] == pytest.approx(len(gold & set(ranking[:5])) / min(5, len(ranking)))


def test_trec_metrics_equal_their_definitions():
    rng = np.random.default_rng(2)
    for doc_ids, scores, gold in random_queries(3):
        scores = scores + np.where(rng.random(len(scores)) < 0.3, 1e-9, 0.0)  # ties that exist only in float32
        qrel = {doc: int(rng.integers(1, 3)) for doc in gold} | {"judged-irrelevant": 0}
        order = sorted(range(len(doc_ids)), key=lambda i: (float(np.float32(scores[i])), doc_ids[i]), reverse=True)
        ranking = [doc_ids[i] for i in order]
        assert trec_ranking(doc_ids, scores) == ranking
        relevant = [doc for doc, level in qrel.items() if level >= 1]
        hit_ranks = [rank for rank, doc in enumerate(ranking, start=1) if qrel.get(doc, 0) >= 1]
        expected_ap = sum((n + 1) / rank for n, rank in enumerate(hit_ranks)) / len(relevant) if relevant else 0.0
        dcg = sum(qrel.get(doc, 0) / np.log2(rank + 1) for rank, doc in enumerate(ranking, start=1))
        ideal = sum(
            level / np.log2(rank + 1) for rank, level in enumerate(sorted(qrel.values(), reverse=True), start=1)
        )
        average_precision, ndcg = trec_map_ndcg(qrel, doc_ids, scores)
        assert average_precision == pytest.approx(expected_ap, abs=1e-12)
        assert ndcg == pytest.approx(dcg / ideal if ideal else 0.0, abs=1e-12)


def test_top_list_metrics_equal_their_definitions():
    rng = np.random.default_rng(4)
    for _ in range(30):
        size = int(rng.integers(1, 30))
        scores = np.sort(rng.random(size))[::-1]  # distinct scores, best first
        hits = (rng.random(size) < 0.2).astype(int).tolist()
        relevant_count = sum(hits) + int(rng.integers(0, 3))
        hit_ranks = [rank for rank, hit in enumerate(hits, start=1) if hit]
        expected_ap = float(np.mean([(n + 1) / rank for n, rank in enumerate(hit_ranks)])) if hit_ranks else 0.0
        dcg = sum(hit / np.log2(rank + 1) for rank, hit in enumerate(hits[:10], start=1))
        ideal = sum(1 / np.log2(rank + 1) for rank in range(1, min(relevant_count, 10) + 1))
        average_precision, ndcg = top_list_metrics(hits, scores, relevant_count)
        assert average_precision == pytest.approx(expected_ap, abs=1e-12)
        if relevant_count == 0:
            assert ndcg is None
        else:
            assert ndcg == pytest.approx(dcg / ideal, abs=1e-12)


# -- pair sets --------------------------------------------------------------------------------------------------------
from harness.evaluation.pairs import PairSet, correlation_scores, score_pair_sets  # noqa: E402


class CountingEmbedder:
    """A fixed vector per text (its length and letter counts); records what it encodes and how often."""

    def __init__(self):
        self.calls, self.encoded = 0, []

    def encode(self, texts):
        self.calls += 1
        self.encoded.extend(texts)
        return np.array([[len(t), t.count("a") + 1.0, t.count("e") + 0.5, 1.0] for t in texts])


def pair_sets() -> list[PairSet]:
    rng = np.random.default_rng(5)
    words = ["a cat", "the sea", "an apple", "bee", "tree", "a wave", "eagle", "sand", "ant", "a lamp"]
    sets = []
    for name, size in (("one", 12), ("two", 7), ("three", 20)):
        first = [str(rng.choice(words)) for _ in range(size)]
        second = [str(rng.choice(words)) for _ in range(size)]
        sets.append(PairSet(name, first, second, np.round(rng.random(size) * 5, 1)))
    return sets


def test_score_pair_sets_makes_one_call_and_encodes_each_text_once():
    sets, embedder = pair_sets(), CountingEmbedder()
    predictions = score_pair_sets(embedder, sets)
    assert embedder.calls == 1 and len(embedder.encoded) == len(set(embedder.encoded))
    for pair_set, predicted in zip(sets, predictions):
        vectors = CountingEmbedder()
        a, b = vectors.encode(pair_set.first), vectors.encode(pair_set.second)
        expected = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        np.testing.assert_allclose(predicted, expected, rtol=1e-12)


def test_correlation_scores_pool_and_average_as_senteval():
    from scipy.stats import pearsonr, spearmanr

    sets = pair_sets()
    predictions = score_pair_sets(CountingEmbedder(), sets)
    scores = correlation_scores(sets, predictions)
    per_set = [100 * spearmanr(predicted, p.gold)[0] for p, predicted in zip(sets, predictions)]
    pooled_gold, pooled_predicted = np.concatenate([p.gold for p in sets]), np.concatenate(predictions)
    assert scores["spearman_all"] == pytest.approx(100 * spearmanr(pooled_predicted, pooled_gold)[0])
    assert scores["pearson_all"] == pytest.approx(100 * pearsonr(pooled_predicted, pooled_gold)[0])
    assert scores["spearman_mean"] == pytest.approx(np.mean(per_set))
    assert scores["spearman_wmean"] == pytest.approx(np.average(per_set, weights=[12, 7, 20]))
    assert scores["pearson_mean"] == pytest.approx(
        np.mean([100 * pearsonr(predicted, p.gold)[0] for p, predicted in zip(sets, predictions)])
    )
    assert [scores[f"spearman.{p.name}"] for p in sets] == pytest.approx(per_set)
    single = correlation_scores(sets[:1], predictions[:1])
    assert set(single) == {"spearman_all", "pearson_all"}


# -- the seeded evaluation sample -------------------------------------------------------------------------------------
from harness.evaluation.sampling import evaluation_sample, sample_items  # noqa: E402


def test_evaluation_sample_is_the_seed_0_choice_sorted():
    assert evaluation_sample(10, None) == list(range(10))
    assert evaluation_sample(10, 10) == list(range(10))
    expected = sorted(np.random.default_rng(0).choice(1000, size=37, replace=False).tolist())
    assert evaluation_sample(1000, 37) == expected == evaluation_sample(1000, 37)
    assert sample_items([f"item{i}" for i in range(1000)], 37) == [f"item{i}" for i in expected]


# -- plugin isolation -------------------------------------------------------------------------------------------------
def test_no_task_module_imports_another_task_plugin_or_a_model_plugin():
    """A task plugin (``tasks/X.py`` or the package ``tasks/X/``) imports only the harness core and itself: shared
    code belongs in ``harness`` (e.g. ``harness.evaluation``)."""
    import ast
    from pathlib import Path

    tasks_dir = Path(__file__).resolve().parent.parent / "tasks"
    problems = []
    for path in sorted(tasks_dir.rglob("*.py")):
        relative = path.relative_to(tasks_dir)
        if relative == Path("__init__.py"):
            continue
        own_plugin = relative.parts[0].removesuffix(".py")
        package = ["harness", "tasks", *relative.parent.parts]  # where `from . import` points
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)]
                    modules = [".".join(base + ([node.module] if node.module else []))]
                else:
                    modules = [node.module or ""]
            else:
                continue
            for module in modules:
                parts = module.split(".")
                if (
                    parts[0] in ("tasks", "plugins")
                    or parts[:2] == ["harness", "plugins"]
                    or parts[:2] == ["harness", "tasks"]
                    and parts[2:3] != [own_plugin]
                ):
                    problems.append(f"{relative}:{node.lineno} imports {module}")
    assert not problems, "task modules import other plugins: " + "; ".join(problems)
