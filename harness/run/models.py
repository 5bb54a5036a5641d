"""The models of a run, in pieces that the driver and the cell work hand on one by one (:func:`run_models`): the
builder (:mod:`harness.run.build`), the provenance log and the overlap of test texts with training data
(:mod:`harness.run.provenance`), and the checkpoints that load or train (:mod:`harness.run.checkpoints`, training
itself: :mod:`harness.run.trainer`). The model of a job, ready for its cells, is :mod:`harness.run.jobs`'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..profiles import Profile
from ..registry import Registry
from ..spec import ModelSpec
from ..store import Store
from ..trackers import RunTrackers
from .build import ModelBuilder, TaskSet
from .checkpoints import Checkpoints
from .config import RunConfig
from .provenance import ProvenanceLog, TrainingOverlap
from .trainer import Trainer

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunModels:
    """The pieces of one run's models, made together by :func:`run_models` (each is handed on by itself)."""

    builder: ModelBuilder
    provenance: ProvenanceLog
    checkpoints: Checkpoints
    overlap: TrainingOverlap


def run_models(
    registry: Registry,
    config: RunConfig,
    store: Store,
    log: Callable[[str], None] | None = None,
    training_checksums: Mapping[str, str] | None = None,
    tasks: TaskSet | None = None,
    trackers: RunTrackers | None = None,
) -> RunModels:
    """The models of one run. ``training_checksums`` (by spec key): the training data each planned spec would train
    on now (a checkpoint trained on other data is trained again); ``tasks``: the task objects to share with another
    run's models; ``trackers``: where trainings report (none unless the run's driver hands them over)."""
    say = log or logger.info
    provenance = ProvenanceLog()

    def trained_model(spec: ModelSpec, profile: Profile, device: str, seed: int) -> Any:
        # The builder hands the trained models to the contexts it makes (teachers, search encoders).
        return checkpoints.trained_model(spec, profile, device, seed)

    builder = ModelBuilder(registry, config, store, trained_model, tasks, provenance)
    trainer = Trainer(registry, builder, provenance, trackers if trackers is not None else RunTrackers(), say)
    checkpoints = Checkpoints(registry, config, store, builder, trainer, provenance, say, training_checksums)
    return RunModels(builder, provenance, checkpoints, TrainingOverlap(builder.source_splits, provenance))
