"""Metrics shared by tasks and by dev-set model selection."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy import stats


def spearman(predicted: Sequence[float], gold: Sequence[float]) -> float:
    """Spearman's rho (scipy, ties averaged: SentEval's and mteb's convention); NaN input gives 0."""
    value = stats.spearmanr(np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64))[0]
    return 0.0 if np.isnan(value) else float(value)


def pearson(predicted: Sequence[float], gold: Sequence[float]) -> float:
    value = stats.pearsonr(np.asarray(predicted, dtype=np.float64), np.asarray(gold, dtype=np.float64))[0]
    return 0.0 if np.isnan(value) else float(value)


def scored_pairs_dev_score(model, dev) -> float:
    """Spearman of the model's pair scores on a ScoredPairs dev split (model selection after each epoch)."""
    from .capabilities import as_pair_scorer

    return spearman(as_pair_scorer(model).score(dev.first, dev.second), dev.scores)
