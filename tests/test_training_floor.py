"""benchmarks/training_floor.py's counting on a tiny random BERT: the steps the loop takes, the real tokens they read
and the model FLOPs counted from them (the benchmark's numerator; its timings are never asserted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import torch

from harness import ScoredPairs, TrainingSplits
from harness.plugin_api import ModelContext
from harness.profiles import get_profile

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "training_floor.py"


def _script():
    spec = importlib.util.spec_from_file_location("training_floor", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("training_floor", module)
    spec.loader.exec_module(module)
    return module


def test_step_meter_counts_every_step_and_the_flops_of_its_real_tokens(registry, tiny_bert):
    floor = _script()
    plugin = registry.model("ce")
    options = {key: option.default for key, option in plugin.options.items()}
    profile = get_profile("smoke").with_budget({"epochs": None, "max_steps": 5, "batch_size": 4})
    ctx = ModelContext(options=options, backbone=tiny_bert, profile=profile, device="cpu", seed=1, progress=False)
    torch.manual_seed(1)
    model = plugin.factory(ctx)
    words = "man woman dog cat plays runs eats guitar food park".split()
    rng = np.random.default_rng(0)
    first = [" ".join(rng.choice(words, int(rng.integers(2, 9)))) for _ in range(12)]
    second = [" ".join(rng.choice(words, int(rng.integers(2, 9)))) for _ in range(12)]
    pairs = ScoredPairs(first, second, np.linspace(0, 1, 12))

    seen = []  # (real tokens, sum of squared lengths) of every transformer call, from the inputs themselves
    transformer = model.network.transformer
    transformer.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(
            (int(kwargs["attention_mask"].sum()), int((kwargs["attention_mask"].sum(1) ** 2).sum()))
        ),
        with_kwargs=True,
    )
    meter = floor.StepMeter(model.network)
    try:
        report = model.fit(TrainingSplits("synthetic", pairs, None), ctx)
    finally:
        meter.close()
    assert report.steps == 5
    assert len(meter.step_flops) == 5 and len(meter.step_seconds) == 4  # the first step has no start to time from
    assert meter.step_real_tokens == [tokens for tokens, _ in seen]
    weights = sum(m.weight.numel() for m in transformer.modules() if isinstance(m, torch.nn.Linear))
    config = transformer.config
    expected = [
        3 * (2.0 * weights * tokens + 4.0 * config.num_hidden_layers * config.hidden_size * squares)
        for tokens, squares in seen
    ]
    assert meter.step_flops == expected
    assert all(real <= padded for real, padded in zip(meter.step_real_tokens, meter.step_padded_tokens))
    summary = meter.summary(warmup=1)
    assert summary["steps"] == 3 and summary["flops"] == sum(expected[2:]) / 3
    assert floor.matmul_peak(torch.float32, shape=(8, 8, 8), seconds=0.01) > 0
