"""USEB, the Unsupervised Sentence Embedding Benchmark: AskUbuntu, CQADupStack, TwitterPara, SciDocs.

Reference: Wang, Reimers & Gurevych 2021, "TSDAE" (arXiv 2104.06979), which introduced USEB; thesis section 3.2
(table 3.4) and table 6.10 (METHODS.md "USEB"). The protocol is the public ``useb`` package 0.0.1 (UKPLab/useb,
``useb/evaluators``); ``tests/test_useb.py`` runs that package and these tasks on the same embeddings and requires
equal numbers.

Members (scores x100, unrounded; useb rounds to two decimals):

- ``askubuntu``: each test query's 20 candidates (titles; ``text=title_and_body|body`` as useb's ``text_components``)
  are reranked by the pair score; ties keep the candidates' BM25 order (useb sorts stably). Queries without gold are
  skipped. ``map`` (main; AP = mean precision at the ranks of the gold candidates), ``mrr`` (useb's: no cut-off),
  ``mrr@10``, ``p@1``, ``p@5``.
- ``cqadupstack``: per forum (the 12 of ``corpus.json``), the split's queries retrieve from the forum's documents
  minus the split's queries (as useb: a query never retrieves itself). ``map@100``: scikit-learn's average
  precision over the top 100 (hits vs scores; 0 without a hit), mean over queries, then over forums (main);
  ``ndcg@10`` as useb computes it. Embedders rank the whole pool by cosine, scored in float32 as useb
  does. A model that scores pairs itself (cross-encoders) reranks the top 100 of a first stage:
  option ``first_stage`` = ``bm25`` (default; rank_bm25's Okapi BM25, k1 1.5, b 0.75, lower-cased ``\\w+`` tokens)
  or a backbone (a registered ``backbone`` name or a local Hugging Face folder) used as a mean-pooled embedder. The
  first stage is recorded in ``EvalResult.details``.
- ``twitterpara``: PIT-2015 test (expert label 0-5) and Twitter URL Corpus test (n of 6 annotators): label 3 dropped,
  above 3 a paraphrase; ``ap`` = mean of the two average precisions of the pair scores (main); ``spearman`` =
  mean of the two Spearman correlations of the scores with the labels over all pairs, label 3 included (as useb).
- ``scidocs``: cite, cocite, coread, coview; each query title against its (up to 30) candidate titles; candidates
  without a title are dropped from the ranking but stay in the qrels, queries without a title are skipped.
  ``map`` and ``ndcg`` as trec_eval computes them (pytrec_eval in useb: scores compared as float32, ties broken by
  descending document id, AP over all relevant qrels), mean over queries, then over the four (main ``map``).

Every member scores pairs through ``harness.as_pair_scorer`` (cross-encoders directly; embedders by cosine, each
distinct text encoded once). The smoke profile evaluates a seeded sample of ``max_eval_examples`` queries/pairs per
sub-dataset (CQADupStack: and a pool cut to the gold documents plus a seeded sample, five times that size).

Data: useb's ``data-eval/`` (evaluation) and ``data-train/<domain>/unsupervised/train.txt`` (unlabelled in-domain
sentences, offered as ``unlabeled_sentences`` training data; the domain of twitterpara is ``twitter``). Folders are
looked for in ``--data-dir`` / ``HARNESS_DATA_DIR`` (as ``DIR/useb/data-eval/...`` or ``DIR/data-eval/...``), then,
for twitterpara only, the bundled copy ``tasks/data/twitterpara`` (the original releases, see its SOURCE.md), then
``~/.cache/harness/data/useb`` where ``harness data download useb`` puts the official archives. A missing member
raises ``MissingDataError`` saying what is missing and how to get it.

Deviations from useb (see docs/fidelity.md):
- useb's SciDocs also reports Euclidean-distance scores of embeddings; a pair-scorer interface has no distance, so
  only the cosine scores (useb's main metric) are reported.
- ``Twitter_URL_Corpus_test.txt``: the original release (bundled) has 250 blank lines, on which useb's parser would
  fail (so its own copy has none); they are skipped.
- An AskUbuntu query whose gold is not among its candidates (useb fails an assertion; the official data has none)
  scores 0 and is counted in ``details``.
- Pair scorers on CQADupStack rerank a first stage's top 100 (useb defines the protocol for embedders only).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from sklearn.metrics import average_precision_score

from harness import (
    UNLABELED_SENTENCES,
    Component,
    EvalResult,
    MissingDataError,
    Option,
    Task,
    TaskMetadata,
    TaskPlugin,
    TrainingSplits,
    UnlabeledSentences,
    as_embedder,
    as_pair_scorer,
    hookimpl,
)
from harness.capabilities import Embedder, PairScorer, SpanEncoder
from harness.plugin_api import task_factory
from harness.data import data_dir_override, default_download_dir, files_checksum
from harness.download import Archive, ArchiveDataset
from harness.errors import data_error
from harness.metrics import spearman

FAMILY = "useb"
DATASET_NAME = "useb"  # the folder `harness data download useb` creates under the data dir
BUNDLED_TWITTERPARA = Path(__file__).resolve().parent / "data" / "twitterpara"
DOWNLOAD_HINT = "harness data download useb"

# The official archives, as in useb 0.0.1's `useb/downloading.py`. UKP publishes no checksum or size for them, so
# the download verifies every zip member's CRC-32 and records the sha256 it saw in the dataset's manifest.
USEB_ARCHIVES: tuple[Archive, ...] = (
    Archive("https://public.ukp.informatik.tu-darmstadt.de/kwang/unsupse-benchmark/tsdae-evaluation/data-eval.zip"),
    Archive("https://public.ukp.informatik.tu-darmstadt.de/kwang/unsupse-benchmark/tsdae-evaluation/data-train.zip"),
)

# Files each member reads from data-eval/<member>/ (useb asserts the same ones, plus PIT's test.label, unused).
REQUIRED_FILES = {
    "askubuntu": ("text_tokenized.txt", "test.txt", "dev.txt"),
    "cqadupstack": ("corpus.json", "retrieval_split.json"),
    "twitterpara": ("Twitter_URL_Corpus_test.txt", "test.data"),
    "scidocs": ("data.json",),
}
TRAIN_DOMAIN = {"askubuntu": "askubuntu", "cqadupstack": "cqadupstack", "twitterpara": "twitter", "scidocs": "scidocs"}
CANDIDATES_TOP_K = 100  # CQADupStack: MAP@100, and the first stage's depth for pair scorers
NDCG_K = 10
SMOKE_POOL_FACTOR = 5


# ---------------------------------------------------------------------------------------------------------------------
# Locating the data
# ---------------------------------------------------------------------------------------------------------------------
def candidate_roots(data_dir: Path | None) -> list[Path]:
    """Folders that may hold useb's ``data-eval`` / ``data-train``, in the order they are tried."""
    roots: list[Path] = []
    explicit = data_dir or data_dir_override()
    if explicit is not None:
        roots += [Path(explicit) / DATASET_NAME, Path(explicit)]
    roots += [default_download_dir() / DATASET_NAME, Path.home() / ".cache" / "harness" / "data" / DATASET_NAME]
    return list(dict.fromkeys(roots))


def find_eval_dir(member: str, data_dir: Path | None, bundled: Path | None = None) -> Path:
    """``data-eval/<member>`` with all the files it needs, or a MissingDataError saying how to get it."""
    explicit = data_dir or data_dir_override()
    roots = candidate_roots(data_dir)
    folders = [root / "data-eval" / member for root in roots]
    if bundled is not None:
        # Order of DESIGN.md "Data": explicit data dir, then the bundled copy, then the download folder.
        folders.insert(2 if explicit is not None else 0, bundled)
    needed = REQUIRED_FILES[member]
    for folder in folders:
        if all((folder / name).is_file() for name in needed):
            return folder
    raise MissingDataError(
        f"USEB {member}: the evaluation files {', '.join(needed)} were not found (looked in: "
        f"{', '.join(str(f) for f in folders)}). Download the official USEB data with `{DOWNLOAD_HINT}` (it goes to "
        f"{default_download_dir() / DATASET_NAME}; add --data-dir DIR to put it elsewhere), or pass --data-dir DIR "
        f"(or set HARNESS_DATA_DIR) where DIR/useb/data-eval/{member}/ holds these files."
    )


def find_train_file(member: str, data_dir: Path | None) -> Path:
    relative = Path("data-train") / TRAIN_DOMAIN[member] / "unsupervised" / "train.txt"
    roots = candidate_roots(data_dir)
    for root in roots:
        if (root / relative).is_file():
            return root / relative
    raise MissingDataError(
        f"USEB {member}: the unlabelled training sentences {relative} were not found (looked in: "
        f"{', '.join(str(r) for r in roots)}). Download them with `{DOWNLOAD_HINT}`, or pass --data-dir DIR (or set "
        f"HARNESS_DATA_DIR) where DIR/useb/{relative} exists."
    )


def file_lines(path: Path) -> list[str]:
    """Lines as useb reads them (iterating the file: ``\\n``, ``\\r\\n`` or ``\\r`` end a line, nothing else),
    without the line end."""
    if not Path(path).is_file():
        raise MissingDataError(f"{path}: data file not found.")
    try:
        with open(path, encoding="utf-8") as handle:
            return [line.rstrip("\n") for line in handle]
    except UnicodeDecodeError as error:
        raise data_error(path, None, f"is not UTF-8 ({error}).") from None


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise data_error(path, error.lineno, f"invalid JSON ({error.msg}).") from None


def _sample_indices(count: int, limit: int | None) -> list[int]:
    """All indices, or the smoke profile's seeded sample (seed 0, so every model sees the same items)."""
    if limit is None or count <= limit:
        return list(range(count))
    return sorted(np.random.default_rng(0).choice(count, size=limit, replace=False).tolist())


# ---------------------------------------------------------------------------------------------------------------------
# Ranking metrics
# ---------------------------------------------------------------------------------------------------------------------
def stable_rank(candidates: Sequence[str], scores: Sequence[float]) -> list[str]:
    """Candidates by descending score; equal scores keep their given order (useb's ``rank_by_score``)."""
    order = sorted(range(len(candidates)), key=lambda i: -float(scores[i]))
    return [candidates[i] for i in order]


def rerank_metrics(gold: set[str], ranking: Sequence[str]) -> dict[str, float]:
    """useb's AskUbuntu metrics of one ranked candidate list: AP (mean precision at the gold ranks), P@1, P@5, RR."""
    precisions, hits = [], 0
    first_hit_rank = None
    for rank, candidate in enumerate(ranking, start=1):
        if candidate in gold:
            hits += 1
            precisions.append(hits / rank)
            first_hit_rank = first_hit_rank or rank
    reciprocal = 1.0 / first_hit_rank if first_hit_rank else 0.0
    return {
        "map": float(np.mean(precisions)) if precisions else 0.0,
        "p@1": len(set(ranking[:1]) & gold) / max(len(ranking[:1]), 1),
        "p@5": len(set(ranking[:5]) & gold) / max(len(ranking[:5]), 1),
        "mrr": reciprocal,
        "mrr@10": reciprocal if first_hit_rank and first_hit_rank <= 10 else 0.0,
    }


def trec_ranking(doc_ids: Sequence[str], scores: Sequence[float]) -> list[str]:
    """trec_eval's order: score as float32 descending, ties by document id descending (``comp_sim_docno``)."""
    sims = np.asarray(scores, dtype=np.float32).tolist()
    return [doc for _, doc in sorted(zip(sims, doc_ids), reverse=True)]


def trec_map_ndcg(qrel: dict[str, int], doc_ids: Sequence[str], scores: Sequence[float]) -> tuple[float, float]:
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
    ideal = sum(level / np.log2(index + 2) for index, level in enumerate(ideal_levels))
    average_precision = precision_sum / relevant_total if relevant_total else 0.0
    return average_precision, (dcg / ideal if ideal > 0 else 0.0)


def topk_metrics(hits: Sequence[int], scores: Sequence[float], relevant_count: int) -> tuple[float, float | None]:
    """useb's CQADupStack metrics of one query's top list (sorted by descending score): scikit-learn's average
    precision of hits vs scores (0 without a hit), and nDCG@10 against ``relevant_count`` ideal hits (None: no gold)."""
    average_precision = float(average_precision_score(list(hits), list(scores))) if 1 in hits else 0.0

    def dcg(relevances: Sequence[int]) -> float:
        return sum(relevance / np.log2(i + 2) for i, relevance in enumerate(relevances[:NDCG_K]))

    ndcg = dcg(list(hits)) / dcg([1] * relevant_count) if relevant_count > 0 else None
    return average_precision, ndcg


# ---------------------------------------------------------------------------------------------------------------------
# First stages for pair scorers on CQADupStack
# ---------------------------------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\w+")


def bm25_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25Index:
    """rank_bm25's Okapi BM25 (its idf and parameters), scored for many queries at once with a sparse matrix; equal
    to ``BM25Okapi.get_scores`` (tested), which loops in Python over every document for every query token."""

    def __init__(self, documents: Sequence[str]):
        from rank_bm25 import BM25Okapi
        from scipy import sparse

        bm25 = BM25Okapi([bm25_tokens(doc) for doc in documents])
        self.vocabulary = {term: column for column, term in enumerate(bm25.idf)}
        rows, columns, weights = [], [], []
        for row, (frequencies, length) in enumerate(zip(bm25.doc_freqs, bm25.doc_len)):
            norm = bm25.k1 * (1 - bm25.b + bm25.b * length / bm25.avgdl)
            for term, frequency in frequencies.items():
                rows.append(row)
                columns.append(self.vocabulary[term])
                weights.append(bm25.idf[term] * frequency * (bm25.k1 + 1) / (frequency + norm))
        self.term_weights = sparse.csr_matrix(
            (weights, (rows, columns)), shape=(len(documents), len(self.vocabulary))
        ).T.tocsr()  # [vocabulary, documents]

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """[n_queries, n_documents]; a repeated query token counts as often as it occurs, as in rank_bm25."""
        from scipy import sparse

        rows, columns = [], []
        for row, query in enumerate(queries):
            for term in bm25_tokens(query):
                if term in self.vocabulary:
                    rows.append(row)
                    columns.append(self.vocabulary[term])
        counts = sparse.csr_matrix(
            (np.ones(len(rows)), (rows, columns)), shape=(len(queries), len(self.vocabulary))
        )
        return np.asarray((counts @ self.term_weights).todense())


def top_k(score_rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and scores of the k best columns of each row, best first (ties: lower index first)."""
    k = min(k, score_rows.shape[1])
    if k < score_rows.shape[1]:
        part = np.argpartition(-score_rows, k - 1, axis=1)[:, :k]
    else:
        part = np.tile(np.arange(score_rows.shape[1]), (score_rows.shape[0], 1))
    part_scores = np.take_along_axis(score_rows, part, axis=1)
    order = np.lexsort((part, -part_scores), axis=1)
    indices = np.take_along_axis(part, order, axis=1)
    return indices, np.take_along_axis(score_rows, indices, axis=1)


def cosine_top_k(query_vectors: np.ndarray, doc_vectors: np.ndarray, k: int, chunk: int = 256):
    """Top k documents by cosine for each query, computed in query chunks so the score matrix stays small."""
    def normalise(matrix: np.ndarray) -> np.ndarray:
        matrix = np.asarray(matrix, dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)

    queries, docs = normalise(query_vectors), normalise(doc_vectors)
    indices, scores = [], []
    for start in range(0, len(queries), chunk):
        # float32 scores, as useb ranks and scores them (it wraps the score matrix in a float32 torch.Tensor).
        chunk_scores32 = (queries[start : start + chunk] @ docs.T).astype(np.float32)
        chunk_indices, chunk_scores = top_k(chunk_scores32, k)
        indices.append(chunk_indices)
        scores.append(chunk_scores)
    if not indices:
        return np.zeros((0, 0), dtype=int), np.zeros((0, 0))
    return np.concatenate(indices), np.concatenate(scores)


def resolve_backbone(name: str) -> str:
    """A registered ``backbone`` component (e.g. the bundled all-MiniLM-L6-v2) or the name itself (a folder or id)."""
    if Path(name).expanduser().is_dir():
        return str(Path(name).expanduser())
    from harness.registry import default_registry

    registry = default_registry()
    if ("backbone", name) in registry.components:
        return str(registry.component("backbone", name)())
    return name


class FirstStage:
    """Top-100 pool indices per query for a pair scorer to rerank: BM25, or a backbone as a mean-pooled embedder
    (loaded once per evaluation)."""

    def __init__(self, name: str, ctx):
        self.name = name
        self.ctx = ctx
        self.encoder = None
        if name == "bm25":
            self.description = "bm25 (rank_bm25 BM25Okapi, k1 1.5, b 0.75)"
        else:
            from harness.encoding import SentenceEncoder

            path = resolve_backbone(name)
            self.encoder = SentenceEncoder.from_backbone(path, "mean", ctx.profile.max_seq_length).to(ctx.device)
            self.description = f"embedder {name} ({path}, mean pooling, cosine)"

    def candidates(self, queries: list[str], pool: list[str]) -> np.ndarray:
        if self.encoder is None:
            index = BM25Index(pool)
            chunks = [top_k(index.scores(queries[s : s + 256]), CANDIDATES_TOP_K)[0]
                      for s in range(0, len(queries), 256)]
            return np.concatenate(chunks) if chunks else np.zeros((0, 0), dtype=int)
        vectors = self.encoder.encode([*queries, *pool], batch_size=self.ctx.batch_size, progress=self.ctx.progress)
        return cosine_top_k(vectors[: len(queries)], vectors[len(queries) :], CANDIDATES_TOP_K)[0]


def encode_once(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """Embeddings of ``texts`` with each distinct text encoded once (duplicate titles are common in forums)."""
    distinct = list(dict.fromkeys(texts))
    row_of = {text: row for row, text in enumerate(distinct)}
    return np.asarray(embedder.encode(distinct))[[row_of[text] for text in texts]]


def full_pool_embedder(model: Any) -> Embedder | None:
    """The embedder to rank CQADupStack's whole pool with (useb's protocol), or None for a model that scores pairs
    itself (cross-encoders and friends), which then reranks a first stage."""
    if isinstance(model, PairScorer):
        return None
    if isinstance(model, (Embedder, SpanEncoder)):
        return as_embedder(model)
    return None


# ---------------------------------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------------------------------
class UsebTask(Task):
    """Shared by the members: data location, unlabelled training sentences, checksum."""

    member: str
    bundled: Path | None = None

    def eval_dir(self) -> Path:
        return find_eval_dir(self.member, self.data_dir, self.bundled)

    def data_files(self) -> list[Path]:
        folder = self.eval_dir()
        return [folder / name for name in REQUIRED_FILES[self.member]]

    def load(self) -> Any:  # pragma: no cover - interface
        """Read and check the member's evaluation data (DataFileError / MissingDataError on problems)."""
        raise NotImplementedError

    def check_data(self) -> str:
        self.load()
        return files_checksum(self.data_files())

    def training_data(self, kind: str, ctx=None) -> TrainingSplits | None:
        if kind != UNLABELED_SENTENCES:
            return None
        path = find_train_file(self.member, self.data_dir)
        sentences = [line.strip() for line in file_lines(path)]
        return TrainingSplits(
            source=self.metadata.name,
            train=UnlabeledSentences([s for s in sentences if s]),
            checksum=files_checksum([path]),
        )

    def split_name(self) -> str:
        return self.options.get("split", "test")


# -- AskUbuntu --------------------------------------------------------------------------------------------------------
@dataclass
class RerankQuery:
    query_id: str
    gold: list[str]
    candidates: list[str]  # in BM25 order


def read_askubuntu_pool(path: Path) -> dict[str, tuple[str, str]]:
    pool = {}
    for number, line in enumerate(file_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise data_error(path, number, f"expected 'id<TAB>title<TAB>body', found {len(fields)} fields.")
        pool[fields[0].strip()] = (fields[1].strip(), fields[2].strip())
    return pool


def read_askubuntu_queries(path: Path) -> list[RerankQuery]:
    """``id<TAB>gold ids<TAB>20 candidate ids<TAB>their BM25 scores``; candidates sorted by BM25 (stable)."""
    queries = []
    for number, line in enumerate(file_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 4:
            raise data_error(path, number, f"expected 4 tab-separated fields (id, gold, candidates, BM25 scores), "
                                           f"found {len(fields)}.")
        candidates, bm25_text = fields[2].split(), fields[3].split()
        try:
            bm25_scores = [float(value) for value in bm25_text]
        except ValueError:
            raise data_error(path, number, "BM25 scores must be numbers.") from None
        if len(bm25_scores) != len(candidates):
            raise data_error(path, number, f"{len(candidates)} candidates but {len(bm25_scores)} BM25 scores.")
        queries.append(RerankQuery(fields[0], fields[1].split(), stable_rank(candidates, bm25_scores)))
    return queries


class AskUbuntu(UsebTask):
    member = "askubuntu"

    def load(self) -> tuple[dict[str, tuple[str, str]], list[RerankQuery]]:
        folder = self.eval_dir()
        pool = read_askubuntu_pool(folder / "text_tokenized.txt")
        eval_file = folder / ("dev.txt" if self.split_name() == "valid" else "test.txt")
        queries = read_askubuntu_queries(eval_file)
        for query in queries:
            for question_id in [query.query_id, *query.candidates]:
                if question_id not in pool:
                    raise data_error(eval_file, None, f"question {question_id!r} is not in text_tokenized.txt.")
        return pool, queries

    def text(self, pool: dict[str, tuple[str, str]], question_id: str) -> str:
        title, body = pool[question_id]
        mode = self.options.get("text", "title")
        return title if mode == "title" else body if mode == "body" else " ".join([title, body]).strip()

    def evaluate(self, model, ctx) -> EvalResult:
        pool, queries = self.load()
        queries = [q for q in queries if q.gold]  # useb skips queries without a similar question
        queries = [queries[i] for i in _sample_indices(len(queries), ctx.profile.max_eval_examples)]
        first = [self.text(pool, q.query_id) for q in queries for _ in q.candidates]
        second = [self.text(pool, c) for q in queries for c in q.candidates]
        pair_scores = np.asarray(as_pair_scorer(model).score(first, second), dtype=np.float64)
        per_query: dict[str, list[float]] = {}
        start, without_gold = 0, 0
        for query in queries:
            scores = pair_scores[start : start + len(query.candidates)]
            start += len(query.candidates)
            gold = set(query.gold)
            without_gold += not (gold & set(query.candidates))
            for name, value in rerank_metrics(gold, stable_rank(query.candidates, scores)).items():
                per_query.setdefault(name, []).append(value)
        scores_x100 = {name: 100 * float(np.mean(values)) for name, values in per_query.items()}
        return EvalResult(
            scores=scores_x100,
            dataset_checksum=files_checksum(self.data_files()),
            details={"queries": len(queries), "pairs": len(first), "split": self.split_name(),
                     "text": self.options.get("text", "title"), "queries_without_gold_in_candidates": without_gold},
        )


# -- CQADupStack ------------------------------------------------------------------------------------------------------
@dataclass
class Forum:
    name: str
    query_ids: list[str]
    queries: list[str]
    doc_ids: list[str]
    docs: list[str]
    gold: dict[str, list[str]]


class CQADupStack(UsebTask):
    member = "cqadupstack"

    def load(self) -> list[Forum]:
        folder = self.eval_dir()
        corpus = _read_json(folder / "corpus.json")
        split = _read_json(folder / "retrieval_split.json")
        split_name = self.split_name()
        if split_name not in split:
            raise data_error(folder / "retrieval_split.json", None, f"has no {split_name!r} split.")
        forums = []
        for forum_name, texts in corpus.items():
            qrels = split[split_name].get(forum_name)
            if qrels is None:
                raise data_error(folder / "retrieval_split.json", None, f"has no forum {forum_name!r}.")
            missing = [qid for qid in qrels if qid not in texts]
            if missing:
                raise data_error(folder / "corpus.json", None, f"forum {forum_name!r} lacks queries {missing[:3]}.")
            doc_ids = [doc_id for doc_id in texts if doc_id not in qrels]  # queries never retrieve themselves
            forums.append(Forum(
                forum_name, list(qrels), [texts[q].strip() for q in qrels], doc_ids,
                [texts[d].strip() for d in doc_ids], {q: list(d) for q, d in qrels.items()},
            ))
        return forums

    def _smoke_cut(self, forum: Forum, limit: int | None) -> Forum:
        keep = _sample_indices(len(forum.query_ids), limit)
        if limit is None or len(keep) == len(forum.query_ids) and len(forum.doc_ids) <= SMOKE_POOL_FACTOR * limit:
            return forum
        query_ids = [forum.query_ids[i] for i in keep]
        gold_docs = {d for q in query_ids for d in forum.gold[q]}
        gold_rows = [i for i, d in enumerate(forum.doc_ids) if d in gold_docs]
        others = [i for i, d in enumerate(forum.doc_ids) if d not in gold_docs]
        room = max(SMOKE_POOL_FACTOR * limit - len(gold_rows), 0)
        rows = sorted(gold_rows + [others[i] for i in _sample_indices(len(others), room)])
        return Forum(forum.name, query_ids, [forum.queries[i] for i in keep], [forum.doc_ids[i] for i in rows],
                     [forum.docs[i] for i in rows], forum.gold)

    def evaluate(self, model, ctx) -> EvalResult:
        forums = [self._smoke_cut(f, ctx.profile.max_eval_examples) for f in self.load()]
        embedder = full_pool_embedder(model)
        scores: dict[str, float] = {}
        details: dict[str, Any] = {"split": self.split_name(), "forums": {}}
        first_stage = None
        if embedder is not None:
            details["ranking"] = "embedder: whole pool by cosine (useb)"
        else:
            first_stage = FirstStage(self.options.get("first_stage", "bm25"), ctx)
            details["ranking"] = f"pair scorer: reranks the top {CANDIDATES_TOP_K} of the first stage"
            details["first_stage"] = first_stage.name
            details["first_stage_used"] = first_stage.description
        for forum in forums:
            if embedder is not None:
                vectors = encode_once(embedder, [*forum.queries, *forum.docs])
                indices, top_scores = cosine_top_k(vectors[: len(forum.queries)], vectors[len(forum.queries):],
                                                   CANDIDATES_TOP_K)
            else:
                indices, top_scores = self._rerank(model, forum, first_stage.candidates(forum.queries, forum.docs))
            average_precisions, ndcgs = [], []
            for row, query_id in enumerate(forum.query_ids):
                gold = set(forum.gold[query_id])
                hits = [1 if forum.doc_ids[i] in gold else 0 for i in indices[row]]
                average_precision, ndcg = topk_metrics(hits, top_scores[row], len(forum.gold[query_id]))
                average_precisions.append(average_precision)
                if ndcg is not None:
                    ndcgs.append(ndcg)
            scores[f"map@100.{forum.name}"] = 100 * float(np.mean(average_precisions))
            scores[f"ndcg@10.{forum.name}"] = 100 * float(np.mean(ndcgs))
            details["forums"][forum.name] = {"queries": len(forum.query_ids), "pool": len(forum.doc_ids)}
        scores["map@100"] = float(np.mean([scores[f"map@100.{f.name}"] for f in forums]))
        scores["ndcg@10"] = float(np.mean([scores[f"ndcg@10.{f.name}"] for f in forums]))
        return EvalResult(scores, files_checksum(self.data_files()), details)

    @staticmethod
    def _rerank(model, forum: Forum, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pair scorer's scores of each query's first-stage candidates, reordered best first."""
        first = [forum.queries[row] for row in range(len(candidates)) for _ in candidates[row]]
        second = [forum.docs[i] for row in range(len(candidates)) for i in candidates[row]]
        flat = np.asarray(as_pair_scorer(model).score(first, second), dtype=np.float64)
        pair_scores = flat.reshape(candidates.shape)
        order = np.argsort(-pair_scores, axis=1, kind="stable")
        return np.take_along_axis(candidates, order, axis=1), np.take_along_axis(pair_scores, order, axis=1)


# -- TwitterPara ------------------------------------------------------------------------------------------------------
@dataclass
class ParaphrasePairs:
    name: str
    first: list[str]
    second: list[str]
    labels: np.ndarray  # the annotation (PIT: expert 0-5; URL: how many of 6 annotators said paraphrase)

    def subset(self, indices: Sequence[int]) -> "ParaphrasePairs":
        return ParaphrasePairs(self.name, [self.first[i] for i in indices], [self.second[i] for i in indices],
                               self.labels[list(indices)])


_URL_LABEL = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def read_twitter_url(path: Path) -> ParaphrasePairs:
    """``sentence1<TAB>sentence2<TAB>(n,6)<TAB>url``; blank lines (250 in the original release) are skipped."""
    first, second, labels = [], [], []
    for number, line in enumerate(file_lines(path), start=1):
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        match = _URL_LABEL.match(fields[2].strip()) if len(fields) >= 3 else None
        if match is None:
            raise data_error(path, number, "expected 'sentence1<TAB>sentence2<TAB>(n,6)<TAB>url'.")
        first.append(fields[0].strip())
        second.append(fields[1].strip())
        labels.append(int(match.group(1)))
    return ParaphrasePairs("twitterurl", first, second, np.array(labels))


def read_pit(path: Path) -> ParaphrasePairs:
    """PIT-2015 ``test.data``: topic id, topic, sentence 1, sentence 2, expert label 0-5, tags."""
    first, second, labels = [], [], []
    for number, line in enumerate(file_lines(path), start=1):
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        if len(fields) < 5 or not fields[4].strip().isdigit():
            raise data_error(path, number, "expected topic id, topic, sentence 1, sentence 2, label 0-5, ... "
                                           "(the test file with expert labels).")
        first.append(fields[2].strip())
        second.append(fields[3].strip())
        labels.append(int(fields[4]))
    return ParaphrasePairs("pit", first, second, np.array(labels))


class TwitterPara(UsebTask):
    member = "twitterpara"
    bundled = BUNDLED_TWITTERPARA

    def load(self) -> list[ParaphrasePairs]:
        folder = self.eval_dir()
        # useb's order: the URL corpus first, then PIT.
        return [read_twitter_url(folder / "Twitter_URL_Corpus_test.txt"), read_pit(folder / "test.data")]

    def evaluate(self, model, ctx) -> EvalResult:
        datasets = [d.subset(_sample_indices(len(d.labels), ctx.profile.max_eval_examples)) for d in self.load()]
        first = [s for d in datasets for s in d.first]
        second = [s for d in datasets for s in d.second]
        predicted = np.asarray(as_pair_scorer(model).score(first, second), dtype=np.float64)
        scores: dict[str, float] = {}
        details: dict[str, Any] = {"folder": str(self.eval_dir()), "pairs": {}}
        start = 0
        for dataset in datasets:
            pair_scores = predicted[start : start + len(dataset.labels)]
            start += len(dataset.labels)
            judged = dataset.labels != 3  # label 3 is undecided: left out of AP (kept for Spearman, as useb)
            paraphrase = (dataset.labels[judged] > 3).astype(int)
            scores[f"ap.{dataset.name}"] = 100 * float(average_precision_score(paraphrase, pair_scores[judged]))
            scores[f"spearman.{dataset.name}"] = 100 * spearman(pair_scores, dataset.labels * 20)
            details["pairs"][dataset.name] = {"all": len(dataset.labels), "judged": int(judged.sum()),
                                              "paraphrases": int(paraphrase.sum())}
        scores["ap"] = float(np.mean([scores[f"ap.{d.name}"] for d in datasets]))
        scores["spearman"] = float(np.mean([scores[f"spearman.{d.name}"] for d in datasets]))
        return EvalResult(scores, files_checksum(self.data_files()), details)


# -- SciDocs ----------------------------------------------------------------------------------------------------------
SCIDOCS_SUBTASKS = ("cite", "cocite", "coread", "coview")


class SciDocs(UsebTask):
    member = "scidocs"

    def load(self) -> tuple[dict[str, str | None], dict[str, dict[str, dict[str, int]]]]:
        path = self.eval_dir() / "data.json"
        data = _read_json(path)
        split_name = self.split_name()
        if "corpus" not in data or split_name not in data:
            raise data_error(path, None, f"expected the keys 'corpus' and {split_name!r}.")
        titles = {pid: (paper or {}).get("title") for pid, paper in data["corpus"].items()}
        return titles, data[split_name]

    def evaluate(self, model, ctx) -> EvalResult:
        titles, qrels_by_subtask = self.load()

        def title(pid: str) -> str | None:
            return titles.get(pid) or None  # useb: missing paper or None/empty title -> no text

        # (subtask, query id, candidate ids) in useb's order; one scoring call for all of them.
        rankings: list[tuple[str, str, list[str]]] = []
        first, second = [], []
        for subtask, qrels in qrels_by_subtask.items():
            query_ids = [qid for qid in qrels if title(qid)]  # useb skips queries without a title
            query_ids = [query_ids[i] for i in _sample_indices(len(query_ids), ctx.profile.max_eval_examples)]
            for query_id in query_ids:
                candidates = [did for did in qrels[query_id] if title(did)]
                rankings.append((subtask, query_id, candidates))
                first += [title(query_id).strip()] * len(candidates)
                second += [title(did).strip() for did in candidates]
        pair_scores = np.asarray(as_pair_scorer(model).score(first, second), dtype=np.float64)
        per_subtask: dict[str, dict[str, list[float]]] = {name: {"map": [], "ndcg": []} for name in qrels_by_subtask}
        start = 0
        for subtask, query_id, candidates in rankings:
            scores = pair_scores[start : start + len(candidates)]
            start += len(candidates)
            average_precision, ndcg = trec_map_ndcg(qrels_by_subtask[subtask][query_id], candidates, scores)
            per_subtask[subtask]["map"].append(average_precision)
            per_subtask[subtask]["ndcg"].append(ndcg)
        result: dict[str, float] = {}
        for subtask, values in per_subtask.items():
            result[f"map.{subtask}"] = 100 * float(np.mean(values["map"]))
            result[f"ndcg.{subtask}"] = 100 * float(np.mean(values["ndcg"]))
        result["map"] = float(np.mean([result[f"map.{s}"] for s in per_subtask]))
        result["ndcg"] = float(np.mean([result[f"ndcg.{s}"] for s in per_subtask]))
        return EvalResult(result, files_checksum(self.data_files()), {
            "split": self.split_name(), "queries": {s: len(v["map"]) for s, v in per_subtask.items()},
            "pairs": len(first),
        })


# ---------------------------------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------------------------------
REFERENCE = "Wang, Reimers & Gurevych 2021, TSDAE (arXiv 2104.06979), USEB; thesis 3.2, table 6.10"
SOURCE = "official USEB data-eval.zip / data-train.zip (UKP TU Darmstadt), via `harness data download useb`"
SPLIT_OPTION = Option("test", "useb's eval_type: test, or valid (the development queries)", choices=("test", "valid"))
FIRST_STAGE_OPTION = Option(
    "bm25",
    "pair scorers only: first stage whose top 100 is reranked; 'bm25' or a backbone (registered name or local "
    "folder) used as a mean-pooled embedder",
)



def task_plugins() -> list[TaskPlugin]:
    specs = [
        (AskUbuntu, "askubuntu", "map",
         "AskUbuntu: rerank 20 candidate questions (titles) per query",
         "MAP x100 of the reranked 20 candidates (also MRR, MRR@10, P@1, P@5)",
         "Lei et al. 2016 AskUbuntu duplicates; USEB data-eval/askubuntu", "not stated by USEB; see the original "
         "release (github.com/taolei87/askubuntu)",
         {"split": SPLIT_OPTION, "text": Option("title", "the text of a question (useb's text_components)",
                                                 choices=("title", "body", "title_and_body"))}),
        (CQADupStack, "cqadupstack", "map@100",
         "CQADupStack: retrieve duplicate question titles from each of 12 StackExchange forums",
         "MAP@100 x100 per forum, mean over forums (also nDCG@10); pair scorers rerank a first stage's top 100",
         "Hoogeveen et al. 2015 CQADupStack; USEB data-eval/cqadupstack",
         "not stated by USEB; see the original release (github.com/D1Doris/CQADupStack)",
         {"split": SPLIT_OPTION, "first_stage": FIRST_STAGE_OPTION}),
        (TwitterPara, "twitterpara", "ap",
         "TwitterPara: paraphrase identification on PIT-2015 test and Twitter URL Corpus test (bundled)",
         "AP x100 of pair scores vs paraphrase labels (label 3 dropped, >3 positive), mean of the two; Spearman too",
         "Xu et al. 2015 (PIT-2015), Lan et al. 2017 (Twitter URL Corpus); USEB data-eval/twitterpara",
         "Twitter URL Corpus CC BY-NC-SA 3.0; PIT-2015 none stated (see tasks/data/twitterpara/SOURCE.md)", {}),
        (SciDocs, "scidocs", "map",
         "SciDocs: rerank up to 30 candidate paper titles per query title (cite, cocite, coread, coview)",
         "MAP x100 (trec_eval) per sub-task, mean of the four (also nDCG)",
         "Cohan et al. 2020 SciDocs; USEB data-eval/scidocs", "not stated by USEB; see the original "
         "release (github.com/allenai/scidocs)",
         {"split": SPLIT_OPTION}),
    ]
    plugins = []
    for cls, name, main_score, description, metric, dataset_reference, license_text, options in specs:
        metadata = TaskMetadata(
            name=name,
            family=FAMILY,
            description=description,
            main_score=main_score,
            metric=metric,
            reference=f"{REFERENCE}; {dataset_reference}",
            dataset=DATASET_NAME,
            dataset_source=(SOURCE if name != "twitterpara" else
                            "bundled original releases (tasks/data/twitterpara/SOURCE.md); or " + SOURCE),
            license=license_text,
            version="1",
            training_kinds=(UNLABELED_SENTENCES,),
        )
        plugins.append(TaskPlugin(metadata, task_factory(cls, metadata), options))
    return plugins


def useb_dataset(archives: Sequence[Archive] = USEB_ARCHIVES) -> ArchiveDataset:
    """The downloadable USEB data (data-eval + data-train), from ``archives`` (the official ones by default)."""
    return ArchiveDataset(
        name=DATASET_NAME,
        description="USEB data-eval (AskUbuntu, CQADupStack, TwitterPara, SciDocs) and data-train (unlabelled "
                    "sentences), official UKP archives; no published checksum: zip CRCs verified",
        archives=tuple(archives),
        license="per dataset: see https://github.com/UKPLab/useb and the original datasets",
    )


@hookimpl
def register_tasks(register):
    for plugin in task_plugins():
        register(plugin)


@hookimpl
def register_components(register):
    dataset = useb_dataset()
    register(Component("dataset", DATASET_NAME, dataset, dataset.description))
