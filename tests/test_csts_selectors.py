"""The C-STS span selectors (plugins/csts_selectors.py) on their own: word spans, spelling nearness, the word-list
adapter for LLM answers, and the embedding selector's margin and word cap (tests/test_csts.py runs them in the
task)."""

from __future__ import annotations

import numpy as np

import harness.testing as ht
from harness.plugins.csts_selectors import (
    EmbeddingSelector,
    LexicalSelector,
    SpanSelector,
    WordListSelector,
    content_words,
    near,
    words,
)


def test_words_keep_apostrophes_and_hyphens_and_their_spans():
    text = "It's a well-known café, isn't it?"
    found = words(text)
    assert [word for word, _ in found] == ["It's", "a", "well-known", "café", "isn't", "it"]
    assert all(text[start:end] == word for word, (start, end) in found)
    assert [word for word, _ in content_words("The dog and the cat")] == ["dog", "cat"]


def test_near_needs_a_shared_prefix_or_a_close_spelling_of_long_enough_words():
    assert near("colour", "colourful") and near("Organise", "organize")
    assert not near("cat", "cut")  # short words must match exactly (through normalise), not nearly


def test_word_list_selector_finds_every_whole_word_occurrence_case_insensitively():
    selector = WordListSelector(lambda sentence, condition: ["Dog"])
    sentence = "A dog chases another dog past the doghouse."
    (spans,) = selector.select([sentence], ["the animal"])
    assert [sentence[a:b] for a, b in spans] == ["dog", "dog"]  # not the "dog" inside "doghouse"
    assert isinstance(selector, SpanSelector) and isinstance(LexicalSelector(), SpanSelector)


class _Context:
    def __init__(self, embedder):
        self.embedder = lambda spec: embedder


def test_embedding_selector_keeps_at_most_max_words_within_the_margin():
    sentence = "guitar guitars piano violin drums"
    embedder = ht.HashingEmbedder()
    wide = EmbeddingSelector(margin=10.0, max_words=2).select([sentence], ["guitar"], _Context(embedder))
    assert len(wide[0]) == 2 and [sentence[a:b] for a, b in wide[0]][0] in sentence.split()
    # A zero margin keeps only the best word (here the condition itself: cosine 1).
    (best,) = EmbeddingSelector(margin=0.0).select([sentence], ["guitar"], _Context(embedder))
    assert [sentence[a:b] for a, b in best] == ["guitar"]
    # A sentence of stopwords has no candidate words.
    assert EmbeddingSelector().select(["it is what it is"], ["guitar"], _Context(embedder)) == [[]]
    assert np.all([a < b for a, b in wide[0]])
