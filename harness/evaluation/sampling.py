"""The seeded evaluation sample of the smoke profile's cut (``Profile.max_eval_examples``).

Every task draws its cut through :func:`evaluation_sample`, so every model sees the same items: ``limit`` indices
out of ``count`` drawn without replacement by ``numpy.random.default_rng(0).choice`` and sorted (the data keeps its
order). The seed is fixed (not the run's seed) on purpose: smoke numbers of different seeds stay comparable. This is
exactly the selection senteval, bws and useb made before it moved here, so stored smoke numbers do not change.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

logger = logging.getLogger(__name__)

SAMPLE_SEED = 0
Item = TypeVar("Item")


def evaluation_sample(count: int, limit: int | None) -> list[int]:
    """All indices ``0..count-1`` (``limit`` None or not below ``count``), else a sorted seeded sample of
    ``limit`` of them."""
    if limit is None or count <= limit:
        return list(range(count))
    return sorted(np.random.default_rng(SAMPLE_SEED).choice(count, size=limit, replace=False).tolist())


def sample_items(items: Sequence[Item], limit: int | None) -> list[Item]:
    """The items at :func:`evaluation_sample`'s indices."""
    return [items[index] for index in evaluation_sample(len(items), limit)]
