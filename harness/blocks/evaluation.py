"""The evaluation layer tasks build on (torch-free): the seeded evaluation sample, per-example scores for the
bootstrap, and pair-set scoring with correlation aggregation.
"""
from __future__ import annotations

from harness.evaluation.bootstrap import ExampleScores, mean_examples
from harness.evaluation.pairs import PairSet, correlation_scores, pair_examples, score_pair_sets, score_pairs
from harness.evaluation.sampling import evaluation_sample, sample_items

__all__ = [
    "evaluation_sample", "sample_items", "ExampleScores", "mean_examples", "PairSet", "correlation_scores",
    "pair_examples", "score_pair_sets", "score_pairs",
]
