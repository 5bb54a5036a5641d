"""Input noise for denoising and noise-matching objectives: word deletion.

TSDAE (Wang et al. 2021, section 3 "deletion ... with a ratio of 0.6"; thesis 2.4.6, 5.4.1) and Noise Matching
(thesis 4.2.3: the positive of x is T(x), "60% deletion"). sentence-transformers counterpart:
``DenoisingAutoEncoderDataset.delete``: the text is split into words with NLTK's Treebank word tokenizer, every word
is kept with probability 1 - ratio (``rng.random(n) > ratio``), one word chosen uniformly is kept if none was, and the
kept words are joined again with NLTK's Treebank detokenizer. :func:`delete_words` draws exactly the same numbers in
the same order, so with a ``numpy.random.RandomState`` seeded like sentence-transformers' global ``np.random`` it
returns the same text (tests/test_unsupervised.py checks it).

Empty input: a text without any word (empty or blank) is returned unchanged, as sentence-transformers does; the
objectives drop such sentences before training (:func:`harness.nn.objectives.usable_sentences`), so it only reaches
this function when called directly. A non-empty text always keeps at least one word, so deletion never empties it.

Deviations: ``word_tokenize`` first splits a text into sentences with NLTK's Punkt model, which needs a data download
(``nltk.download("punkt_tab")``) that is not possible offline; here the whole text is tokenised as one line
(``word_tokenize(text, preserve_line=True)``). The words differ only where a text holds several sentences: a period
inside such a text stays attached to its word ("end." instead of "end", "."), one word fewer to draw for.
"""

from __future__ import annotations

import functools
from typing import Protocol

import numpy as np

from harness.errors import InvalidOptionError

DELETION_RATIO = 0.6  # TSDAE's best ratio (Wang et al. 2021, table 6), the thesis' T(x)


class RandomSource(Protocol):
    """What deletion draws from: ``numpy.random.Generator`` or ``numpy.random.RandomState`` both fit."""

    def random(self, size: int) -> np.ndarray: ...

    def choice(self, a: int) -> int: ...


def check_deletion_ratio(ratio: float, owner: str = "deletion") -> float:
    """``ratio`` if it lies strictly between 0 and 1; an InvalidOptionError naming the allowed range otherwise (0
    would leave every sentence whole, 1 would delete all but one word of every sentence)."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0.0 < float(ratio) < 1.0:
        raise InvalidOptionError(
            f"{owner}: the deletion ratio must lie in the open interval (0, 1), e.g. 0.6 (TSDAE); got {ratio!r}."
        )
    return float(ratio)


@functools.lru_cache(maxsize=1)
def _treebank() -> tuple[object, object]:
    """NLTK's word tokenizer (the one ``word_tokenize`` applies per sentence) and detokenizer, built once."""
    from nltk.tokenize import NLTKWordTokenizer
    from nltk.tokenize.treebank import TreebankWordDetokenizer

    return NLTKWordTokenizer(), TreebankWordDetokenizer()


def split_words(text: str) -> list[str]:
    """The words :func:`delete_words` draws from (NLTK's Treebank tokenisation of the text as one line)."""
    tokenizer, _ = _treebank()
    return tokenizer.tokenize(text)


def delete_words(text: str, ratio: float, rng: RandomSource) -> str:
    """``text`` with each word deleted with probability ``ratio``; at least one word is always kept."""
    tokenizer, detokenizer = _treebank()
    words = tokenizer.tokenize(text)
    if not words:
        return text
    keep = rng.random(len(words)) > ratio
    if not keep.any():
        keep[rng.choice(len(words))] = True  # never an empty sentence
    return detokenizer.detokenize([word for word, kept in zip(words, keep) if kept])


class WordDeletion:
    """Seeded word deletion: ``noise(text)`` draws from its own generator, so a training run is reproducible and
    touches no global random state."""

    def __init__(self, ratio: float = DELETION_RATIO, seed: int = 0):
        self.ratio = check_deletion_ratio(ratio)
        self.rng = np.random.default_rng(seed)

    def __call__(self, text: str) -> str:
        return delete_words(text, self.ratio, self.rng)
