"""Capabilities a model can have: their names, Protocols and checks (docs/writing-plugins.md).

- ``embedder``: ``encode(texts) -> float32 [n, d]``
- ``pair_scorer``: ``score(first, second) -> float [n]``
- ``multi_vector_embedder``: ``encode_multi(texts) -> list of float32 [k_i, d]`` (compared with MaxSim)
- ``span_encoder``: ``encode_spans(items) -> float32 [n, d]``; an item is ``(text, [(start, end), ...])``
- ``trainable``: ``fit(splits, ctx) -> report``, ``save(dir)``, ``load(dir)`` (safetensors only)

Recipes additionally ask their student for a small learning protocol (``ScoredPairLearner``, ...). The adapters
that let most models run on most tasks (``as_embedder``, ``as_pair_scorer``) are in the evaluation layer
(:mod:`harness.evaluation.adapters`); this module imports nothing of the package.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

EMBEDDER = "embedder"  # capability: one vector per text (the Embedder protocol)
PAIR_SCORER = "pair_scorer"  # capability: one score per pair of texts (the PairScorer protocol)
MULTI_VECTOR_EMBEDDER = "multi_vector_embedder"  # capability: one vector per token (the MultiVectorEmbedder protocol)
SPAN_ENCODER = "span_encoder"  # capability: one vector per span of a text (the SpanEncoder protocol)
TRAINABLE = "trainable"  # capability: trains in place on training splits (the Trainable protocol)
# every capability a model may declare
CAPABILITIES = (EMBEDDER, PAIR_SCORER, MULTI_VECTOR_EMBEDDER, SPAN_ENCODER, TRAINABLE)


class ModelOutputError(ValueError):
    """A model returned what its capability does not allow (another number of rows than texts, not numbers): the
    runner fails the cell with this message, the rest of the matrix runs."""


def checked_vectors(value: Any, count: int, who: str = "encode") -> Any:
    """``value`` (what a model's ``encode`` returned for ``count`` texts) as a 2-D float array with ``count`` rows;
    ModelOutputError saying what is wrong otherwise (never an IndexError deep inside an evaluation)."""
    kind = getattr(getattr(value, "dtype", None), "kind", None)
    if kind is not None and kind not in "biuf":  # object, string or complex arrays: not vectors
        raise ModelOutputError(f"{who} returned an array of {value.dtype} values, not numbers.")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ModelOutputError(
            f"{who} returned {type(value).__name__} that is not an array of numbers ({exc})."
        ) from None
    if array.ndim != 2 or array.shape[0] != count:
        raise ModelOutputError(
            f"{who} returned an array of shape {array.shape} for {count} texts; it must return "
            f"one vector per text ({count} rows)."
        )
    return array


@runtime_checkable
class Embedder(Protocol):
    """A model that maps each text to one vector (``encode``: ``[len(texts), dim]``); tasks compare them by cosine."""

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class PairScorer(Protocol):
    """A model that reads two texts at once and scores the pair (``score``: one number per pair), e.g. a
    cross-encoder."""

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class MultiVectorEmbedder(Protocol):
    """A model that maps each text to a set of vectors (``encode_multi``: one ``[tokens, dim]`` array per text),
    compared by MaxSim (late interaction)."""

    def encode_multi(self, texts: Sequence[str]) -> list[np.ndarray]: ...


@runtime_checkable
class SpanEncoder(Protocol):
    """A model that encodes spans inside texts (``encode_spans``: one vector per ``(text, character spans)`` item)."""

    def encode_spans(self, items: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> np.ndarray: ...


@runtime_checkable
class Trainable(Protocol):
    """A model that trains in place (``fit(splits, ctx)``) on the training data kinds its plugin declares."""

    def fit(self, splits: Any, ctx: Any) -> Any:
        """Train in place on ``splits`` (a TrainingSplits); return the training report (a TrainReport or a dict)."""

    def save(self, directory: Path) -> None: ...

    def load(self, directory: Path) -> None: ...


@runtime_checkable
class ScoredPairLearner(Protocol):
    """What a recipe such as Augmented SBERT needs from its student."""

    def fit_scored_pairs(self, train: Any, dev: Any, ctx: Any) -> Any:
        """Regression on ScoredPairs ``train``; ``dev`` (ScoredPairs or None) selects the best epoch; returns the
        training report."""


# The Protocol each capability name stands for.
PROTOCOLS: dict[str, type] = {
    EMBEDDER: Embedder,
    PAIR_SCORER: PairScorer,
    MULTI_VECTOR_EMBEDDER: MultiVectorEmbedder,
    SPAN_ENCODER: SpanEncoder,
    TRAINABLE: Trainable,
}


def _protocol_methods(protocol: type) -> list[str]:
    return sorted(
        name
        for name in getattr(protocol, "__protocol_attrs__", None) or vars(protocol)
        if not name.startswith("_") and callable(getattr(protocol, name, None))
    )


def missing_methods(candidate: Any, capabilities: Iterable[str]) -> dict[str, list[str]]:
    """Per declared capability, the methods of its Protocol that ``candidate`` (a class or an object) lacks."""
    missing: dict[str, list[str]] = {}
    for capability in capabilities:
        protocol = PROTOCOLS.get(capability)
        if protocol is None:
            continue
        lacking = [m for m in _protocol_methods(protocol) if not callable(getattr(candidate, m, None))]
        if lacking:
            missing[capability] = lacking
    return missing


def reachable_capabilities(declared: Iterable[str]) -> set[str]:
    """What a model with ``declared`` capabilities can serve once the core's adapters are applied."""
    reachable = set(declared)
    if SPAN_ENCODER in reachable:
        reachable.add(EMBEDDER)
    if EMBEDDER in reachable or MULTI_VECTOR_EMBEDDER in reachable:
        reachable.add(PAIR_SCORER)
    return reachable


class VectorSets(list):
    """A list of multi-vector embeddings ``[k_i, d]`` that are consecutive row blocks of one ``stacked`` array.

    What a multi-vector model may return from ``encode_multi`` when it writes every text's vectors into one array:
    it is a plain list of arrays to every reader, and batched MaxSim (:mod:`harness.evaluation.maxsim`) uses
    ``stacked`` as it is instead of copying the sets together. Build it with :meth:`from_stacked`; a list changed
    afterwards (items added, removed or replaced) no longer matches ``stacked`` and is read as a plain list.
    """

    stacked: np.ndarray
    lengths: np.ndarray

    @classmethod
    def from_stacked(cls, stacked: np.ndarray, lengths: Sequence[int]) -> VectorSets:
        lengths = np.asarray(lengths, dtype=np.int64)
        if stacked.ndim != 2 or int(lengths.sum()) != len(stacked) or (lengths < 0).any():
            raise ValueError(
                f"lengths {lengths[:5].tolist()}... (sum {int(lengths.sum())}) do not split a "
                f"[{', '.join(map(str, stacked.shape))}] array into row blocks"
            )
        sets = cls(np.split(stacked, np.cumsum(lengths)[:-1]))
        sets.stacked, sets.lengths = stacked, lengths
        return sets

    def matches_stacked(self) -> bool:
        """Whether the items are still the row blocks of ``stacked`` (checked cheaply: count and first/last item)."""
        stacked = getattr(self, "stacked", None)
        if stacked is None or len(self) != len(self.lengths) or not len(self):
            return False
        return (
            np.shares_memory(self[0], stacked)
            and np.shares_memory(self[-1], stacked)
            and self[0].shape[0] == self.lengths[0]
            and self[-1].shape[0] == self.lengths[-1]
        )
