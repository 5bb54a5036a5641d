"""Harness models behind mteb's model protocols, so mteb's own evaluators compute the numbers.

Reference: mteb 2's ``EncoderProtocol`` / ``CrossEncoderProtocol`` (``mteb/models/models_protocols.py``) and its
``SentenceTransformerEncoderWrapper`` / ``CrossEncoderWrapper``, which these mirror for harness models:

- :class:`HarnessEncoder` (an embedder, or a span encoder through ``harness.as_embedder``): ``encode`` collects the
  texts of mteb's data loader and calls the model's ``encode`` once per call. When mteb says which side a text is on
  (``prompt_type`` query / document) and the model has ``encode_query`` / ``encode_document`` (the ``st`` model,
  with its own prompts), those are used. Similarity: cosine, as every harness embedder is compared.
- :class:`HarnessCrossEncoder` (a pair scorer, or anything ``harness.as_pair_scorer`` adapts): ``predict`` scores
  the pairs of two loaders with the model's ``score``; mteb uses it to rerank the candidates of reranking tasks.

Deviations: mteb's task prompts (instructions for instruction-tuned models) are not passed on: no harness model
takes instructions.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
from mteb.models.abs_encoder import AbsEncoder
from mteb.models.model_meta import ModelMeta, ScoringFunction
from mteb.types import PromptType

from harness import as_embedder, as_pair_scorer

logger = logging.getLogger(__name__)


def _texts(inputs: Any) -> list[str]:
    """Every text of an mteb data loader (batches are dicts with a ``text`` column), in order."""
    return [text for batch in inputs for text in batch["text"]]


def model_meta(model: Any, name: str, revision: str) -> ModelMeta:
    """The minimal ModelMeta mteb asks a model for (name, revision, similarity); nothing is cached under it."""
    return ModelMeta.create_empty(
        overwrites={
            "name": name,
            "revision": revision,
            "similarity_fn_name": ScoringFunction.COSINE,
            "framework": ["PyTorch"],
            "modalities": ["text"],
        }
    )


class HarnessEncoder(AbsEncoder):
    """mteb's EncoderProtocol over a harness embedder."""

    def __init__(self, model: Any, name: str = "harness/model", revision: str = "local"):
        self.model = model
        self.embedder = as_embedder(model)
        self.mteb_model_meta = model_meta(model, name, revision)

    def encode(
        self,
        inputs: Any,
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        texts = _texts(inputs)
        side = {PromptType.query: "encode_query", PromptType.document: "encode_document"}.get(prompt_type)
        encode = getattr(self.model, side, None) if side else None
        vectors = (encode or self.embedder.encode)(texts)
        return np.asarray(vectors, dtype=np.float32)


class HarnessCrossEncoder:
    """mteb's CrossEncoderProtocol over a harness pair scorer. Not an AbsEncoder: mteb treats anything with an
    ``encode`` as a bi-encoder first."""

    def __init__(self, model: Any, name: str = "harness/model", revision: str = "local"):
        self.model = model
        self.scorer = as_pair_scorer(model)
        self.mteb_model_meta = model_meta(model, name, revision)

    def predict(
        self,
        inputs1: Any,
        inputs2: Any,
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        prompt_type: PromptType | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        first, second = _texts(inputs1), _texts(inputs2)
        return np.asarray(self.scorer.score(first, second), dtype=np.float32)
