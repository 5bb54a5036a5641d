"""Deprecated (harness 0.3): RAKE key phrases and the masked copy are PaSeR's own helpers and live in its plugin,
``harness.plugins.paser``; these names keep working until harness 0.4 with a ``DeprecationWarning``."""

from __future__ import annotations

from harness.deprecation import deprecated_names

_MOVED = (
    "MaskedCopy",
    "PUNCTUATION",
    "Phrase",
    "WORD_PATTERN",
    "english_stopwords",
    "masked_copy",
    "pad_ids",
    "rake_phrases",
    "words_with_spans",
)
__getattr__ = deprecated_names(__name__, {name: ("harness.plugins.paser", name) for name in _MOVED})
