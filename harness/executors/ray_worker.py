"""The worker side of the Ray executor (:mod:`harness.executors.ray_cluster`): what runs on a Ray worker.

``CellServer`` is the long-lived worker (a Ray actor, one per cluster slot): it builds the registry, the plan and the
run's task objects once and keeps the current job's model between that job's cells; ``probe_node`` checks a node
before any cell runs. ``TaskResources``, ``worker_device`` and ``threads_for`` say what a worker was given and how it
uses it. The driver is ``ray_cluster`` (the cluster, the workers' start, lost nodes) and ``ray_dispatch``
(scheduling, claims, records, lost workers).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..run.cell import Cell
    from ..run.config import RunConfig
    from ..run.plan import Plan, TrainingJob

logger = logging.getLogger(__name__)


# -- what a worker is given --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskResources:
    num_cpus: float
    num_gpus: float

    def as_options(self) -> dict[str, float]:
        """Keyword arguments of ``remote_function.options``."""
        return {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}


def worker_device(requested: str, num_gpus: float) -> str:
    """The device a task uses: CUDA exactly when it asked Ray for a GPU (then ``cuda``, which is its own GPU), else
    the CPU for ``auto``/``cuda`` (a task must not use a GPU it did not reserve), else what was asked (cpu, mps)."""
    if num_gpus > 0:
        return "cuda"
    return "cpu" if requested in ("auto", "cuda") else requested


def threads_for(num_cpus: float) -> int:
    """PyTorch threads of a task: its CPU share (Ray sets OMP_NUM_THREADS only when a worker starts)."""
    return max(1, int(num_cpus))


# -- what runs on the workers ------------------------------------------------------------------------------------------
@dataclass
class TrainingResult:
    """What preparing a job's model returns: how long training (or loading) took, where it ran, and the problem that
    stopped it (or None)."""

    seconds: float
    problem: Exception | None
    where: str


@dataclass(frozen=True)
class Served:
    """Who computed a cell and how long it took there: the worker (host and pid), whether the model was built or
    loaded for this cell (False: the worker had it in memory from an earlier call), the seconds of the call on the
    worker, and the seconds the worker took to start (imports, registry, plan: once per worker)."""

    where: str
    loaded_model: bool
    seconds: float
    worker_start_seconds: float


class CellServer:
    """A long-lived Ray worker (an actor, one per cluster slot, alive for the whole run): the registry, the plan and
    the run's computation (``CellWork``: its task objects keep their loaded datasets) are built once, and the model of
    the job it serves now stays in memory between that job's cells. The driver sends every call of one job to the
    same server, so a job's model is trained or loaded once. Calls run one at a time, in the order they were sent.

    One job's model is kept (key: the trained spec's key and the seed); a call for another job releases it first, so
    a server's memory holds one model (and the teachers it trained with) at a time, as the local executor does."""

    def __init__(self, config: RunConfig, plan: Plan, resources: TaskResources):
        started = time.perf_counter()
        from dataclasses import replace

        import torch

        from ..device import hardware_description, resolve_device
        from ..registry import default_registry
        from ..run.evaluate import CellWork
        from ..run.models import run_models
        from ..store import Store

        # Ray sets OMP_NUM_THREADS only when a worker starts; PyTorch threads follow the slot's CPUs.
        torch.set_num_threads(threads_for(resources.num_cpus))
        device = resolve_device(worker_device(plan.device, resources.num_gpus))
        registry = default_registry()
        for task_spec in plan.tasks:  # a task namespace's tasks (mteb.sts22) are known once resolved
            registry.resolve_task(task_spec.name)
        # Checkpoints are checked against the training data the driver planned with (other data: retrained).
        models = run_models(
            registry, config, Store(config.results_dir), log=logger.debug, training_checksums=plan.training_checksums
        )
        self.cell_work = CellWork(registry, config, replace(plan, device=device), models, hardware_description(device))
        self._where = f"{socket.gethostname()} pid {os.getpid()}"
        self._held: tuple[str, int] | None = None  # (trained spec key, seed) of the model in memory
        self._model: tuple[Any, float, Exception | None] = (None, 0.0, None)
        self._start_seconds = time.perf_counter() - started

    def _job_model(self, job: TrainingJob) -> tuple[tuple[Any, float, Exception | None], bool]:
        """The job's (model, seconds, problem), and whether this call built, trained or loaded it."""
        key = (job.trained.key, job.seed)
        if self._held == key:
            return self._model, False
        self._model, self._held = (None, 0.0, None), None
        self.cell_work.release()  # the previous job's model (and its teachers) before building the next
        release_gpu_memory()
        model = self.cell_work.model(job)
        self._model = model
        self._held = key
        return self._model, True

    def prepare(self, job: TrainingJob) -> TrainingResult:
        """Train (or load, or build) the job's model and keep it for the job's cells."""
        (_, seconds, problem), _ = self._job_model(job)
        return TrainingResult(seconds, problem, self._where)

    def evaluate(self, job: TrainingJob, task_index: int) -> tuple[Cell, Served]:
        """One cell of the job, with the job's model (in memory, or trained/loaded now: after a restart of this
        server the model is loaded again from its checkpoint)."""
        started = time.perf_counter()
        task_spec = job.tasks[task_index]
        (model, model_seconds, problem), loaded = self._job_model(job)
        if problem is not None:
            result = self.cell_work.problem(job.spec, job.seed, task_spec, problem)
        else:
            result = self.cell_work.evaluate(job, task_spec, model, model_seconds)
        return result, Served(self._where, loaded, time.perf_counter() - started, self._start_seconds)


def release_gpu_memory() -> None:
    """Hand the memory PyTorch's caching allocator keeps for freed tensors back to the GPU: workers sharing a GPU
    (--gpus-per-task 0.5) would otherwise each keep the peak of their previous job and starve the other."""
    import gc

    import torch

    gc.collect()  # the released model's tensors, if a reference cycle still holds them
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def probe_node(marker: str) -> tuple[str, bool, str]:
    """Run on each node before any cell: (host, whether the store's marker file is visible, harness version)."""
    import harness

    return socket.gethostname(), Path(marker).is_file(), harness.__version__
