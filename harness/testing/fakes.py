"""Fake models with no weights to download, one per capability (hashing embedders, a word-overlap pair scorer),
small training data of every kind, and the hook that registers the fakes as ``testing-*`` models
(``HARNESS_EXTRA_PLUGINS=harness.testing``); part of the test kit :mod:`harness.testing`."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..api import (
    EMBEDDER,
    LABELED_SENTENCES,
    MULTI_VECTOR_EMBEDDER,
    PAIR_SCORER,
    PROPOSITION_PAIRS,
    SCORED_PAIRS,
    SPAN_ENCODER,
    TRAINABLE,
    UNLABELED_SENTENCES,
    LabeledSentences,
    ModelPlugin,
    Option,
    PropositionPair,
    PropositionPairs,
    ScoredPairs,
    TrainingSplits,
    UnlabeledSentences,
    hookimpl,
)
from ..capabilities import reachable_capabilities
from .backbones import TINY_SENTENCES

_TOKEN = re.compile(r"\w+", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _bucket(token: str, dim: int) -> tuple[int, float]:
    """A stable (process-independent, unlike ``hash``) bucket and sign of a token."""
    value = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
    return value % dim, 1.0 if (value >> 63) & 1 else -1.0


class HashingEmbedder:
    """Capability ``embedder``: lower-cased word tokens hashed into ``dim`` signed buckets with sublinear term
    frequency, so cosine approximates TF cosine. Deterministic, no weights, no torch."""

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.bucket_weights = np.ones(dim, dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            counts: dict[str, int] = {}
            for token in _tokens(text):
                counts[token] = counts.get(token, 0) + 1
            for token, count in counts.items():
                bucket, sign = _bucket(token, self.dim)
                matrix[row, bucket] += sign * (1.0 + math.log(count))
        return matrix * self.bucket_weights


class TrainableHashingEmbedder(HashingEmbedder):
    """Capabilities ``embedder`` and ``trainable``: ``fit`` learns an IDF weight per bucket from the training
    sentences (any kind with sentences); ``save``/``load`` use one safetensors file."""

    WEIGHTS_FILE = "model.safetensors"

    def fit(self, splits: TrainingSplits, ctx: Any) -> dict:
        sentences = _sentences_of(splits.train)
        document_frequency = np.zeros(self.dim, dtype=np.float64)
        for text in sentences:
            for token in set(_tokens(text)):
                document_frequency[_bucket(token, self.dim)[0]] += 1
        idf = np.log((1.0 + len(sentences)) / (1.0 + document_frequency)) + 1.0
        self.bucket_weights = idf.astype(np.float32)
        return {"sentences": len(sentences), "source": splits.source}

    def save(self, directory: Path) -> None:
        from safetensors.numpy import save_file

        save_file({"bucket_weights": self.bucket_weights}, str(Path(directory) / self.WEIGHTS_FILE))

    def load(self, directory: Path) -> None:
        from safetensors.numpy import load_file

        self.bucket_weights = load_file(str(Path(directory) / self.WEIGHTS_FILE))["bucket_weights"]


class HashingMultiVectorEmbedder:
    """Capability ``multi_vector_embedder``: one hashed vector per token (a text without tokens gets one zero
    vector), compared by the core with MaxSim."""

    def __init__(self, dim: int = 256):
        self.embedder = HashingEmbedder(dim)

    def encode_multi(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [self.embedder.encode(_tokens(text) or [""]) for text in texts]


class HashingSpanEncoder:
    """Capability ``span_encoder``: an item ``(text, [(start, end), ...])`` is the mean of its spans' hashed
    embeddings (the core adapts it to an embedder by giving each sentence one span covering all of it)."""

    def __init__(self, dim: int = 256):
        self.embedder = HashingEmbedder(dim)

    def encode_spans(self, items: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> np.ndarray:
        rows = []
        for text, spans in items:
            pieces = [text[start:end] for start, end in spans] or [text]
            rows.append(self.embedder.encode(pieces).mean(axis=0))
        return np.asarray(rows, dtype=np.float32).reshape(len(items), self.embedder.dim)


class OverlapPairScorer:
    """Capability ``pair_scorer``: the Jaccard overlap of the two texts' word sets (a cross-encoder stand-in)."""

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        scores = []
        for left, right in zip(first, second):
            left_tokens, right_tokens = set(_tokens(left)), set(_tokens(right))
            union = left_tokens | right_tokens
            scores.append(len(left_tokens & right_tokens) / len(union) if union else 0.0)
        return np.asarray(scores, dtype=np.float64)


class _AllCapabilities(HashingEmbedder):
    """Every evaluation capability at once, for a task that requires several."""

    def encode_multi(self, texts: Sequence[str]) -> list[np.ndarray]:
        return HashingMultiVectorEmbedder(self.dim).encode_multi(texts)

    def encode_spans(self, items: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> np.ndarray:
        return HashingSpanEncoder(self.dim).encode_spans(items)

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        return OverlapPairScorer().score(first, second)


_TINY_MODEL_CLASSES = (HashingEmbedder, HashingMultiVectorEmbedder, HashingSpanEncoder, OverlapPairScorer)


def tiny_model_for(requires: Iterable[str]) -> Any:
    """The simplest tiny model that can serve a task requiring ``requires`` (capability names)."""
    required = set(requires)
    for candidate, declared in (
        (HashingEmbedder(), {EMBEDDER}),
        (OverlapPairScorer(), {PAIR_SCORER}),
        (HashingMultiVectorEmbedder(), {MULTI_VECTOR_EMBEDDER}),
        (HashingSpanEncoder(), {SPAN_ENCODER}),
    ):
        if required <= reachable_capabilities(declared):
            return candidate
    return _AllCapabilities()


def _sentences_of(data: Any) -> list[str]:
    if isinstance(data, ScoredPairs):
        return data.sentences()
    if isinstance(data, (UnlabeledSentences, LabeledSentences)):
        return list(data.sentences)
    if isinstance(data, PropositionPairs):
        return data.sentences()
    raise TypeError(f"no sentences in training data of type {type(data).__name__}")


def tiny_training_splits(kind: str, source: str = "harness.testing") -> TrainingSplits:
    """Small deterministic training data of ``kind`` (any of ``harness.TRAINING_KINDS``) with a dev split where the
    kind has one. Proposition pairs link each sentence's two halves to the same halves of an identical sentence."""
    sentences = list(dict.fromkeys(TINY_SENTENCES))
    if kind == SCORED_PAIRS:
        first, second, scores = [], [], []
        for index, sentence in enumerate(sentences):
            for offset, score in ((0, 1.0), (1, 0.2), (3, 0.0)):
                first.append(sentence)
                second.append(sentences[(index + offset) % len(sentences)])
                scores.append(score)
        train = ScoredPairs(first, second, np.asarray(scores, dtype=np.float32))
        dev: Any = train.subset(range(0, len(train), 2))
    elif kind == UNLABELED_SENTENCES:
        train, dev = UnlabeledSentences(sentences * 2), None
    elif kind == LABELED_SENTENCES:
        train = LabeledSentences(sentences, ["people" if index < 5 else "world" for index in range(len(sentences))])
        dev = None
    elif kind == PROPOSITION_PAIRS:
        pairs = []
        for sentence in sentences:
            middle = sentence.index(" ", len(sentence) // 2)
            halves = (((0, middle),), ((middle + 1, len(sentence)),))
            pairs.append(PropositionPair(sentence, sentence, halves, halves, ((0, 0), (1, 1))))
        train, dev = PropositionPairs(pairs), None
    else:
        raise ValueError(f"harness.testing has no tiny training data of kind {kind!r}; pass training_data=...")
    checksum = hashlib.sha256(json.dumps([kind, _sentences_of(train)]).encode()).hexdigest()
    return TrainingSplits(source=source, train=train, dev=dev, checksum=checksum)


# The fake models as registered model plugins (testing-embedder, ...), for a registry built in a test.
TESTING_MODELS: tuple[ModelPlugin, ...] = (
    ModelPlugin(
        "testing-embedder",
        "hashed bag-of-words embedder (harness.testing)",
        lambda ctx: HashingEmbedder(ctx.options["dim"]),
        (EMBEDDER,),
        options={"dim": Option(256, "number of hash buckets", type=int)},
        model_class=HashingEmbedder,
    ),
    ModelPlugin(
        "testing-trainable",
        "hashed bag-of-words embedder with learned IDF weights (harness.testing)",
        lambda ctx: TrainableHashingEmbedder(ctx.options["dim"]),
        (EMBEDDER, TRAINABLE),
        options={"dim": Option(256, "number of hash buckets", type=int)},
        training_kinds=(SCORED_PAIRS, UNLABELED_SENTENCES, LABELED_SENTENCES, PROPOSITION_PAIRS),
        model_class=TrainableHashingEmbedder,
    ),
    ModelPlugin(
        "testing-multi-vector",
        "one hashed vector per token, MaxSim (harness.testing)",
        lambda ctx: HashingMultiVectorEmbedder(ctx.options["dim"]),
        (MULTI_VECTOR_EMBEDDER,),
        options={"dim": Option(256, "number of hash buckets", type=int)},
        model_class=HashingMultiVectorEmbedder,
    ),
    ModelPlugin(
        "testing-spans",
        "mean of hashed span embeddings (harness.testing)",
        lambda ctx: HashingSpanEncoder(ctx.options["dim"]),
        (SPAN_ENCODER,),
        options={"dim": Option(256, "number of hash buckets", type=int)},
        model_class=HashingSpanEncoder,
    ),
    ModelPlugin(
        "testing-pair-scorer",
        "word-set Jaccard overlap of a pair (harness.testing)",
        lambda ctx: OverlapPairScorer(),
        (PAIR_SCORER,),
        model_class=OverlapPairScorer,
    ),
)


@hookimpl
def register_models(register: Callable[[ModelPlugin], None]) -> None:
    """Registers the tiny models when this module is loaded as a plugin (``HARNESS_EXTRA_PLUGINS=harness.testing``
    or ``plugin_registry(harness.testing)``)."""
    for plugin in TESTING_MODELS:
        register(plugin)
