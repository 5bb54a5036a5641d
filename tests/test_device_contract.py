"""The device contract of every registered model: built for the ``meta`` device, trained under the smoke
profile and evaluated, no tensor stays on the CPU (harness.testing.check_model_device); and training under CPU
bfloat16 and float16 autocast, float16 with a real GradScaler, stays finite (harness.testing.check_model_precision).
New built-in models join the parametrisation automatically."""

from __future__ import annotations

import pytest
import torch

import harness.testing as ht
from harness.registry import build_registry

pytestmark = pytest.mark.usefixtures("one_torch_thread")

REGISTRY = build_registry()
MODELS = sorted(REGISTRY.models)
# Per-model settings the tiny 2-layer backbone needs (nugget's default layer is 3).
OPTIONS = {"nugget": {"layer": 1}}


def _backbone(name: str, tiny_bert: str, request) -> str:
    if name in ("st", "st-ce"):
        return request.getfixturevalue("st_folders")[name]
    return tiny_bert


@pytest.mark.parametrize("name", MODELS)
def test_every_model_keeps_its_tensors_on_its_device(name, tiny_bert, tiny_wordnet, request):
    report = ht.check_model_device(
        name, registry=REGISTRY, backbone=_backbone(name, tiny_bert, request), options=OPTIONS.get(name)
    )
    assert report.trained == ("trainable" in REGISTRY.model(name).capabilities)
    assert report.operations_checked


# Each built-in recipe as the specs whose device paths differ: augsbert's teachers (a cross-encoder, a
# cross-bi-encoder), its samplers (BM25, semantic search with a bi-encoder, KDE over teacher scores) and the domain
# MLM. A recipe without an entry fails test_every_recipe_has_device_specs.
RECIPE_SPECS = {
    "augsbert": [
        "augsbert:teacher=ce,sampler=bm25",
        "augsbert:teacher=cbe,sampler=semantic-search",
        "augsbert:teacher=ce,sampler=kde-iterative",
        "augsbert:teacher=ce,teacher_mlm=true",
    ],
}


def test_every_recipe_has_device_specs():
    assert sorted(RECIPE_SPECS) == sorted(REGISTRY.recipes)


@pytest.mark.parametrize("spec", [spec for specs in RECIPE_SPECS.values() for spec in specs])
def test_every_recipe_keeps_its_tensors_on_its_device(spec, tiny_bert):
    report = ht.check_recipe_device(spec, registry=REGISTRY, backbone=tiny_bert)
    assert report.trained and report.operations_checked


TRAINABLE = [name for name in MODELS if "trainable" in REGISTRY.model(name).capabilities]


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("name", TRAINABLE)
def test_every_trainable_model_trains_under_cpu_autocast(name, precision, tiny_bert, tiny_wordnet):
    record = ht.check_model_precision(name, precision, registry=REGISTRY, backbone=tiny_bert, options=OPTIONS.get(name))
    if "applied_budget" in record and "precision_used" in record["applied_budget"]:
        assert record["applied_budget"]["precision_used"] == precision


def test_the_device_check_finds_a_tensor_left_on_the_cpu():
    """The check can fail: a module that builds a position index without ``device=`` is caught, with its line."""

    class Forgetful(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(4))

        def forward(self, values):
            return values * self.weight + torch.arange(4.0)  # arange on the CPU: a GPU run fails here

    tracer = ht.DeviceTracer()
    with tracer:
        module = Forgetful().to("meta")
        loss = module(torch.ones(4).to("meta")).sum()
        loss.backward()
        assert float(loss.detach()) == pytest.approx(10.0)  # the values are computed, on the CPU twins
    assert [v.operation for v in tracer.violations] == ["add"]
    assert "test_device_contract.py" in tracer.violations[0].where


def test_a_float16_saved_backbone_trains_under_a_gradient_scaler(tmp_path, tiny_bert):
    """A backbone saved in float16 loads in float32: float16 training with a GradScaler cannot unscale float16
    gradients ('Attempting to unscale FP16 gradients')."""
    from transformers import AutoModel, AutoTokenizer

    half = tmp_path / "half"
    AutoModel.from_pretrained(tiny_bert).half().save_pretrained(half)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(half)
    ht.check_model_precision("be", "fp16", registry=REGISTRY, backbone=str(half))
