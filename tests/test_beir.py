"""beir:NAME tasks: BEIR's loader and evaluator on the harness' exact, chunked search (and reranking)."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

import harness.testing as ht
from harness import DataFileError, MissingDataError, maxsim
from harness.tasks import beir as beir_tasks

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "beir"
K_VALUES = [1, 3, 5, 10, 100, 1000]


def run(*argv, data_dir=FIXTURES):
    return ht.run_harness(
        *argv, "--profile", "smoke", "--no-progress", "--data-dir", data_dir, plugins=["harness.testing"]
    )


def stored(results: Path, task_key: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(results.glob(f"*/seed-42/{task_key}.json"))]


def test_namespace_and_metadata(registry):
    assert registry.expand_task(registry.resolve_task("beir:tiny")) == ["beir.tiny"]
    metadata = registry.task(registry.resolve_task("beir:scifact")).metadata
    assert metadata.main_score == "ndcg@10" and metadata.family == "beir"
    assert "scifact.zip" in metadata.dataset_source
    assert registry.split_task_text("beir:tiny:first_stage=be") == ("beir:tiny", {"first_stage": "be"})


def test_embedder_numbers_are_beirs_exact_search(tmp_path):
    import torch
    from beir.datasets.data_loader import GenericDataLoader
    from beir.retrieval.evaluation import EvaluateRetrieval
    from beir.retrieval.search.dense import DenseRetrievalExactSearch

    result = run("run", "--models", "testing-embedder", "--tasks", "beir:tiny", "--results", tmp_path)
    assert result.exit_code == 0, result.stderr
    (record,) = stored(tmp_path, "beir.tiny")
    assert record["details"]["retrieval"] == "exact cosine over every document"
    assert record["examples"]["statistic"] == "mean"  # per-query nDCG@10 kept beside it: a bootstrap interval
    assert list(tmp_path.glob("*/seed-42/beir.tiny.examples.npz"))

    embedder = ht.HashingEmbedder()

    class BeirModel:  # BEIR's dense-model interface over the same embedder
        def encode_queries(self, queries, batch_size=16, **kwargs):
            return torch.tensor(embedder.encode(queries))

        def encode_corpus(self, corpus, batch_size=16, **kwargs):
            return torch.tensor(embedder.encode([beir_tasks.document_text(d) for d in corpus]))

    corpus, queries, qrels = GenericDataLoader(str(FIXTURES / "tiny")).load(split="test")
    search = EvaluateRetrieval(
        DenseRetrievalExactSearch(BeirModel(), batch_size=4), k_values=K_VALUES, score_function="cos_sim"
    )
    ndcg, mean_ap, recall, _ = EvaluateRetrieval.evaluate(qrels, search.retrieve(corpus, queries), K_VALUES)
    assert record["main_score"] == pytest.approx(100 * ndcg["NDCG@10"], abs=1e-9)
    assert record["scores"]["map@100"] == pytest.approx(100 * mean_ap["MAP@100"], abs=1e-9)
    assert record["scores"]["recall@5"] == pytest.approx(100 * recall["Recall@5"], abs=1e-9)


def test_chunked_search_equals_one_matrix_product():
    rng = np.random.default_rng(0)
    queries, documents = rng.normal(size=(7, 16)), rng.normal(size=(53, 16))
    chunked = beir_tasks.cosine_search(queries, lambda a, b: documents[a:b], 53, 10, corpus_chunk=6)
    whole = beir_tasks.cosine_search(queries, lambda a, b: documents[a:b], 53, 10, corpus_chunk=1000)
    assert np.array_equal(chunked[0], whole[0]) and np.allclose(chunked[1], whole[1])
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    reference = np.argsort(-(unit(queries) @ unit(documents).T), axis=1, kind="stable")[:, :10]
    assert np.array_equal(chunked[0], reference)
    few = beir_tasks.cosine_search(queries, lambda a, b: documents[a:b], 3, 10, corpus_chunk=2)
    assert few[0].shape == (7, 3) and set(few[0][0]) == {0, 1, 2}


def test_multi_vector_models_are_searched_by_maxsim():
    model = ht.HashingMultiVectorEmbedder()
    queries = ["guitar player", "frog species"]
    documents = [json.loads(line)["text"] for line in (FIXTURES / "tiny" / "corpus.jsonl").read_text().splitlines()]
    indices, scores = beir_tasks.maxsim_search(
        model.encode_multi(queries), lambda a, b: model.encode_multi(documents[a:b]), len(documents), 5, corpus_chunk=4
    )
    query_vectors, document_vectors = model.encode_multi(queries), model.encode_multi(documents)
    for row, query in enumerate(query_vectors):
        expected = [maxsim(query, d) for d in document_vectors]
        assert np.allclose(scores[row], sorted(expected, reverse=True)[:5], atol=1e-5)


def test_pair_scorers_rerank_a_recorded_first_stage(tmp_path):
    result = run(
        "run",
        "--models",
        "testing-pair-scorer,testing-multi-vector",
        "--tasks",
        "beir:tiny,beir:tiny:first_stage=testing-embedder,rerank_k=3",
        "--results",
        tmp_path,
    )
    assert result.exit_code == 0, result.stderr
    details = sorted(
        record["details"]["retrieval"]
        for record in [
            *stored(tmp_path, "beir.tiny"),
            *[json.loads(p.read_text()) for p in tmp_path.glob("*/seed-42/beir.tiny-*.json")],
        ]
    )
    assert "exact MaxSim over every document" in details
    assert any(d.startswith("rerank the top 100 of bm25") for d in details)
    assert any(d.startswith("rerank the top 3 of embedder testing-embedder") for d in details)


def test_a_folder_without_qrels_is_one_clear_line(tmp_path):
    broken = tmp_path / "data" / "broken"
    broken.mkdir(parents=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        shutil.copy(FIXTURES / "tiny" / name, broken / name)
    with pytest.raises(DataFileError) as error:
        beir_tasks.find_dataset("broken", "test", tmp_path / "data")
    assert "has no qrels/ folder" in str(error.value) and "\n" not in str(error.value)
    result = run(
        "run",
        "--models",
        "testing-embedder",
        "--tasks",
        "beir:broken",
        "--results",
        tmp_path / "r",
        data_dir=tmp_path / "data",
    )
    # A malformed dataset is a failed cell (the runner's rule for broken data), reported in that one line.
    assert result.exit_code == 1 and "beir.broken: " in result.stderr and "has no qrels/ folder" in result.stderr
    assert (result.stdout + result.stderr).count("has no qrels/ folder") == 1, result.stderr  # printed once
    with pytest.raises(MissingDataError, match="harness data download beir:scifact"):
        beir_tasks.find_dataset("scifact", "test", tmp_path / "data")
    with pytest.raises(DataFileError, match="its splits: test"):
        beir_tasks.find_dataset("tiny", "dev", FIXTURES)


def test_download_puts_beirs_zip_where_the_task_finds_it(tmp_path, monkeypatch):
    archive = tmp_path / "scifact.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in (FIXTURES / "tiny").rglob("*"):
            if path.is_file():
                bundle.write(path, "scifact/" + path.relative_to(FIXTURES / "tiny").as_posix())
    source = beir_tasks.BeirDownload("scifact")
    assert source.dataset.archives[0].url == beir_tasks.BEIR_URL.format(name="scifact")
    source.dataset.archives = (beir_tasks.Archive(archive.as_uri(), filename="scifact.zip"),)
    source.dataset.log = lambda message: None
    target = tmp_path / "data"
    source.download(target)
    assert (target / "beir" / "scifact" / "scifact" / "corpus.jsonl").is_file()
    assert beir_tasks.find_dataset("scifact", "test", target) == target / "beir" / "scifact" / "scifact"


def test_per_query_ndcg_keeps_each_querys_top_hits_in_trec_evals_order():
    qrels = {"q1": {"d2": 1, "d9": 0}, "q2": {"d7": 2}}
    results = {"q1": {"d1": 0.9, "d2": 0.5, "d3": 0.5, "d9": 0.1}, "q2": {"d4": 0.3, "d5": 0.2}}
    examples = beir_tasks.per_query_ndcg(qrels, results)
    assert examples.ids.tolist() == ["q1", "q2"]
    # ties by document id descending, as trec_eval ranks; d9 is judged but not relevant
    assert examples.hits.top[0].tolist()[:4] == ["d1", "d3", "d2", "d9"] and examples.hits.gold_rank.tolist() == [3, 0]
    assert examples.hits.gold.tolist() == [["d2"], ["d7"]]


def test_ranked_texts_are_the_datasets_queries_and_documents_as_read():
    import harness

    task = beir_tasks.task_class("tiny")({}, FIXTURES)
    texts = task.ranked_texts(ht.eval_context(), {"q1"}, {"d1", "d3"})
    assert texts == harness.RankedTexts(
        {"q1": "who is playing the guitar"},
        {
            "d1": "Guitar lessons A man is playing a guitar on the stage.",
            "d3": "Pets The cat sits on the mat all afternoon.",
        },
    )
    with pytest.raises(DataFileError, match="no query 'q404'"):
        task.ranked_texts(ht.eval_context(), {"q404"}, ())
