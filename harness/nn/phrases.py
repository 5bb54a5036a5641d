"""Key phrases of a sentence by RAKE, and a copy of the sentence with chosen phrases masked (PaSeR, section 3.1).

RAKE (Rose et al. 2010), as the reference library rake-nltk 1.0.6 computes it (``Rake`` with the default metric
``DEGREE_TO_FREQUENCY_RATIO``, repeated phrases included, the whole text as one sentence):

- words: the text split by NLTK's ``wordpunct_tokenize`` rule (runs of word characters, or runs of other
  non-space characters), lower-cased;
- candidate phrases: maximal runs of words that are neither a stopword nor a punctuation mark (a single character of
  ``string.punctuation``; a run such as ``?!`` is neither, as in the library);
- word score deg(w) / freq(w): freq counts the word's occurrences in the candidate phrases, deg sums the lengths of
  the phrases it occurs in (the row sum of the co-occurrence matrix);
- phrase score: the sum of its words' scores; phrases ranked by (score, phrase text) descending, as the library's
  ``rank_list.sort(reverse=True)``; occurrences of the same phrase keep their text order.

:func:`rake_phrases` returns every occurrence with its character span, so a tokenizer's offset mapping can mask
exactly its tokens (:func:`masked_copy`). tests/test_paser.py checks phrases and scores against rake-nltk on the same
stopwords and tokenizers. No NLTK data is needed (rake-nltk itself would load NLTK's stopword corpus and Punkt
sentence splitter when not given a stopword list and a sentence tokenizer).

Stopwords: scikit-learn's English list (``ENGLISH_STOP_WORDS``, 318 words, shipped with scikit-learn) by default; the
PaSeR code uses rake-nltk's default, NLTK's English stopword corpus (179 words), which needs a data download.
"""
from __future__ import annotations

import re
import string
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

WORD_PATTERN = re.compile(r"\w+|[^\w\s]+")  # nltk.tokenize.WordPunctTokenizer's pattern
PUNCTUATION = frozenset(string.punctuation)


def english_stopwords() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


@dataclass(frozen=True)
class Phrase:
    text: str  # lower-cased words joined by one space (rake-nltk's phrase string)
    score: float  # sum of deg(w) / freq(w) over its words
    start: int  # character span in the original text
    end: int
    word_spans: tuple[tuple[int, int], ...]


def words_with_spans(text: str) -> list[tuple[str, int, int]]:
    return [(match.group(0), match.start(), match.end()) for match in WORD_PATTERN.finditer(text)]


def rake_phrases(text: str, stopwords: Iterable[str] | None = None,
                 punctuation: Iterable[str] = PUNCTUATION) -> list[Phrase]:
    """Every candidate phrase occurrence of ``text``, best first (RAKE; ties as rake-nltk sorts them)."""
    ignored = set(english_stopwords() if stopwords is None else stopwords) | set(punctuation)
    occurrences: list[list[tuple[str, int, int]]] = []
    current: list[tuple[str, int, int]] = []
    for word, start, end in words_with_spans(text):
        lowered = word.lower()
        if lowered in ignored:
            if current:
                occurrences.append(current)
            current = []
        else:
            current.append((lowered, start, end))
    if current:
        occurrences.append(current)
    frequency: dict[str, int] = {}
    degree: dict[str, int] = {}
    for phrase in occurrences:
        for word, _, _ in phrase:
            frequency[word] = frequency.get(word, 0) + 1
            degree[word] = degree.get(word, 0) + len(phrase)
    phrases = []
    for phrase in occurrences:
        score = 0.0
        for word, _, _ in phrase:
            score += 1.0 * degree[word] / frequency[word]
        spans = tuple((start, end) for _, start, end in phrase)
        phrases.append(Phrase(" ".join(w for w, _, _ in phrase), score, spans[0][0], spans[-1][1], spans))
    # Python's sort is stable under reverse=True: equal (score, text) keep their text order.
    return sorted(phrases, key=lambda p: (p.score, p.text), reverse=True)


@dataclass
class MaskedCopy:
    input_ids: list[int]  # the sentence's token ids with the chosen phrases' tokens replaced by the mask token
    masked_positions: list[int]  # token positions that were masked
    phrases: list[Phrase]  # the chosen phrases, best first
    covers_sentence: bool  # every non-special token is masked


def masked_copy(text: str, phrases: Sequence[Phrase], tokenizer, max_length: int,
                mask_token_id: int) -> MaskedCopy:
    """``text`` tokenised (truncated to ``max_length``) with every token whose characters overlap a word of
    ``phrases`` replaced by ``mask_token_id``; special tokens (empty offsets) are never masked."""
    encoded = tokenizer(text, truncation=True, max_length=max_length, return_offsets_mapping=True,
                        return_special_tokens_mask=True)
    spans = [span for phrase in phrases for span in phrase.word_spans]
    ids = list(encoded["input_ids"])
    masked = []
    content = 0
    for position, ((start, end), special) in enumerate(zip(encoded["offset_mapping"],
                                                           encoded["special_tokens_mask"])):
        if special or start == end:
            continue
        content += 1
        if any(start < span_end and span_start < end for span_start, span_end in spans):
            ids[position] = mask_token_id
            masked.append(position)
    return MaskedCopy(ids, masked, list(phrases), covers_sentence=bool(masked) and len(masked) == content)


def pad_ids(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``[b, longest]`` ids and their attention mask."""
    longest = max((len(row) for row in rows), default=0)
    ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[index, : len(row)] = 1
    return ids, mask
