"""The evaluation layer tasks build on (torch-free): the seeded evaluation sample, per-example scores for the
bootstrap, pair-set scoring with correlation aggregation, and the STS task base (:class:`STSTask`: a task in the
SemEval file layout is its metadata and file names).
"""

from __future__ import annotations

from harness.evaluation.bootstrap import HITS_K, ExampleScores, RankedHits, mean_examples, ranked_hits
from harness.evaluation.pairs import PairSet, correlation_scores, pair_examples, score_pair_sets, score_pairs
from harness.evaluation.sampling import evaluation_sample, sample_items
from harness.evaluation.sts import STSTask, read_sts_pairs

__all__ = [
    "evaluation_sample",
    "sample_items",
    "ExampleScores",
    "mean_examples",
    "HITS_K",
    "RankedHits",
    "ranked_hits",
    "PairSet",
    "correlation_scores",
    "pair_examples",
    "score_pair_sets",
    "score_pairs",
    "STSTask",
    "read_sts_pairs",
]
