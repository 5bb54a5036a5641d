"""BEIR: any retrieval dataset in BEIR's format as ``--tasks beir:NAME`` (family ``beir``), scored by BEIR itself.

Reference: Thakur et al. 2021, "BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information Retrieval
Models" (NeurIPS Datasets and Benchmarks) and the ``beir`` package (``GenericDataLoader``,
``EvaluateRetrieval.evaluate``): the numbers are BEIR's; only the retrieval that produces the ranked lists is the
harness' own. Retrieval per kind of model, data and the deviations: docs/tasks/beir.md, section "BEIR".
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from harness import (
    Archive,
    ArchiveDataset,
    Component,
    DataFileError,
    Embedder,
    EvalResult,
    HarnessError,
    MissingDataError,
    MultiVectorEmbedder,
    Option,
    PairScorer,
    RankedTexts,
    Task,
    TaskMetadata,
    as_embedder,
    data_dir_override,
    default_download_dir,
    files_checksum,
    hookimpl,
    texts_by_id,
)
from harness.blocks import (
    EmbedderFirstStage,
    MaxSimIndex,
    first_stage_from_context,
    mean_examples,
    ranked_hits,
    sample_items,
    top_k,
    trec_ranking,
)

logger = logging.getLogger(__name__)

FAMILY = "beir"
K_VALUES = (1, 3, 5, 10, 100, 1000)
MAIN_SCORE = "ndcg@10"
QUERY_BLOCK = 256  # queries scored at once against a corpus chunk
DEFAULT_CORPUS_CHUNK = 50_000  # documents embedded and scored at once (BEIR's corpus_chunk_size)
BEIR_URL = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets/{name}.zip"
# BEIR's publicly downloadable datasets (the others need a licence: bioasq, signal1m, trec-news, robust04), with
# their corpus and test-query counts from the BEIR paper (table 1).
DOWNLOADS: dict[str, tuple[str, str]] = {
    "msmarco": ("8.8M", "6,980 (dev)"),
    "trec-covid": ("171K", "50"),
    "nfcorpus": ("3.6K", "323"),
    "nq": ("2.68M", "3,452"),
    "hotpotqa": ("5.2M", "7,405"),
    "fiqa": ("57K", "648"),
    "arguana": ("8.7K", "1,406"),
    "webis-touche2020": ("382K", "49"),
    "cqadupstack": ("457K", "13,145"),
    "quora": ("523K", "10,000"),
    "dbpedia-entity": ("4.63M", "400"),
    "scidocs": ("25K", "1,000"),
    "fever": ("5.42M", "6,666"),
    "climate-fever": ("5.42M", "1,535"),
    "scifact": ("5K", "300"),
}
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")


class BeirDataError(DataFileError):
    """A folder that is not (completely) in BEIR's format."""


class UnknownBeirDatasetError(HarnessError):
    """A ``beir:`` name that cannot be a dataset folder."""


# -- where the data is ---------------------------------------------------------------------------------------------
def candidate_folders(name: str, data_dir: Path | None) -> list[Path]:
    """Folders that may hold dataset ``name`` in BEIR's format, in the order they are tried."""
    roots: list[Path] = []
    explicit = data_dir or data_dir_override()
    if explicit is not None:
        roots += [Path(explicit) / name, Path(explicit) / FAMILY / name, Path(explicit) / FAMILY / name / name]
    download = default_download_dir() / FAMILY / name
    roots += [download / name, download]  # BEIR's zips hold a folder named after the dataset
    return list(dict.fromkeys(roots))


def find_dataset(name: str, split: str, data_dir: Path | None) -> Path:
    """The folder of ``name`` with its corpus, queries and ``qrels/<split>.tsv``; a one-line error otherwise."""
    folders = candidate_folders(name, data_dir)
    for folder in folders:
        if not ((folder / "corpus.jsonl").is_file() or (folder / "queries.jsonl").is_file()):
            continue
        for required in ("corpus.jsonl", "queries.jsonl"):
            if not (folder / required).is_file():
                raise BeirDataError(
                    f"{folder} has no {required}; BEIR's format needs corpus.jsonl, queries.jsonl "
                    "and qrels/<split>.tsv."
                )
        qrels = folder / "qrels"
        if not qrels.is_dir():
            raise BeirDataError(
                f"{folder} has no qrels/ folder; BEIR's format needs qrels/{split}.tsv (query-id, "
                "corpus-id, score, with a header line)."
            )
        if not (qrels / f"{split}.tsv").is_file():
            splits = sorted(p.stem for p in qrels.glob("*.tsv"))
            raise BeirDataError(
                f"{folder}/qrels has no {split}.tsv; its splits: {', '.join(splits) or '(none)'}. "
                f"Choose one with beir:{name}:split=SPLIT."
            )
        return folder
    how = f"`harness data download beir:{name}` (BEIR's public copy), or " if name in DOWNLOADS else ""
    raise MissingDataError(
        f"BEIR dataset {name!r} not found (looked in: {', '.join(str(f) for f in folders)}). Get it with {how}pass "
        f"--data-dir DIR where DIR/{name}/ holds corpus.jsonl, queries.jsonl and qrels/{split}.tsv."
    )


def document_text(document: dict) -> str:
    """``title + " " + text``, stripped: how BEIR's sentence-transformers model reads a document."""
    return f"{document.get('title') or ''} {document.get('text') or ''}".strip()


# -- search --------------------------------------------------------------------------------------------------------
def unit_rows_float32(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def merge_top_k(
    best: tuple[np.ndarray, np.ndarray], new: tuple[np.ndarray, np.ndarray], k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of two candidate lists per query (earlier candidates win ties: lower corpus positions)."""
    indices = np.concatenate([best[0], new[0]], axis=1)
    scores = np.concatenate([best[1], new[1]], axis=1)
    order, _ = top_k(scores, k)
    return np.take_along_axis(indices, order, axis=1), np.take_along_axis(scores, order, axis=1)


def streaming_top_k(
    query_count: int,
    document_count: int,
    k: int,
    score_chunk: Callable[[int, int], Callable[[int, int], np.ndarray]],
    corpus_chunk: int = DEFAULT_CORPUS_CHUNK,
    query_block: int = QUERY_BLOCK,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k over a corpus seen one chunk at a time.

    ``score_chunk(start, stop)`` prepares corpus chunk ``start:stop`` (e.g. embeds it) and returns a function
    ``(query_start, query_stop) -> [queries, chunk]`` scores. Only one chunk and one query block of scores exist at
    once, plus the running ``[queries, k]`` best lists. Returns corpus indices and scores, best first.
    """
    width = max(min(k, document_count), 0)
    # Padding (index -1, score -inf) sorts after every real document and is gone once width documents were seen.
    best_indices = np.full((query_count, width), -1, dtype=np.int64)
    best_scores = np.full((query_count, width), -np.inf, dtype=np.float32)
    for start in range(0, document_count, corpus_chunk):
        stop = min(start + corpus_chunk, document_count)
        block_scores = score_chunk(start, stop)
        for query_start in range(0, query_count, query_block):
            rows = slice(query_start, min(query_start + query_block, query_count))
            indices, scores = top_k(block_scores(rows.start, rows.stop), width)
            best_indices[rows], best_scores[rows] = merge_top_k(
                (best_indices[rows], best_scores[rows]), (indices + start, scores.astype(np.float32)), width
            )
        logger.debug("beir search: %d of %d documents", stop, document_count)
    return best_indices, best_scores


def cosine_search(
    query_vectors: np.ndarray,
    encode_documents: Callable[[int, int], np.ndarray],
    document_count: int,
    k: int,
    corpus_chunk: int = DEFAULT_CORPUS_CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine top-k; ``encode_documents(start, stop)`` embeds corpus rows ``start:stop`` (once each)."""
    queries = unit_rows_float32(query_vectors)

    def score_chunk(start: int, stop: int) -> Callable[[int, int], np.ndarray]:
        documents = unit_rows_float32(encode_documents(start, stop))
        return lambda a, b: queries[a:b] @ documents.T

    return streaming_top_k(len(queries), document_count, k, score_chunk, corpus_chunk)


def maxsim_search(
    query_vectors: list[np.ndarray],
    encode_documents: Callable[[int, int], list[np.ndarray]],
    document_count: int,
    k: int,
    corpus_chunk: int = DEFAULT_CORPUS_CHUNK,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact MaxSim top-k for multi-vector models (ColBERT-style late interaction, one-sided, averaged), batched
    per corpus chunk by :class:`harness.evaluation.maxsim.MaxSimIndex`."""
    queries = list(query_vectors)

    def score_chunk(start: int, stop: int) -> Callable[[int, int], np.ndarray]:
        index = MaxSimIndex(encode_documents(start, stop))
        return lambda a, b: index.scores(queries[a:b]).astype(np.float32)

    return streaming_top_k(len(queries), document_count, k, score_chunk, corpus_chunk)


# -- the task ------------------------------------------------------------------------------------------------------
def per_query_ndcg(qrels: dict, results: dict) -> Any:
    """Each evaluated query's nDCG@10 (pytrec_eval, as BEIR's ``EvaluateRetrieval.evaluate``, whose mean over them
    is the main score; ``results`` as that call left them, the query's own id removed) for a bootstrap interval.
    BEIR rounds its mean to 5 decimals; the per-query values are not rounded."""
    import pytrec_eval

    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(results)
    query_ids = sorted(per_query)
    rankings = [trec_ranking(list(results[qid]), list(results[qid].values())) for qid in query_ids]
    golds = [{doc for doc, level in qrels[qid].items() if level >= 1} for qid in query_ids]
    return mean_examples(
        [per_query[query_id]["ndcg_cut_10"] for query_id in query_ids],
        ids=query_ids,
        hits=ranked_hits(rankings, golds),  # in trec_eval's order, the one the nDCG above is computed in
    )


class BeirTask(Task):
    """One dataset in BEIR's format; ``dataset_name`` is its folder name (set by :func:`task_class`)."""

    dataset_name: str = ""
    options = {
        "split": Option("test", "the qrels split to evaluate (qrels/<split>.tsv)", type=str),
        "first_stage": Option("bm25", "candidates a pair scorer reranks: bm25 or an embedder spec (e.g. be)", type=str),
        "rerank_k": Option(100, "how many first-stage candidates a pair scorer reranks", type=int, bounds="[1, inf)"),
        "corpus_chunk": Option(
            DEFAULT_CORPUS_CHUNK, "documents embedded and scored at once (memory bound)", type=int, bounds="[1, inf)"
        ),
    }

    def __init__(self, options=None, data_dir=None):
        super().__init__(options, data_dir)
        self._loaded: tuple[Path, dict, dict, dict] | None = None

    def folder(self) -> Path:
        return find_dataset(self.dataset_name, self.options["split"], self.data_dir)

    def data_files(self, folder: Path) -> list[Path]:
        return [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{self.options['split']}.tsv"]

    def load(self) -> tuple[Path, dict, dict, dict]:
        """(folder, corpus, queries, qrels) as BEIR's GenericDataLoader reads them (kept for the next call)."""
        if self._loaded is None:
            from beir.datasets.data_loader import GenericDataLoader

            folder = self.folder()
            try:
                corpus, queries, qrels = GenericDataLoader(data_folder=str(folder)).load(split=self.options["split"])
            except (ValueError, KeyError, IndexError, json.JSONDecodeError) as exc:
                raise BeirDataError(f"{folder}: BEIR's loader cannot read it ({type(exc).__name__}: {exc}).") from None
            if not corpus or not queries or not qrels:
                raise BeirDataError(f"{folder}: empty corpus, queries or {self.options['split']} qrels.")
            self._loaded = (folder, corpus, queries, qrels)
        return self._loaded

    def check_data(self) -> str:
        folder = self.load()[0]
        return files_checksum(self.data_files(folder))

    def ranked_texts(self, ctx: Any, queries: Any, documents: Any) -> RankedTexts:
        """Queries and documents by their ids in the dataset, documents as the models read them (title and text)."""
        _, corpus, all_queries, _ = self.load()

        def document(doc_id: str) -> str | None:
            return document_text(corpus[doc_id]) if doc_id in corpus else None

        name = self.metadata.name
        return RankedTexts(
            texts_by_id(name, "query", queries, all_queries), texts_by_id(name, "document", documents, document)
        )

    def evaluate(self, model: Any, ctx: Any) -> EvalResult:
        from beir.retrieval.evaluation import EvaluateRetrieval

        folder, corpus, all_queries, qrels = self.load()
        query_ids = sample_items(sorted(all_queries), ctx.profile.max_eval_examples)
        query_texts = [all_queries[qid] for qid in query_ids]
        document_ids = list(corpus)
        k = max(K_VALUES) + 1  # one more, as BEIR's exact search: a document with the query's id is dropped
        details: dict[str, Any] = {
            "split": self.options["split"],
            "queries": len(query_ids),
            "documents": len(document_ids),
            "folder": str(folder),
        }
        if isinstance(model, PairScorer) and not isinstance(model, (Embedder, MultiVectorEmbedder)):
            results = self._rerank(model, ctx, query_ids, query_texts, corpus, document_ids, details)
        else:
            results = self._retrieve(model, query_ids, query_texts, corpus, document_ids, k, details)
        ndcg, mean_ap, recall, precision = EvaluateRetrieval.evaluate(qrels, results, list(K_VALUES))
        mrr = EvaluateRetrieval.evaluate_custom(qrels, results, list(K_VALUES), metric="mrr")
        scores: dict[str, float] = {}
        for table in (ndcg, mean_ap, recall, precision, mrr):
            for name, value in table.items():
                scores[name.lower()] = 100 * float(value)
        return EvalResult(
            scores, files_checksum(self.data_files(folder)), details, examples=per_query_ndcg(qrels, results)
        )

    def _texts(self, corpus: dict, document_ids: Sequence[str], start: int, stop: int) -> list[str]:
        return [document_text(corpus[doc_id]) for doc_id in document_ids[start:stop]]

    def _retrieve(self, model, query_ids, query_texts, corpus, document_ids, k, details) -> dict:
        chunk = self.options["corpus_chunk"]
        if isinstance(model, MultiVectorEmbedder) and not isinstance(model, Embedder):
            details["retrieval"] = "exact MaxSim over every document"
            queries = model.encode_multi(query_texts)
            indices, scores = maxsim_search(
                queries,
                lambda a, b: model.encode_multi(self._texts(corpus, document_ids, a, b)),
                len(document_ids),
                k,
                chunk,
            )
        else:
            details["retrieval"] = "exact cosine over every document"
            embedder = as_embedder(model)
            encode_query = getattr(model, "encode_query", None) or embedder.encode
            encode_document = getattr(model, "encode_document", None) or embedder.encode
            indices, scores = cosine_search(
                np.asarray(encode_query(query_texts)),
                lambda a, b: np.asarray(encode_document(self._texts(corpus, document_ids, a, b))),
                len(document_ids),
                k,
                chunk,
            )
        return {
            qid: {document_ids[i]: float(s) for i, s in zip(row_indices, row_scores)}
            for qid, row_indices, row_scores in zip(query_ids, indices, scores)
        }

    def _rerank(self, model, ctx, query_ids, query_texts, corpus, document_ids, details) -> dict:
        depth = self.options["rerank_k"]
        first_stage = first_stage_from_context(self.options["first_stage"], ctx, self.metadata.name)
        documents = [document_text(corpus[doc_id]) for doc_id in document_ids]
        if isinstance(first_stage, EmbedderFirstStage):  # searched chunk by chunk, like the embedders above
            embedder = first_stage.embedder
            candidates, _ = cosine_search(
                np.asarray(embedder.encode(query_texts)),
                lambda a, b: np.asarray(embedder.encode(documents[a:b])),
                len(documents),
                depth,
                self.options["corpus_chunk"],
            )
        else:  # BM25 (rank_bm25's Okapi BM25 over the whole corpus, queries scored in chunks)
            candidates = first_stage.candidates(query_texts, documents, depth)
        details["retrieval"] = f"rerank the top {depth} of {first_stage.description}"
        details["first_stage"] = first_stage.name
        first = [text for text, row in zip(query_texts, candidates) for _ in row]
        second = [documents[i] for row in candidates for i in row]
        pair_scores = np.asarray(model.score(first, second), dtype=np.float64)
        results: dict[str, dict[str, float]] = {}
        position = 0
        for qid, row in zip(query_ids, candidates):
            results[qid] = {document_ids[i]: float(pair_scores[position + j]) for j, i in enumerate(row)}
            position += len(row)
        return results


def harness_task_name(dataset: str) -> str:
    return f"{FAMILY}.{dataset}"


_CLASSES: dict[str, type[BeirTask]] = {}


def task_class(dataset: str) -> type[BeirTask]:
    """The Task class of the BEIR-format dataset folder ``dataset`` (built once per name)."""
    if not _NAME.match(dataset) or "/" in dataset:
        raise UnknownBeirDatasetError(
            f"beir:{dataset!r}: a BEIR dataset name is its folder name (lower-case letters, "
            f"digits, '-', '_', '.'), e.g. beir:scifact. Downloadable: {', '.join(DOWNLOADS)}."
        )
    if dataset not in _CLASSES:
        size = DOWNLOADS.get(dataset)
        metadata = TaskMetadata(
            name=harness_task_name(dataset),
            family=FAMILY,
            description=f"BEIR {dataset}: retrieve relevant documents"
            + (f" ({size[0]} documents, {size[1]} test queries)" if size else " (a dataset in BEIR's format)"),
            main_score=MAIN_SCORE,
            metric="BEIR's EvaluateRetrieval (pytrec_eval) x100: nDCG@10 (main), MAP, Recall, P, MRR at 1/3/5/10/"
            "100/1000; exact search for embedders, top-100 reranking for pair scorers",
            reference="Thakur et al. 2021, BEIR (NeurIPS Datasets and Benchmarks); github.com/beir-cellar/beir",
            dataset=dataset,
            dataset_source=(BEIR_URL.format(name=dataset) if size else "a folder in BEIR's format under --data-dir"),
            license="per dataset: see the BEIR repository's dataset table",
            requires=("pair_scorer",),  # embedders and multi-vector models reach it through the core's adapters
        )
        _CLASSES[dataset] = BeirTask.variant(metadata, dataset_name=dataset)  # type: ignore[assignment]
    return _CLASSES[dataset]


class BeirNamespace:
    """The ``task-namespace`` component ``beir``: ``beir:NAME`` -> the dataset folder NAME in BEIR's format."""

    description = "any dataset in BEIR's format: beir:scifact, beir:nfcorpus, beir:MYDATA (--data-dir)"

    def resolve(self, name: str) -> type[BeirTask]:
        if not name:
            raise UnknownBeirDatasetError(
                f"name a BEIR dataset after the prefix, e.g. --tasks beir:scifact "
                f"(downloadable: {', '.join(DOWNLOADS)})."
            )
        return task_class(name)


class BeirDownload:
    """``harness data download beir:NAME``: BEIR's public zip into ``<data dir>/beir/NAME/`` (resumable, verified,
    unpacked atomically by :class:`harness.ArchiveDataset`)."""

    def __init__(self, name: str):
        self.name = name
        documents, queries = DOWNLOADS[name]
        self.description = f"BEIR {name} ({documents} documents, {queries} test queries), BEIR's public zip"
        self.dataset = ArchiveDataset(
            name=name,
            description=self.description,
            archives=(Archive(BEIR_URL.format(name=name)),),
            license="per dataset: see the BEIR repository's dataset table",
        )

    def download(self, target_dir: Path, progress: bool = False) -> list[Path]:
        return self.dataset.download(Path(target_dir) / FAMILY, progress)


@hookimpl
def register_components(register):
    namespace = BeirNamespace()
    register(Component("task-namespace", FAMILY, namespace, namespace.description))
    for name in DOWNLOADS:
        source = BeirDownload(name)
        register(Component("dataset", f"{FAMILY}:{name}", source, source.description))
