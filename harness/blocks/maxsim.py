"""Batched MaxSim for multi-vector models (late interaction): an index over token-vector sets, pair scores and top-k
search.
"""

from __future__ import annotations

from harness.evaluation.maxsim import MaxSimIndex, maxsim_pairs, maxsim_top_k

__all__ = [
    "MaxSimIndex",
    "maxsim_pairs",
    "maxsim_top_k",
]
