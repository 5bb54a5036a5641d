"""A run's plan: its config resolved into model specs x seeds x tasks, every check that needs no computing done
(names, options, seeds, capabilities, training sources and budgets, that the store is writable, every task's data
and every training source), and each cell's status fixed (harness.run.cell): ``cached`` (a valid record of this run
answers it, see ``harness.record.reuse_problem``), ``missing`` or ``failed`` (its data or training data is missing
or malformed: it is stored so, the rest of the matrix still runs) or ``pending`` (to compute). The planner reads data
only through a :class:`DataChecker` and takes the device its caller chose (the executor's, harness.executors). The
plan is frozen: what runs it (harness.run.driver, an executor) reads it and never changes it.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..errors import DataFileError, HarnessError, IncompatibleError, InvalidOptionError, MissingDataError
from ..matrix import ModelEntry, numbered_mistakes
from ..profiles import Profile, get_profile
from ..record import reuse_problem
from ..registry import Registry
from ..spec import SELF_TRAINING, ModelSpec, TaskSpec, resolve_model_spec, resolve_task_specs
from ..store import Store, read_examples
from .cell import Cell, CellStatus
from .config import CACHE, RunConfig
from .spec_checks import SpecChecks

logger = logging.getLogger(__name__)


class DataChecker(Protocol):
    """What the planner reads data through (harness.run.build.ModelBuilder is one). Each raises DataFileError (or
    MissingDataError) for data that is malformed (or missing)."""

    def task_checksum(self, task_spec: TaskSpec) -> str | None:
        """A task's dataset checksum (NotImplementedError: the task cannot say before evaluating)."""

    def training_checksum(self, spec: ModelSpec, profile: Profile, seed: int) -> str:
        """The checksum of the training data of a trained spec, cut to ``profile``'s budget."""

    def check_backbone(self, name: str) -> None:
        """A backbone the user named exists."""


@dataclass(frozen=True)
class PlannedModel:
    spec: ModelSpec
    entry: ModelEntry
    tasks: tuple[TaskSpec, ...] = ()  # the plan's tasks this model can run
    skipped: tuple[tuple[TaskSpec, str], ...] = ()  # family members it cannot run, and why


@dataclass(frozen=True)
class TrainingJob:
    """Cells that one trained model serves: the pending tasks of one model spec and seed (under --train-on self,
    of one task). An executor trains (or loads) the model once, then evaluates each task."""

    planned: PlannedModel
    trained: ModelSpec  # the spec whose training makes the model: planned.spec, or its per-task spec under self
    seed: int
    tasks: tuple[TaskSpec, ...]

    @property
    def spec(self) -> ModelSpec:
        return self.planned.spec

    @property
    def label(self) -> str:
        return f"{self.spec.label} seed {self.seed}"


@dataclass(frozen=True)
class Plan:
    models: tuple[PlannedModel, ...]
    tasks: tuple[TaskSpec, ...]
    seeds: tuple[int, ...]
    profile: Profile
    device: str
    data_dir_text: str | None = None  # the data dir as the user gave it (records name it so)
    runtime: str = "torch"  # the evaluation runtime (RunConfig.runtime); records name it when it is not torch
    # Checked in the plan, before anything runs: the dataset checksum of every task (None: the task cannot say
    # before evaluating), the data problem of every task whose data is missing or malformed, and the same for the
    # training data of every trained spec (by spec key).
    data_checksums: dict[str, str | None] = field(default_factory=dict)
    data_problems: dict[str, DataFileError] = field(default_factory=dict)
    training_checksums: dict[str, str] = field(default_factory=dict)
    training_problems: dict[str, DataFileError] = field(default_factory=dict)
    cells: tuple[Cell, ...] = ()  # every cell, in plan order (model, seed, task), with its status
    log_to: tuple[str, ...] = ()  # the run's experiment trackers (RunConfig.log_to): records name them, keys do not

    @property
    def cell_count(self) -> int:
        """How many cells the plan has (known before their statuses are)."""
        return sum(len(m.tasks) for m in self.models) * len(self.seeds)

    @property
    def statuses(self) -> tuple[Cell, ...]:
        """Deprecated name of :attr:`cells` (removed in the next version)."""
        warnings.warn("Plan.statuses is deprecated; use Plan.cells", DeprecationWarning, stacklevel=2)
        return self.cells

    def jobs(self) -> list[TrainingJob]:
        """The pending cells, grouped by the trained model that serves them (one per model spec and seed, except
        under --train-on self: one per task)."""
        planned = {model.spec.key: model for model in self.models}
        groups: dict[tuple[str, int, str], TrainingJob] = {}
        for cell in self.cells:
            if cell.status != CellStatus.PENDING:
                continue
            trained = trained_spec(cell.spec, cell.task)
            key = (cell.spec.key, cell.seed, trained.key)
            job = groups.get(key) or TrainingJob(planned[cell.spec.key], trained, cell.seed, ())
            groups[key] = replace(job, tasks=(*job.tasks, cell.task))
        return list(groups.values())


def trained_spec(spec: ModelSpec, task_spec: TaskSpec) -> ModelSpec:
    """The spec trained for a cell. ``--train-on self`` (thesis table 6.10 and the TSDAE paper train one model per
    USEB domain on its own unlabeled sentences) trains one model per evaluated task on that task's training data:
    that model is the spec with the task as its source (its own checkpoint and training checksum), while the cell's
    record stays under the ``self`` spec, so the leaderboard shows one row."""
    if spec.train_on != SELF_TRAINING:
        return spec
    return replace(spec, train_on=task_spec.label)


def _check_finite_options(owner: str, options: dict[str, Any]) -> None:
    """NaN or infinite option values (``be:lr=nan``) are refused at plan time rather than failing in training."""
    for key, value in options.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidOptionError(f"option {key!r} of {owner} is {value}; give a finite number.")


def stored_cell(
    registry: Registry, store: Store, plan: Plan, spec: ModelSpec, seed: int, task_spec: TaskSpec, config: RunConfig
) -> Cell:
    """The cell as the store answers it: ``cached`` when its record is valid (schema and content checksum), has
    status ok, and matches the spec hash, task version, dataset checksum and training data; else ``pending`` with
    why it is computed."""
    cell = Cell(spec, seed, task_spec)
    if config.overwrite or config.rescore:
        return replace(cell, why="--overwrite" if config.overwrite else "rescore")
    record, invalid = store.lookup(spec.key, seed, task_spec.key, plan.runtime)
    if invalid is not None:
        return replace(cell, why=f"the stored record is invalid ({invalid})", invalid=invalid)
    if record is None:
        return replace(cell, why="not stored")
    dataset_checksum = plan.data_checksums.get(task_spec.key)
    trained_key = trained_spec(spec, task_spec).key  # differs from spec.key under self
    training_checksum = plan.training_checksums.get(trained_key)
    if isinstance(plan.data_problems.get(task_spec.key), MissingDataError):
        dataset_checksum = record.get("dataset_checksum")  # data gone since: keep what was computed
    if isinstance(plan.training_problems.get(trained_key), MissingDataError):
        training_checksum = record.get("training_data_checksum")
    why = reuse_problem(
        record,
        model_hash=spec.hash,
        task_version=registry.task(task_spec.name).metadata.version,
        dataset_checksum=dataset_checksum,
        training_data_checksum=training_checksum,
        runtime=plan.runtime,
        requested_budget=spec.requested_budget,
    )
    if why is None:  # the score can be reused; its per-example file too? (a damaged one is never kept)
        _, why = read_examples({**record, "_path": str(store.record_path(spec.key, seed, task_spec.key, plan.runtime))})
    if why is None:
        return replace(cell, status=CellStatus.CACHED, record=record)
    return replace(cell, why=why, recomputed_ok=record["status"] == CellStatus.OK)


def raise_all(mistakes: list[HarnessError]) -> None:
    """Raise the one mistake as it is, or several as one line that numbers them."""
    if len(mistakes) == 1:
        raise mistakes[0]
    if mistakes:
        raise HarnessError(numbered_mistakes([str(exc) for exc in mistakes]))


class Planner:
    """Builds the plan of a config (``plan()``) for cells computed on ``device`` (the executor's choice, see
    harness.executors); ``data`` reads every task's data and training data."""

    def __init__(
        self,
        registry: Registry,
        config: RunConfig,
        store: Store,
        data: DataChecker,
        device: str,
        log: Callable[[str], None],
    ):
        self.registry, self.config, self.store, self.data, self.log = registry, config, store, data, log
        self.device = device
        self.checks = SpecChecks(registry, config.runtime)

    def plan(self) -> Plan:
        config = self.config
        profile = get_profile(config.profile)
        device = self.device
        self.store.check_writable()
        if not config.models:
            raise HarnessError("no models given; use --models NAME[,NAME] (see `harness list`).")
        if not config.tasks:
            raise HarnessError("no tasks given; use --tasks NAME[,NAME] (see `harness list`).")
        # Every mistake of the tasks and models is said at once (a matrix with several needs one round, not many).
        mistakes: list[HarnessError] = []
        task_specs = self._task_specs(mistakes)
        from_family = {key for key, (_, family) in task_specs.items() if family}
        planned = []
        for entry in config.models:
            try:
                planned.append(self._planned_model(entry, profile, list(task_specs.values()), from_family))
            except HarnessError as exc:
                mistakes.append(exc)
        raise_all(mistakes)
        shared = dict(config.budget)
        for entry in config.models:
            own = entry.budget if entry.own_budget_keys is None else entry.own_budget_keys
            shared.update({key: value for key, value in entry.budget.items() if key not in own})
        self.checks.check_run_budget_keys([model.spec for model in planned], shared)
        self.checks.check_runtime([model.spec for model in planned], device)
        # A backbone the user names (--backbone, a matrix entry's) that is missing or unreachable fails here, in
        # seconds; the profile's default is left to the models that read it (some read none).
        given = [entry.backbone or config.backbone for entry in config.models]
        for backbone in dict.fromkeys(name for name in given if name):
            self.data.check_backbone(backbone)
        plan = Plan(
            tuple(planned),
            tuple(spec for spec, _ in task_specs.values()),
            tuple(dict.fromkeys(config.seeds)),
            profile,
            device,
            log_to=config.log_to,
            data_dir_text=str(config.data_dir) if config.data_dir else None,
            runtime=config.runtime,
        )
        if plan.cell_count == 0:
            reasons = "; ".join(problem for m in planned for _, problem in m.skipped[:1])
            raise IncompatibleError(f"nothing to run: no model of the plan can run any of its tasks ({reasons}).")
        plan = replace(plan, **self._check_data(plan))
        return replace(
            plan,
            cells=tuple(
                self._cell(plan, model, seed, task_spec)
                for model in plan.models
                for seed in plan.seeds
                for task_spec in model.tasks
            ),
        )

    def _task_specs(self, mistakes: list[HarnessError]) -> dict[str, tuple[TaskSpec, bool]]:
        """The plan's tasks by key, each with whether it was reached only through a family name (a task that cannot
        be resolved goes to ``mistakes``)."""
        task_specs: dict[str, tuple[TaskSpec, bool]] = {}
        for text in self.config.tasks:
            try:
                resolved = resolve_task_specs(self.registry, text)
            except HarnessError as exc:
                mistakes.append(exc)
                continue
            for spec in resolved:
                if spec.key not in task_specs:
                    task_specs[spec.key] = (spec, len(resolved) > 1)
                elif len(resolved) == 1:
                    task_specs[spec.key] = (task_specs[spec.key][0], False)
        return task_specs

    def _planned_model(
        self, entry: ModelEntry, profile: Profile, task_specs: list[tuple[TaskSpec, bool]], from_family: set[str]
    ) -> PlannedModel:
        config = self.config
        spec = resolve_model_spec(
            self.registry,
            entry.spec,
            profile,
            entry.backbone or config.backbone,
            entry.train_on or config.train_on,
            {**config.budget, **entry.budget},
            content_cache=self.store.root / CACHE,
        )
        _check_finite_options(f"model {spec.label!r}", spec.options)
        self.checks.check_training(spec)
        own = entry.budget if entry.own_budget_keys is None else entry.own_budget_keys
        self.checks.check_budget_keys(spec, [key for key in entry.budget if key in own])
        validate = self.registry.spec_plugin(spec.name).validate
        if validate is not None:
            validate(spec, self.registry)
        tasks, skipped = [], []
        for task_spec, _ in task_specs:
            problem = self.checks.incompatibility(spec, task_spec)
            if problem is None:
                tasks.append(task_spec)
            elif task_spec.key in from_family:
                # A family may mix capabilities (e.g. a pair task and an embedding probe): run what fits.
                skipped.append((task_spec, problem))
            else:
                raise IncompatibleError(problem + " Leave this pair out of the matrix.")
        return PlannedModel(spec, entry, tuple(tasks), tuple(skipped))

    def _cell(self, plan: Plan, model: PlannedModel, seed: int, task_spec: TaskSpec) -> Cell:
        cell = stored_cell(self.registry, self.store, plan, model.spec, seed, task_spec, self.config)
        if cell.status == CellStatus.CACHED:
            return cell
        problem = plan.data_problems.get(task_spec.key) or plan.training_problems.get(
            trained_spec(model.spec, task_spec).key
        )
        if problem is None:
            return cell
        status = CellStatus.MISSING if isinstance(problem, MissingDataError) else CellStatus.FAILED
        return replace(cell, status=status, problem=problem)

    # -- data --------------------------------------------------------------------------------------------------------
    def _check_data(self, plan: Plan) -> dict[str, Any]:
        """Load every task's data and every trained spec's training data once, before the first cell: a problem is
        kept in the plan (its cells are stored as missing or failed, the others run), never raised mid-matrix."""
        found: dict[str, dict] = {
            "data_checksums": {},
            "data_problems": {},
            "training_checksums": {},
            "training_problems": {},
        }
        for task_spec in plan.tasks:
            try:
                found["data_checksums"][task_spec.key] = self.data.task_checksum(task_spec)
            except NotImplementedError:
                found["data_checksums"][task_spec.key] = None
                self.log(
                    f"  task {task_spec.label} cannot check its data before evaluating (no check_data); its "
                    "cells are recomputed on every run"
                )
            except DataFileError as exc:
                found["data_problems"][task_spec.key] = exc
            except (UnicodeDecodeError, ValueError, OSError) as exc:
                found["data_problems"][task_spec.key] = DataFileError(
                    f"task {task_spec.label}: its data could not be read ({type(exc).__name__}: {exc})."
                )
        # Under --train-on self each task trains its own model: one trained spec (and training data) per task.
        trained_specs = [
            trained_spec(planned.spec, task_spec) for planned in plan.models for task_spec in planned.tasks
        ]
        for spec in trained_specs:
            if (
                spec.train_on is None
                or spec.key in found["training_checksums"]
                or spec.key in found["training_problems"]
            ):
                continue
            try:
                found["training_checksums"][spec.key] = self.data.training_checksum(spec, plan.profile, plan.seeds[0])
            except DataFileError as exc:
                found["training_problems"][spec.key] = exc
            except (UnicodeDecodeError, ValueError, OSError) as exc:
                found["training_problems"][spec.key] = DataFileError(
                    f"training data of {spec.train_on}: could not be read ({type(exc).__name__}: {exc})."
                )
        return found
