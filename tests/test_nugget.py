"""Nugget (plugins/nugget.py): k = ceil(r * n) over real tokens, gradients to the scorer through the decoder's
cross-attention (eq. 5 and the straight-through form), frozen bottom layers, bad input, and training end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness import (
    IncompatibleError,
    InvalidOptionError,
    TrainingSplits,
    UnlabeledSentences,
    VectorSets,
    as_pair_scorer,
)
from harness.matrix import ModelEntry
from harness.nn import SentenceEncoder, TransformerDecoder
from harness.plugin_api import ModelContext
from harness.plugins.nugget import NuggetAutoencoder, NuggetEncoder, nugget_counts, select_nuggets
from harness.profiles import get_profile
from harness.run.config import RunConfig
from harness.run.driver import Run

SENTENCES = [
    "a man is playing a guitar on the stage tonight .",
    "the cat sits .",
    "two dogs are running through a green field near the old farm house by the river .",
    "",
    "scientists discovered a new species of frog .",
]


@pytest.mark.parametrize("ratio", [0.05, 0.1, 0.15, 0.25, 1.0])
def test_counts_use_real_tokens_only_and_stay_within_one_and_n(ratio):
    lengths = torch.tensor([1, 2, 3, 7, 10, 20, 30, 33, 64])
    counts = nugget_counts(lengths, ratio)
    assert counts.tolist() == [min(max(math.ceil(round(ratio * n, 9)), 1), n) for n in lengths.tolist()]
    generator = torch.Generator().manual_seed(0)
    mask = (torch.arange(64)[None, :] < lengths[:, None]).long()  # right padding to 64
    scores = torch.randn(len(lengths), 64, generator=generator)
    scores[mask == 0] = 100.0  # padding would win if it were eligible
    selection = select_nuggets(scores, mask, ratio)
    assert selection.counts.tolist() == counts.tolist()
    assert selection.mask.sum(dim=1).tolist() == counts.tolist()
    assert not (selection.selected & (mask == 0).bool()).any()
    for row, n in enumerate(lengths.tolist()):
        chosen = selection.positions[row][selection.mask[row]]
        assert (chosen.diff() > 0).all()  # text order, no repeats
        best = scores[row, :n].topk(int(counts[row])).indices.sort().values
        assert chosen.tolist() == best.tolist()


def test_bad_counts_input():
    with pytest.raises(InvalidOptionError, match=r"\(0, 1\]"):
        nugget_counts(torch.tensor([5]), 0.0)
    with pytest.raises(InvalidOptionError, match=r"\(0, 1\]"):
        nugget_counts(torch.tensor([5]), 1.5)
    with pytest.raises(ValueError, match="no token at all"):
        nugget_counts(torch.tensor([3, 0]), 0.5)


@pytest.fixture(scope="module")
def nugget_parts(tiny_bert):
    torch.manual_seed(0)
    encoder = SentenceEncoder.from_backbone(tiny_bert, "cls", 64)
    nugget_encoder = NuggetEncoder(encoder, ratio=0.25, layer=1, feedback=True)
    return nugget_encoder, tiny_bert


def test_a_replica_in_another_thread_scores_with_its_own_mask(nugget_parts):
    """Data-parallel replicas (torch's replicate(): shallow copies whose forward hooks stay those of the original
    module) run in their own threads; the scorer hook gets the attention mask with the call, not from the module."""
    import threading

    nugget_encoder, _ = nugget_parts
    batch = dict(nugget_encoder.tokenizer(SENTENCES, padding=True, return_tensors="pt"))
    expected = nugget_encoder.token_states(batch)[2]
    replica = nugget_encoder._replicate_for_data_parallel()  # what replicate() makes of each module
    found, failures = [], []

    def run():
        try:
            found.append(replica.token_states(batch)[2])
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert not failures, failures
    assert torch.equal(found[0], expected)


def test_encoder_counts_on_a_batch_of_mixed_lengths(nugget_parts):
    nugget_encoder, _ = nugget_parts
    lengths = [len(ids) for ids in nugget_encoder.tokenizer(SENTENCES)["input_ids"]]
    vectors = nugget_encoder.encode_multi(SENTENCES)
    assert [len(v) for v in vectors] == [max(1, math.ceil(0.25 * n)) for n in lengths]
    assert lengths[3] == 2 and len(vectors[3]) == 1  # only [CLS] [SEP]: one nugget, one of the two specials
    batch = nugget_encoder.tokenizer(SENTENCES, padding=True, return_tensors="pt")
    nuggets = nugget_encoder(dict(batch))
    assert nuggets.mask.sum(dim=1).tolist() == [len(v) for v in vectors]
    assert not (nuggets.selection.selected & (batch["attention_mask"] == 0)).any()
    # Distinct texts come back as one array's row blocks (batched MaxSim reads it without copying); repeated texts
    # as a plain list of the same vectors, each computed once.
    assert isinstance(vectors, VectorSets) and vectors.matches_stacked()
    repeated = nugget_encoder.encode_multi([SENTENCES[1], SENTENCES[0], SENTENCES[1]])
    assert not isinstance(repeated, VectorSets)
    for ours, theirs in zip(repeated, [vectors[1], vectors[0], vectors[1]]):  # other batches: other padding
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    assert repeated[0] is repeated[2]


@pytest.mark.parametrize("residual", ["scores", "straight-through"])
def test_gradients_reach_the_scorer_and_never_the_frozen_layers(nugget_parts, residual):
    nugget_encoder, backbone = nugget_parts
    torch.manual_seed(1)
    module = NuggetAutoencoder(nugget_encoder, backbone, residual)
    module.train()
    module.zero_grad()
    batch = dict(nugget_encoder.tokenizer(SENTENCES, padding=True, return_tensors="pt"))
    module(clean=batch).backward()
    scorer_gradient = sum(float(p.grad.abs().sum()) for p in nugget_encoder.scorer.parameters())
    assert scorer_gradient > 0
    assert nugget_encoder.type_embeddings.weight.grad.abs().sum() > 0
    transformer = nugget_encoder.transformer
    frozen = [*transformer.embeddings.parameters(), *transformer.encoder.layer[0].parameters()]
    assert frozen and all(not p.requires_grad and p.grad is None for p in frozen)
    assert all(p.grad is not None for p in transformer.encoder.layer[1].parameters())
    assert set(nugget_encoder.frozen) == {n for n, p in transformer.named_parameters() if not p.requires_grad}


def test_score_bias_enters_every_cross_attention_logit(tiny_bert):
    """eq. 5: the bias is added to the logits before the softmax: a constant shift changes nothing, a very low
    bias on a memory vector equals leaving it out."""
    torch.manual_seed(0)
    encoder = SentenceEncoder.from_backbone(tiny_bert, "cls", 64)
    decoder = TransformerDecoder.from_encoder(encoder.transformer, share="embeddings").eval()
    memory = torch.randn(2, 3, encoder.transformer.config.hidden_size)
    ids = torch.tensor([[101, 2000, 2001, 102], [101, 2003, 102, 0]])
    mask = (ids != 0).long()
    plain = decoder.hidden_states(memory, ids, attention_mask=mask)
    shifted = decoder.hidden_states(memory, ids, attention_mask=mask, memory_bias=torch.full((2, 3), 2.5))
    torch.testing.assert_close(plain, shifted, atol=1e-5, rtol=0)
    dropped = decoder.hidden_states(
        memory, ids, attention_mask=mask, memory_bias=torch.tensor([[0.0, 0.0, -1e4], [0.0, 0.0, -1e4]])
    )
    without = decoder.hidden_states(memory[:, :2], ids, attention_mask=mask)
    torch.testing.assert_close(dropped, without, atol=1e-5, rtol=0)
    changed = decoder.hidden_states(memory, ids, attention_mask=mask, memory_bias=torch.tensor([[3.0, 0, 0]] * 2))
    assert (changed - plain).abs().max() > 1e-3


def context(backbone, registry, tmp_path, **options) -> ModelContext:
    plugin = registry.model("nugget")
    resolved = {key: option.default for key, option in plugin.options.items()} | options
    return ModelContext(
        options=resolved,
        backbone=backbone,
        profile=get_profile("smoke"),
        device="cpu",
        seed=3,
        progress=False,
        component=registry.component,
        artifact_dir=tmp_path,
        cache_dir=tmp_path,
        train_on="test",
    )


def test_training_saves_and_reloads_and_scores_by_maxsim(tiny_bert, registry, tmp_path):
    ctx = context(tiny_bert, registry, tmp_path, layer=1, ratio=0.25, residual="straight-through", deletion=0.3)
    model = registry.model("nugget").factory(ctx)
    before = [v.copy() for v in model.encode_multi(SENTENCES[:2])]
    report = model.fit(TrainingSplits("test", UnlabeledSentences(["", *SENTENCES])), ctx)
    assert report["steps"] > 0 and report["empty_sentences_dropped"] == 2 and report["frozen_parameters"] > 0
    assert report["loss_curve"]["reconstruction"]["first"] > 0
    after = model.encode_multi(SENTENCES[:2])
    assert any(not np.allclose(a, b) for a, b in zip(before, after))  # training moved the nuggets
    model.save(tmp_path)
    reloaded = registry.model("nugget").factory(ctx)
    reloaded.load(tmp_path)
    for ours, theirs in zip(reloaded.encode_multi(SENTENCES), model.encode_multi(SENTENCES)):
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
    scores = as_pair_scorer(model).score(SENTENCES[:2], SENTENCES[1:3])
    assert scores.shape == (2,) and np.all(np.abs(scores) <= 1 + 1e-6)


def test_bad_options_fail_at_plan_time_or_build(tiny_bert, registry, tmp_path):
    def plan(model, train_on="stsb"):
        config = RunConfig(
            models=[ModelEntry(model)],
            tasks=["stsb"],
            train_on=train_on,
            profile="smoke",
            results_dir=tmp_path / "results",
            progress=False,
        )
        return Run(registry, config, log=lambda _: None).plan()

    for bad in ("nugget:ratio=0", "nugget:ratio=1.5", "nugget:ratio=-0.1"):
        with pytest.raises(InvalidOptionError, match=r"ratio must lie in \(0, 1\].*0.05, 0.1, 0.15, 0.25"):
            plan(bad)
    with pytest.raises(InvalidOptionError, match="layer"):
        plan("nugget:layer=-1")
    with pytest.raises(InvalidOptionError, match="residual"):
        plan("nugget:residual=soft")
    # the shared refusal of objective models (harness.blocks.require_unlabeled_source): it names the sources
    with pytest.raises(IncompatibleError, match=r"learns from unlabeled sentences; add --train-on TASK \(.*stsb"):
        plan("nugget", train_on=None)
    with pytest.raises(InvalidOptionError, match="layer must be in 0..2"):
        registry.model("nugget").factory(context(tiny_bert, registry, tmp_path, layer=3))
