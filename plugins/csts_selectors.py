"""Condition-to-span selectors for C-STS: which words of a sentence express a condition.

Sub-Sentence Encoder (Chen et al. 2023, arXiv 2311.04335), section 4.2.2, asks an LLM for the words that best
correspond to the condition. This module declares the component kind ``span-selector`` (the hook) and registers
two selectors usable offline, ``lexical`` (the ``csts`` task's default) and ``embedding``. How each selects and how
they differ from the paper's LLM: docs/tasks/csts.md, section "C-STS", subsection "Span selectors".
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from harness import Component, ComponentKind, as_embedder, hookimpl

logger = logging.getLogger(__name__)

KIND = "span-selector"
Span = tuple[int, int]
WORD = re.compile(r"\w+(?:['’-]\w+)*", re.UNICODE)
STOPWORDS = frozenset(
    "a an the of in on at to for with by from about as and or but not no is are was were be been being am do does "
    "did has have had this that these those it its their his her they them he she we you i me my your our there "
    "what which who whom whose how when where why any some each every all both either neither other such than then "
    "so very can could will would shall should may might must into onto over under between through during".split()
)
PREFIX_NEAR = 5  # a shared prefix this long makes two words near in spelling (e.g. "colour" / "colours")
RATIO_NEAR = 0.85
EMBEDDING_MARGIN = 0.05
EMBEDDING_MAX_WORDS = 3


@runtime_checkable
class SpanSelector(Protocol):
    """What a ``span-selector`` component must offer."""

    def select(self, sentences: Sequence[str], conditions: Sequence[str], ctx: Any) -> list[list[Span]]:
        """Per (sentence, condition) pair: character spans of the words of the sentence that express the
        condition; an empty list when none do."""


def words(text: str) -> list[tuple[str, Span]]:
    """The words of ``text`` with their character spans."""
    return [(match.group(), match.span()) for match in WORD.finditer(text)]


def normalise(word: str) -> str:
    """Lower case without a possessive and without the commonest inflection endings (a tiny stemmer)."""
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    for ending, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)] + replacement
    return word


def content_words(text: str) -> list[tuple[str, Span]]:
    return [(word, span) for word, span in words(text) if word.lower() not in STOPWORDS]


def near(first: str, second: str) -> bool:
    first, second = first.lower(), second.lower()
    if min(len(first), len(second)) >= PREFIX_NEAR and first[:PREFIX_NEAR] == second[:PREFIX_NEAR]:
        return True
    return min(len(first), len(second)) >= 4 and difflib.SequenceMatcher(None, first, second).ratio() >= RATIO_NEAR


class LexicalSelector:
    """Words of the sentence matching or near a content word of the condition."""

    def select(self, sentences: Sequence[str], conditions: Sequence[str], ctx: Any = None) -> list[list[Span]]:
        selections = []
        for sentence, condition in zip(sentences, conditions):
            targets = [(word, normalise(word)) for word, _ in content_words(condition)]
            selections.append(
                [
                    span
                    for word, span in content_words(sentence)
                    if any(normalise(word) == stem or near(word, target) for target, stem in targets)
                ]
            )
        return selections


class EmbeddingSelector:
    """Content words of the sentence whose embedding is nearest the condition's (cosine within ``margin`` of the
    best word, at most ``max_words``), embedded by the model of ``embedder_spec``."""

    def __init__(
        self, embedder_spec: str = "be", margin: float = EMBEDDING_MARGIN, max_words: int = EMBEDDING_MAX_WORDS
    ):
        self.embedder_spec = embedder_spec
        self.margin = margin
        self.max_words = max_words

    def select(self, sentences: Sequence[str], conditions: Sequence[str], ctx: Any) -> list[list[Span]]:
        embedder = as_embedder(ctx.embedder(self.embedder_spec))
        candidates = [content_words(sentence) for sentence in sentences]
        texts = list(dict.fromkeys([*conditions, *(word for found in candidates for word, _ in found)]))
        vectors = np.asarray(embedder.encode(texts), dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        row_of = {text: row for row, text in enumerate(texts)}
        selections = []
        for found, condition in zip(candidates, conditions):
            if not found:
                selections.append([])
                continue
            similarity = unit[[row_of[word] for word, _ in found]] @ unit[row_of[condition]]
            order = np.argsort(-similarity, kind="stable")[: self.max_words]
            kept = [index for index in order if similarity[index] >= similarity[order[0]] - self.margin]
            selections.append(sorted(found[index][1] for index in kept))
        return selections


class WordListSelector:
    """Adapts ``answer(sentence, condition) -> list of words`` (e.g. an LLM's reply) to a span selector: each
    answered word is located in the sentence (case-insensitively, as a whole word; every occurrence)."""

    def __init__(self, answer: Callable[[str, str], Sequence[str]]):
        self.answer = answer

    def select(self, sentences: Sequence[str], conditions: Sequence[str], ctx: Any = None) -> list[list[Span]]:
        selections = []
        for sentence, condition in zip(sentences, conditions):
            wanted = {word.lower() for word in self.answer(sentence, condition)}
            selections.append([span for word, span in words(sentence) if word.lower() in wanted])
        return selections


@hookimpl
def register_components(register):
    register(
        ComponentKind(
            KIND,
            SpanSelector,
            "select(sentences, conditions, ctx) -> character spans per sentence "
            "of the words expressing the condition (csts)",
        )
    )
    register(
        Component(
            KIND, "lexical", LexicalSelector(), "words of the sentence matching or near a content word of the condition"
        )
    )
    register(
        Component(
            KIND,
            "embedding",
            EmbeddingSelector(),
            "content words nearest the condition by cosine of the pretrained `be` embeddings",
        )
    )
