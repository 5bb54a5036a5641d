"""Training one model: on its spec's (cut) training data, with its own ``fit`` or its recipe's ``train``, its curves
reported to the run's trackers, and its checkpoint saved with the training record (``training.json``: spec, seed,
the data's checksum, the requested and applied budget, the report, the provenance and the curves). Whether a model is
trained or loaded is :mod:`harness.run.checkpoints`' decision.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from .. import distributed
from ..checkpoints import build_checkpoint, check_checkpoint_target
from ..curves import TrainingCurves, recording
from ..data import TrainingSplits
from ..device import seed_everything
from ..errors import HarnessError
from ..files import atomic_write_json
from ..plugin_api import RecipeContext, RecipePlugin
from ..profiles import Profile, budget_differences, format_budget
from ..registry import Registry
from ..spec import ModelSpec
from ..trackers import RunTrackers
from .build import ModelBuilder, train_examples
from .provenance import ProvenanceLog

logger = logging.getLogger(__name__)


class Trained(NamedTuple):
    """A model as its training left it, the training's report record and the checksum of the data it learnt from."""

    model: Any
    report: dict
    data_checksum: str


class Trainer:
    """Trains the models of one run (``train``), noting what each trained on in ``provenance`` and reporting its
    curves to ``trackers``."""

    def __init__(
        self,
        registry: Registry,
        builder: ModelBuilder,
        provenance: ProvenanceLog,
        trackers: RunTrackers,
        log: Callable[[str], None],
    ):
        self.registry = registry
        self.builder = builder
        self.provenance = provenance
        self.trackers = trackers
        self.log = log

    def train(self, spec: ModelSpec, model: Any, checkpoint: Path, profile: Profile, device: str, seed: int) -> Trained:
        """Train ``model`` on the spec's (cut) training data and save its checkpoint."""
        assert spec.train_on is not None, "a trained spec"
        check_checkpoint_target(checkpoint)  # before training, not after it
        budgeted = profile.with_budget(spec.requested_budget)
        with self.provenance.training(spec, seed) as provenance:
            splits = self.builder.training_splits(spec.train_on, self.builder.training_kinds(spec), budgeted, seed)
            self.log(
                f"  training {spec.label} on {spec.train_on} ({train_examples(splits)} examples, seed {seed}, "
                f"profile {profile.name}, budget {format_budget(spec.requested_budget)})"
            )
            tracking = self.trackers.training(spec.key, seed, spec.label, tracked_params(spec, profile, seed))
            curves = TrainingCurves(listener=tracking)
            with recording(curves):
                model, report = self._fit(spec, model, splits, profile, device, seed)
        report_record = applied_report(spec, report, budgeted.max_train_examples, train_examples(splits), seed)
        if tracking is not None:
            tracking.add_params({"applied_budget": report_record["applied_budget"]})
        trained = model

        def save(directory: Path) -> None:
            trained.save(directory)
            atomic_write_json(
                directory / "training.json",
                {
                    "spec": spec.as_record(),
                    "seed": seed,
                    "source_checksum": splits.checksum,
                    "train_examples": train_examples(splits),
                    "requested_budget": spec.requested_budget,
                    "report": report_record,
                    "training_data": provenance,
                    # Per-step losses and dev scores, bounded (harness.curves)
                    "curves": curves.as_record(),
                },
            )

        if distributed.is_main_process():  # torchrun: rank 0 writes; the others hold the same weights in memory
            build_checkpoint(checkpoint, save)
        distributed.barrier()
        return Trained(model, report_record, splits.checksum)

    def _fit(
        self, spec: ModelSpec, model: Any, splits: TrainingSplits, profile: Profile, device: str, seed: int
    ) -> tuple[Any, Any]:
        """Train a model with its own ``fit``, or a recipe's student with the recipe; returns (model, report)."""
        if not spec.recipe:
            ctx = self.builder.model_context(spec, profile, device, seed)
            seed_everything(seed)
            return model, model.fit(splits, ctx)
        recipe: RecipePlugin = self.registry.recipe(spec.name)
        ctx = self.builder.model_context(spec, profile, device, seed, prebuilt_student=model)
        assert isinstance(ctx, RecipeContext), "a recipe's context"
        seed_everything(seed)
        result = recipe.train(splits, ctx)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise HarnessError(
                f"recipe {recipe.name!r} returned {type(result).__name__}; train() must return (student, report). "
                "This is a bug in the recipe plugin."
            )
        return result


def applied_report(spec: ModelSpec, report: Any, max_train_examples: int | None, examples: int, seed: int) -> dict:
    """A training's report as a record, its ``applied_budget`` completed with the cut of the training data (applied
    here, not by the method: recorded with what it applied); a budget applied other than requested is a warning."""
    report_record = dict(report.as_record() if hasattr(report, "as_record") else report)
    report_record["applied_budget"] = {
        **dict(report_record.get("applied_budget") or {}),
        "max_train_examples": max_train_examples,
        "train_examples": examples,
    }
    differences = budget_differences(spec.requested_budget, report_record["applied_budget"])
    if differences:
        logger.warning(
            "%s seed %s: the training applied another budget than requested (%s)",
            spec.label,
            seed,
            "; ".join(differences),
        )
    return report_record


def tracked_params(spec: ModelSpec, profile: Profile, seed: int) -> dict:
    """A trained model's hyperparameters for the trackers: the resolved spec, seed, profile and budget."""
    return {
        "spec": spec.as_record(),
        "seed": seed,
        "profile": profile.name,
        "requested_budget": dict(spec.requested_budget),
    }
