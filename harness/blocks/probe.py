"""The frozen-encoder probe: a logistic-regression classifier trained on cached sentence vectors, and macro F1; the
probe task base (:class:`ProbeTask`: a probe task is metadata, file names and one reader)."""

from __future__ import annotations

from harness.evaluation.probe import PROBE_VARIANTS, cached_embeddings, macro_f1, probe_on_texts, train_probe
from harness.evaluation.probe_task import ProbeTask

__all__ = [
    "PROBE_VARIANTS",
    "ProbeTask",
    "cached_embeddings",
    "macro_f1",
    "probe_on_texts",
    "train_probe",
]
