"""Measured train/test overlap ("contamination"): which of a cell's test pairs and test sentences were in the data
its model trained on.

mteb lets a model *declare* its training data; here it is *measured*. The run stages record what every trained spec
was handed (its training source cut to the budget, the data its recipe fetched, the teachers it trained and the
pairs a recipe made and reported, e.g. silver pairs): the spec's *training provenance*. A task exposes the texts it
scores through :meth:`harness.Task.evaluated_texts`; the overlap of the two, after :func:`normalise`, is stored in
the cell's record (``contamination``), marked in every leaderboard format and printed by ``harness compare``.

Matching (:data:`NORMALISATION`, rule :data:`NORMALISATION_VERSION`): Unicode NFKC, case folded, and only letters
and digits kept, so punctuation, symbols and whitespace are ignored (SICK's "A man is playing a piano" is STS-B's
"a man is playing a piano .", a tokenised "do n't" is "don't"); a test pair is seen when the training data holds the
same two sentences in either order; a test sentence is seen when any training text (a pair's side or an unlabeled
sentence) equals it. Rule 1 (a measurement without ``normalisation_version``) kept punctuation and whitespace
(collapsed); ``harness contamination`` measures such records again. The pretraining data of a backbone is not known to
the harness and is not measured.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .options import Option

NORMALISATION = (
    "NFKC, case-folded, letters and digits only (punctuation, symbols and whitespace ignored); a pair matches in "
    "either order, a sentence matches any training text"
)
# The matching rule's version, recorded with every measurement (``normalisation_version``): 1 (absent) kept
# punctuation and whitespace; 2 ignores them. A measurement under an older rule is measured again.
NORMALISATION_VERSION = 2


# A task that scores pairs may offer this option: ``unseen=true`` scores only the test pairs the cell's model did
# not train on (its record says how many were dropped); the option is part of the cell's identity, so the subset's
# score never replaces the full set's.
UNSEEN_OPTION = Option(
    False,
    "score only the test pairs the model did not see in training (harness.contamination; "
    "the record says how many were dropped)",
    type=bool,
)


def normalise(text: str) -> str:
    """``text`` as matched (:data:`NORMALISATION`): NFKC, case-folded, its letters and digits only."""
    return "".join(
        character for character in unicodedata.normalize("NFKC", str(text)).casefold() if character.isalnum()
    )


def current_rule(measured: Any) -> bool:
    """Whether a record's ``contamination`` was measured under the current rule (:data:`NORMALISATION_VERSION`)."""
    return isinstance(measured, dict) and measured.get("normalisation_version", 1) == NORMALISATION_VERSION


def pair_key(first: str, second: str) -> tuple[str, str]:
    """A pair's normalised sentences in sorted order: the key under which either order matches."""
    a, b = normalise(first), normalise(second)
    return (a, b) if a <= b else (b, a)


@dataclass(frozen=True)
class EvaluatedTexts:
    """What a task scores, for the overlap measurement (``Task.evaluated_texts``): one pair per scored pair example,
    and the sentences it encodes (when empty: the pairs' sentences)."""

    pairs: tuple[tuple[str, str], ...] = ()
    sentences: tuple[str, ...] = ()

    def sentence_keys(self) -> set[str]:
        texts = self.sentences or tuple(text for pair in self.pairs for text in pair)
        return {normalise(text) for text in texts}


@dataclass
class TextSet:
    """The normalised texts a model trained on: pair keys and sentences."""

    pairs: set[tuple[str, str]] = field(default_factory=set)
    sentences: set[str] = field(default_factory=set)

    def add_pairs(self, pairs: Iterable[tuple[str, str]]) -> None:
        for first, second in pairs:
            self.pairs.add(pair_key(first, second))
            self.sentences.update((normalise(first), normalise(second)))

    def add_sentences(self, sentences: Iterable[str]) -> None:
        self.sentences.update(normalise(text) for text in sentences)

    def add(self, data: Any) -> bool:
        """Add a training data object's texts (:func:`data_texts`); False when its texts cannot be read."""
        texts = data_texts(data)
        if texts is None:
            return False
        pairs, sentences = texts
        self.add_pairs(pairs)
        self.add_sentences(sentences)
        return True

    def seen(self, first: str, second: str) -> bool:
        return pair_key(first, second) in self.pairs


def data_texts(data: Any) -> tuple[list[tuple[str, str]], list[str]] | None:
    """``(pairs, sentences)`` of a training data object: its own ``training_texts()`` when it has one, else pairs of
    ``first``/``second`` lists (scored pairs), ``pairs`` of objects with ``first``/``second`` (proposition pairs),
    or a ``sentences`` list (unlabeled or labeled sentences). None: its texts cannot be read."""
    own = getattr(data, "training_texts", None)
    if callable(own):
        pairs, sentences = own()
        return list(pairs), list(sentences)
    first, second = getattr(data, "first", None), getattr(data, "second", None)
    if isinstance(first, (list, tuple)) and isinstance(second, (list, tuple)):
        return list(zip(first, second)), []
    items = getattr(data, "pairs", None)
    if isinstance(items, (list, tuple)) and all(hasattr(item, "first") and hasattr(item, "second") for item in items):
        return [(item.first, item.second) for item in items], []
    sentences = getattr(data, "sentences", None)
    if isinstance(sentences, (list, tuple)):
        return [], list(sentences)
    return None


def pairs_record(data: Any) -> dict | None:
    """A made training set (e.g. silver pairs) as provenance: its texts inline (they exist only in the run)."""
    texts = data_texts(data)
    if texts is None:
        return None
    pairs, sentences = texts
    return {"pairs": [list(pair) for pair in pairs], "sentences": list(sentences)}


def measure(seen: TextSet, evaluated: EvaluatedTexts) -> dict[str, Any]:
    """The overlap of a cell's test texts with its training texts (the record's ``contamination`` counts)."""
    pairs = [pair_key(first, second) for first, second in evaluated.pairs]
    sentences = evaluated.sentence_keys()
    return {
        "test_pairs": len(pairs),
        "test_pairs_seen": sum(key in seen.pairs for key in pairs),
        "test_sentences": len(sentences),
        "test_sentences_seen": len(sentences & seen.sentences),
        "training_pairs": len(seen.pairs),
        "training_sentences": len(seen.sentences),
        "normalisation": NORMALISATION,
        "normalisation_version": NORMALISATION_VERSION,
    }


def unseen_indices(pairs: Sequence[tuple[str, str]], seen: TextSet | None) -> list[int]:
    """Indices of the pairs not seen in training (all of them when nothing was trained on)."""
    if seen is None:
        return list(range(len(pairs)))
    return [index for index, (first, second) in enumerate(pairs) if not seen.seen(first, second)]


def seen_shares(record: dict) -> tuple[float, float] | None:
    """(share of test pairs, share of test sentences) of a record seen in training; None when not measured."""
    measured = record.get("contamination")
    if not isinstance(measured, dict):
        return None
    pairs, sentences = measured.get("test_pairs") or 0, measured.get("test_sentences") or 0
    return (
        (measured.get("test_pairs_seen") or 0) / pairs if pairs else 0.0,
        (measured.get("test_sentences_seen") or 0) / sentences if sentences else 0.0,
    )


def percent(share: float) -> str:
    """``32%``; ``<1%`` for a share that is seen but rounds to 0%."""
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


def seen_text(record: dict) -> str | None:
    """ "32% of test pairs seen in training" (or of test sentences when no pair was seen); None when nothing was seen
    or the overlap was not measured."""
    shares = seen_shares(record)
    if shares is None or not any(shares):
        return None
    pairs, sentences = shares
    share, unit = (pairs, "pairs") if pairs else (sentences, "sentences")
    return f"{percent(share)} of test {unit} seen in training"
