"""Pair-set scoring: many sets of sentence pairs scored with one call to the model, and correlation aggregation.

Reference: SentEval's ``STSEval`` (per sub-dataset Spearman/Pearson, then their plain and size-weighted means) and
SimCSE / mteb (every pair of a year pooled: "all"). :func:`score_pair_sets` makes one ``score`` call over the
concatenated sets, so an embedder (through ``harness.as_pair_scorer``) encodes each distinct text once even when it
occurs in several sets. :func:`correlation_scores` returns both aggregations; which one is a task's main score is
the task's choice. Correlations are scipy's (``harness.metrics``: Spearman with averaged ties; NaN counts as 0).
Deviation: none (tests/test_senteval.py compares with SentEval's numbers).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.evaluation.adapters import as_pair_scorer
from harness.evaluation.bootstrap import ExampleScores
from harness.metrics import ConstantPredictionError, pearson, spearman

logger = logging.getLogger(__name__)


@dataclass
class PairSet:
    """One named set of sentence pairs with a gold value per pair (a similarity score or a label)."""

    name: str
    first: list[str]
    second: list[str]
    gold: np.ndarray

    def __post_init__(self) -> None:
        if not len(self.first) == len(self.second) == len(self.gold):
            raise ValueError(f"pair set {self.name!r}: first, second and gold must have the same length")

    def __len__(self) -> int:
        return len(self.gold)

    def subset(self, indices: Sequence[int]) -> PairSet:
        indices = list(indices)
        return PairSet(
            self.name,
            [self.first[i] for i in indices],
            [self.second[i] for i in indices],
            np.asarray(self.gold)[indices],
        )


def score_pairs(model: Any, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
    """The model's float64 score of every pair (its own ``score``, else cosine of embeddings) in one call."""
    return np.asarray(as_pair_scorer(model).score(list(first), list(second)), dtype=np.float64)


def score_pair_sets(model: Any, pair_sets: Sequence[PairSet]) -> list[np.ndarray]:
    """The scores of every set's pairs, one array per set, from a single scoring call over all of them."""
    predicted = score_pairs(model, [s for p in pair_sets for s in p.first], [s for p in pair_sets for s in p.second])
    pieces, start = [], 0
    for pair_set in pair_sets:
        pieces.append(predicted[start : start + len(pair_set)])
        start += len(pair_set)
    return pieces


def correlation_scores(pair_sets: Sequence[PairSet], predictions: Sequence[np.ndarray]) -> dict[str, float]:
    """Correlations x100 of predictions with gold.

    Always ``spearman_all`` / ``pearson_all`` (all pairs pooled). With more than one set also ``spearman_mean``,
    ``pearson_mean`` (unweighted mean over sets: SentEval's "mean"), ``spearman_wmean`` (weighted by set size:
    SentEval's "wmean") and ``spearman.<set name>`` per set.
    """
    gold_pooled = np.concatenate([np.asarray(p.gold, dtype=np.float64) for p in pair_sets])
    predicted_pooled = np.concatenate(list(predictions))
    scores = {
        "spearman_all": 100 * spearman(predicted_pooled, gold_pooled),
        "pearson_all": 100 * pearson(predicted_pooled, gold_pooled),
    }
    if len(pair_sets) > 1:
        spearman_per_set = [100 * spearman(pred, p.gold) for p, pred in zip(pair_sets, predictions)]
        sizes = np.array([len(p) for p in pair_sets], dtype=np.float64)
        scores["spearman_mean"] = float(np.mean(spearman_per_set))
        scores["spearman_wmean"] = float(np.average(spearman_per_set, weights=sizes))
        pearson_per_set = [100 * pearson(pred, p.gold) for p, pred in zip(pair_sets, predictions)]
        scores["pearson_mean"] = float(np.mean(pearson_per_set))
        for pair_set, value in zip(pair_sets, spearman_per_set):
            scores[f"spearman.{pair_set.name}"] = value
    return scores


def pair_examples(
    pair_sets: Sequence[PairSet],
    predictions: Sequence[np.ndarray],
    aggregation: str = "all",
    statistic: str = "spearman",
) -> ExampleScores:
    """What resampling a correlation main score needs (harness.evaluation.bootstrap): every pair's prediction and
    gold, its set as the group (resampled within sets), and the aggregation of :func:`correlation_scores`:
    ``"all"`` (pairs pooled: ``<statistic>_all``) or ``"mean"`` (mean over sets: ``<statistic>_mean``)."""
    groups = np.repeat(np.arange(len(pair_sets)), [len(p) for p in pair_sets]) if len(pair_sets) > 1 else None
    return ExampleScores(
        statistic,
        {
            "predicted": np.concatenate(list(predictions)),
            "gold": np.concatenate([np.asarray(p.gold, dtype=np.float64) for p in pair_sets]),
        },
        groups=groups,
        aggregate="group-mean" if aggregation == "mean" and groups is not None else "pooled",
    )


def scored_pairs_dev_score(model, dev) -> float:
    """Spearman of the model's pair scores on a ScoredPairs dev split (model selection after each epoch).

    Constant predictions count as no correlation (0.0), so such an epoch is never selected over a real one; NaN or
    infinite predictions raise ScoreError (the training has diverged)."""
    try:
        return spearman(as_pair_scorer(model).score(dev.first, dev.second), dev.scores)
    except ConstantPredictionError:
        return 0.0
