"""USEB SciDocs: rerank candidate paper titles for cite, cocite, coread and coview (Cohan et al. 2020; useb's
``SciDocsEvaluator``).

Each query title against its (up to 30) candidate titles; candidates without a title are dropped from the ranking
but stay in the qrels, queries without a title are skipped. ``map`` and ``ndcg`` as trec_eval computes them
(harness.evaluation.ranking.trec_map_ndcg: pytrec_eval in useb), mean over queries, then over the four (main
``map``). All pairs of all four sub-tasks are scored with one call. Each query keeps its top hits in trec_eval's
order (the results site's examples): queries are named ``<sub-task>/<paper id>`` (a paper may be a query in several
sub-tasks, with other candidates), documents by their paper id (one corpus: a paper is the same in every sub-task);
its gold documents are its candidates of relevance level >= 1, as trec_eval counts them.

Deviation: useb's SciDocs also reports Euclidean-distance scores of embeddings; a pair-scorer interface has no
distance, so only the cosine scores (useb's main metric) are reported.
"""

from __future__ import annotations

import logging

import numpy as np

from harness import EvalResult, RankedTexts, data_error, files_checksum, texts_by_id
from harness.blocks import mean_examples, ranked_hits, sample_items, score_pairs, trec_map_ndcg, trec_ranking

from .base import SPLIT_OPTION, UsebTask, useb_metadata
from .data import read_json

logger = logging.getLogger(__name__)

SCIDOCS_SUBTASKS = ("cite", "cocite", "coread", "coview")

Qrels = dict[str, dict[str, dict[str, int]]]  # sub-task -> query id -> candidate id -> relevance level


class SciDocs(UsebTask):
    member = "scidocs"
    metadata = useb_metadata(
        "scidocs",
        description="SciDocs: rerank up to 30 candidate paper titles per query title (cite, cocite, coread, coview)",
        main_score="map",
        metric="MAP x100 (trec_eval) per sub-task, mean of the four (also nDCG)",
        dataset_reference="Cohan et al. 2020 SciDocs; USEB data-eval/scidocs",
        license="not stated by USEB; see the original release (github.com/allenai/scidocs)",
    )
    options = {"split": SPLIT_OPTION}

    def load(self) -> tuple[dict[str, str | None], Qrels]:
        path = self.eval_dir() / "data.json"
        data = read_json(path)
        split_name = self.options["split"]
        if "corpus" not in data or split_name not in data:
            raise data_error(path, None, f"expected the keys 'corpus' and {split_name!r}.")
        titles = {pid: (paper or {}).get("title") for pid, paper in data["corpus"].items()}
        return titles, data[split_name]

    def ranked_texts(self, ctx, queries, documents) -> RankedTexts:
        """Titles of queries (``<sub-task>/<paper id>``) and documents (paper ids), stripped as the model reads them;
        a paper the qrels name without a title (never ranked, but gold) has the empty text."""
        titles, qrels_by_subtask = self.load()
        named = {pid for qrels in qrels_by_subtask.values() for qrel in qrels.values() for pid in qrel}

        def title(pid: str) -> str | None:
            return (titles.get(pid) or "").strip() if pid in named or pid in titles else None

        def query_title(query: str) -> str | None:
            subtask, _, pid = query.partition("/")
            return title(pid) if pid in qrels_by_subtask.get(subtask, {}) else None

        name = self.metadata.name
        return RankedTexts(
            texts_by_id(name, "query", queries, query_title), texts_by_id(name, "document", documents, title)
        )

    def evaluate(self, model, ctx) -> EvalResult:
        titles, qrels_by_subtask = self.load()

        def title(pid: str) -> str | None:
            return titles.get(pid) or None  # useb: missing paper or None/empty title -> no text

        # (subtask, query id, candidate ids) in useb's order; one scoring call for all of them.
        rankings: list[tuple[str, str, list[str]]] = []
        first, second = [], []
        for subtask, qrels in qrels_by_subtask.items():
            query_ids = [qid for qid in qrels if title(qid)]  # useb skips queries without a title
            for query_id in sample_items(query_ids, ctx.profile.max_eval_examples):
                candidates = [did for did in qrels[query_id] if title(did)]
                rankings.append((subtask, query_id, candidates))
                first += [title(query_id).strip()] * len(candidates)
                second += [title(did).strip() for did in candidates]
        pair_scores = score_pairs(model, first, second)
        per_subtask: dict[str, dict[str, list[float]]] = {name: {"map": [], "ndcg": []} for name in qrels_by_subtask}
        start = 0
        ranked: list[list[str]] = []  # each query's candidates in trec_eval's order (the stored top hits)
        golds: list[list[str]] = []
        for subtask, query_id, candidates in rankings:
            scores = pair_scores[start : start + len(candidates)]
            start += len(candidates)
            qrel = qrels_by_subtask[subtask][query_id]
            average_precision, ndcg = trec_map_ndcg(qrel, candidates, scores)
            ranked.append(trec_ranking(candidates, scores))
            golds.append([doc for doc, level in qrel.items() if level >= 1])
            per_subtask[subtask]["map"].append(average_precision)
            per_subtask[subtask]["ndcg"].append(ndcg)
        result: dict[str, float] = {}
        for subtask, values in per_subtask.items():
            result[f"map.{subtask}"] = 100 * float(np.mean(values["map"]))
            result[f"ndcg.{subtask}"] = 100 * float(np.mean(values["ndcg"]))
        result["map"] = float(np.mean([result[f"map.{s}"] for s in per_subtask]))
        result["ndcg"] = float(np.mean([result[f"ndcg.{s}"] for s in per_subtask]))
        return EvalResult(
            result,
            files_checksum(self.data_files()),
            {
                "split": self.options["split"],
                "queries": {s: len(v["map"]) for s, v in per_subtask.items()},
                "pairs": len(first),
            },
            examples=mean_examples(  # main score: the mean over sub-tasks of their mean AP (or nDCG)
                [value for values in per_subtask.values() for value in values[self.metadata.main_score]],
                ids=[f"{subtask}/{query_id}" for subtask, query_id, _ in rankings],
                groups=[
                    index for index, values in enumerate(per_subtask.values()) for _ in values[self.metadata.main_score]
                ],
                hits=ranked_hits(ranked, golds),
            ),
        )
