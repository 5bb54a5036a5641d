"""Runs a matrix of cells (model spec x seed x task): trains or loads each spec once per seed, evaluates every
task, and stores one record per cell. Finished cells are answered from the store when their record is valid and
matches this run (``harness.store.reuse_problem``), so an interrupted run resumes where it stopped.

Everything that can be checked without computing (names, options, seeds, capabilities, training sources, that the
store is writable, every task's data and every training source) is checked in ``plan`` before the first cell runs.
A data problem found there makes its cells ``missing`` or ``failed``; the rest of the matrix still runs. A cell whose
score is not finite (or undefined) or whose training diverged is stored as ``failed`` with the reason.
"""
from __future__ import annotations

import gc
import importlib.metadata as importlib_metadata
import json
import logging
import math
import statistics
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .capabilities import TRAINABLE, reachable_capabilities
from .consistency import batch_dependence
from .data import TrainingSplits, check_data_dir
from .device import check_device_name, hardware_description, resolve_device, seed_everything
from .environment import environment_record
from .errors import DataFileError, HarnessError, IncompatibleError, InvalidOptionError, MissingDataError
from .evaluation.bootstrap import example_side_file
from .executors import make_executor
from .hub import check_backbone
from .matrix import check_seeds
from .metrics import ScoreError
from .plugin_api import EvalContext, ModelContext, RecipeContext, RecipePlugin, Task
from .profiles import Profile, budget_differences, format_budget, get_profile
from .registry import BUILTIN_PACKAGES, Registry, check_model_object
from .spec import (
    SELF_TRAINING,
    ModelSpec,
    TaskSpec,
    budget_keys,
    resolve_model_spec,
    resolve_task_specs,
    stable_hash,
    student_spec,
)
from .store import (
    Store,
    StoreError,
    atomic_write_json,
    build_checkpoint,
    check_checkpoint_target,
    reuse_problem,
    trained_checkpoint_problem,
)
from .training import NonFiniteLossError


@dataclass
class ModelEntry:
    """One model of a matrix: its spec text and, optionally, its own training source and backbone."""

    spec: str
    train_on: str | None = None
    backbone: str | None = None
    budget: dict = field(default_factory=dict)  # training budget overrides (harness.profiles.BUDGET_KEYS)
    # The keys of ``budget`` the entry set itself (refused when its spec cannot honour them); the others came from a
    # matrix-wide ``budget:`` and, like --set, need only one trained spec of the run that honours them. None: all.
    own_budget_keys: tuple[str, ...] | None = None


@dataclass
class RunConfig:
    models: list[ModelEntry]
    tasks: list[str]
    seeds: list[int] = field(default_factory=lambda: [42])
    profile: str = "quick"
    backbone: str | None = None
    train_on: str | None = None
    device: str = "auto"
    results_dir: Path = Path("results")
    data_dir: Path | None = None
    overwrite: bool = False
    rescore: bool = False  # recompute every cell's evaluation from stored checkpoints; never train (harness rescore)
    progress: bool = True
    batch_size: int | None = None
    store_only: bool = False  # answer every cell from the store; refuse (saying why) if one would be computed
    budget: dict = field(default_factory=dict)  # --set overrides for every trained spec (entries' own win)
    # Where cells run (harness.executors): "local" (this process) or "ray" (tasks on a Ray cluster; the device is
    # then resolved on each worker, and the options below size each task).
    executor: str = "local"
    ray_address: str | None = None  # None: start or join a local cluster; "auto"; "ray://host:port"
    gpus_per_task: float | None = None  # None: 1 if the cluster has GPUs (and --device is not cpu), else 0
    cpus_per_task: float = 1.0


@dataclass
class PlannedModel:
    spec: ModelSpec
    entry: ModelEntry
    tasks: list[TaskSpec] = field(default_factory=list)  # the plan's tasks this model can run
    skipped: list[tuple[TaskSpec, str]] = field(default_factory=list)  # family members it cannot run, and why


@dataclass
class Plan:
    models: list[PlannedModel]
    tasks: list[TaskSpec]
    seeds: list[int]
    profile: Profile
    device: str
    # Checked in the plan, before anything runs: the dataset checksum of every task (None: the task cannot say
    # before evaluating), the data problem of every task whose data is missing or malformed, and the same for the
    # training data of every trained spec (by spec key).
    data_checksums: dict[str, str | None] = field(default_factory=dict)
    data_problems: dict[str, DataFileError] = field(default_factory=dict)
    training_checksums: dict[str, str] = field(default_factory=dict)
    training_problems: dict[str, DataFileError] = field(default_factory=dict)

    @property
    def cells(self) -> int:
        return sum(len(m.tasks) for m in self.models) * len(self.seeds)


@dataclass
class CellOutcome:
    spec: ModelSpec
    seed: int
    task: TaskSpec
    status: str  # ok | cached | missing | failed
    main_score: float | None = None
    message: str = ""


@dataclass
class TrainingJob:
    """Cells that one trained model serves: the pending tasks of one model spec and seed (under --train-on self,
    of one task). An executor trains (or loads) the model once, then evaluates each task."""

    planned: PlannedModel
    trained: ModelSpec  # the spec whose training makes the model: planned.spec, or its per-task spec under self
    seed: int
    tasks: list[TaskSpec]

    @property
    def spec(self) -> ModelSpec:
        return self.planned.spec

    @property
    def label(self) -> str:
        return f"{self.spec.label} seed {self.seed}"


class RescoreError(HarnessError):
    """``harness rescore`` met a trained spec without a usable checkpoint."""


@dataclass
class CellResult:
    """A computed cell before it is stored: the record (status ok, missing or failed) and the line that reports it.
    Workers compute these; only the driver writes them (``Runner.store_result``)."""

    spec: ModelSpec
    seed: int
    task: TaskSpec
    status: str  # ok | missing | failed
    record: dict
    message: str = ""
    keeps_ok: bool = False  # a data problem: a stored ok record of the cell is kept, not replaced by this one
    examples: bytes | None = None  # the per-example side file (npz) of an ok record with ``record["examples"]``


def _data_dir_text(path: Path | None) -> str | None:
    return str(path) if path else None


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


def _check_finite_options(owner: str, options: dict[str, Any]) -> None:
    """NaN or infinite option values (``be:lr=nan``) are refused at plan time rather than failing in training."""
    for key, value in options.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidOptionError(f"option {key!r} of {owner} is {value}; give a finite number.")


class BatchDependenceError(HarnessError):
    """An embedder whose vectors depend on the other texts of the batch (harness.consistency); its cells fail."""


logger = logging.getLogger(__name__)
CACHE = "cache"  # store folder shared by every spec: content-addressed artifacts (e.g. domain-MLM checkpoints)


class Runner:
    def __init__(self, registry: Registry, config: RunConfig, log: Callable[[str], None] | None = None):
        self.registry = registry
        self.config = config
        self.log = log or logger.info
        self.store = Store(config.results_dir)
        self._tasks: dict[str, Task] = {}
        self._loaded: dict[tuple[str, int], Any] = {}  # in-process cache of trained models (teachers)
        self._reports: dict[tuple[str, int], Any] = {}  # training report per (spec hash, seed)
        self._training_data_checksums: dict[tuple[str, int], str | None] = {}  # what each loaded model learnt from
        self._planned_training_checksums: dict[str, str] = {}  # by spec key: the training data as it is now
        self._missing_reported: set[tuple[str, str]] = set()  # (task key, message) of data-missing lines printed

    # -- planning --------------------------------------------------------------------------------------------------
    def plan(self) -> Plan:
        profile = get_profile(self.config.profile)
        # Under a distributed executor each worker resolves the device (the driver may have no GPU at all).
        device = (resolve_device(self.config.device) if self.config.executor == "local"
                  else check_device_name(self.config.device))
        self._check_config()
        if not self.config.models:
            raise HarnessError("no models given; use --models NAME[,NAME] (see `harness list`).")
        if not self.config.tasks:
            raise HarnessError("no tasks given; use --tasks NAME[,NAME] (see `harness list`).")
        task_specs: list[TaskSpec] = []
        from_family: set[str] = set()  # tasks reached only through a family name
        for text in self.config.tasks:
            resolved = resolve_task_specs(self.registry, text)
            for spec in resolved:
                if spec.key not in {t.key for t in task_specs}:
                    task_specs.append(spec)
                    if len(resolved) > 1:
                        from_family.add(spec.key)
                elif len(resolved) == 1:
                    from_family.discard(spec.key)
        planned = []
        for entry in self.config.models:
            backbone = entry.backbone or self.config.backbone
            train_on = entry.train_on or self.config.train_on
            spec = resolve_model_spec(self.registry, entry.spec, profile, backbone, train_on,
                                      {**self.config.budget, **entry.budget}, content_cache=self.store.root / CACHE)
            _check_finite_options(f"model {spec.label!r}", spec.options)
            self._check_training(spec)
            own = entry.budget if entry.own_budget_keys is None else entry.own_budget_keys
            self._check_budget_keys(spec, [key for key in entry.budget if key in own])
            validate = self.registry.spec_plugin(spec.name).validate
            if validate is not None:
                validate(spec, self.registry)
            model_plan = PlannedModel(spec, entry)
            for task_spec in task_specs:
                problem = self._incompatibility(spec, task_spec)
                if problem is None:
                    model_plan.tasks.append(task_spec)
                elif task_spec.key in from_family:
                    # A family may mix capabilities (e.g. a pair task and an embedding probe): run what fits.
                    model_plan.skipped.append((task_spec, problem))
                else:
                    raise IncompatibleError(problem + " Leave this pair out of the matrix.")
            planned.append(model_plan)
        shared = dict(self.config.budget)
        for entry in self.config.models:
            own = entry.budget if entry.own_budget_keys is None else entry.own_budget_keys
            shared.update({key: value for key, value in entry.budget.items() if key not in own})
        self._check_run_budget_keys([model_plan.spec for model_plan in planned], shared)
        # A backbone the user names (--backbone, a matrix entry's) that is missing or unreachable fails here, in
        # seconds; the profile's default is left to the models that read it (some read none).
        given = [entry.backbone or self.config.backbone for entry in self.config.models]
        for backbone in dict.fromkeys(name for name in given if name):
            check_backbone(self.resolve_backbone(backbone))
        plan = Plan(planned, task_specs, list(dict.fromkeys(self.config.seeds)), profile, device)
        if plan.cells == 0:
            reasons = "; ".join(problem for m in planned for _, problem in m.skipped[:1])
            raise IncompatibleError(f"nothing to run: no model of the plan can run any of its tasks ({reasons}).")
        self._check_data(plan)
        return plan

    def _honoured_budget_keys(self, spec: ModelSpec) -> tuple[str, ...]:
        """The budget keys ``spec``'s training honours; none when it is not trained."""
        return budget_keys(self.registry.spec_plugin(spec.name)) if spec.train_on is not None else ()

    def _check_budget_keys(self, spec: ModelSpec, entry_keys: list[str]) -> None:
        """A matrix entry's budget key that the spec's training cannot honour is refused (never silently ignored)."""
        honoured = self._honoured_budget_keys(spec)
        refused = [key for key in entry_keys if key not in honoured]
        if not refused:
            return
        if not honoured:
            raise InvalidOptionError(f"model {spec.label!r} is not trained (no train_on), so its budget "
                                     f"{', '.join(refused)} would have no effect; drop it or give train_on.")
        raise InvalidOptionError(f"model {spec.label!r} cannot honour budget key(s) {', '.join(refused)}; "
                                 f"{spec.name} takes {', '.join(honoured)}.")

    def _check_run_budget_keys(self, specs: list[ModelSpec], shared: dict) -> None:
        """``--set`` (and a matrix-wide ``budget:``) applies to every trained spec: each key must be honoured by at
        least one of them."""
        if not shared:
            return
        takes = {spec.name: self._honoured_budget_keys(spec) for spec in specs if spec.train_on is not None}
        if not takes:
            raise InvalidOptionError(f"--set {', '.join(shared)}: no model of this run is trained, so a training "
                                     "budget has no effect; drop it or add --train-on.")
        for key in shared:
            if not any(key in keys for keys in takes.values()):
                shown = "; ".join(f"{name} takes {', '.join(keys)}" for name, keys in takes.items())
                raise InvalidOptionError(f"--set {key}: no trained model of this run honours it ({shown}).")

    def _check_config(self) -> None:
        """Values that would otherwise fail late (numpy's seed range) or pass silently (a data dir that does not
        exist, a result store that cannot be written)."""
        check_seeds(list(self.config.seeds), "--seeds")
        batch_size = self.config.batch_size
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise InvalidOptionError(f"--batch-size must be a positive integer, got {batch_size!r}.")
        if self.config.data_dir is not None:
            self.config.data_dir = check_data_dir(self.config.data_dir)
        self.store.check_writable()

    def _check_data(self, plan: Plan) -> None:
        """Load every task's data and every trained spec's training data once, before the first cell: a problem is
        kept in the plan (its cells are stored as missing or failed, the others run), never raised mid-matrix."""
        for task_spec in plan.tasks:
            try:
                plan.data_checksums[task_spec.key] = self.task(task_spec).check_data()
            except NotImplementedError:
                plan.data_checksums[task_spec.key] = None
                self.log(f"  task {task_spec.label} cannot check its data before evaluating (no check_data); its "
                         "cells are recomputed on every run")
            except DataFileError as exc:
                plan.data_problems[task_spec.key] = exc
            except (UnicodeDecodeError, ValueError, OSError) as exc:
                plan.data_problems[task_spec.key] = DataFileError(
                    f"task {task_spec.label}: its data could not be read ({type(exc).__name__}: {exc})."
                )
        # Under --train-on self each task trains its own model: one trained spec (and training data) per task.
        trained_specs = [self.trained_spec(planned.spec, task_spec) for planned in plan.models
                         for task_spec in planned.tasks]
        for spec in trained_specs:
            if spec.train_on is None or spec.key in plan.training_checksums or spec.key in plan.training_problems:
                continue
            try:
                splits = self.training_splits(spec.train_on, self._training_kinds(spec), plan.profile, plan.seeds[0])
                check_finite_labels(splits, spec.train_on)
                plan.training_checksums[spec.key] = splits.checksum
            except DataFileError as exc:
                plan.training_problems[spec.key] = exc
            except (UnicodeDecodeError, ValueError, OSError) as exc:
                plan.training_problems[spec.key] = DataFileError(
                    f"training data of {spec.train_on}: could not be read ({type(exc).__name__}: {exc})."
                )
        self._planned_training_checksums = plan.training_checksums

    def _training_kinds(self, spec: ModelSpec) -> tuple[str, ...]:
        if spec.recipe:
            return self.registry.recipe(spec.name).training_kinds
        return self.registry.model(spec.name).training_kinds

    def capabilities(self, spec: ModelSpec) -> tuple[str, ...]:
        """A model's declared capabilities; a recipe's are its student's."""
        if spec.recipe:
            return self.registry.model(student_spec(self.registry, spec, get_profile(spec.profile)).name).capabilities
        return self.registry.model(spec.name).capabilities

    def _incompatibility(self, spec: ModelSpec, task_spec: TaskSpec) -> str | None:
        metadata = self.registry.task(task_spec.name).metadata
        available = reachable_capabilities(self.capabilities(spec))
        kinds = self._training_kinds(spec)
        if spec.train_on == SELF_TRAINING and not set(metadata.training_kinds) & set(kinds):
            return (
                f"model {spec.label!r} is trained on each task's own data (--train-on self), but task "
                f"{task_spec.name!r} offers no {', '.join(kinds)}; tasks that do: {', '.join(self._sources(kinds))}."
            )
        if set(metadata.requires) <= available:
            return None
        return (
            f"model {spec.label!r} cannot run task {task_spec.name!r}: the task needs "
            f"{', '.join(metadata.requires)}, the model offers {', '.join(sorted(available))}."
        )

    def _check_training(self, spec: ModelSpec) -> None:
        plugin = self.registry.spec_plugin(spec.name)
        if spec.train_on is None:
            if spec.recipe:
                sources = sorted(
                    name for name, task_plugin in self.registry.tasks.items()
                    if set(task_plugin.metadata.training_kinds) & set(plugin.training_kinds)
                )
                raise IncompatibleError(
                    f"recipe {spec.label!r} trains on a source; add --train-on TASK (or train_on in the matrix), "
                    f"e.g. {', '.join(sources[:4]) or '(no installed task offers its data)'}."
                )
            return
        if not spec.recipe and (TRAINABLE not in plugin.capabilities or not plugin.training_kinds):
            raise IncompatibleError(f"model {spec.name!r} cannot be trained; drop --train-on for it.")
        if spec.train_on == SELF_TRAINING:
            return  # every task trains on its own data: checked per task by _incompatibility
        source_specs = resolve_task_specs(self.registry, spec.train_on)
        if len(source_specs) != 1:
            raise IncompatibleError(
                f"--train-on {spec.train_on!r} names a task family; name one task of it: "
                f"{', '.join(s.name for s in source_specs)}."
            )
        offered = self.registry.task(source_specs[0].name).metadata.training_kinds
        if not set(offered) & set(plugin.training_kinds):
            sources = sorted(
                name
                for name, task_plugin in self.registry.tasks.items()
                if set(task_plugin.metadata.training_kinds) & set(plugin.training_kinds)
            )
            raise IncompatibleError(
                f"model {spec.name!r} learns from {', '.join(plugin.training_kinds)}, but task {spec.train_on!r} "
                f"offers {', '.join(offered) or 'no training data'}. Training sources that would work: "
                f"{', '.join(sources) or '(none installed)'}."
            )

    def _sources(self, kinds: tuple[str, ...]) -> list[str]:
        """Tasks that offer training data of one of ``kinds``."""
        return sorted(name for name, task_plugin in self.registry.tasks.items()
                      if set(task_plugin.metadata.training_kinds) & set(kinds)) or ["(none installed)"]

    def trained_spec(self, spec: ModelSpec, task_spec: TaskSpec) -> ModelSpec:
        """The spec trained for a cell. ``--train-on self`` (thesis table 6.10 and the TSDAE paper train one model
        per USEB domain on its own unlabeled sentences) trains one model per evaluated task on that task's training
        data: that model is the spec with the task as its source (its own checkpoint and training checksum), while
        the cell's record stays under the ``self`` spec, so the leaderboard shows one row."""
        if spec.train_on != SELF_TRAINING:
            return spec
        return replace(spec, train_on=task_spec.label)

    # -- tasks and training data ------------------------------------------------------------------------------------
    def task(self, task_spec: TaskSpec) -> Task:
        if task_spec.key not in self._tasks:
            plugin = self.registry.task(task_spec.name)
            self._tasks[task_spec.key] = plugin.factory(task_spec.options, self.config.data_dir)
        return self._tasks[task_spec.key]

    def eval_context(self, profile: Profile, device: str, seed: int) -> EvalContext:
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
        )

    def training_splits(self, source: str, kinds: tuple[str, ...], profile: Profile, seed: int) -> TrainingSplits:
        (task_spec,) = resolve_task_specs(self.registry, source)
        task = self.task(task_spec)
        for kind in kinds:
            splits = task.training_data(kind, self.eval_context(profile, "cpu", seed))
            if splits is not None:
                return subsample(splits, profile, seed)
        raise IncompatibleError(f"task {source!r} offers no training data of kind {', '.join(kinds)}.")

    # -- models -----------------------------------------------------------------------------------------------------
    def model_context(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> ModelContext:
        values = self._context_values(spec, profile, device, seed)
        if not spec.recipe:
            return ModelContext(**values)
        student = student_spec(self.registry, spec, profile)

        def build_student(backbone: str | None = None) -> Any:
            started_from = student if backbone is None else ModelSpec(
                student.name, student.options, backbone, student.profile, None, student.label
            )
            return self._build(started_from, profile, device, seed)

        return RecipeContext(**values, student=spec.options["student"], build_student=build_student)

    def _context_values(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> dict[str, Any]:
        def trained_model(text: str, train_on: str | None = None, backbone: str | None = None) -> Any:
            # Models a spec trains through its context (teachers, search encoders) get its budget overrides.
            resolved = resolve_model_spec(self.registry, text, profile, backbone or spec.backbone, train_on,
                                          spec.budget_overrides)
            return self.trained_model(resolved, profile, device, seed)

        return dict(
            options=dict(spec.options),
            backbone=self.resolve_backbone(spec.backbone),
            profile=profile.with_budget(spec.requested_budget),  # the spec's training budget, as requested
            device=device,
            seed=seed,
            progress=self.config.progress,
            trained_model=trained_model,
            # Cut to the spec's own budget, as the splits it trains on are (a recipe fetching another kind of the
            # same source gets the same documents).
            training_data=lambda source, kind: self.training_splits(
                source, (kind,), profile.with_budget(spec.requested_budget), seed),
            component=self.registry.component,
            artifact_dir=self.store.artifact_dir(spec.key, seed),
            cache_dir=self.store.root / CACHE,
            train_on=spec.train_on,
            backbone_content=spec.backbone_content,
            eval_batch_size=self.config.batch_size or profile.eval_batch_size,
            logger=logging.getLogger(f"harness.model.{spec.name}"),
        )

    def _build(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> Any:
        """A fresh model of a (non-recipe) spec, checked against the capabilities its plugin declares."""
        plugin = self.registry.model(spec.name)
        seed_everything(seed)
        model = plugin.factory(self.model_context(spec, profile, device, seed))
        check_model_object(plugin, model)
        return model

    def _budget_record(self, trained: ModelSpec, seed: int) -> dict:
        """``{"budget": {"requested": ..., "applied": ...}}`` for a cell of a trained spec (empty otherwise): what
        the spec asked for (harness.profiles.requested_budget) and what its training applied (the training loop's
        ``applied_budget`` and the runner's cut of the training data)."""
        if trained.train_on is None:
            return {}
        report = self.training_report(trained, seed)
        applied = report.get("applied_budget") if isinstance(report, dict) else None
        return {"budget": {"requested": dict(trained.requested_budget), "applied": dict(applied or {})}}

    def training_report(self, spec: ModelSpec, seed: int) -> Any:
        """The report of the training that produced the (spec, seed) model in this process, or None."""
        return self._reports.get((spec.hash, seed))

    def resolve_backbone(self, name: str) -> str:
        """A registered backbone alias (e.g. a model shipped inside a package) or the name itself."""
        if ("backbone", name) in self.registry.components:
            return str(self.registry.component("backbone", name)())
        return name

    def trained_model(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> Any:
        """Build the model; if it is trained, load its checkpoint or train it and save one (shared by all cells).
        A recipe spec builds its student, and trains it with the recipe.

        A trained spec's checkpoint is checked, trained, built and loaded under its lock (harness.locks): of several
        processes sharing the store (other runs, Ray workers) one trains, the others wait and then load it."""
        if spec.train_on is None or (spec.hash, seed) in self._loaded:
            return self._trained_model(spec, profile, device, seed)
        lock = self.store.checkpoint_lock(spec.key, seed, f"training {spec.label} seed {seed}")
        try:
            lock.acquire(on_wait=lambda message: self.log(f"  {spec.label} seed {seed}: {message}"))
        except PermissionError as exc:  # a read-only store (e.g. `harness export` from a shared one)
            checkpoint = self.store.checkpoint_dir(spec.key, seed)
            if self.config.overwrite or self._checkpoint_problem(spec, seed, checkpoint) is not None:
                raise StoreError(f"cannot train {spec.label} seed {seed}: the store {self.store.root} is not "
                                 f"writable ({exc.strerror}); choose a writable store.") from None
            return self._trained_model(spec, profile, device, seed)  # nobody can replace it from here: load it
        try:
            return self._trained_model(spec, profile, device, seed)
        finally:
            lock.release()

    def _trained_model(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> Any:
        cache_key = (spec.hash, seed)
        if cache_key in self._loaded:
            return self._loaded[cache_key]
        if spec.recipe:
            model = self._build(student_spec(self.registry, spec, profile), profile, device, seed)
            kinds = self.registry.recipe(spec.name).training_kinds
        else:
            model = self._build(spec, profile, device, seed)
            kinds = self.registry.model(spec.name).training_kinds
        report_record = None
        if spec.train_on is not None:
            checkpoint = self.store.checkpoint_dir(spec.key, seed)
            problem = "--overwrite" if self.config.overwrite else self._checkpoint_problem(spec, seed, checkpoint)
            if problem is None:
                self.log(f"  loading checkpoint {checkpoint}")
                model.load(checkpoint)
                training_record = json.loads((checkpoint / "training.json").read_text())
                report_record = training_record.get("report")
                self._training_data_checksums[cache_key] = training_record.get("source_checksum")
            else:
                if self.config.rescore:  # rescore evaluates what was trained; it never trains
                    raise RescoreError(f"cannot rescore {spec.label} seed {seed}: its checkpoint {checkpoint} "
                                       f"cannot be loaded ({problem}); train it with `harness run` instead.")
                if problem not in ("--overwrite", "not built yet"):
                    logger.warning("checkpoint %s cannot be used: %s; training it again", checkpoint, problem)
                check_checkpoint_target(checkpoint)  # before training, not after it
                budgeted = profile.with_budget(spec.requested_budget)
                splits = self.training_splits(spec.train_on, kinds, budgeted, seed)
                self.log(
                    f"  training {spec.label} on {spec.train_on} ({len(splits.train)} examples, seed {seed}, "
                    f"profile {profile.name}, budget {format_budget(spec.requested_budget)})"
                )
                model, report = self._fit(spec, model, splits, profile, device, seed)
                report_record = dict(report.as_record() if hasattr(report, "as_record") else report)
                # The cut of the training data is applied here, not by the method: record it with what it applied.
                report_record["applied_budget"] = {
                    **dict(report_record.get("applied_budget") or {}),
                    "max_train_examples": budgeted.max_train_examples, "train_examples": len(splits.train),
                }
                differences = budget_differences(spec.requested_budget, report_record["applied_budget"])
                if differences:
                    logger.warning("%s seed %s: the training applied another budget than requested (%s)",
                                   spec.label, seed, "; ".join(differences))
                trained = model

                def save(directory: Path) -> None:
                    trained.save(directory)
                    atomic_write_json(
                        directory / "training.json",
                        {"spec": spec.as_record(), "seed": seed, "source_checksum": splits.checksum,
                         "train_examples": len(splits.train), "requested_budget": spec.requested_budget,
                         "report": report_record},
                    )

                build_checkpoint(checkpoint, save)
                self._training_data_checksums[cache_key] = splits.checksum
        self._reports[cache_key] = report_record
        self._loaded[cache_key] = model
        return model

    def _checkpoint_problem(self, spec: ModelSpec, seed: int, checkpoint: Path) -> str | None:
        """Why a stored checkpoint cannot be loaded: not built, damaged (a file differs from the checksum recorded
        when it was built), built for another spec or seed (a checkpoint folder copied or moved by hand: its
        ``training.json`` names the spec hash and seed it was trained for), or trained on data that has changed
        since (planned specs only). None: load it."""
        return trained_checkpoint_problem(checkpoint, spec_hash=spec.hash, seed=seed,
                                          training_data_checksum=self._planned_training_checksums.get(spec.key),
                                          train_on=spec.train_on)

    def _fit(self, spec: ModelSpec, model: Any, splits: TrainingSplits, profile: Profile, device: str,
             seed: int) -> tuple[Any, Any]:
        """Train a model with its own ``fit``, or a recipe's student with the recipe; returns (model, report)."""
        ctx = self.model_context(spec, profile, device, seed)
        seed_everything(seed)
        if not spec.recipe:
            return model, model.fit(splits, ctx)
        recipe: RecipePlugin = self.registry.recipe(spec.name)
        prebuilt = [model]  # the first build_student() without a backbone gets the student built above

        def build_student(backbone: str | None = None) -> Any:
            if backbone is None and prebuilt:
                return prebuilt.pop()
            return ctx_build(backbone)

        assert isinstance(ctx, RecipeContext)
        ctx_build = ctx.build_student
        ctx.build_student = build_student
        result = recipe.train(splits, ctx)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise HarnessError(
                f"recipe {recipe.name!r} returned {type(result).__name__}; train() must return (student, report). "
                "This is a bug in the recipe plugin."
            )
        return result

    def release(self) -> None:
        self._loaded.clear()
        gc.collect()

    # -- running ----------------------------------------------------------------------------------------------------
    def run(self, plan: Plan | None = None, executor: Any = None) -> list[CellOutcome]:
        """Compute the plan's cells (``executor``: a harness.executors executor, by default the config's)."""
        plan = plan or self.plan()
        if self.config.rescore:
            self.check_rescore(plan)
        executor = executor or make_executor(self.config)
        executor.start(self, plan)  # checks that can fail (Ray missing, cluster unreachable) before any cell runs
        outcomes: list[CellOutcome] = []
        hardware = hardware_description(plan.device)
        for path, why in self.store.clean_stale_temporaries():
            self.log(f"  removed {path} ({why})")
        answers, reasons = self._stored_answers(plan)
        if self.config.store_only and reasons:
            cells = [f"{label}: {why}" for label, why in reasons.values()]
            raise HarnessError(
                f"--store-only: {len(cells)} of {plan.cells} cells cannot be answered from {self.store.root}: "
                + "; ".join(cells[:5]) + ("; ..." if len(cells) > 5 else "")
                + ". Run without --store-only to compute them."
            )
        self.log(
            f"{plan.cells} cells: {len(plan.models)} models x {len(plan.tasks)} tasks x {len(plan.seeds)} seeds "
            f"(profile {plan.profile.name}, device {plan.device}, results in {self.store.root})"
        )
        jobs = self.pending_jobs(plan, answers, hardware, outcomes)
        # The executor (harness.executors) trains and evaluates the jobs, here or on a cluster; records are written
        # by this process only (store_result), so the store stays consistent whatever the workers do.
        outcomes += executor.run(self, plan, jobs, hardware)
        return in_plan_order(plan, outcomes)

    def check_rescore(self, plan: Plan) -> None:
        """``harness rescore`` needs every trained spec's checkpoint: refuse before any cell runs when one is not
        usable (rescore never trains)."""
        problems = {}
        for planned in plan.models:
            for task_spec in planned.tasks:
                trained = self.trained_spec(planned.spec, task_spec)
                for seed in plan.seeds if trained.train_on is not None else ():
                    problem = self._checkpoint_problem(trained, seed, self.store.checkpoint_dir(trained.key, seed))
                    if problem is not None:
                        problems[(trained.label, seed)] = problem
        if problems:
            shown = "; ".join(f"{label} seed {seed}: {why}" for (label, seed), why in list(problems.items())[:4])
            raise RescoreError(f"cannot rescore {len(problems)} trained model(s) without a usable checkpoint "
                               f"({shown}); train them with `harness run`, rescore recomputes evaluations only.")

    def pending_jobs(self, plan: Plan, answers: dict, hardware: str,
                     outcomes: list[CellOutcome]) -> list[TrainingJob]:
        """The cells left to compute, grouped by the trained model that serves them. Cells the store answers and
        cells whose data problem the plan found (stored as missing/failed at once) go to ``outcomes``."""
        jobs: list[TrainingJob] = []
        for planned in plan.models:
            spec = planned.spec
            for task_spec, problem in planned.skipped:
                self.log(f"  skipping {task_spec.label} for {spec.label}: {problem}")
            for seed in plan.seeds:
                pending = []
                for task_spec in planned.tasks:
                    record = answers.get((spec.key, seed, task_spec.key))
                    if record is not None:
                        outcomes.append(CellOutcome(spec, seed, task_spec, "cached", record["main_score"]))
                    elif task_spec.key in plan.data_problems:  # found in the plan: stored as missing/failed at once
                        outcomes.append(self._write_problem(spec, seed, task_spec, plan,
                                                            plan.data_problems[task_spec.key], hardware))
                    else:
                        pending.append(task_spec)
                # One trained model serves all pending tasks, except under --train-on self (one per task).
                groups: dict[str, TrainingJob] = {}
                for task_spec in pending:
                    trained = self.trained_spec(spec, task_spec)
                    groups.setdefault(trained.key, TrainingJob(planned, trained, seed, [])).tasks.append(task_spec)
                jobs.extend(groups.values())
        return jobs

    def recheck(self, job: TrainingJob, plan: Plan) -> tuple[list[CellOutcome], TrainingJob | None]:
        """After claiming a job (its cells lock): the cells another process stored since this run planned (answered
        from the store, as ``cached``) and the job of the cells still to compute (None if none are left)."""
        narrowed = replace(plan, models=[replace(job.planned, tasks=list(job.tasks), skipped=[])], seeds=[job.seed])
        answers, _ = self._stored_answers(narrowed, quiet=True)
        cached, remaining = [], []
        for task_spec in job.tasks:
            record = answers.get((job.spec.key, job.seed, task_spec.key))
            if record is not None:
                cached.append(CellOutcome(job.spec, job.seed, task_spec, "cached", record["main_score"]))
            else:
                remaining.append(task_spec)
        return cached, (replace(job, tasks=remaining) if remaining else None)

    def train_job(self, job: TrainingJob, plan: Plan) -> tuple[Any, float, Exception | None]:
        """The job's model (trained, loaded from its checkpoint, or built as is), the seconds that took, and the
        data, training or batch-dependence problem that stops it (its cells are then stored as missing/failed) or
        None."""
        started = time.perf_counter()
        try:
            if job.trained.key in plan.training_problems:
                raise plan.training_problems[job.trained.key]
            model = self.trained_model(job.trained, plan.profile, plan.device, job.seed)
            self.check_batch_independence(job.trained, model, plan.profile)
        except (DataFileError, NonFiniteLossError, ScoreError, BatchDependenceError) as exc:
            self.release()
            return None, time.perf_counter() - started, exc
        return model, time.perf_counter() - started, None

    def check_batch_independence(self, spec: ModelSpec, model: Any, profile: Profile) -> None:
        """Third-party embedders are probed (harness.consistency) before their first cell, once per plugin version
        (the verdict is cached in the store); one whose vectors depend on the rest of the batch raises
        BatchDependenceError, so its cells fail instead of storing scores. Built-in models are covered by tests."""
        name = student_spec(self.registry, spec, profile).name if spec.recipe else spec.name
        package = self.registry.package_of("model", name)
        if package in BUILTIN_PACKAGES or not callable(getattr(model, "encode", None)):
            return
        try:
            version = importlib_metadata.version(package)
        except (importlib_metadata.PackageNotFoundError, ValueError):
            version = None  # not an installed distribution (e.g. registered in code): probed in every run
        verdict_path = self.store.root / CACHE / "batch-probe" / f"{name}-{stable_hash([package, version], 16)}.json"
        verdict: str | None
        if version is not None and verdict_path.is_file():
            verdict = json.loads(verdict_path.read_text(encoding="utf-8")).get("problem")
        else:
            verdict = batch_dependence(model)
            if version is not None:
                atomic_write_json(verdict_path, {"model": name, "package": package, "version": version,
                                                 "problem": verdict})
        if verdict:
            raise BatchDependenceError(f"model {spec.label!r} ({package} {version or ''}): {verdict}.")

    def run_job(self, job: TrainingJob, plan: Plan, hardware: str,
                on_cell: Callable[[CellOutcome], None] | None = None) -> list[CellOutcome]:
        """Train (or load) the job's model once and evaluate each of its tasks in this process, storing each cell."""
        model, train_seconds, problem = self.train_job(job, plan)
        outcomes = []
        for task_spec in job.tasks:
            if problem is not None:
                result = self.problem_result(job.spec, job.seed, task_spec, plan, problem, hardware)
            else:
                result = self.compute_cell(job.spec, job.seed, task_spec, model, plan, hardware, train_seconds,
                                           job.trained)
            outcomes.append(self.store_result(result))
            if on_cell is not None:
                on_cell(outcomes[-1])
        self.release()
        return outcomes

    def _stored_answers(self, plan: Plan, quiet: bool = False) -> tuple[dict, dict]:
        """The cells the store answers, ``{(model key, seed, task key): record}``, and for every other cell
        ``{cell: (label, why it is computed)}``. A record answers a cell only if it is valid (schema and content
        checksum), has status ok, and matches the spec hash, task version, dataset checksum and training data."""
        answers: dict[tuple[str, int, str], dict] = {}
        reasons: dict[tuple[str, int, str], tuple[str, str]] = {}
        for planned in plan.models:
            spec = planned.spec
            for seed in plan.seeds:
                for task_spec in planned.tasks:
                    cell = (spec.key, seed, task_spec.key)
                    label = f"{spec.label} seed {seed} {task_spec.label}"
                    if self.config.overwrite or self.config.rescore:
                        reasons[cell] = (label, "--overwrite" if self.config.overwrite else "rescore")
                        continue
                    record, invalid = self.store.lookup(*cell)
                    path = self.store.record_path(*cell)
                    if invalid is not None:
                        if not quiet:
                            logger.warning("record %s is invalid (%s); the cell is recomputed", path, invalid)
                        reasons[cell] = (label, f"the stored record is invalid ({invalid})")
                        continue
                    if record is None:
                        reasons[cell] = (label, "not stored")
                        continue
                    dataset_checksum = plan.data_checksums.get(task_spec.key)
                    trained_key = self.trained_spec(spec, task_spec).key  # differs from spec.key under self
                    training_checksum = plan.training_checksums.get(trained_key)
                    if isinstance(plan.data_problems.get(task_spec.key), MissingDataError):
                        dataset_checksum = record.get("dataset_checksum")  # data gone since: keep what was computed
                    if isinstance(plan.training_problems.get(trained_key), MissingDataError):
                        training_checksum = record.get("training_data_checksum")
                    why = reuse_problem(
                        record, model_hash=spec.hash, task_version=self.registry.task(task_spec.name).metadata.version,
                        dataset_checksum=dataset_checksum, training_data_checksum=training_checksum,
                    )
                    if why is None:
                        answers[cell] = record
                    else:
                        reasons[cell] = (label, why)
                        if record["status"] == "ok" and not quiet:
                            self.log(f"  {label}: recomputing the stored result: {why}")
        return answers, reasons

    def _write_problem(self, spec, seed, task_spec, plan, error: Exception, hardware) -> CellOutcome:
        return self.store_result(self.problem_result(spec, seed, task_spec, plan, error, hardware))

    def problem_result(self, spec, seed, task_spec, plan, error: Exception, hardware) -> CellResult:
        """The cell of a data or training problem: missing (data not available) or failed (anything else). A
        malformed data file does not replace a stored ``ok`` result (``keeps_ok``), as missing data does not."""
        if isinstance(error, MissingDataError):
            return self._problem(spec, seed, task_spec, plan, "missing", str(error), hardware)
        result = self._problem(spec, seed, task_spec, plan, "failed", str(error), hardware)
        result.keeps_ok = isinstance(error, DataFileError) and not self.config.overwrite
        return result

    def _write_failed(self, spec, seed, task_spec, plan, message, hardware) -> CellOutcome:
        return self.store_result(self._problem(spec, seed, task_spec, plan, "failed", message, hardware))

    def _problem(self, spec, seed, task_spec, plan, status: str, message: str, hardware) -> CellResult:
        """A cell that could not produce a score (diverged training, non-finite or undefined score, malformed or
        missing data): stored as ``failed`` or ``missing`` with the reason, never as a number; recomputed on the
        next run."""
        record = {**self._base_record(spec, seed, task_spec, plan, hardware), "status": status, "message": message}
        return CellResult(spec, seed, task_spec, status, record, message)

    def store_result(self, result: CellResult) -> CellOutcome:
        """Write a computed cell's record (the driver alone does this) and report it in one line."""
        spec, seed, task_spec = result.spec, result.seed, result.task
        if result.keeps_ok:
            stored, _ = self.store.lookup(spec.key, seed, task_spec.key)
            if stored is not None and stored["status"] == "ok":
                logger.error("%s seed %s %s: %s The stored ok result (computed from the data as it was) is kept; fix "
                             "the data and run again.", spec.label, seed, task_spec.label, result.message)
                return CellOutcome(spec, seed, task_spec, "failed", None, result.message)
        self.store.write(spec.key, seed, task_spec.key, result.record, examples=result.examples)
        if result.status == "failed":
            # The reason is in the outcome (the CLI prints each distinct reason once, after the run's table).
            self.log(f"  {spec.label} seed {seed} {task_spec.label}: failed")
            return CellOutcome(spec, seed, task_spec, "failed", None, result.message)
        if result.status == "missing":
            if (task_spec.key, result.message) not in self._missing_reported:  # once per task, not once per cell
                self._missing_reported.add((task_spec.key, result.message))
                self.log(f"  {task_spec.label}: data missing (its cells are stored as missing): {result.message}")
            return CellOutcome(spec, seed, task_spec, "missing", None, result.message)
        score, eval_seconds = result.record["main_score"], result.record["timings"]["eval_seconds"]
        self.log(f"  {spec.label} seed {seed} {task_spec.label}: {score:.2f} ({eval_seconds:.1f}s)")
        return CellOutcome(spec, seed, task_spec, "ok", score)

    def _base_record(self, spec: ModelSpec, seed: int, task_spec: TaskSpec, plan: Plan, hardware: str) -> dict:
        metadata = self.registry.task(task_spec.name).metadata
        return {
            "model": spec.as_record(),
            "model_key": spec.key,
            "model_package": self.registry.package_of("model", spec.name),
            "seed": seed,
            "task": {
                "name": task_spec.name,
                "key": task_spec.key,
                "label": task_spec.label,
                "options": task_spec.options,
                "family": metadata.family,
                "version": str(metadata.version),
                "main_score": metadata.main_score,
                "package": self.registry.package_of("task", task_spec.name),
            },
            "profile": plan.profile.as_record(),
            "device": plan.device,
            "hardware": hardware,
            "environment": environment_record(),
            "config_hash": stable_hash(
                {"model": spec.hash, "seed": seed, "task": task_spec.name, "task_options": task_spec.options,
                 "task_version": metadata.version}
            ),
            "data_dir": _data_dir_text(self.config.data_dir),
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }

    def _write_missing(self, spec, seed, task_spec, plan, message, hardware) -> CellOutcome:
        return self.store_result(self._problem(spec, seed, task_spec, plan, "missing", message, hardware))

    def _run_cell(self, spec, seed, task_spec, model, plan, hardware, train_seconds,
                  trained: ModelSpec | None = None) -> CellOutcome:
        return self.store_result(self.compute_cell(spec, seed, task_spec, model, plan, hardware, train_seconds,
                                                   trained))

    def compute_cell(self, spec, seed, task_spec, model, plan, hardware, train_seconds,
                     trained: ModelSpec | None = None) -> CellResult:
        """Evaluate one cell and build its record without storing it. ``trained`` is the spec whose training produced
        ``model`` (``spec`` itself unless --train-on self)."""
        trained = trained or spec
        task = self.task(task_spec)
        metadata = task.metadata
        started = time.perf_counter()
        seed_everything(seed)
        try:
            result = task.evaluate(model, self.eval_context(plan.profile, plan.device, seed))
        except MissingDataError as exc:
            return self._problem(spec, seed, task_spec, plan, "missing", str(exc), hardware)
        except DataFileError as exc:  # malformed data found only now: a stored ok result is kept, as at plan time
            return self.problem_result(spec, seed, task_spec, plan, exc, hardware)
        except ScoreError as exc:  # a score undefined for these predictions
            return self._problem(spec, seed, task_spec, plan, "failed", str(exc), hardware)
        except IncompatibleError as exc:  # found only at evaluation (e.g. a reranker's first stage): this cell alone
            return self._problem(spec, seed, task_spec, plan, "failed", str(exc), hardware)
        eval_seconds = time.perf_counter() - started
        if metadata.main_score not in result.scores:
            raise HarnessError(
                f"task {task_spec.name!r} returned no {metadata.main_score!r} score (it returned "
                f"{', '.join(result.scores)}); this is a bug in the task plugin."
            )
        non_finite = {k: v for k, v in result.scores.items() if not math.isfinite(float(v))}
        if non_finite:
            shown = ", ".join(f"{k}={v}" for k, v in list(non_finite.items())[:4])
            return self._problem(
                spec, seed, task_spec, plan, "failed",
                f"the evaluation produced non-finite scores ({shown}); the model's predictions or the data are "
                "broken (e.g. diverged training: lower the learning rate).", hardware,
            )
        planned_checksum = plan.data_checksums.get(task_spec.key)
        if planned_checksum is not None and planned_checksum != result.dataset_checksum:
            logger.warning("task %s: the dataset checksum of the evaluation differs from its check_data(); its "
                           "cells cannot be reused until they agree", task_spec.label)
        record = {
            **self._base_record(spec, seed, task_spec, plan, hardware),
            "status": "ok",
            "scores": {k: float(v) for k, v in result.scores.items()},
            "main_score": float(result.scores[metadata.main_score]),
            "details": result.details,
            "dataset_checksum": result.dataset_checksum,
            "training_data_checksum": self._training_data_checksums.get((trained.hash, seed)),
            "training": self.training_report(trained, seed),
            **self._budget_record(trained, seed),
            "timings": {"model_seconds": round(train_seconds, 3), "eval_seconds": round(eval_seconds, 3)},
        }
        description, side_file = example_side_file(result.examples, record["main_score"], task_spec.label)
        if description is not None:
            record["examples"] = description
        return CellResult(spec, seed, task_spec, "ok", record, examples=side_file)


def in_plan_order(plan: Plan, outcomes: list[CellOutcome]) -> list[CellOutcome]:
    """Outcomes in the plan's order (model, seed, task) whatever order an executor finished them in, so the summary
    table and the returned list are the same under every executor."""
    model_index = {planned.spec.key: number for number, planned in enumerate(plan.models)}
    seed_index = {seed: number for number, seed in enumerate(plan.seeds)}
    task_index = {task_spec.key: number for number, task_spec in enumerate(plan.tasks)}
    return sorted(outcomes, key=lambda o: (model_index.get(o.spec.key, 0), seed_index.get(o.seed, 0),
                                           task_index.get(o.task.key, 0)))


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


def summary_rows(outcomes: list[CellOutcome]) -> tuple[list[str], list[list[str]]]:
    """A table of this run: one row per model spec, one column per task, mean ± std over seeds."""
    task_labels = list(dict.fromkeys(o.task.label for o in outcomes))
    specs = list(dict.fromkeys((o.spec.key, o.spec.label, o.spec.train_on) for o in outcomes))
    rows = []
    for key, label, train_on in specs:
        row = [label + (f" (trained on {train_on})" if train_on else "")]
        for task_label in task_labels:
            values = [
                o.main_score
                for o in outcomes
                if o.spec.key == key and o.task.label == task_label and o.main_score is not None
            ]
            statuses = {o.status for o in outcomes if o.spec.key == key and o.task.label == task_label}
            empty = "failed" if "failed" in statuses else "missing" if "missing" in statuses else "-"
            row.append(format_mean_std(values) if values else empty)
        rows.append(row)
    return ["model", *task_labels], rows


def format_mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"
