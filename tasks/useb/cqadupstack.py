"""USEB CQADupStack: retrieve duplicate question titles in 12 StackExchange forums (Hoogeveen et al. 2015; useb's
``CQADupStackEvaluator``).

Per forum (the 12 of ``corpus.json``), the split's queries retrieve from the forum's documents minus the split's
queries (as useb: a query never retrieves itself). ``map@100``: scikit-learn's average precision over the top 100
(hits vs scores; 0 without a hit), mean over queries, then over forums (main); ``ndcg@10`` as useb computes it
(harness.evaluation.ranking.top_list_metrics). Embedders rank the whole pool by cosine, scored in float32 as useb
does (harness.evaluation.search.cosine_top_k); multi-vector embedders rank it by MaxSim the same way
(harness.evaluation.maxsim.maxsim_top_k: batched, every distinct text encoded once per forum).

Deviation: a model that scores pairs itself (cross-encoders) reranks the top 100 of a first stage (useb defines the
protocol for embedders only): option ``first_stage`` = ``bm25`` (default) or an embedder model spec (e.g. ``be``)
that the evaluation context builds through the runner (harness.evaluation.first_stage). The first stage is recorded
in ``EvalResult.details``. Ties at the 100th place are broken by the lower pool index (useb: torch.topk's order).

Smoke profile: a seeded sample of ``max_eval_examples`` queries per forum, and a pool cut to their gold documents
plus a seeded sample of the others, ``SMOKE_POOL_FACTOR`` times the query count in all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness import EvalResult, Option, RankedTexts, data_error, files_checksum, texts_by_id
from harness.blocks import (
    BM25_FIRST_STAGE,
    cosine_top_k,
    encode_multi_once,
    encode_once,
    evaluation_sample,
    first_stage_from_context,
    full_pool_embedder,
    full_pool_multi_vector,
    maxsim_top_k,
    mean_examples,
    ranked_hits,
    score_pairs,
    top_list_metrics,
)

from .base import SPLIT_OPTION, UsebTask, useb_metadata
from .data import read_json

logger = logging.getLogger(__name__)

CANDIDATES_TOP_K = 100  # MAP@100, and the first stage's depth for pair scorers
SMOKE_POOL_FACTOR = 5


@dataclass
class Forum:
    name: str
    query_ids: list[str]
    queries: list[str]
    doc_ids: list[str]
    docs: list[str]
    gold: dict[str, list[str]]


def smoke_cut(forum: Forum, limit: int | None) -> Forum:
    """The forum with a seeded sample of ``limit`` queries and a pool of their gold documents plus a seeded sample
    of the others (``SMOKE_POOL_FACTOR * limit`` documents in all, or more when the gold alone exceeds that)."""
    keep = evaluation_sample(len(forum.query_ids), limit)
    if limit is None or len(keep) == len(forum.query_ids) and len(forum.doc_ids) <= SMOKE_POOL_FACTOR * limit:
        return forum
    query_ids = [forum.query_ids[i] for i in keep]
    gold_docs = {d for q in query_ids for d in forum.gold[q]}
    gold_rows = [i for i, d in enumerate(forum.doc_ids) if d in gold_docs]
    other_rows = [i for i, d in enumerate(forum.doc_ids) if d not in gold_docs]
    room = max(SMOKE_POOL_FACTOR * limit - len(gold_rows), 0)
    rows = sorted(gold_rows + [other_rows[i] for i in evaluation_sample(len(other_rows), room)])
    return Forum(
        forum.name,
        query_ids,
        [forum.queries[i] for i in keep],
        [forum.doc_ids[i] for i in rows],
        [forum.docs[i] for i in rows],
        forum.gold,
    )


def rerank(model: Any, forum: Forum, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pair scorer's scores of each query's first-stage candidates, reordered best first (ties: first-stage
    order)."""
    first = [forum.queries[row] for row in range(len(candidates)) for _ in candidates[row]]
    second = [forum.docs[i] for row in range(len(candidates)) for i in candidates[row]]
    pair_scores = score_pairs(model, first, second).reshape(candidates.shape)
    order = np.argsort(-pair_scores, axis=1, kind="stable")
    return np.take_along_axis(candidates, order, axis=1), np.take_along_axis(pair_scores, order, axis=1)


class CQADupStack(UsebTask):
    member = "cqadupstack"
    metadata = useb_metadata(
        "cqadupstack",
        description="CQADupStack: retrieve duplicate question titles from each of 12 StackExchange forums",
        main_score="map@100",
        metric="MAP@100 x100 per forum, mean over forums (also nDCG@10); pair scorers rerank a first stage's top 100",
        dataset_reference="Hoogeveen et al. 2015 CQADupStack; USEB data-eval/cqadupstack",
        license="not stated by USEB; see the original release (github.com/D1Doris/CQADupStack)",
        # 2: first_stage names an embedder model spec (was: a backbone); exact tie-break at the 100th place.
        version="2",
    )
    options = {
        "split": SPLIT_OPTION,
        "first_stage": Option(
            BM25_FIRST_STAGE,
            "pair scorers only: first stage whose top 100 is reranked; 'bm25' or an embedder model spec (e.g. "
            "'be'), built by the runner",
        ),
    }

    def load(self) -> list[Forum]:
        folder = self.eval_dir()
        corpus = read_json(folder / "corpus.json")
        split = read_json(folder / "retrieval_split.json")
        split_name = self.options["split"]
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
            forums.append(
                Forum(
                    forum_name,
                    list(qrels),
                    [texts[q].strip() for q in qrels],
                    doc_ids,
                    [texts[d].strip() for d in doc_ids],
                    {q: list(d) for q, d in qrels.items()},
                )
            )
        return forums

    def ranked_texts(self, ctx, queries, documents) -> RankedTexts:
        """Queries and documents by ``<forum>/<id>``, as the stored hits name them, from the forums' whole corpus (a
        gold document may be another query, which the pool leaves out)."""
        self.load()  # checks the data as evaluate does
        corpus = read_json(self.eval_dir() / "corpus.json")

        def text(named: str) -> str | None:
            forum, _, question = named.partition("/")
            found = corpus.get(forum, {}).get(question)
            return None if found is None else found.strip()

        name = self.metadata.name
        return RankedTexts(texts_by_id(name, "query", queries, text), texts_by_id(name, "document", documents, text))

    def evaluate(self, model, ctx) -> EvalResult:
        forums = [smoke_cut(forum, ctx.profile.max_eval_examples) for forum in self.load()]
        embedder = full_pool_embedder(model)
        multi_vector = full_pool_multi_vector(model)
        scores: dict[str, float] = {}
        details: dict[str, Any] = {"split": self.options["split"], "forums": {}}
        first_stage = None
        per_query: dict[str, list] = {"ap": [], "forum": [], "id": []}  # resampling map@100 (bootstrap interval)
        rankings: list[list[str]] = []  # each query's ranked documents, "<forum>/<doc id>" (the site's top hits)
        golds: list[list[str]] = []
        if embedder is not None:
            details["ranking"] = "embedder: whole pool by cosine (useb)"
        elif multi_vector is not None:
            details["ranking"] = "multi-vector embedder: whole pool by MaxSim"
        else:
            first_stage = first_stage_from_context(self.options["first_stage"], ctx, self.metadata.name)
            details["ranking"] = f"pair scorer: reranks the top {CANDIDATES_TOP_K} of the first stage"
            details["first_stage"] = first_stage.name
            details["first_stage_used"] = first_stage.description
        for forum in forums:
            if multi_vector is not None:
                vector_sets = encode_multi_once(multi_vector, [*forum.queries, *forum.docs])
                indices, top_scores = maxsim_top_k(
                    vector_sets[: len(forum.queries)], vector_sets[len(forum.queries) :], CANDIDATES_TOP_K
                )
            elif first_stage is None:
                vectors = encode_once(embedder, [*forum.queries, *forum.docs])
                indices, top_scores = cosine_top_k(
                    vectors[: len(forum.queries)], vectors[len(forum.queries) :], CANDIDATES_TOP_K
                )
            else:
                candidates = first_stage.candidates(forum.queries, forum.docs, CANDIDATES_TOP_K)
                indices, top_scores = rerank(model, forum, candidates)
            average_precisions, ndcgs = [], []
            for row, query_id in enumerate(forum.query_ids):
                gold = set(forum.gold[query_id])
                hits = [1 if forum.doc_ids[i] in gold else 0 for i in indices[row]]
                average_precision, ndcg = top_list_metrics(hits, top_scores[row], len(forum.gold[query_id]))
                rankings.append([f"{forum.name}/{forum.doc_ids[i]}" for i in indices[row]])
                golds.append([f"{forum.name}/{doc_id}" for doc_id in gold])
                average_precisions.append(average_precision)
                if ndcg is not None:
                    ndcgs.append(ndcg)
            scores[f"map@100.{forum.name}"] = 100 * float(np.mean(average_precisions))
            per_query["ap"] += average_precisions
            per_query["forum"] += [len(details["forums"])] * len(average_precisions)
            per_query["id"] += [f"{forum.name}/{query_id}" for query_id in forum.query_ids]
            scores[f"ndcg@10.{forum.name}"] = 100 * float(np.mean(ndcgs))
            details["forums"][forum.name] = {"queries": len(forum.query_ids), "pool": len(forum.doc_ids)}
        scores["map@100"] = float(np.mean([scores[f"map@100.{f.name}"] for f in forums]))
        scores["ndcg@10"] = float(np.mean([scores[f"ndcg@10.{f.name}"] for f in forums]))
        return EvalResult(
            scores,
            files_checksum(self.data_files()),
            details,
            examples=mean_examples(
                per_query["ap"], ids=per_query["id"], groups=per_query["forum"], hits=ranked_hits(rankings, golds)
            ),
        )
