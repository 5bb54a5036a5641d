"""Batches of unlabeled sentences: the collator that makes the token views the objectives read (the clean sentence
and, for TSDAE and Noise Matching, its word-deleted copy, :mod:`harness.nn.noise`), and the training sentences kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .composition import CLEAN, DELETED


class UnlabeledCollator:
    """Sentences -> the token views the objectives need. ``noise`` makes the deleted copy of a sentence."""

    def __init__(
        self,
        tokenizer,
        max_length: int,
        views: Sequence[str],
        noise: Callable[[str], str] | None = None,
        extras: Sequence[Callable[[list[str]], dict[str, Any]]] = (),
    ):
        if DELETED in views and noise is None:
            raise ValueError("a deleted view needs a noise function")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.views = tuple(dict.fromkeys(views))
        self.noise = noise
        self.extras = tuple(extras)  # objectives' own batch entries (Objective.prepare)

    def tokenize(self, texts: Sequence[str]) -> dict[str, torch.Tensor]:
        return dict(
            self.tokenizer(list(texts), truncation=True, max_length=self.max_length, padding=True, return_tensors="pt")
        )

    def __call__(self, sentences: list[str]) -> dict[str, dict[str, torch.Tensor]]:
        batch = {CLEAN: self.tokenize(sentences)}
        if DELETED in self.views:
            batch[DELETED] = self.tokenize([self.noise(sentence) for sentence in sentences])  # type: ignore[misc]
        for extra in self.extras:
            batch.update(extra(sentences))
        return batch


def usable_sentences(sentences: Sequence[str]) -> tuple[list[str], int]:
    """Stripped sentences without the empty ones, and how many were dropped."""
    kept = [text.strip() for text in sentences if isinstance(text, str) and text.strip()]
    return kept, len(sentences) - len(kept)
