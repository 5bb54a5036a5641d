"""PaSeR and its RAKE (plugins/paser.py): phrases and scores equal rake-nltk's on the same
stopwords, the masked copy masks exactly the chosen phrase tokens, the edge cases, the loss, bad options."""

from __future__ import annotations

import lzma
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from harness import InvalidOptionError, TrainingSplits, UnlabeledSentences
from harness.matrix import ModelEntry
from harness.nn import SentenceEncoder, wordnet
from harness.nn.objectives import CLEAN, ObjectiveSetup, ObjectiveSum, TrainingStep
from harness.plugin_api import ModelContext
from harness.plugins.paser import (
    PhraseMasking,
    PhraseReconstruction,
    english_stopwords,
    masked_copy,
    rake_phrases,
    replace_synonyms,
)
from harness.profiles import get_profile
from harness.run.config import RunConfig
from harness.run.driver import Run

TEXT = (
    "Compatibility of systems of linear constraints over the set of natural numbers. Criteria of compatibility "
    "of a system of linear Diophantine equations, strict inequations, and nonstrict inequations are considered. "
    "Upper bounds for components of a minimal set of solutions?! and algorithms of construction of minimal "
    "generating sets of solutions for all types of systems are given; minimal sets -- again: minimal sets."
)
OPTIONS = {
    "top_k": 1,
    "signal": "paper",
    "signal_m": 10.0,
    "signal_n": 10.0,
    "decoder_layers": 6,
    "synonyms": 0.0,
    "synonym_views": "both",
}


@pytest.mark.parametrize("stopwords", ["sklearn", "small"])
def test_rake_equals_rake_nltk(stopwords):
    rake_nltk = pytest.importorskip("rake_nltk")
    from nltk.tokenize import wordpunct_tokenize

    words = english_stopwords() if stopwords == "sklearn" else frozenset({"of", "the", "a", "and", "are", "for"})
    reference = rake_nltk.Rake(
        stopwords=set(words), sentence_tokenizer=lambda text: [text], word_tokenizer=wordpunct_tokenize
    )
    for text in (TEXT, "Red apples, are good in flavour.", "the of a", "Machine learning"):
        reference.extract_keywords_from_text(text)
        ours = rake_phrases(text, words)
        assert [(p.score, p.text) for p in ours] == reference.get_ranked_phrases_with_scores()
        for phrase in ours:  # spans point at the phrase's words in the original text
            assert " ".join(text[a:b].lower() for a, b in phrase.word_spans) == phrase.text


@pytest.fixture(scope="module")
def encoder(tiny_bert):
    torch.manual_seed(0)
    return SentenceEncoder.from_backbone(tiny_bert, "cls", 64)


def test_masked_copy_masks_exactly_the_chosen_phrase_tokens(encoder):
    tokenizer = encoder.tokenizer
    sentence = "A man is playing a wooden guitar on the big stage tonight."
    phrases = rake_phrases(sentence)
    chosen = phrases[:2]
    copy = masked_copy(sentence, chosen, tokenizer, 64, tokenizer.mask_token_id)
    encoded = tokenizer(sentence, return_offsets_mapping=True)
    expected = [
        i
        for i, (a, b) in enumerate(encoded["offset_mapping"])
        if a < b and any(a < end and start < b for p in chosen for start, end in p.word_spans)
    ]
    assert copy.masked_positions == expected and expected
    assert [i for i, t in enumerate(copy.input_ids) if t == tokenizer.mask_token_id] == expected
    unmasked = [i for i in range(len(copy.input_ids)) if i not in expected]
    assert [copy.input_ids[i] for i in unmasked] == [encoded["input_ids"][i] for i in unmasked]
    masked_text = tokenizer.decode([encoded["input_ids"][i] for i in expected])
    assert masked_text.split() == " ".join(p.text for p in sorted(chosen, key=lambda p: p.start)).split()
    assert not copy.covers_sentence


def test_edge_cases_whole_sentence_and_no_phrase(encoder):
    setup = ObjectiveSetup(encoder, "", {**OPTIONS, "top_k": 5}, seed=0)
    batch = PhraseMasking(setup)(["machine learning", "it is what it is .", "a cat sat on the mat ."])["paser"]
    mask_id = encoder.tokenizer.mask_token_id
    whole = batch["masked_ids"][0][batch["masked_mask"][0].bool()]
    assert (whole[1:-1] == mask_id).all() and whole[0] != mask_id and whole[-1] != mask_id
    assert batch["covers"].tolist() == [True, False, False]
    assert batch["has_phrase"].tolist() == [True, False, True]
    assert tokenizer_text(encoder, batch["target_ids"][0]) == "machine learning"
    no_phrase = batch["masked_ids"][1][batch["masked_mask"][1].bool()]
    assert no_phrase.tolist() == encoder.tokenizer("it is what it is .")["input_ids"]  # unmasked copy


def tokenizer_text(encoder, ids) -> str:
    return encoder.tokenizer.decode(ids, skip_special_tokens=True)


def test_loss_trains_the_encoder_and_skips_sentences_without_phrase(encoder, tiny_bert):
    torch.manual_seed(0)
    setup = ObjectiveSetup(encoder, tiny_bert, {**OPTIONS, "signal": "public"}, seed=0)
    term = PhraseReconstruction(setup)
    module = ObjectiveSum(encoder, [("paser", term, 1.0)])
    sentences = ["a man is playing a guitar .", "it is what it is ."]
    batch = {CLEAN: dict(encoder.tokenize(sentences)), **PhraseMasking(setup)(sentences)}
    module.train()
    loss = module(**batch)
    loss.backward()
    assert term.last_terms["mlm"] > 0 and term.last_terms["generation"] > 0
    assert encoder.transformer.encoder.layer[1].attention.self.query.weight.grad.abs().sum() > 0
    decoder_embeddings = term.decoder.language_model.get_input_embeddings().weight
    assert decoder_embeddings is encoder.transformer.get_input_embeddings().weight  # shared word embeddings
    assert term.decoder.language_model.config.num_hidden_layers == 2  # min(6, the tiny backbone's depth)
    memory = term.decoding_signal(torch.ones(1, 32), torch.full((1, 32), 3.0))
    projected = term.projection(torch.full((1, 32), 3.0))
    torch.testing.assert_close(memory[0, 1:], torch.cat([projected, 10 * (1 - projected), 10 * projected]))
    only_stopwords = {CLEAN: dict(encoder.tokenize(["it is ."])), **PhraseMasking(setup)(["it is ."])}
    module(**only_stopwords)
    assert term.last_terms["generation"] == 0.0


def test_paper_signal_is_equation_2():
    term = PhraseReconstruction.__new__(PhraseReconstruction)
    nn_init = torch.nn.Module.__init__
    nn_init(term)
    term.projection, term.scale_difference, term.scale_product = None, 10.0, 10.0
    sentence, masked = torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 0.5]])
    expected = torch.tensor([[[1.0, -2.0], [3.0, 0.5], [20.0, 25.0], [30.0, 10.0]]])
    torch.testing.assert_close(term.decoding_signal(sentence, masked), expected)


def test_wordnet_reader_finds_base_forms(tiny_wordnet):
    synonyms, folder = wordnet.wordnet_synonyms()
    assert folder == tiny_wordnet
    # As NLTK's synsets(): the base form is a synonym of an inflected word; only the word itself is left out.
    assert synonyms("guitars") == ["guitar", "lute"]  # noun rule s -> ""
    assert synonyms("playing") == ["play", "strum"]  # verb rule ing -> ""
    assert synonyms("ran") == ["run", "sprint"]  # verb.exc
    assert synonyms("Man") == ["adult male"] and synonyms("mat") == []


def test_bundled_wordnet_needs_no_system_package(monkeypatch):
    """The default reads the WordNet synsets shipped in harness/nn/data; no system folder is ever opened."""
    monkeypatch.delenv(wordnet.ENVIRONMENT_VARIABLE, raising=False)
    wordnet._wordnet.cache_clear()
    real_open = open

    def guarded_open(path, *args, **kwargs):
        assert "/usr/share/wordnet" not in str(path) and "nltk_data" not in str(path), path
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", guarded_open)
    synonyms, source = wordnet.wordnet_synonyms()
    assert source == wordnet.BUNDLED and source.is_relative_to(Path(wordnet.__file__).parent)
    assert synonyms("guitars") == ["guitar"] and {"play", "act"} <= set(synonyms("playing"))
    assert "run" in synonyms("ran") and "happy" in synonyms("happier")  # verb.exc, adj.exc
    assert "WordNet 3.0 Copyright 2006 by Princeton University" in lzma.decompress(source.read_bytes())[:4000].decode()


def test_synonym_replacement_reaches_both_views(encoder, tiny_bert, tiny_wordnet, registry):
    """3.1.3: synonym replacement on both s and s~: the clean view E_s reads the replaced sentence, and s~ is its
    masked copy; synonym_views=masked keeps the earlier behaviour (s unchanged)."""
    options = {key: option.default for key, option in registry.model("paser").options.items()} | {"synonyms": 0.5}
    sentences = ["a man is playing a guitar .", "the cat sits on the red mat ."]
    setup = ObjectiveSetup(encoder, tiny_bert, options, 0)
    entry = PhraseMasking(setup)(sentences)["paser"]
    replaced = encoder.tokenizer.batch_decode(entry["clean_ids"], skip_special_tokens=True)
    originals = encoder.tokenizer.batch_decode(encoder.tokenizer(sentences)["input_ids"], skip_special_tokens=True)
    assert replaced != originals  # "man" / "playing" / "guitar" / "cat" / "sits" have tiny-WordNet synonyms
    for clean, masked in zip(entry["clean_ids"], entry["masked_ids"]):  # s~ = s with the phrase masked, token-wise
        kept = masked != encoder.tokenizer.mask_token_id
        width = min(len(clean), len(masked))
        assert torch.equal(clean[:width][kept[:width]], masked[:width][kept[:width]])
    term = PhraseReconstruction(setup)
    seen = []

    def spy(features):
        seen.append(features["input_ids"])
        return encoder(features)

    batch = {CLEAN: encoder.tokenizer(sentences, padding=True, return_tensors="pt"), "paser": entry}
    term(TrainingStep(spy, batch))
    assert any(torch.equal(ids, entry["clean_ids"]) for ids in seen)  # E_s from the replaced s
    assert not any(torch.equal(ids, batch[CLEAN]["input_ids"]) for ids in seen)
    masked_only = PhraseMasking(ObjectiveSetup(encoder, tiny_bert, options | {"synonym_views": "masked"}, 0))
    assert "clean_ids" not in masked_only(sentences)["paser"]


def test_synonym_replacement_and_missing_wordnet(monkeypatch, tmp_path):
    table = {"guitar": ["lute"], "playing": ["strumming"], "man": []}
    replaced = replace_synonyms(
        "a man is playing a guitar .", 0.5, lambda w: table.get(w, []), english_stopwords(), random.Random(0)
    )
    assert replaced in {"a man is strumming a lute .", "a man is playing a lute .", "a man is strumming a guitar ."}
    assert replaced != "a man is playing a guitar ."
    monkeypatch.setenv(wordnet.ENVIRONMENT_VARIABLE, str(tmp_path))  # no WordNet files there
    from harness.plugins.paser import check_options

    with pytest.raises(InvalidOptionError, match="unset it to use the bundled data"):
        check_options({**OPTIONS, "synonyms": 0.1}, "model 'paser'")
    check_options(OPTIONS, "model 'paser'")  # synonyms=0 needs no WordNet
    with pytest.raises(InvalidOptionError, match="synonyms=0 turns it off"):
        check_options({**OPTIONS, "synonym_views": "masked"}, "model 'paser'")


def test_training_end_to_end_and_bad_options(tiny_bert, registry, tmp_path, tiny_wordnet):
    plugin = registry.model("paser")
    assert plugin.options["top_k"].default == 5 and plugin.options["synonyms"].default == 0.1  # table 1's setting
    options = {key: option.default for key, option in plugin.options.items()} | {"top_k": 2}
    ctx = ModelContext(
        options=options,
        backbone=tiny_bert,
        profile=get_profile("smoke"),
        device="cpu",
        seed=3,
        progress=False,
        component=registry.component,
        artifact_dir=tmp_path,
        cache_dir=tmp_path,
        train_on="test",
    )
    model = plugin.factory(ctx)
    sentences = ["a man is playing a guitar .", "machine learning", "it is .", "the cat sits on the red mat ."]
    before = model.encode(sentences)
    report = model.fit(TrainingSplits("test", UnlabeledSentences(sentences)), ctx)
    assert report["objectives"] == ["paser"] and report["setup"] == "paser-4.2" and report["steps"] > 0
    # One of the four sentences has no phrase ("it is ."), one is masked whole ("machine learning").
    counts = report["counts"]["paser"]
    assert counts["examples"] >= 4 and counts["examples"] % 4 == 0
    assert counts["without_phrase"] * 4 == counts["examples"] == counts["fully_masked"] * 4
    assert not np.allclose(before, model.encode(sentences))

    def plan(spec):
        config = RunConfig(
            models=[ModelEntry(spec)],
            tasks=["stsb"],
            train_on="stsb",
            profile="smoke",
            results_dir=tmp_path / "results",
            progress=False,
        )
        return Run(registry, config, log=lambda _: None).plan()

    with pytest.raises(InvalidOptionError, match="top_k must be at least 1"):
        plan("paser:top_k=0")
    with pytest.raises(InvalidOptionError, match="signal"):
        plan("paser:signal=concat")
    with pytest.raises(InvalidOptionError, match="needs its own options"):
        plan("simcse:aux=paser")
