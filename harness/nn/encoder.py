"""Single-text encoders and fast batched encoding.

:class:`SentenceEncoder` is SBERT's tower (Reimers & Gurevych 2019, section 3; thesis 4.1.2): a transformer plus
pooling; sentence-transformers counterpart: ``SentenceTransformer([models.Transformer, models.Pooling])``.
:func:`encode_distinct` is the encoding loop every model that embeds single texts shares: each distinct text is
computed once per call, tokenised once, sorted by token length so that batches carry little padding, and run under
``torch.inference_mode`` (plus autocast on CUDA); sentence-transformers' ``SentenceTransformer.encode`` sorts by
length the same way.

Deviations: none in the numbers (repeated texts get bit-identical rows, which sentence-transformers would compute
twice).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from harness.device import autocast, autocast_dtype
from harness.embedding_cache import cached_encode, software_versions
from harness.errors import invalid_choice
from harness.progress import progress_bar

from .backbone import MODEL_INPUTS, load_tokenizer, load_transformer, sequence_limits
from .onnx_runtime import RuntimeSwitch, _weight_versions, export_key
from .pooling import POOLING_CHOICES, pool

logger = logging.getLogger(__name__)


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices in batches of similar length, longest first (so memory problems show up at once)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def encode_distinct(
    texts: Sequence[str],
    tokenizer,
    forward: Callable[[dict[str, torch.Tensor]], torch.Tensor],
    device: str,
    batch_size: int,
    max_length: int,
    progress: bool = False,
    description: str = "encoding",
) -> np.ndarray:
    """Run ``forward`` (token batch -> [b, d]) over every distinct text once; rows come back in input order."""
    distinct = list(dict.fromkeys(texts))
    if not distinct:
        return np.zeros((0, 0), dtype=np.float32)
    encoded = tokenizer(distinct, truncation=True, max_length=max_length, padding=False)
    features = [{key: encoded[key][i] for key in encoded} for i in range(len(distinct))]
    lengths = [len(feature["input_ids"]) for feature in features]
    outputs: list[torch.Tensor | None] = [None] * len(distinct)
    with torch.inference_mode(), progress_bar(len(distinct), description, progress) as bar:
        for batch_indices in length_sorted_batches(lengths, batch_size):
            batch = tokenizer.pad([features[i] for i in batch_indices], return_tensors="pt")
            batch = {key: value.to(device) for key, value in batch.items()}
            with autocast(device):
                vectors = forward(batch)
            vectors = vectors.float().cpu()
            for row, index in enumerate(batch_indices):
                outputs[index] = vectors[row]
            bar.update(len(batch_indices))
    matrix = torch.stack(outputs).numpy()  # type: ignore[arg-type]
    if len(distinct) == len(texts) and distinct == list(texts):
        return matrix
    row_of = {text: row for row, text in enumerate(distinct)}
    return matrix[[row_of[text] for text in texts]]


class SentenceEncoder(nn.Module):
    """A transformer plus pooling: the Bi-Encoder's tower, reused by every model that embeds single texts.

    ``forward(features)`` maps a tokenised batch to ``[b, d]`` (with gradients, for training);
    ``encode(texts)`` is the inference path.
    """

    def __init__(self, transformer: nn.Module, tokenizer, pooling: str = "mean", max_length: int = 128):
        super().__init__()
        if pooling not in POOLING_CHOICES:
            raise invalid_choice("pooling", pooling, POOLING_CHOICES)
        self.transformer = transformer
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.max_length = max_length
        self.runtime = RuntimeSwitch()  # harness run --runtime: how encode runs the transformer
        # (weight versions, hash) and (tokenizer, hash): see embedding_determinants
        self._weights_key: tuple[tuple, str] | None = None
        self._tokenizer_key: tuple[Any, str] | None = None

    def use_runtime(self, runtime: str, cache_dir: Path | str | None = None) -> None:
        """Let :meth:`encode` run through ``runtime`` (one of :data:`~harness.nn.onnx_runtime.RUNTIMES`): "onnx"
        exports the transformer (cached under ``cache_dir`` by its weights' hash) and encodes with ONNX Runtime on
        the CPU. ``forward`` (training) always runs in torch. Refused in one line when onnxruntime is missing."""
        self.runtime.use(runtime, cache_dir)

    @classmethod
    def from_backbone(cls, path: str, pooling: str = "mean", profile_limit: int | None = None) -> SentenceEncoder:
        """The backbone at ``path`` with ``pooling``; texts are cut to the sentence limit of
        :func:`~harness.nn.backbone.sequence_limits` under ``profile_limit``."""
        tokenizer = load_tokenizer(path)
        transformer = load_transformer(path)
        limit = sequence_limits(path, tokenizer, transformer.config, profile_limit).sentence
        return cls(transformer, tokenizer, pooling, limit)

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        return self.tokenizer(
            list(texts), truncation=True, max_length=self.max_length, padding=True, return_tensors="pt"
        )

    def token_states(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """The last hidden states ``[b, L, d]`` of a tokenised batch."""
        inputs = {key: value for key, value in features.items() if key in MODEL_INPUTS}
        return self.transformer(**inputs).last_hidden_state

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        return pool(self.token_states(features), features["attention_mask"], self.pooling)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_weights_key": None, "_tokenizer_key": None}  # a copy hashes its own

    def embedding_determinants(self) -> dict:
        """Everything that determines what :meth:`encode` returns for a text (the embedding cache's namespace,
        :mod:`harness.embedding_cache`): the weights' hash (:func:`~harness.nn.onnx_runtime.export_key`, kept while
        no weight tensor changes), the tokenizer, pooling, max length, runtime, device type, autocast dtype and the
        versions of the code that computes the vectors."""
        versions = _weight_versions(self)
        if self._weights_key is None or self._weights_key[0] != versions:
            self._weights_key = (versions, export_key(self, ()))
        if self._tokenizer_key is None or self._tokenizer_key[0] is not self.tokenizer:
            self._tokenizer_key = (self.tokenizer, tokenizer_key(self.tokenizer))
        device = str(next(self.parameters()).device)
        return {
            "encoder": f"{type(self).__module__}.{type(self).__qualname__}",
            "weights": self._weights_key[1],
            "tokenizer": self._tokenizer_key[1],
            "pooling": self.pooling,
            "max_length": self.max_length,
            "runtime": self.runtime.runtime,
            "device": device.split(":")[0],
            "autocast": str(autocast_dtype(device)),
            "software": software_versions(self.runtime.runtime),
        }

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        was_training = self.training
        self.eval()
        device = str(next(self.parameters()).device)

        def compute(distinct: list[str]) -> np.ndarray:
            with self.runtime.inference(self):
                return encode_distinct(
                    distinct, self.tokenizer, self.forward, device, batch_size, self.max_length, progress
                )

        try:
            if not self._caches_embeddings():
                return compute(list(texts))
            return cached_encode(self.embedding_determinants, texts, compute)
        finally:
            self.train(was_training)

    def _caches_embeddings(self) -> bool:
        # a subclass that computes vectors its own way names what determines them by overriding
        # embedding_determinants; otherwise its vectors are not cached (the weights alone might not say)
        own = type(self)
        return own.embedding_determinants is not SentenceEncoder.embedding_determinants or (
            own.forward is SentenceEncoder.forward and own.token_states is SentenceEncoder.token_states
        )


def tokenizer_key(tokenizer: Any) -> str:
    """A hash of what ``tokenizer`` does: a fast tokenizer's full definition (vocabulary, normaliser such as
    lower-casing, pre-tokeniser), else its class, vocabulary and settings."""
    digest = hashlib.sha256(type(tokenizer).__name__.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        definition = json.loads(backend.to_str())
        # A fast tokenizer's truncation and padding are state left by its last call (``truncation=True,
        # max_length=...`` sets them on the backend), not part of what it does: every encode passes its own, and
        # the max length is a determinant of its own. Kept in, a reloaded checkpoint's fresh tokenizer would never
        # share vectors with the same tokenizer after a training run had called it.
        for call_state in ("truncation", "padding"):
            definition.pop(call_state, None)
        digest.update(json.dumps(definition, sort_keys=True).encode())
    else:
        digest.update(repr(sorted(tokenizer.get_vocab().items())).encode())
        digest.update(repr(sorted((k, repr(v)) for k, v in getattr(tokenizer, "init_kwargs", {}).items())).encode())
    return digest.hexdigest()
