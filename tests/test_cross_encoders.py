"""Cross-Encoder (ce) and Cross-Bi-Encoder (cbe) on tiny random BERT- and RoBERTa-style transformers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from harness import InvalidOptionError, ScoredPairs, TrainingSplits
from harness.blocks import FIRST_SEGMENT, SECOND_SEGMENT, truncate_longest_first
from harness.plugin_api import ModelContext
from harness.plugins.cross_bi_encoder import segment_masks
from harness.profiles import get_profile

SENTENCE_A = "a man is playing a guitar ."
SENTENCE_B = "the cat sits on the mat ."


def _check_tokenizer(path: str) -> None:
    """The fixtures must give a tokenizer that actually splits words (not only its special tokens)."""
    from harness.nn import load_tokenizer

    tokenizer = load_tokenizer(path)
    ids = tokenizer(SENTENCE_A, add_special_tokens=False)["input_ids"]
    assert len(ids) >= 5, (
        f"fixture tokenizer at {path} turns {SENTENCE_A!r} into {ids}; with transformers 5 the tiny_roberta "
        "fixture must build RobertaTokenizerFast(vocab=..., merges=...) instead of vocab_file=/merges_file="
    )


@pytest.fixture(params=["bert", "roberta"])
def backbone(request) -> str:
    path = request.getfixturevalue("tiny_bert" if request.param == "bert" else "tiny_roberta")
    _check_tokenizer(path)
    return path


def _pairs(n: int = 32) -> ScoredPairs:
    """Learnable targets: identical sentences 0.9, different ones 0.6 (a constant bias already lowers the loss)."""
    rng = np.random.default_rng(0)
    words = "man woman dog cat plays runs eats guitar food park ball red".split()
    first = [" ".join(rng.choice(words, 5)) for _ in range(n)]
    second = [a if i % 2 == 0 else " ".join(rng.choice(words, 4)) for i, a in enumerate(first)]
    scores = np.array([0.9 if a == b else 0.6 for a, b in zip(first, second)])
    return ScoredPairs(first, second, scores)


def _build(registry, name: str, backbone: str, seed: int = 0, epochs: int = 1, **options):
    plugin = registry.model(name)
    resolved = {key: option.default for key, option in plugin.options.items()}
    resolved.update(options)
    profile = dataclasses.replace(get_profile("smoke"), epochs=epochs, max_steps=None, batch_size=8)
    ctx = ModelContext(options=resolved, backbone=backbone, profile=profile, device="cpu", seed=seed, progress=False)
    torch.manual_seed(seed)
    return plugin.factory(ctx), ctx


def _weights(network: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {key: value.detach().clone() for key, value in network.state_dict().items()}


# -- Cross-Encoder -----------------------------------------------------------------------------------------------------


def test_ce_input_is_the_tokenizers_pair_encoding(registry, tiny_bert):
    model, _ = _build(registry, "ce", tiny_bert)
    encoded = model.tokenize_pairs([SENTENCE_A], [SENTENCE_B], padding=False)
    tokens = model.tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    words_a = model.tokenizer.tokenize(SENTENCE_A)
    words_b = model.tokenizer.tokenize(SENTENCE_B)
    assert tokens == ["[CLS]", *words_a, "[SEP]", *words_b, "[SEP]"]
    assert encoded["token_type_ids"][0] == [0] * (len(words_a) + 2) + [1] * (len(words_b) + 1)


@pytest.mark.parametrize("activation", ["sigmoid", "tanh", "none"])
def test_ce_score_is_activated_linear_head_on_cls(registry, backbone, activation):
    model, _ = _build(registry, "ce", backbone, activation=activation)
    network = model.network
    with torch.no_grad():  # a large head weight so that tanh/sigmoid saturation would show
        network.head.weight.mul_(50)
    first = [SENTENCE_A, "two dogs run", SENTENCE_B]
    second = [SENTENCE_B, "a dog is running through a field .", SENTENCE_A]
    scores = model.score(first, second)

    batch = model.tokenize_pairs(first, second, padding=True)
    inputs = {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        cls_state = network.transformer(**inputs).last_hidden_state[:, 0]
        logits = (cls_state @ network.head.weight.T + network.head.bias).squeeze(-1).numpy()
    expected = {"sigmoid": 1 / (1 + np.exp(-logits)), "tanh": np.tanh(logits), "none": logits}[activation]
    np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-5)
    if activation == "sigmoid":
        assert np.all((scores > 0) & (scores < 1))
    if activation == "none":
        assert np.abs(scores).max() > 1  # unbounded, unlike sigmoid and tanh


def test_ce_batched_scores_equal_one_at_a_time(registry, tiny_bert):
    model, _ = _build(registry, "ce", tiny_bert)
    model.batch_size = 2  # several length-sorted batches with padding
    first = [SENTENCE_A, "a dog", SENTENCE_B, "a dog", "the weather will be sunny tomorrow ."]
    second = [SENTENCE_B, "a cat", "a child is riding a horse .", "a cat", "it rains"]
    batched = model.score(first, second)
    single = np.array([model.score([a], [b])[0] for a, b in zip(first, second)])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    assert batched[1] == batched[3]  # a repeated pair is scored once
    assert model.score([], []).shape == (0,)


def test_ce_training_lowers_loss_changes_weights_and_keeps_best_epoch(registry, backbone):
    _check_ce_training(registry, backbone, "mse")


def test_ce_trains_with_bce_with_logits(registry, tiny_bert):
    _check_ce_training(registry, tiny_bert, "bce")


def _check_ce_training(registry, backbone: str, loss: str) -> None:
    model, ctx = _build(registry, "ce", backbone, epochs=3, lr=1e-3, loss=loss)
    before = _weights(model.network)
    pairs = _pairs()
    report = model.fit(TrainingSplits("synthetic", pairs, pairs), ctx)
    assert report.steps == 3 * 8  # 32 pairs in both orders (pair_orders=both), batch 8
    assert report.examples_seen == 3 * 64
    assert report.loss_history[-1] < report.loss_history[0]
    assert len(report.dev_history) == 3 and report.best_dev_score == max(report.dev_history)
    after = model.network.state_dict()
    changed = [key for key in before if not torch.equal(before[key], after[key])]
    assert "head.weight" in changed and any(key.startswith("transformer.") for key in changed)
    assert not model.network.training


def test_ce_rejects_bce_without_sigmoid(registry, tiny_bert):
    with pytest.raises(InvalidOptionError, match="loss=bce with head=linear needs activation=sigmoid"):
        _build(registry, "ce", tiny_bert, activation="tanh", loss="bce")


@pytest.mark.parametrize("name", ["ce", "cbe"])
def test_pair_scorers_train_on_both_pair_orders(registry, tiny_bert, name, monkeypatch):
    """The thesis code and UKPLab's examples train teachers on (a, b) and (b, a); pair_orders=given keeps one."""
    seen: list[tuple[str, str]] = []
    for orders, expected in (("both", 2), ("given", 1)):
        model, ctx = _build(registry, name, tiny_bert, lr=1e-3, pair_orders=orders)
        pairs = _pairs(8)
        original = model.fit_scored_pairs.__globals__["fit_scored_pairs"]

        def spy(model_, objective, collate, train, dev, ctx_, lr, description, original=original):
            seen.extend(zip(train.first, train.second))
            return original(model_, objective, collate, train, dev, ctx_, lr, description)

        monkeypatch.setitem(model.fit_scored_pairs.__globals__, "fit_scored_pairs", spy)
        seen.clear()
        model.fit(TrainingSplits("synthetic", pairs, None), ctx)
        assert len(seen) == expected * len(pairs)
        assert set(zip(pairs.first, pairs.second)) <= set(seen)
        if orders == "both":
            assert set(zip(pairs.second, pairs.first)) <= set(seen)
        monkeypatch.undo()


def test_ce_sentence_transformers_head_uses_the_pooler_and_bce(registry, tiny_bert):
    """head=sentence-transformers: HF's pooler (the backbone's pretrained weights) before the linear layer, BCE on the
    logit whatever the activation, the activation only at prediction."""
    model, ctx = _build(registry, "ce", tiny_bert, head="sentence-transformers", activation="tanh", lr=1e-3)
    assert model.loss == "bce"
    network = model.network
    assert torch.equal(network.pooler[0].weight, network.transformer.pooler.dense.weight)
    features = dict(model.tokenize_pairs([SENTENCE_A], [SENTENCE_B], padding=True))
    with torch.no_grad():
        network.eval()
        cls = network.transformer(**features).last_hidden_state[:, 0]
        expected = torch.tanh(network.head(torch.tanh(network.pooler[0](cls)))).squeeze(-1)
    np.testing.assert_allclose(model.score([SENTENCE_A], [SENTENCE_B]), expected.numpy(), atol=1e-5)
    report = model.fit(TrainingSplits("synthetic", _pairs(16), None), ctx)
    assert report.steps > 0 and all(np.isfinite(report.loss_history))
    linear, _ = _build(registry, "ce", tiny_bert)
    assert linear.network.pooler is None and linear.loss == "mse"


def test_ce_save_load_round_trip_is_exact(registry, backbone, tmp_path):
    model, ctx = _build(registry, "ce", backbone, lr=1e-3)
    pairs = _pairs(16)
    model.fit(TrainingSplits("synthetic", pairs, None), ctx)
    model.save(tmp_path)
    fresh, _ = _build(registry, "ce", backbone, seed=99)
    assert not np.array_equal(fresh.score(pairs.first, pairs.second), model.score(pairs.first, pairs.second))
    fresh.load(tmp_path)
    np.testing.assert_array_equal(fresh.score(pairs.first, pairs.second), model.score(pairs.first, pairs.second))


# -- Cross-Bi-Encoder --------------------------------------------------------------------------------------------------


def test_truncate_longest_first():
    assert truncate_longest_first([1, 2, 3, 4, 5], [6, 7], 5) == ([1, 2, 3], [6, 7])
    assert truncate_longest_first([1, 2, 3], [4, 5, 6, 7], 4) == ([1, 2], [4, 5])
    assert truncate_longest_first([1], [2], 10) == ([1], [2])


def test_cbe_bert_input_segments_and_token_types(registry, tiny_bert):
    model, _ = _build(registry, "cbe", tiny_bert)
    tokenizer = model.inputs.tokenizer
    words_a = tokenizer.tokenize(SENTENCE_A)  # 7 word pieces
    words_b = tokenizer.tokenize("the cat .")  # 3
    (row,) = model.inputs.features([SENTENCE_A], ["the cat ."])
    assert tokenizer.convert_ids_to_tokens(row["input_ids"]) == ["[CLS]", *words_a, "[SEP]", "[CLS]", *words_b, "[SEP]"]
    batch = model.inputs.collate(model.inputs.features([SENTENCE_A, "a dog"], ["the cat .", "a cat"]))
    length_a, length_b = len(words_a) + 2, len(words_b) + 2
    width = length_a + length_b
    assert batch["input_ids"].shape == (2, width)
    # Row 1 is "[CLS] a dog [SEP] [CLS] a cat [SEP]" (8 tokens) padded to the width of row 0.
    assert batch["segments"].tolist() == [
        [FIRST_SEGMENT] * length_a + [SECOND_SEGMENT] * length_b,
        [FIRST_SEGMENT] * 4 + [SECOND_SEGMENT] * 4 + [0] * (width - 8),
    ]
    assert batch["attention_mask"].tolist() == [[1] * width, [1] * 8 + [0] * (width - 8)]
    assert batch["token_type_ids"].tolist() == [[0] * length_a + [1] * length_b, [0] * 4 + [1] * 4 + [0] * (width - 8)]
    # Pooling masks: CLS..SEP inclusive (default), or only the sentence's own tokens.
    first, second = segment_masks(batch["segments"], "boundaries")
    assert first[1].tolist() == [1, 1, 1, 1] + [0] * (width - 4)
    assert second[1].tolist() == [0, 0, 0, 0, 1, 1, 1, 1] + [0] * (width - 8)
    first, second = segment_masks(batch["segments"], "content")
    assert first[1].tolist() == [0, 1, 1, 0] + [0] * (width - 4)
    assert second[1].tolist() == [0, 0, 0, 0, 0, 1, 1, 0] + [0] * (width - 8)
    assert first[0].sum() == len(words_a) and second[0].sum() == len(words_b)


def test_cbe_roberta_uses_its_own_start_and_separator_tokens(registry, tiny_roberta):
    _check_tokenizer(tiny_roberta)
    model, _ = _build(registry, "cbe", tiny_roberta)
    tokenizer = model.inputs.tokenizer
    words_a = tokenizer.tokenize(SENTENCE_A)
    words_b = tokenizer.tokenize(SENTENCE_B)
    (row,) = model.inputs.features([SENTENCE_A], [SENTENCE_B])
    assert tokenizer.convert_ids_to_tokens(row["input_ids"]) == ["<s>", *words_a, "</s>", "<s>", *words_b, "</s>"]
    assert row["segments"] == [FIRST_SEGMENT] * (len(words_a) + 2) + [SECOND_SEGMENT] * (len(words_b) + 2)
    batch = model.inputs.collate([row])
    assert "token_type_ids" not in batch  # RoBERTa has a single type embedding
    assert batch["input_ids"][0, 0] == tokenizer.bos_token_id


def test_cbe_score_is_cosine_of_segment_means(registry, backbone):
    model, _ = _build(registry, "cbe", backbone)
    first = [SENTENCE_A, "two dogs run"]
    second = ["the cat .", "a dog is running through a field ."]
    scores = model.score(first, second)
    batch = model.inputs.collate(model.inputs.features(first, second))
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
    with torch.no_grad():
        hidden = model.network.transformer(**inputs).last_hidden_state
    for row in range(2):
        segments = batch["segments"][row]
        u = hidden[row, segments == FIRST_SEGMENT].mean(dim=0)
        v = hidden[row, segments == SECOND_SEGMENT].mean(dim=0)
        assert scores[row] == pytest.approx(float(torch.cosine_similarity(u, v, dim=0)), abs=1e-5)
    assert np.all(np.abs(scores) <= 1.0)


def test_cbe_batched_scores_equal_one_at_a_time(registry, backbone):
    model, _ = _build(registry, "cbe", backbone)
    model.batch_size = 2
    first = [SENTENCE_A, "a dog", SENTENCE_B, "the weather will be sunny tomorrow ."]
    second = [SENTENCE_B, "a cat", "a child is riding a horse .", "it rains"]
    batched = model.score(first, second)
    single = np.array([model.score([a], [b])[0] for a, b in zip(first, second)])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    assert np.all((batched >= -1) & (batched <= 1))


def test_cbe_long_pairs_fit_the_position_table(registry, tiny_bert):
    model, _ = _build(registry, "cbe", tiny_bert)
    long_text = " ".join(["guitar"] * 400)
    (row,) = model.inputs.features([long_text], [long_text])
    assert len(row["input_ids"]) <= model.inputs.pair_limit <= 128
    assert row["segments"].count(FIRST_SEGMENT) == row["segments"].count(SECOND_SEGMENT)
    assert np.isfinite(model.score([long_text], [SENTENCE_A])).all()


def test_cbe_training_lowers_loss_and_changes_weights(registry, backbone):
    model, ctx = _build(registry, "cbe", backbone, epochs=3, lr=1e-3)
    before = _weights(model.network)
    pairs = _pairs()
    report = model.fit(TrainingSplits("synthetic", pairs, pairs), ctx)
    assert report.loss_history[-1] < report.loss_history[0]
    assert len(report.dev_history) == 3
    after = model.network.state_dict()
    assert any(not torch.equal(before[key], after[key]) for key in before)


def test_cbe_save_load_round_trip_is_exact(registry, backbone, tmp_path):
    model, ctx = _build(registry, "cbe", backbone, lr=1e-3)
    pairs = _pairs(16)
    model.fit(TrainingSplits("synthetic", pairs, None), ctx)
    model.save(tmp_path)
    fresh, _ = _build(registry, "cbe", backbone, seed=99)
    fresh.load(tmp_path)
    np.testing.assert_array_equal(fresh.score(pairs.first, pairs.second), model.score(pairs.first, pairs.second))


def test_ce_and_cbe_train_and_evaluate_through_the_cli(run_cli, tiny_bert, tmp_path):
    code, out, err = run_cli(
        "run",
        "--models",
        "ce,cbe",
        "--tasks",
        "stsb,bws-cross-topic",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--device",
        "cpu",
        "--results",
        tmp_path,
        "--no-progress",
    )
    assert code == 0, err
    import json

    records = [json.loads(path.read_text()) for path in tmp_path.rglob("seed-*/*.json")]
    cells = {(r["model"]["name"], r["task"]["name"]): r for r in records if r.get("status") == "ok"}
    assert set(cells) == {(m, t) for m in ("ce", "cbe") for t in ("stsb", "bws-cross-topic")}
    for record in cells.values():
        assert record["model"]["train_on"] == "stsb"
        assert record["training"]["steps"] > 0
        assert -100 <= record["main_score"] <= 100


# -- plugins stand alone -----------------------------------------------------------------------------------------------
def test_no_plugin_module_imports_another_plugin():
    import ast
    from pathlib import Path

    plugins_dir = Path(__file__).resolve().parent.parent / "plugins"
    offenders = []
    for path in sorted(plugins_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            plugin_modules = [
                name
                for name in names
                if name.split(".")[:2] in (["harness", "plugins"], ["plugins"]) or name.startswith("plugins.")
            ]
            offenders += [f"{path.name}: {name}" for name in plugin_modules]
    assert not offenders


@pytest.mark.parametrize(("entry_point", "model"), [("cross_bi_encoder", "cbe"), ("cross_encoder", "ce")])
def test_each_model_plugin_loads_when_allow_listed_alone(entry_point, model):
    import os
    import subprocess
    import sys

    environment = {**os.environ, "HARNESS_PLUGINS": entry_point}
    listing = subprocess.run(
        [sys.executable, "-m", "harness", "list"], capture_output=True, text=True, env=environment, timeout=300
    )
    assert listing.returncode == 0, listing.stderr
    models = [line.split()[0] for line in listing.stdout.splitlines() if line.startswith("  ") and line.split()]
    assert model in models
    assert "fail" not in listing.stdout.lower() and "error" not in listing.stdout.lower()
