"""The frozen-encoder probe: a logistic-regression classifier trained on cached sentence vectors, and macro F1."""

from __future__ import annotations

from harness.evaluation.probe import PROBE_VARIANTS, cached_embeddings, macro_f1, probe_on_texts, train_probe

__all__ = [
    "PROBE_VARIANTS",
    "cached_embeddings",
    "macro_f1",
    "probe_on_texts",
    "train_probe",
]
