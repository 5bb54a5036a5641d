"""Writing a trained model as a Sentence-Transformers folder (bi-encoder or cross-encoder) that loads without
harness."""

from __future__ import annotations

from harness.nn.st_export import ExportError, write_cross_encoder, write_sentence_transformer

__all__ = [
    "ExportError",
    "write_cross_encoder",
    "write_sentence_transformer",
]
