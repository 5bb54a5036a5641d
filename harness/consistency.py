"""Does an embedder give a text the same vector whatever else is in the batch?

An embedder whose vectors depend on the other texts of an ``encode`` call (batch statistics, padding that leaks into
pooling, a model left in training mode) gives scores that depend on batching and on the order of the data, not on
the texts. :func:`harness.testing.check_model` finds this in a plugin's tests; :func:`batch_dependence` is the same
probe for ``harness run``: a handful of short texts encoded together and alone. The runner asks it once per plugin
version for third-party plugins (the verdict is cached in the store) and fails their cells with its message instead
of storing scores.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .capabilities import checked_vectors
from .metrics import check_finite_vectors

# Different lengths, so padding inside a batch differs from encoding a text alone; the first text is repeated.
PROBE_TEXTS = (
    "A man is playing a guitar on the stage.",
    "The cat sleeps.",
    "Stock markets fell sharply on Monday after the central bank raised interest rates again.",
    "A man is playing a guitar on the stage.",
)
RTOL, ATOL = 1e-3, 1e-5  # as harness.testing: float32 kernels may differ slightly between batch shapes


def _matrix(value: Any, count: int) -> np.ndarray:
    return checked_vectors(value, count)


def batch_dependence(model: Any) -> str | None:
    """Why ``model.encode`` is not a function of each text alone, or None when the probe finds nothing.
    ModelOutputError when it does not return one vector of numbers per text."""
    texts = list(PROBE_TEXTS)
    together = _matrix(model.encode(texts), len(texts))
    # NaN is unequal to itself: a model returning NaN vectors would be reported as dropout left on. It raises
    # NonFiniteVectorsError (its cells fail with that reason) and is not cached as the plugin's verdict: the NaN
    # may come from these weights (diverged training), not the plugin's code.
    check_finite_vectors(together, "vectors of the batch-probe texts")
    if not np.allclose(together[0], together[-1], rtol=RTOL, atol=ATOL):
        return (
            "encode gave the same text two different vectors in one call (dropout left on, or randomness in "
            "encoding); scores from it would not be reproducible"
        )
    for index in (1, 2):
        alone = check_finite_vectors(_matrix(model.encode([texts[index]]), 1), "vectors of the batch-probe texts")
        if alone.shape[1] != together.shape[1] or not np.allclose(alone[0], together[index], rtol=RTOL, atol=ATOL):
            return (
                "encode gives a text another vector alone than inside a batch: its vectors depend on the other "
                "texts of the batch, so its scores would depend on batching (harness.testing.check_model reports "
                "the same); make each row depend on its own text only"
            )
    return None
