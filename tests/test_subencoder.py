"""Sub-Sentence Encoder and its core blocks (harness.nn.spans): character spans to token masks, one forward pass per
sentence, the SupCon objective, span input errors, training and checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import harness
from harness import PropositionPair, PropositionPairs, TrainingSplits
from harness.nn import SupCon, load_tokenizer
from harness.nn.spans import (
    SpanError,
    encode_span_items,
    normalise_spans,
    subset_text,
    token_mask,
    tokenise_sentences,
)
from harness.plugins import subencoder
from harness.testing import check_model, model_context, plugin_registry

SENTENCE = "Dracula is a novel by Bram Stoker, published in 1897."


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    return load_tokenizer(tiny_bert)


def mask_tokens(tokenizer, text, spans, max_length=64):
    (sentence,) = tokenise_sentences(tokenizer, [text], max_length)
    mask = token_mask(sentence.offsets, sentence.special_tokens, normalise_spans(text, spans))
    return [
        token for token, inside in zip(tokenizer.convert_ids_to_tokens(sentence.features["input_ids"]), mask) if inside
    ]


def span_of(text, words):
    start = text.index(words)
    return (start, start + len(words))


# -- offset mapping ---------------------------------------------------------------------------------------------------
def test_mask_holds_exactly_the_tokens_of_the_span_with_subword_splits(tokenizer):
    assert mask_tokens(tokenizer, SENTENCE, [span_of(SENTENCE, "Bram Stoker")]) == ["bram", "stoke", "##r"]
    # two spans, one of them ending on a punctuation token
    assert mask_tokens(tokenizer, SENTENCE, [span_of(SENTENCE, "Dracula"), span_of(SENTENCE, "1897.")]) == [
        "dracula",
        "1897",
        ".",
    ]


def test_punctuation_is_its_own_token_and_only_in_the_mask_when_covered(tokenizer):
    assert mask_tokens(tokenizer, SENTENCE, [span_of(SENTENCE, "Stoker")]) == ["stoke", "##r"]
    assert mask_tokens(tokenizer, SENTENCE, [span_of(SENTENCE, "Stoker,")]) == ["stoke", "##r", ","]


def test_a_span_cutting_a_word_keeps_the_pieces_it_touches(tokenizer):
    start = SENTENCE.index("Stoker")
    assert mask_tokens(tokenizer, SENTENCE, [(start, start + 3)]) == ["stoke"]
    assert mask_tokens(tokenizer, SENTENCE, [(start + 5, start + 6)]) == ["##r"]


def test_special_tokens_and_padding_are_never_in_the_mask(tokenizer):
    (sentence,) = tokenise_sentences(tokenizer, [SENTENCE], 64)
    mask = token_mask(sentence.offsets, sentence.special_tokens, [(0, len(SENTENCE))])
    tokens = tokenizer.convert_ids_to_tokens(sentence.features["input_ids"])
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert not mask[0] and not mask[-1] and mask[1:-1].all()
    # padding: offsets (0, 0) and special mark 1
    padded_offsets = np.vstack([sentence.offsets, [[0, 0], [0, 0]]])
    padded_special = np.concatenate([sentence.special_tokens, [1, 1]])
    assert not token_mask(padded_offsets, padded_special, [(0, len(SENTENCE))])[-2:].any()


def test_a_span_at_the_end_of_a_truncated_sentence_keeps_only_the_tokens_that_fit(tokenizer):
    # 8 tokens: [CLS] dracula is a novel by bram [SEP]; "Bram Stoker" loses "stoke ##r", "published" loses all.
    assert mask_tokens(tokenizer, SENTENCE, [span_of(SENTENCE, "Bram Stoker")], max_length=8) == ["bram"]
    assert mask_tokens(tokenizer, SENTENCE, [span_of(SENTENCE, "published")], max_length=8) == []


def test_a_proposition_truncated_away_is_the_zero_vector_with_a_warning(tiny_bert, caplog):
    model = build_subencoder(tiny_bert, max_seq_length=8)
    with caplog.at_level("WARNING"):
        vectors = model.encode_spans(
            [(SENTENCE, [span_of(SENTENCE, "published")]), (SENTENCE, [span_of(SENTENCE, "Dracula")])]
        )
    assert np.all(vectors[0] == 0) and np.any(vectors[1] != 0)
    assert "1 of 2 propositions have no token" in caplog.text


# -- span input errors and defined behaviours -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "spans,message",
    [
        ([(40, 99)], "outside the sentence"),
        ([(-1, 3)], "outside the sentence"),
        ([(5, 2)], "outside the sentence"),
        ([(3, 3)], "is empty"),
        ([], "at least one"),
        ([(1, "b")], "integer"),
        ("0-5", "list of"),
    ],
)
def test_bad_spans_are_errors_naming_the_item(tiny_bert, spans, message):
    model = build_subencoder(tiny_bert)
    with pytest.raises(SpanError, match=message) as raised:
        model.encode_spans([(SENTENCE, [(0, 7)]), (SENTENCE, spans)])
    assert "item 1" in str(raised.value) and "Dracula" in str(raised.value)
    assert isinstance(raised.value, harness.HarnessError)


def test_overlapping_and_unordered_spans_are_their_union(tiny_bert):
    assert normalise_spans(SENTENCE, [(22, 33), (0, 7), (5, 12), (12, 14)]) == [(0, 14), (22, 33)]
    model = build_subencoder(tiny_bert)
    vectors = model.encode_spans([(SENTENCE, [(22, 33), (0, 7), (5, 12)]), (SENTENCE, [(0, 12), (22, 33)])])
    np.testing.assert_allclose(vectors[0], vectors[1], rtol=1e-6, atol=1e-6)


def test_a_sentence_with_zero_propositions_costs_nothing(tiny_bert):
    model = build_subencoder(tiny_bert)
    calls = count_forwards(model)
    assert model.encode_spans([]).shape == (0, model.network.output_dim)
    assert calls == []


def test_an_empty_sentence_through_the_embedder_adapter_is_the_zero_vector(tiny_bert):
    embedder = harness.as_embedder(build_subencoder(tiny_bert))
    vectors = embedder.encode(["", SENTENCE])
    assert np.all(vectors[0] == 0) and np.any(vectors[1] != 0)


def test_subset_text_joins_the_proposition_words():
    assert subset_text(SENTENCE, [span_of(SENTENCE, "Stoker"), span_of(SENTENCE, "Dracula")]) == "Dracula Stoker"


# -- one forward pass per sentence ------------------------------------------------------------------------------------
def count_forwards(model):
    """Rows of every transformer call of ``model`` (a SubEncoder)."""
    calls: list[int] = []
    original = model.network.transformer.forward

    def counting(*args, **kwargs):
        calls.append(int(kwargs["input_ids"].shape[0]))
        return original(*args, **kwargs)

    model.network.transformer.forward = counting
    return calls


@pytest.mark.parametrize("propositions_per_sentence", [1, 3, 12])
def test_one_forward_row_per_sentence_however_many_propositions(tiny_bert, propositions_per_sentence):
    model = build_subencoder(tiny_bert)
    sentences = [SENTENCE, "The cat sat on the mat.", "Paris is the capital of France and its largest city."]
    items = []
    for sentence in sentences:
        for index in range(propositions_per_sentence):
            start = index % (len(sentence) - 3)
            items.append((sentence, [(start, start + 3)]))
    calls = count_forwards(model)
    vectors = model.encode_spans(items)
    assert vectors.shape == (len(items), model.network.output_dim)
    assert sum(calls) == len(sentences)


def test_a_proposition_encodes_the_same_alone_or_among_others(tiny_bert):
    model = build_subencoder(tiny_bert)
    items = [(SENTENCE, [(0, 7)]), ("A short one.", [(2, 7)]), (SENTENCE, [span_of(SENTENCE, "Bram Stoker")])]
    together = model.encode_spans(items)
    for index, item in enumerate(items):
        np.testing.assert_allclose(model.encode_spans([item])[0], together[index], rtol=1e-5, atol=1e-5)


def test_short_rows_run_apart_with_the_same_states_and_gradients(tiny_bert, tokenizer):
    model = build_subencoder(tiny_bert)
    transformer = model.network.transformer
    texts = [SENTENCE + " It tells of the count's move from Transylvania to England.", "A cat.", SENTENCE, "Go."]
    features = dict(tokenizer(texts, padding=True, return_tensors="pt").items())
    calls = count_forwards(model)
    trimmed = subencoder.trimmed_states(transformer, features)
    assert calls == [2, 2]  # the two short rows apart from the two long ones
    full = transformer(**features).last_hidden_state
    real = features["attention_mask"].bool()
    torch.testing.assert_close(trimmed[real], full[real], rtol=1e-4, atol=1e-5)
    short_width = int(features["attention_mask"][[1, 3]].sum(dim=1).max())
    assert trimmed[[1, 3], short_width:].abs().sum() == 0  # cut away: zeros, never in a proposition mask
    trimmed[real].sum().backward()
    assert transformer.embeddings.word_embeddings.weight.grad.abs().sum() > 0


def test_full_mask_attention_gives_one_row_per_proposition(tiny_bert):
    model = build_subencoder(tiny_bert)
    calls = count_forwards(model)
    items = [(SENTENCE, [(0, 7)]), (SENTENCE, [(8, 18)]), (SENTENCE, [(22, 33)])]
    encode_span_items(items, model.tokenizer, model.network.token_states, "cpu", 64, 64, attention="proposition")
    assert sum(calls) == 3


# -- SupCon -----------------------------------------------------------------------------------------------------------
def naive_supcon(vectors: np.ndarray, labels: list[int], temperature: float) -> float:
    """Paper eq. in 3.2 (Khosla et al. L^sup_out) with loops, averaged over anchors that have a positive."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    losses = []
    for i in range(len(unit)):
        positives = [p for p in range(len(unit)) if p != i and labels[p] == labels[i]]
        if not positives:
            continue
        denominator = sum(math.exp(unit[i] @ unit[a] / temperature) for a in range(len(unit)) if a != i)
        losses.append(
            -sum(math.log(math.exp(unit[i] @ unit[p] / temperature) / denominator) for p in positives) / len(positives)
        )
    return sum(losses) / len(losses)


@pytest.mark.parametrize("temperature", [0.01, 0.5])
def test_supcon_equals_a_naive_reference(temperature):
    generator = np.random.default_rng(0)
    vectors = generator.normal(size=(7, 5))
    labels = [0, 1, 0, 2, 1, 0, 3]  # a clique of three, a pair, two anchors without positives
    expected = naive_supcon(vectors, labels, temperature)
    actual = SupCon(temperature)(torch.tensor(vectors, dtype=torch.float64), torch.tensor(labels))
    assert float(actual) == pytest.approx(expected, rel=1e-6)


def test_positive_groups_close_cliques():
    for links in ([(0, 2), (2, 4)], [(4, 0), (2, 0)]):
        groups = subencoder.positive_groups(5, links)
        assert groups[0] == groups[2] == groups[4] and len({groups[1], groups[3], groups[0]}) == 3


def test_the_collated_batch_dedupes_sentences_and_propositions(tiny_bert, tokenizer):
    first, second, third = SENTENCE, "Bram Stoker wrote Dracula.", "Dracula appeared in 1897."
    pairs = [
        PropositionPair(first, second, (((0, 7), (22, 33)), ((46, 53),)), (((0, 11), (18, 25)),), ((0, 0),)),
        PropositionPair(first, third, (((22, 33), (0, 7)), ((46, 53),)), (((0, 7), (20, 24)),), ((1, 0),)),
    ]
    batch = subencoder.PropositionPairCollator(tokenizer, 64)(pairs)
    assert batch["features"]["input_ids"].shape[0] == 3  # the shared sentence is read once
    assert len(batch["labels"]) == 4  # its two propositions are one node each, whichever pair they came from
    labels = batch["labels"].tolist()
    assert labels[0] == labels[2] and labels[1] == labels[3] and labels[0] != labels[1]


# -- the model plugin -------------------------------------------------------------------------------------------------
def build_subencoder(backbone, max_seq_length=64, **options):
    registry = plugin_registry(subencoder)
    plugin = registry.model("subencoder")
    profile = harness.testing.smoke_profile(max_seq_length=max_seq_length)
    return plugin.factory(model_context(backbone, options, plugin=plugin, profile=profile))


def tiny_pairs() -> TrainingSplits:
    texts = [SENTENCE, "Bram Stoker wrote the novel Dracula.", "The cat sat on the mat.", "A cat was sitting on a mat."]
    pairs = PropositionPairs(
        [
            PropositionPair(texts[0], texts[1], (((0, 7), (22, 33)), ((35, 53),)), (((0, 18), (28, 35)),), ((0, 0),)),
            PropositionPair(texts[2], texts[3], (((0, 7),), ((8, 22),)), (((0, 5),), ((6, 27),)), ((0, 0), (1, 1))),
        ]
    )
    return TrainingSplits(source="tiny-propositions", train=pairs, checksum="tiny")


def test_output_dimension_is_an_option(tiny_bert):
    assert build_subencoder(tiny_bert, output_dim=64).encode_spans([(SENTENCE, [(0, 7)])]).shape == (1, 64)
    assert build_subencoder(tiny_bert).encode_spans([(SENTENCE, [(0, 7)])]).shape == (1, 32)  # tiny BERT width


@pytest.mark.parametrize(
    "options,message",
    [({"output_dim": -1}, "output_dim"), ({"temperature": 0.0}, "temperature"), ({"epochs": -2}, "epochs")],
)
def test_bad_options_are_refused(tiny_bert, options, message):
    with pytest.raises(harness.InvalidOptionError, match=message):
        build_subencoder(tiny_bert, **options)


def test_learning_rate_follows_the_paper():
    assert subencoder.learning_rate(0.0, "princeton-nlp/sup-simcse-bert-base-uncased") == 5e-5
    assert subencoder.learning_rate(0.0, "sentence-transformers/gtr-t5-base") == 1e-4
    assert subencoder.learning_rate(3e-5, "anything") == 3e-5


def test_subencoder_passes_the_model_contract_with_training_and_checkpoints(tiny_bert):
    registry = plugin_registry(subencoder)
    report = check_model(
        "subencoder",
        registry=registry,
        backbone=tiny_bert,
        training_data=tiny_pairs(),
        options={"output_dim": 16, "epochs": 2},
    )
    assert report.training_report["steps"] == 2
    assert "model.safetensors" in report.checkpoint_files


def test_training_pulls_linked_propositions_together(tiny_bert):
    model = build_subencoder(tiny_bert, output_dim=16, epochs=30, lr=1e-3)
    splits = tiny_pairs()
    pair = splits.train.pairs[0]
    items = [
        (pair.first, pair.first_propositions[0]),
        (pair.second, pair.second_propositions[0]),
        (pair.first, pair.first_propositions[1]),
    ]

    def margin():
        vectors = model.encode_spans(items)
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return float(unit[0] @ unit[1] - unit[0] @ unit[2])  # positive vs the same sentence's other proposition

    before = margin()
    ctx = model_context(
        tiny_bert,
        {"output_dim": 16, "epochs": 30, "lr": 1e-3, "temperature": 0.01, "batch_size": 0},
        profile=harness.testing.smoke_profile(max_steps=None),
    )
    report = model.fit(splits, ctx)
    assert report.loss_history[-1] < report.loss_history[0]
    assert margin() > before


# -- the paper's baselines: `be` as a span encoder (appendix C.1) ----------------------------------------------------
def build_be(backbone, **options):
    from harness.plugins import bi_encoder

    plugin = plugin_registry(bi_encoder).model("be")
    return plugin.factory(model_context(backbone, options, plugin=plugin))


ITEMS = [
    (SENTENCE, [span_of(SENTENCE, "Bram Stoker"), (0, 7)]),
    (SENTENCE, [span_of(SENTENCE, "1897")]),
    ("The cat sat on the mat.", [(4, 7)]),
]


def test_be_mask_pooling_is_the_mean_of_the_propositions_token_states(tiny_bert):
    model = build_be(tiny_bert)  # span_input=mask by default
    vectors = model.encode_spans(ITEMS)
    encoder = model.encoder.eval()
    features = encoder.tokenize([SENTENCE])
    with torch.no_grad():
        states = encoder.token_states(features)[0]
    (sentence,) = tokenise_sentences(encoder.tokenizer, [SENTENCE], encoder.max_length)
    mask = token_mask(sentence.offsets, sentence.special_tokens, normalise_spans(SENTENCE, ITEMS[0][1]))
    np.testing.assert_allclose(vectors[0], states[torch.from_numpy(mask)].mean(dim=0).numpy(), rtol=1e-5, atol=1e-6)


def test_be_token_subset_and_sentence_inputs(tiny_bert):
    subset = build_be(tiny_bert, span_input="subset")
    np.testing.assert_allclose(subset.encode_spans(ITEMS)[0], subset.encode(["Dracula Bram Stoker"])[0], rtol=1e-5)
    sentence = build_be(tiny_bert, span_input="sentence")
    vectors = sentence.encode_spans(ITEMS)
    np.testing.assert_allclose(vectors[0], vectors[1])
    np.testing.assert_allclose(vectors[0], sentence.encode([SENTENCE])[0], rtol=1e-5)


def test_be_full_mask_reads_each_proposition_separately(tiny_bert):
    model = build_be(tiny_bert, span_input="full-mask")
    calls: list[int] = []
    original = model.encoder.transformer.forward

    def counting(*args, **kwargs):
        calls.append(int(kwargs["input_ids"].shape[0]))
        return original(*args, **kwargs)

    model.encoder.transformer.forward = counting
    vectors = model.encode_spans(ITEMS)
    assert sum(calls) == 3 and vectors.shape[0] == 3
    assert not np.allclose(vectors[0], build_be(tiny_bert).encode_spans(ITEMS)[0])


def test_be_stays_a_native_embedder_and_checks_spans(tiny_bert):
    model = build_be(tiny_bert)
    assert harness.as_embedder(model) is model  # other tasks are untouched by the span capability
    with pytest.raises(SpanError, match="item 0"):
        build_be(tiny_bert, span_input="subset").encode_spans([(SENTENCE, [(0, 99)])])


def test_cuda_n_trains_on_that_gpu_and_torchrun_is_refused(tiny_bert, monkeypatch):
    """cuda:N is one GPU even when several are visible (it used to be refused); sharding its SupCon batch over
    torchrun processes would split a batch's propositions, so distributed training is refused in one line."""
    from harness import IncompatibleError

    model = build_subencoder(tiny_bert)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    configs = []
    monkeypatch.setattr(subencoder, "fit", lambda objective, examples, collate, config, *a, **k: configs.append(config))
    registry = plugin_registry(subencoder)
    ctx = model_context(tiny_bert, plugin=registry.model("subencoder"), device="cuda:1")
    model.fit(tiny_pairs(), ctx)
    assert configs[0].device == "cuda:1"
    monkeypatch.setattr(subencoder.distributed, "active", lambda: True)
    with pytest.raises(IncompatibleError, match="without torchrun"):
        model.fit(tiny_pairs(), ctx)
