"""USEB AskUbuntu: rerank each test query's 20 candidate questions (Lei et al. 2016; useb's ``AskubuntuEvaluator``).

Each query's 20 candidates (titles; option ``text=body|title_and_body`` as useb's ``text_components``) are reranked
by the pair score; ties keep the candidates' BM25 order (useb sorts stably). Queries without gold are skipped.
Scores x100: ``map`` (main), ``mrr`` (no cut-off), ``mrr@10``, ``p@1``, ``p@5`` (harness.evaluation.ranking).
Deviation: a query whose gold is not among its candidates (useb fails an assertion; the official data has none)
scores 0 and is counted in ``details``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import EvalResult, Option, RankedTexts, data_error, files_checksum, texts_by_id
from harness.blocks import mean_examples, ranked_hits, rerank_metrics, sample_items, score_pairs, stable_rank

from .base import SPLIT_OPTION, UsebTask, useb_metadata
from .data import file_lines

logger = logging.getLogger(__name__)


@dataclass
class RerankQuery:
    query_id: str
    gold: list[str]
    candidates: list[str]  # in BM25 order


def read_askubuntu_pool(path: Path) -> dict[str, tuple[str, str]]:
    """``text_tokenized.txt``: ``id<TAB>title<TAB>body`` -> {id: (title, body)}."""
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
            raise data_error(
                path,
                number,
                f"expected 4 tab-separated fields (id, gold, candidates, BM25 scores), found {len(fields)}.",
            )
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
    metadata = useb_metadata(
        "askubuntu",
        description="AskUbuntu: rerank 20 candidate questions (titles) per query",
        main_score="map",
        metric="MAP x100 of the reranked 20 candidates (also MRR, MRR@10, P@1, P@5)",
        dataset_reference="Lei et al. 2016 AskUbuntu duplicates; USEB data-eval/askubuntu",
        license="not stated by USEB; see the original release (github.com/taolei87/askubuntu)",
    )
    options = {
        "split": SPLIT_OPTION,
        "text": Option(
            "title", "the text of a question (useb's text_components)", choices=("title", "body", "title_and_body")
        ),
    }

    def load(self) -> tuple[dict[str, tuple[str, str]], list[RerankQuery]]:
        folder = self.eval_dir()
        pool = read_askubuntu_pool(folder / "text_tokenized.txt")
        eval_file = folder / ("dev.txt" if self.options["split"] == "valid" else "test.txt")
        queries = read_askubuntu_queries(eval_file)
        for query in queries:
            for question_id in [query.query_id, *query.candidates]:
                if question_id not in pool:
                    raise data_error(eval_file, None, f"question {question_id!r} is not in text_tokenized.txt.")
        return pool, queries

    def text(self, pool: dict[str, tuple[str, str]], question_id: str) -> str:
        title, body = pool[question_id]
        mode = self.options["text"]
        return title if mode == "title" else body if mode == "body" else " ".join([title, body]).strip()

    def ranked_texts(self, ctx, queries, documents) -> RankedTexts:
        """Questions by id (queries and candidates share one pool), in the text the model reads (option ``text``)."""
        pool, _ = self.load()

        def question(question_id: str) -> str | None:
            return self.text(pool, question_id) if question_id in pool else None

        name = self.metadata.name
        return RankedTexts(
            texts_by_id(name, "query", queries, question), texts_by_id(name, "document", documents, question)
        )

    def evaluate(self, model, ctx) -> EvalResult:
        pool, queries = self.load()
        queries = [q for q in queries if q.gold]  # useb skips queries without a similar question
        queries = sample_items(queries, ctx.profile.max_eval_examples)
        first = [self.text(pool, q.query_id) for q in queries for _ in q.candidates]
        second = [self.text(pool, c) for q in queries for c in q.candidates]
        pair_scores = score_pairs(model, first, second)
        per_query: dict[str, list[float]] = {}
        start, without_gold = 0, 0
        rankings = []
        for query in queries:
            scores = pair_scores[start : start + len(query.candidates)]
            start += len(query.candidates)
            gold = set(query.gold)
            without_gold += not (gold & set(query.candidates))
            rankings.append(stable_rank(query.candidates, scores))
            for name, value in rerank_metrics(gold, rankings[-1]).items():
                per_query.setdefault(name, []).append(value)
        return EvalResult(
            scores={name: 100 * float(np.mean(values)) for name, values in per_query.items()},
            dataset_checksum=files_checksum(self.data_files()),
            details={
                "queries": len(queries),
                "pairs": len(first),
                "split": self.options["split"],
                "text": self.options["text"],
                "queries_without_gold_in_candidates": without_gold,
            },
            examples=mean_examples(
                per_query[self.metadata.main_score],
                ids=[q.query_id for q in queries],
                hits=ranked_hits(rankings, [q.gold for q in queries]),
            ),
        )
