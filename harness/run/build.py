"""Building a model and what its plugin's code receives: the task objects of a run, the training data of a source
(cut to a profile's budget), the contexts of a model's factory and ``fit``, a recipe's ``train`` and a task's
``evaluate`` (harness.plugin_api), and the checks the planner asks before anything runs (:class:`ModelBuilder` is the
plan's ``DataChecker``). Training is :mod:`harness.run.training`'s, checkpoints :mod:`harness.run.checkpoints`', what a
trained model saw :mod:`harness.run.provenance`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sized
from pathlib import Path
from typing import Any, cast

import numpy as np

from ..contamination import TextSet, pairs_record
from ..data import TrainingSplits
from ..device import seed_everything
from ..errors import DataFileError, IncompatibleError
from ..hub import check_backbone
from ..plugin_api import EvalContext, ModelContext, RecipeContext, Task
from ..profiles import Profile
from ..registry import Registry, check_model_object
from ..spec import ModelSpec, TaskSpec, resolve_model_spec, resolve_task_specs, student_spec
from ..store import Store
from .config import CACHE, RunConfig
from .provenance import ProvenanceLog

logger = logging.getLogger(__name__)
TrainedModel = Callable[[ModelSpec, Profile, str, int], Any]  # (spec, profile, device, seed) -> the trained model


def subsample(splits: TrainingSplits, profile: Profile, seed: int) -> TrainingSplits:
    """Seeded subsample of the train split to the profile's budget (and of dev to its eval budget)."""

    def cut(data, limit):
        if data is None or limit is None or len(data) <= limit:
            return data
        rng = np.random.default_rng(seed)
        return data.subset(sorted(rng.choice(len(data), size=limit, replace=False).tolist()))

    return TrainingSplits(
        source=splits.source,
        train=cut(splits.train, profile.max_train_examples),
        dev=cut(splits.dev, profile.max_eval_examples),
        checksum=splits.checksum,
        held_out_sentences=splits.held_out_sentences,
    )


class TaskSet:
    """One task object per task spec (a task loads its data once and keeps it)."""

    def __init__(self, registry: Registry, data_dir: Path | None):
        self.registry = registry
        self.data_dir = data_dir
        self._tasks: dict[str, Task] = {}

    def task(self, task_spec: TaskSpec) -> Task:
        if task_spec.key not in self._tasks:
            plugin = self.registry.task(task_spec.name)
            self._tasks[task_spec.key] = plugin.factory(task_spec.options, self.data_dir)
        return self._tasks[task_spec.key]


def train_examples(splits: TrainingSplits) -> int:
    """How many examples the train split holds (every task's train data is sized)."""
    return len(cast(Sized, splits.train))


def check_finite_labels(splits: TrainingSplits, source: str) -> None:
    """Refuse training data whose numeric labels (e.g. gold similarity scores) are NaN or infinite: training on them
    makes the loss NaN, which would otherwise be reported as diverged training (DataFileError, at plan time)."""
    for name, data in (("train", splits.train), ("dev", splits.dev)):
        labels = getattr(data, "scores", None)
        if labels is None:
            continue
        labels = np.asarray(labels, dtype=np.float64)
        bad = int((~np.isfinite(labels)).sum())
        if bad:
            raise DataFileError(
                f"training data of {source}: {bad} of {len(labels)} {name} labels are NaN or infinite; fix or remove "
                "those lines of the data (a NaN label makes the training loss NaN; the learning rate is not the "
                "cause)."
            )


class ModelBuilder:
    """Builds the models of one run and the contexts their code receives. ``trained_model`` gives the trained
    models a context hands out (teachers, search encoders): :class:`harness.run.checkpoints.Checkpoints` passes its
    own. The training data read or made while a training runs is noted in ``provenance`` (harness.contamination)."""

    def __init__(
        self,
        registry: Registry,
        config: RunConfig,
        store: Store,
        trained_model: TrainedModel,
        tasks: TaskSet | None = None,
        provenance: ProvenanceLog | None = None,
    ):
        self.registry = registry
        self.config = config
        self.store = store
        self.trained_model = trained_model
        self.tasks = tasks or TaskSet(registry, config.data_dir)
        self.provenance = provenance if provenance is not None else ProvenanceLog()

    # -- what the planner checks (DataChecker) ---------------------------------------------------------------------
    def task_checksum(self, task_spec: TaskSpec) -> str | None:
        """The dataset checksum of a task's data (NotImplementedError: the task cannot say before evaluating)."""
        return self.task(task_spec).check_data()

    def training_checksum(self, spec: ModelSpec, profile: Profile, seed: int) -> str:
        """The checksum of the (cut) training data ``spec`` trains on; DataFileError for data it cannot train on."""
        assert spec.train_on is not None
        splits = self.training_splits(spec.train_on, self.training_kinds(spec), profile, seed)
        check_finite_labels(splits, spec.train_on)
        return splits.checksum

    def check_backbone(self, name: str) -> None:
        """A backbone the user named exists (locally or on the hub); one line otherwise."""
        check_backbone(self.resolve_backbone(name))

    def task(self, task_spec: TaskSpec) -> Task:
        return self.tasks.task(task_spec)

    def eval_context(
        self, profile: Profile, device: str, seed: int, training_texts: TextSet | None = None
    ) -> EvalContext:
        return EvalContext(
            profile=profile,
            device=device,
            seed=seed,
            batch_size=self.config.batch_size or profile.eval_batch_size,
            progress=self.config.progress,
            data_dir=self.config.data_dir,
            component=self.registry.component,
            embedder=lambda text: self.trained_model(
                resolve_model_spec(self.registry, text, profile), profile, device, seed
            ),
            logger=logging.getLogger("harness.task"),
            training_texts=training_texts,
        )

    def training_splits(self, source: str, kinds: tuple[str, ...], profile: Profile, seed: int) -> TrainingSplits:
        """The training data of ``source`` (the first of ``kinds`` it offers), cut to the profile's budget; noted in
        the provenance of every training in progress."""
        splits = self.source_splits(source, kinds, profile, seed)
        self.provenance.source_read(source, splits, profile.max_train_examples, train_examples(splits), seed)
        return splits

    def source_splits(self, source: str, kinds: tuple[str, ...], profile: Profile, seed: int) -> TrainingSplits:
        (task_spec,) = resolve_task_specs(self.registry, source)
        task = self.tasks.task(task_spec)
        for kind in kinds:
            splits = task.training_data(kind, self.eval_context(profile, "cpu", seed))
            if splits is not None:
                return subsample(splits, profile, seed)
        raise IncompatibleError(f"task {source!r} offers no training data of kind {', '.join(kinds)}.")

    def report_training_data(self, what: str, data: Any) -> None:
        """``ModelContext.report_training_data``: data a training made itself (e.g. a recipe's silver pairs) joins
        the provenance of every training in progress, texts inline (they exist only in this run)."""
        texts = pairs_record(data)
        if texts is None:
            logger.warning("training data %r has no readable texts; its overlap with test sets is not measured", what)
            return
        self.provenance.data_made(what, texts)

    def model_context(
        self, spec: ModelSpec, profile: Profile, device: str, seed: int, prebuilt_student: Any = None
    ) -> ModelContext:
        """The context of a model's factory and ``fit``, or of a recipe's ``train`` (whose first
        ``build_student()`` without a backbone returns ``prebuilt_student`` when one is given)."""
        values = self._context_values(spec, profile, device, seed)
        if not spec.recipe:
            return ModelContext(**values)
        student = student_spec(self.registry, spec, profile)
        prebuilt = [prebuilt_student] if prebuilt_student is not None else []

        def build_student(backbone: str | None = None) -> Any:
            if backbone is None and prebuilt:
                return prebuilt.pop()
            started_from = (
                student
                if backbone is None
                else ModelSpec(student.name, student.options, backbone, student.profile, None, student.label)
            )
            return self.build(started_from, profile, device, seed)

        return RecipeContext(**values, student=spec.options["student"], build_student=build_student)

    def _context_values(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> dict[str, Any]:
        def trained_model(text: str, train_on: str | None = None, backbone: str | None = None) -> Any:
            # Models a spec trains through its context (teachers, search encoders) get its budget overrides.
            resolved = resolve_model_spec(
                self.registry, text, profile, backbone or spec.backbone, train_on, spec.budget_overrides
            )
            return self.trained_model(resolved, profile, device, seed)

        return {
            "options": dict(spec.options),
            "backbone": self.resolve_backbone(spec.backbone),
            "profile": profile.with_budget(spec.requested_budget),  # the spec's training budget, as requested
            "device": device,
            "seed": seed,
            "progress": self.config.progress,
            "trained_model": trained_model,
            # Cut to the spec's own budget, as the splits it trains on are (a recipe fetching another kind of the
            # same source gets the same documents).
            "training_data": lambda source, kind: self.training_splits(
                source, (kind,), profile.with_budget(spec.requested_budget), seed
            ),
            "component": self.registry.component,
            "artifact_dir": self.store.artifact_dir(spec.key, seed),
            "cache_dir": self.store.root / CACHE,
            "train_on": spec.train_on,
            "report_training_data": self.report_training_data,
            "backbone_content": spec.backbone_content,
            "eval_batch_size": self.config.batch_size or profile.eval_batch_size,
            "logger": logging.getLogger(f"harness.model.{spec.name}"),
        }

    def resolve_backbone(self, name: str) -> str:
        """A registered backbone alias (e.g. a model shipped inside a package) or the name itself."""
        if ("backbone", name) in self.registry.components:
            return str(self.registry.component("backbone", name)())
        return name

    def build(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> Any:
        """A fresh model of a (non-recipe) spec, checked against the capabilities its plugin declares."""
        plugin = self.registry.model(spec.name)
        seed_everything(seed)
        model = plugin.factory(self.model_context(spec, profile, device, seed))
        check_model_object(plugin, model)
        return model

    def training_kinds(self, spec: ModelSpec) -> tuple[str, ...]:
        if spec.recipe:
            return self.registry.recipe(spec.name).training_kinds
        return self.registry.model(spec.name).training_kinds
