"""Metrics shared by tasks and by dev-set model selection.

A correlation is only computed on input it is defined for: at least two pairs, finite predictions and gold scores,
and neither side constant. Anything else raises :class:`ScoreError` (the runner stores the cell as ``failed`` with
the message), never a made-up 0: a broken model or a broken data file must not look like a bad but real score.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import DataFileError, HarnessError


class ScoreError(HarnessError):
    """A score that cannot be computed from this input (empty, non-finite or constant); the message says which."""


class GoldDataError(ScoreError, DataFileError):
    """The gold scores of the data are unusable (NaN, infinite or all equal): a problem of the data file, so like any
    malformed data it fails the cell without replacing a good stored result computed from the data as it was."""


class ConstantPredictionError(ScoreError):
    """Every prediction is the same value: the model collapsed, a correlation with it is undefined."""


class NonFiniteVectorsError(ScoreError):
    """The model returned vectors holding NaN or infinite values: every similarity with them is undefined."""


def check_finite_vectors(vectors: np.ndarray, what: str = "vectors") -> np.ndarray:
    """``vectors`` (``[n, ...]``) unchanged when every value is finite; NonFiniteVectorsError otherwise. Every place
    that turns a model's vectors into similarities calls this first: a NaN row must fail its cell, never become a
    similarity of 0 (a zero vector's cosine) or drop out of a max."""
    array = np.asarray(vectors)
    if array.dtype.kind not in "fc" or array.size == 0 or np.isfinite(array).all():
        return vectors
    rows = array.reshape(len(array), -1) if array.ndim > 1 else array.reshape(-1, 1)
    bad = int(np.count_nonzero(~np.isfinite(rows).all(axis=1)))
    raise NonFiniteVectorsError(
        f"the model returned {bad} of {len(rows)} {what} with NaN or infinite values; a similarity with such a "
        "vector is undefined, so the cell fails rather than scoring it (check the model's forward pass: NaN "
        "weights after diverged training, or a division by zero in its pooling)."
    )


def _checked(predicted: Sequence[float], gold: Sequence[float], metric: str) -> tuple[np.ndarray, np.ndarray]:
    predicted_array = np.asarray(predicted, dtype=np.float64).ravel()
    gold_array = np.asarray(gold, dtype=np.float64).ravel()
    if len(predicted_array) != len(gold_array):
        raise ScoreError(f"{metric}: {len(predicted_array)} predictions for {len(gold_array)} gold scores.")
    if len(gold_array) < 2:
        raise ScoreError(
            f"{metric}: needs at least 2 scored pairs, got {len(gold_array)}; the evaluation data is empty or was "
            "cut to nothing (check the data file)."
        )
    bad_gold = int(np.count_nonzero(~np.isfinite(gold_array)))
    if bad_gold:
        raise GoldDataError(
            f"{metric}: {bad_gold} of {len(gold_array)} gold scores are NaN or infinite; fix the data file."
        )
    bad_predicted = int(np.count_nonzero(~np.isfinite(predicted_array)))
    if bad_predicted:
        raise ScoreError(
            f"{metric}: {bad_predicted} of {len(predicted_array)} predicted scores are NaN or infinite; the model is "
            "broken (e.g. training diverged: lower the learning rate)."
        )
    if np.all(gold_array == gold_array[0]):
        raise GoldDataError(
            f"{metric}: every gold score is {gold_array[0]:g}; a correlation is undefined. Check the data."
        )
    if np.all(predicted_array == predicted_array[0]):
        raise ConstantPredictionError(
            f"{metric}: the model gave every pair the same score ({predicted_array[0]:g}); a correlation with a "
            "constant is undefined (the model collapsed)."
        )
    return predicted_array, gold_array


def spearman(predicted: Sequence[float], gold: Sequence[float]) -> float:
    """Spearman's rho (scipy, ties averaged: SentEval's and mteb's convention); raises ScoreError on input it is
    undefined for (see the module docstring)."""
    from scipy import stats  # scipy only when scoring: `import harness` (and so `harness --help`) stays light

    predicted_array, gold_array = _checked(predicted, gold, "Spearman")
    return _finite(stats.spearmanr(predicted_array, gold_array)[0], "Spearman")


def pearson(predicted: Sequence[float], gold: Sequence[float]) -> float:
    """Pearson's r; raises ScoreError on input it is undefined for."""
    from scipy import stats

    predicted_array, gold_array = _checked(predicted, gold, "Pearson")
    return _finite(stats.pearsonr(predicted_array, gold_array)[0], "Pearson")


def _finite(value: float, metric: str) -> float:
    value = float(value)
    if not np.isfinite(value):  # pragma: no cover - guarded by _checked; kept so no NaN can ever leave here
        raise ScoreError(f"{metric} is {value} for this input.")
    return value
