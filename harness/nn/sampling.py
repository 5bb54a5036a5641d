"""The contract between pair samplers and the recipes that use them (components of kind ``sampler``).

Augmented SBERT (Thakur et al. 2021, section 4 "Selecting sentence pairs"; thesis 2.4.7, 4.3.2) labels new sentence
pairs with a teacher; which pairs is the sampler's choice. sentence-transformers keeps the corresponding mining
helpers in ``util`` (``paraphrase_mining``, ``semantic_search``, ``mine_hard_negatives``). The contract lives in the
core so that any recipe can use any sampler and neither imports the other: a recipe builds a :class:`SamplingInput`,
a sampler (a :class:`PairSampler`) works in two stages, because some strategies need the teacher's scores to decide
what to keep:

1. ``propose(inputs)`` returns candidate pairs as index pairs ``(i, j)`` into ``inputs.sentences`` (never ``i == j``,
   never the same unordered pair twice, never a gold pair unless the sampler re-annotates gold pairs, and never a
   pair of two ``held_out`` sentences: sentences that also occur in the target's dev or test pairs, so a new pair
   could be an evaluated pair);
2. the recipe lets the teacher score every candidate, then ``select(candidate_scores, gold_scores, rng)`` returns
   the indices of the candidates that become silver pairs (all of them unless the sampler filters).

Deviations: none (this module only states the contract; the built-in samplers are plugins/samplers.py).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from harness.deprecation import deprecated_names

logger = logging.getLogger(__name__)

IndexPair = tuple[int, int]  # two sentences, as indices into ``SamplingInput.sentences``

__getattr__ = deprecated_names(__name__, {"Pair": (__name__, "IndexPair")})  # its name before it said what it holds


@dataclass
class SamplingInput:
    """What a sampler sees: the target sentences and the gold pairs between them."""

    sentences: list[str]  # distinct target sentences
    gold_pairs: list[IndexPair]  # gold pairs as indices into ``sentences``, in the gold data's order
    top_k: int = 5  # partners per sentence for neighbour / random sampling (the thesis code's 5)
    seed: int = 42
    # Embeds texts for semantic search; a recipe builds its embedder lazily (only semantic search needs one).
    embed: Callable[[Sequence[str]], np.ndarray] | None = None
    # Looks up another sampler by name (selection samplers draw their candidates from proposal samplers).
    sampler: Callable[[str], PairSampler] | None = None
    # Names of the proposal samplers a selection sampler should draw candidates from; None: its own default.
    candidates: tuple[str, ...] | None = None
    # Indices of sentences that also occur in the target's dev or test pairs: no new pair joins two of them.
    held_out: frozenset[int] = frozenset()
    _gold_keys: set[frozenset] = field(default_factory=set, init=False, repr=False)
    # Distinct proposed pairs dropped because both sentences are held out (the recipe records how many).
    dropped_held_out_pairs: set[frozenset] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self._gold_keys = {frozenset(pair) for pair in self.gold_pairs}
        self.held_out = frozenset(self.held_out)

    def is_gold(self, pair: IndexPair) -> bool:
        return frozenset(pair) in self._gold_keys

    def joins_held_out(self, pair: IndexPair) -> bool:
        return pair[0] in self.held_out and pair[1] in self.held_out

    def rng(self, salt: str) -> np.random.Generator:
        """A generator per purpose, so one sampler's draws never shift another's (same seed, same pairs)."""
        return np.random.default_rng([self.seed, zlib.crc32(salt.encode())])


def distinct_new_pairs(pairs: Iterable[IndexPair], inputs: SamplingInput) -> list[IndexPair]:
    """Pairs in their given order without self-pairs, gold pairs, pairs of two held-out sentences or repeats (in
    either order)."""
    seen: set[frozenset] = set()
    kept: list[IndexPair] = []
    for first, second in pairs:
        key = frozenset((first, second))
        if first == second or key in seen or inputs.is_gold((first, second)):
            continue
        if inputs.joins_held_out((first, second)):
            inputs.dropped_held_out_pairs.add(key)
            continue
        seen.add(key)
        kept.append((int(first), int(second)))
    return kept


@runtime_checkable
class PairSamplerProtocol(Protocol):
    """What an object registered as a ``sampler`` component must offer."""

    def propose(self, inputs: SamplingInput) -> list[IndexPair]: ...

    def select(self, candidate_scores: np.ndarray, gold_scores: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...


class PairSampler:
    """Base class of samplers. Subclasses set ``name`` and implement ``propose``; selection samplers also override
    ``select`` and set ``uses_gold_scores``."""

    name = ""
    uses_gold_scores = False  # select() compares against the gold score distribution
    # propose() draws candidates from other (proposal) samplers, chosen by inputs.candidates or a default
    selects_from_candidates = False
    needs_embedder = False  # propose() calls inputs.embed

    def propose(self, inputs: SamplingInput) -> list[IndexPair]:  # pragma: no cover - interface
        raise NotImplementedError

    def select(self, candidate_scores: np.ndarray, gold_scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Indices of the candidates to keep (all of them unless a subclass filters)."""
        return np.arange(len(candidate_scores))

    def uses_embedder(self, inputs: SamplingInput) -> bool:
        return self.needs_embedder
