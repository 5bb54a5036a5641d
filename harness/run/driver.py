"""The driver of a run: plans a config (harness.run.plan), hands the plan to an executor (harness.executors; chosen
by the caller, e.g. the CLI) and alone writes the records the workers compute (``Worker.record``), so the store stays
consistent whatever the workers do. Stored cells are answered from the store, so an interrupted run resumes where it
stopped.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from .. import distributed
from ..device import hardware_description, resolve_device
from ..errors import HarnessError
from ..locks import StoreLock
from ..registry import Registry
from ..store import Store
from ..trackers import RunTrackers
from .build import TaskSet
from .cell import Cell, CellStatus
from .checkpoints import check_rescore
from .config import RunConfig
from .evaluate import CellWork
from .models import run_models
from .plan import Plan, Planner, TrainingJob, stored_cell

logger = logging.getLogger(__name__)


class RunLog:
    """Where a run's lines go (``log(line)``): the caller's function, unless a progress bar diverts them above
    itself while it is drawn (``sink``; harness.executors.progress). The run, its models and the worker an executor
    gets all say their lines through the one RunLog."""

    def __init__(self, sink: Callable[[str], None]):
        self.sink = sink

    def __call__(self, message: str) -> None:
        self.sink(message)


class Worker:
    """What an executor gets from the driver: the store's cell locks, a look at the store after claiming a job, the
    computation of a job in this process, the config a remote worker rebuilds the computation from, and ``record``,
    the driver's writer of computed cells. ``log`` says a line (a progress bar may divert it while it runs)."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        config: RunConfig,
        plan: Plan,
        work: CellWork,
        log: RunLog,
        trackers: RunTrackers | None = None,
    ):
        self._store = store
        self._registry = registry
        self._config = config
        self._plan = plan
        self._work = work
        self._trackers = trackers if trackers is not None else RunTrackers()  # each stored cell is reported to them
        self.log = log
        self.progress = config.progress
        self.store_root = store.root
        self._missing_reported: set[tuple[str, str]] = set()  # (task key, message) of data-missing lines said

    def check_locking(self) -> None:
        self._store.check_locking()

    def cells_lock(self, job: TrainingJob) -> StoreLock | RankLock:
        if not distributed.is_main_process():  # torchrun: rank 0 claims for all ranks (harness.executors.local)
            return RankLock()
        return self._store.cells_lock(job.trained.key, job.seed, f"computing {len(job.tasks)} cell(s) of {job.label}")

    def remote_config(self) -> RunConfig:
        """The run's config for a worker in another process (absolute store and data paths; no progress bars; no
        trackers). Records name the data dir as the user gave it (``Plan.data_dir_text``)."""
        config = self._config
        return replace(
            config,
            results_dir=config.results_dir.resolve(),
            progress=False,
            data_dir=config.data_dir.resolve() if config.data_dir else None,
            log_to=(),  # the driver reports each stored cell; a worker's machine need not have the trackers
        )

    def _with_working_trackers(self, record: Any) -> Any:
        """The record naming under ``log_to`` only the trackers still reporting when it is stored (harness.trackers:
        one that failed is dropped; absent when none is left)."""
        content = record.to_dict() if hasattr(record, "to_dict") else dict(record)
        if not content.get("log_to"):
            return record
        working = self._trackers.working(content["log_to"])
        if working == list(content["log_to"]):
            return record
        content.pop("log_to")
        return {**content, **({"log_to": working} if working else {})}

    def recheck(self, job: TrainingJob) -> tuple[list[Cell], TrainingJob | None]:
        """After claiming a job (its cells lock): the cells another process stored since this run planned (answered
        from the store, as ``cached``) and the job of the cells still to compute (None if none are left)."""
        cached, remaining = [], []
        for task_spec in job.tasks:
            cell = stored_cell(self._registry, self._store, self._plan, job.spec, job.seed, task_spec, self._config)
            if cell.status == CellStatus.CACHED:
                cached.append(cell)
            else:
                remaining.append(task_spec)
        return cached, (replace(job, tasks=tuple(remaining)) if remaining else None)

    def run_job(self, job: TrainingJob, on_cell: Callable[[Cell], None] | None = None) -> list[Cell]:
        """Train (or load) the job's model once and evaluate each of its tasks in this process, storing each cell."""
        outcomes = []
        for result in self._work.job_results(job):
            outcomes.append(self.record(result))
            if on_cell is not None:
                on_cell(outcomes[-1])
        return outcomes

    def record(self, result: Cell) -> Cell:
        """Write a computed cell's record (the driver alone does this) and report it in one line; the cell as stored
        (without its per-example file, which is written)."""
        spec, seed, task_spec = result.spec, result.seed, result.task
        assert result.record is not None, "only a computed cell is recorded"
        outcome = replace(result, examples=None)
        if not distributed.is_main_process():  # torchrun: rank 0 writes the records; this rank computed the same
            return outcome
        store = self._store
        if result.keeps_ok:
            stored, _ = store.lookup(spec.key, seed, task_spec.key, result.record.get("runtime"))
            if stored is not None and stored["status"] == CellStatus.OK:
                logger.error(
                    "%s seed %s %s: %s The stored ok result (computed from the data as it was) is kept; fix "
                    "the data and run again.",
                    spec.label,
                    seed,
                    task_spec.label,
                    result.message,
                )
                return replace(outcome, status=CellStatus.FAILED)
        record = self._with_working_trackers(result.record)
        path = store.write(spec.key, seed, task_spec.key, record, examples=result.examples)
        self._trackers.stored_cell(record, path)  # never raises: a failing tracker is dropped
        if result.status == CellStatus.FAILED:
            # The reason is in the outcome (the CLI prints each distinct reason once, after the run's table).
            self.log(f"  {spec.label} seed {seed} {task_spec.label}: failed")
        elif result.status == CellStatus.MISSING:
            if (task_spec.key, result.message) not in self._missing_reported:  # once per task, not once per cell
                self._missing_reported.add((task_spec.key, result.message))
                self.log(f"  {task_spec.label}: data missing (its cells are stored as missing): {result.message}")
        else:
            score, eval_seconds = result.record["main_score"], result.record["timings"]["eval_seconds"]
            self.log(f"  {spec.label} seed {seed} {task_spec.label}: {score:.2f} ({eval_seconds:.1f}s)")
        return outcome


class RankLock:
    """The cells lock of a torchrun rank other than 0: rank 0 holds the real one for every rank."""

    def acquire(
        self, blocking: bool = True, timeout: float | None = None, on_wait: Callable[[str], None] | None = None
    ) -> bool:
        return True

    def release(self) -> None:
        pass

    def holder(self) -> str:
        return "rank 0 of this run"


class Executor(Protocol):
    """Where the cells of a plan run (harness.executors has the built-in ones; only the caller, e.g. the CLI,
    chooses one). ``device``: the device the plan's cells are computed on, from the one the user asked for (an
    executor whose workers each resolve it on their own machine only checks the name); ``start``: the checks that
    can fail (Ray missing, a cluster unreachable), before any cell runs; ``run``: the cells of ``plan.jobs()``,
    each recorded through ``worker.record``."""

    name: str

    def device(self, requested: str) -> str: ...

    def start(self, plan: Plan, worker: Worker) -> None: ...

    def run(self, plan: Plan, worker: Worker) -> list[Cell]: ...


class Run:
    """Plans and runs one config: ``run(executor)`` (or ``plan(executor)`` then ``run(executor, plan)``). ``models``
    builds, trains and loads the models of the config as it is planned (also for callers that want one trained
    model, e.g. tests); a run builds its own for its plan, checked against the plan's training data."""

    def __init__(self, registry: Registry, config: RunConfig, log: Callable[[str], None] | None = None):
        self.registry = registry
        self.config = config
        self.log = RunLog(log or logger.info)
        self.store = Store(config.results_dir)
        self.tasks = TaskSet(registry, config.data_dir)  # the task objects the planner and the cells share
        # The run's experiment trackers (rank 0 only under torchrun: it alone reports, as it alone writes records).
        self.trackers = RunTrackers(config.log_to if distributed.is_main_process() else (), config.results_dir)
        self.models = run_models(registry, config, self.store, self.log, tasks=self.tasks, trackers=self.trackers)

    def plan(self, executor: Executor | None = None) -> Plan:
        """The plan of the config for cells computed where ``executor`` computes them (None: this process)."""
        device = executor.device(self.config.device) if executor is not None else resolve_device(self.config.device)
        return Planner(self.registry, self.config, self.store, self.models.builder, device, self.log).plan()

    def run(self, executor: Executor, plan: Plan | None = None) -> list[Cell]:
        """Compute the plan's pending cells with ``executor`` and return every cell in plan order."""
        plan = plan or self.plan(executor)
        models = run_models(
            self.registry, self.config, self.store, self.log, plan.training_checksums, self.tasks, self.trackers
        )
        if self.config.rescore:
            check_rescore(plan, models.checkpoints)
        work = CellWork(self.registry, self.config, plan, models, hardware_description(plan.device))
        worker = Worker(self.store, self.registry, self.config, plan, work, self.log, self.trackers)
        executor.start(plan, worker)  # checks that can fail (Ray missing, cluster unreachable) before any cell runs
        for path, why in self.store.clean_stale_temporaries() if distributed.is_main_process() else ():
            self.log(f"  removed {path} ({why})")
        self._say_recomputed(plan)
        self._check_store_only(plan)
        self.log(
            f"{plan.cell_count} cells: {len(plan.models)} models x {len(plan.tasks)} tasks x {len(plan.seeds)} seeds "
            f"(profile {plan.profile.name}, device {plan.device}, results in {self.store.root})"
        )
        outcomes = list(self._settled(plan, worker, work))
        # The executor (harness.executors) trains and evaluates the jobs, here or on a cluster; records are written
        # by this process only (Worker.record), so the store stays consistent whatever the workers do.
        try:
            outcomes += executor.run(plan, worker)
        finally:
            self.trackers.finish()
        return in_plan_order(plan, outcomes)

    def _say_recomputed(self, plan: Plan) -> None:
        """Why a stored record is not reused: invalid (a warning) or an ok result this run cannot reuse."""
        for cell in plan.cells:
            if cell.invalid is not None:
                logger.warning(
                    "record %s is invalid (%s); the cell is recomputed",
                    self.store.record_path(cell.spec.key, cell.seed, cell.task.key, plan.runtime),
                    cell.invalid,
                )
            elif cell.status != CellStatus.CACHED and cell.recomputed_ok:
                self.log(f"  {cell.label}: recomputing the stored result: {cell.why}")

    def _check_store_only(self, plan: Plan) -> None:
        recomputed = [cell for cell in plan.cells if cell.status != CellStatus.CACHED]
        if self.config.store_only and recomputed:
            cells = [f"{cell.label}: {cell.why or cell.problem}" for cell in recomputed]
            raise HarnessError(
                f"--store-only: {len(cells)} of {plan.cell_count} cells cannot be answered from {self.store.root}: "
                + "; ".join(cells[:5])
                + ("; ..." if len(cells) > 5 else "")
                + ". Run without --store-only to compute them."
            )

    def _settled(self, plan: Plan, worker: Worker, work: CellWork) -> Iterator[Cell]:
        """The cells the plan settled: answered from the store, or stored at once with their data problem."""
        for planned in plan.models:
            for task_spec, problem in planned.skipped:
                self.log(f"  skipping {task_spec.label} for {planned.spec.label}: {problem}")
        for cell in plan.cells:
            if cell.status == CellStatus.CACHED:
                yield cell
            elif cell.problem is not None:
                yield worker.record(work.problem(cell.spec, cell.seed, cell.task, cell.problem))


def in_plan_order(plan: Plan, outcomes: list[Cell]) -> list[Cell]:
    """Outcomes in the plan's order (model, seed, task) whatever order an executor finished them in, so the summary
    table and the returned list are the same under every executor."""
    model_index = {planned.spec.key: number for number, planned in enumerate(plan.models)}
    seed_index = {seed: number for number, seed in enumerate(plan.seeds)}
    task_index = {task_spec.key: number for number, task_spec in enumerate(plan.tasks)}
    return sorted(
        outcomes,
        key=lambda o: (model_index.get(o.spec.key, 0), seed_index.get(o.seed, 0), task_index.get(o.task.key, 0)),
    )


def summary_rows(outcomes: list[Cell]) -> tuple[list[str], list[list[str]]]:
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
            empty = next((str(status) for status in (CellStatus.FAILED, CellStatus.MISSING) if status in statuses), "-")
            row.append(format_mean_std(values) if values else empty)
        rows.append(row)
    return ["model", *task_labels], rows


def format_mean_std(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"
