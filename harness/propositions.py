"""The ``proposition_pairs`` training kind: sentence pairs whose propositions are character spans, with the links
between propositions of the two sentences that express the same meaning.

Sub-Sentence Encoder (Chen et al. 2023, arXiv 2311.04335), section 3.3 and the official training file format
(``sent1``, ``sent2``, ``sent1_props_spans``, ``sent2_props_spans``, ``positive_pairs``): a task offers these for
``--train-on``; a span encoder learns from them with a supervised contrastive loss in which linked propositions are
positives and every other proposition of the batch (those of the same sentence included) is a negative.

Deviations: none (the official format also carries each proposition's text, which no model reads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .data import PROPOSITION_PAIRS

Span = tuple[int, int]
Proposition = tuple[Span, ...]  # one proposition: its character spans over the sentence


@dataclass(frozen=True)
class PropositionPair:
    """Two sentences, each with its propositions, and the positive links ``(i, j)``: proposition ``i`` of ``first``
    and proposition ``j`` of ``second`` mean the same thing."""

    first: str
    second: str
    first_propositions: tuple[Proposition, ...]
    second_propositions: tuple[Proposition, ...]
    positives: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        for i, j in self.positives:
            if not (0 <= i < len(self.first_propositions) and 0 <= j < len(self.second_propositions)):
                raise ValueError(
                    f"positive link ({i}, {j}) names a proposition the pair does not have "
                    f"({len(self.first_propositions)} and {len(self.second_propositions)} propositions)"
                )


@dataclass
class PropositionPairs:
    """What a task offers as ``proposition_pairs`` training data."""

    pairs: list[PropositionPair]
    kind = PROPOSITION_PAIRS

    def __len__(self) -> int:
        return len(self.pairs)

    def subset(self, indices: Sequence[int]) -> PropositionPairs:
        return PropositionPairs([self.pairs[i] for i in indices])

    def sentences(self) -> list[str]:
        """Distinct sentences in order of first appearance."""
        return list(dict.fromkeys(text for pair in self.pairs for text in (pair.first, pair.second)))

    def counts(self) -> dict[str, int]:
        """Pairs, distinct sentences, propositions and positive links (for training reports)."""
        return {
            "pairs": len(self.pairs),
            "sentences": len(self.sentences()),
            "propositions": sum(len(p.first_propositions) + len(p.second_propositions) for p in self.pairs),
            "positive_links": sum(len(p.positives) for p in self.pairs),
        }
