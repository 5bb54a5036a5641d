"""Silver pairs: the contract between pair samplers and the recipes that label what they propose, and the silver-pair
artifact format.
"""

from __future__ import annotations

from harness.nn.sampling import IndexPair, PairSampler, PairSamplerProtocol, SamplingInput, distinct_new_pairs
from harness.nn.silver_pairs import read_silver_pairs, write_silver_pairs

__all__ = [
    "IndexPair",
    "PairSampler",
    "PairSamplerProtocol",
    "SamplingInput",
    "distinct_new_pairs",
    "read_silver_pairs",
    "write_silver_pairs",
]
