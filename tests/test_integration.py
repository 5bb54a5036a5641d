"""Integration: the bundled real model on real data, against sentence-transformers and mteb's published numbers."""

from __future__ import annotations

import numpy as np
import pytest

from harness.plugin_api import EvalContext, ModelContext
from harness.profiles import get_profile

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def minilm_be(minilm_path):
    from harness.registry import build_registry

    registry = build_registry()
    defaults = {key: option.default for key, option in registry.model("be").options.items()}  # mean pooling
    ctx = ModelContext(
        options=defaults, backbone=minilm_path, profile=get_profile("paper"), device="cpu", seed=42, progress=False
    )
    return registry, registry.model("be").factory(ctx)


def test_embeddings_equal_sentence_transformers(minilm_be, minilm_path):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    _, model = minilm_be
    texts = ["A man is playing a guitar.", "Eine Katze sitzt auf der Matte.", "short", "x " * 300]
    reference = sentence_transformers.SentenceTransformer(minilm_path, device="cpu")
    expected = reference.encode(texts, normalize_embeddings=False)
    ours = model.encode(texts)
    cosines = (ours * expected).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(expected, axis=1)
    assert cosines.min() > 0.99999
    # Normalize is the last module of this sentence-transformers model: our vectors differ only in length.


def test_stsb_matches_mteb_published_score(minilm_be):
    registry, model = minilm_be
    task = registry.task("stsb").factory({"text": "raw"}, None)
    ctx = EvalContext(profile=get_profile("quick"), device="cpu", seed=42, batch_size=64, progress=False)
    score = task.evaluate(model, ctx).scores["spearman"]
    # mteb's published result for sentence-transformers/all-MiniLM-L6-v2 on STSBenchmark (test): 82.03.
    assert round(score, 2) == 82.03
