"""The Bi-Encoder and the shared training loop on a tiny random transformer."""

from __future__ import annotations

import numpy as np
import torch

from harness import ScoredPairs, TrainingSplits
from harness.plugin_api import ModelContext
from harness.profiles import get_profile
from harness.training import linear_schedule


def _pairs(n: int = 48) -> ScoredPairs:
    rng = np.random.default_rng(0)
    words = "man woman dog cat plays runs eats guitar food park ball red blue".split()
    first = [" ".join(rng.choice(words, 5)) for _ in range(n)]
    second = [" ".join(rng.choice(words, 5)) for _ in range(n)]
    scores = np.array([len(set(a.split()) & set(b.split())) / 5 for a, b in zip(first, second)])
    return ScoredPairs(first, second, scores)


def _be(registry, tiny_bert, seed=1):
    plugin = registry.model("be")
    options = {key: option.default for key, option in plugin.options.items()}  # a resolved spec has every option
    options.update(pooling="mean", lr=1e-3)
    ctx = ModelContext(
        options=options, backbone=tiny_bert, profile=get_profile("smoke"), device="cpu", seed=seed, progress=False
    )
    torch.manual_seed(seed)
    return plugin.factory(ctx), ctx


def test_be_training_lowers_loss_and_keeps_best_epoch(registry, tiny_bert):
    model, ctx = _be(registry, tiny_bert)
    pairs = _pairs()
    splits = TrainingSplits("synthetic", pairs, pairs)
    profile = get_profile("smoke")
    ctx.profile = type(profile)(**{**profile.__dict__, "epochs": 4, "max_steps": None})
    report = model.fit(splits, ctx)
    assert report.steps == 4 * 6
    assert report.loss_history[-1] < report.loss_history[0]
    assert len(report.dev_history) == 4 and report.best_dev_score == max(report.dev_history)
    from harness.evaluation.pairs import scored_pairs_dev_score

    assert scored_pairs_dev_score(model, pairs) == np.float64(report.best_dev_score)


def test_save_load_round_trip_is_exact(registry, tiny_bert, tmp_path):
    model, ctx = _be(registry, tiny_bert)
    pairs = _pairs(16)
    model.fit(TrainingSplits("synthetic", pairs, None), ctx)
    model.save(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    fresh, _ = _be(registry, tiny_bert, seed=99)
    fresh.load(tmp_path)
    texts = ["a man plays guitar", "the dog runs in the park"]
    np.testing.assert_array_equal(model.encode(texts), fresh.encode(texts))


def test_same_seed_same_weights(registry, tiny_bert):
    pairs = _pairs(16)
    vectors = []
    for _ in range(2):
        model, ctx = _be(registry, tiny_bert, seed=7)
        model.fit(TrainingSplits("synthetic", pairs, None), ctx)
        vectors.append(model.encode(["a red ball"]))
    np.testing.assert_allclose(vectors[0], vectors[1], rtol=0, atol=1e-6)


def test_encoding_dedups_and_keeps_order(registry, tiny_bert):
    model, _ = _be(registry, tiny_bert)
    texts = ["short", "a much longer sentence than the first one", "short", "mid length text"]
    together = model.encode(texts)
    alone = np.stack([model.encode([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_array_equal(together[0], together[2])


def test_warmup_then_linear_decay():
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([parameter], lr=1.0)
    schedule = linear_schedule(optimizer, warmup_steps=2, total_steps=10, schedule="linear")
    rates = []
    for _ in range(10):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        schedule.step()
    assert rates[:3] == [0.5, 1.0, 1.0] and rates[-1] == 0.125


# -- length-grouped batches and seed optimisation ----------------------------------------------------------------------
def test_length_grouped_batches_cover_every_example_once_and_group_lengths():
    from harness.training import GROUP_CHUNK_BATCHES, epoch_batches

    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 200, size=1000).tolist()
    batches = epoch_batches(1000, 16, torch.Generator().manual_seed(1), lengths)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(1000)) and len(batches) == 63  # ceil(1000 / 16), as without grouping
    plain = epoch_batches(1000, 16, torch.Generator().manual_seed(1))
    spread = lambda bs: np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in bs])  # noqa: E731
    assert spread(batches) < spread(plain) / 4  # much less padding per batch
    again = epoch_batches(1000, 16, torch.Generator().manual_seed(1), lengths)
    assert again == batches  # seeded
    assert epoch_batches(1000, 16, torch.Generator().manual_seed(2), lengths) != batches
    assert GROUP_CHUNK_BATCHES == 50


def test_group_by_length_budget_key_reaches_the_loop_and_is_reported(registry, tiny_bert, monkeypatch):
    """``--set group_by_length=false``: scored-pair training draws plain random batches (the loop gets no lengths)
    and its applied budget says so; the default groups them and says that."""
    import harness.training_loop as loop

    calls = []
    original = loop.epoch_batches
    monkeypatch.setattr(
        loop,
        "epoch_batches",
        lambda count, size, generator, lengths=None: (
            calls.append(lengths is not None) or original(count, size, generator, lengths)
        ),
    )
    reports = {}
    for grouped in (True, False):
        model, ctx = _be(registry, tiny_bert)
        ctx.profile = ctx.profile.with_budget({"group_by_length": grouped})
        pairs = _pairs()
        calls.clear()
        reports[grouped] = model.fit(TrainingSplits("synthetic", pairs, pairs), ctx)
        assert calls and set(calls) == {grouped}
        assert reports[grouped].applied_budget["group_by_length"] is grouped
    assert get_profile("quick").group_by_length is True


def test_seed_trials_keep_the_best_dev_trial_and_record_every_trial(registry, tiny_bert):
    import dataclasses

    model, ctx = _be(registry, tiny_bert)
    ctx.profile = dataclasses.replace(get_profile("smoke"), seed_trials=3, max_steps=None)
    pairs = _pairs()
    report = model.fit(TrainingSplits("synthetic", pairs, pairs), ctx)
    trials = report.seed_trials
    assert [t["trial"] for t in trials] == [0, 1, 2] and trials[0]["seed"] == ctx.seed
    assert len({t["seed"] for t in trials}) == 3
    assert report.best_dev_score == max(t["best_dev_score"] for t in trials)
    from harness.evaluation.pairs import scored_pairs_dev_score

    assert scored_pairs_dev_score(model, pairs) == np.float64(report.best_dev_score)  # the best trial's weights
    assert report.as_record()["seed_trials"] == trials
    assert get_profile("quick").seed_trials == 1 and get_profile("paper").seed_trials == 10


def test_bf16_precision_trains_under_cpu_autocast_and_is_reported(registry, tiny_bert):
    """``--set precision=bf16``: the shared loop's forward passes run in bfloat16 on the CPU, the weights stay
    float32, and the training report says which precision it applied."""
    model, ctx = _be(registry, tiny_bert)
    seen_dtypes = set()
    linear = next(module for module in model.encoder.modules() if isinstance(module, torch.nn.Linear))
    handle = linear.register_forward_hook(lambda module, inputs, output: seen_dtypes.add(output.dtype))
    ctx.profile = ctx.profile.with_budget({"precision": "bf16"})
    report = model.fit(TrainingSplits("synthetic", _pairs(16), None), ctx)
    handle.remove()
    assert torch.bfloat16 in seen_dtypes
    assert all(p.dtype == torch.float32 for p in model.encoder.parameters())
    assert report.applied_budget["precision"] == "bf16" and report.steps > 0
    plain, plain_ctx = _be(registry, tiny_bert)
    assert plain.fit(TrainingSplits("synthetic", _pairs(16), None), plain_ctx).applied_budget["precision"] == "auto"


def test_clip_gradients_equals_torch_clipping_bit_for_bit():
    """The loop's clipping (harness.training.clip_gradients) gives torch's clip_grad_norm_ result exactly: the same
    total norm, gradients scaled where the norm exceeds the limit and untouched where it does not."""
    from harness.training import clip_gradients

    generator = torch.Generator().manual_seed(0)
    for scale in (1e-3, 10.0):  # below the limit (no scaling) and far above it
        ours = [torch.nn.Parameter(torch.zeros(shape)) for shape in ((7, 5), (5,), (3, 4, 2))]
        theirs = [torch.nn.Parameter(torch.zeros(shape)) for shape in ((7, 5), (5,), (3, 4, 2))]
        for mine, reference in zip(ours, theirs):
            gradient = torch.randn(mine.shape, generator=generator) * scale
            mine.grad, reference.grad = gradient.clone(), gradient.clone()
        frozen = torch.nn.Parameter(torch.ones(3), requires_grad=False)  # no gradient: ignored by both
        norm = clip_gradients([*ours, frozen], 1.0)
        reference_norm = torch.nn.utils.clip_grad_norm_([*theirs, frozen], 1.0)
        assert torch.equal(norm, reference_norm)
        assert all(torch.equal(mine.grad, reference.grad) for mine, reference in zip(ours, theirs))
        assert (float(norm) > 1.0) == (scale > 1.0)
    ours, theirs = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(3))
    ours.grad, theirs.grad = torch.tensor([1.0, float("nan"), 0.5]), torch.tensor([1.0, float("nan"), 0.5])
    clip_gradients([ours], 1.0)  # a NaN norm: every gradient NaN, as torch's scaling leaves it
    torch.nn.utils.clip_grad_norm_([theirs], 1.0)
    torch.testing.assert_close(ours.grad, theirs.grad, rtol=0, atol=0, equal_nan=True)
