"""Executors: where the cells of a matrix run (docs/architecture.md, "One run, stage by stage").

- ``local`` (the default): this process, one device, one job after another (:mod:`harness.executors.local`).
- ``ray``: training jobs and evaluation cells run on long-lived Ray workers (one per slot of a cluster's CPUs or
  GPUs, with resource requests), each job's cells on the worker that holds its model
  (:mod:`harness.executors.ray_cluster`); Ray is the optional extra ``sentence-harness[ray]``.
- ``slurm``: the pending jobs as one SLURM job array, each array task running the harness on one job against the
  shared store, the driver following them with ``squeue`` (:mod:`harness.executors.slurm`; needs only the SLURM
  commands on PATH).

Whatever the executor, the driver (the process that runs ``harness run``) plans the matrix, answers cells from the
store, and alone writes result records (``Worker.record`` of harness.run.driver); workers compute records and return
them. Trained
checkpoints are written by whoever trains them, under the checkpoint's lock, into the store, which every worker must
reach at the same path. Several drivers (two terminals, a job array) may share one store: each claims the cells of a
model spec and seed with a lock before computing them (``Store.cells_lock``), so no cell is computed twice at once,
and a driver that finds a job claimed does the others first and then waits for it.

An executor (the ``Executor`` Protocol of harness.run.driver, re-exported here) owns its options and its device
choice: ``device(requested)`` (the device the plan is made for: the local executor resolves it here, Ray's workers
each resolve it on their own machine), ``start(plan, worker)`` (checks that can fail, e.g. Ray missing or the cluster
unreachable; called before any cell runs) and ``run(plan, worker) -> list[Cell]`` (the cells of ``plan.jobs()``).
``worker`` (harness.run.driver.Worker) is what the driver lends it: cell locks, ``recheck``, ``run_job`` (this
process), ``remote_config`` (another process), ``record`` (the driver's writer) and ``log`` (the run's lines). Only
the CLI chooses an executor (``make_executor``); the run stages never import this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import invalid_choice

if TYPE_CHECKING:
    from ..run.driver import Executor

__all__ = ["EXECUTORS", "Executor", "make_executor"]

EXECUTORS = ("local", "ray", "slurm")


def __getattr__(name: str) -> object:
    # The Protocol lives with the driver that calls it (the run stages import no executor); named here too.
    if name == "Executor":
        from ..run.driver import Executor

        return Executor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_executor(
    executor: str = "local",
    ray_address: str | None = None,
    gpus_per_task: float | None = None,
    cpus_per_task: float = 1.0,
    slurm: dict | None = None,
) -> Executor:
    """The executor ``--executor`` names, with its own options (``harness run``'s ``--ray-address``,
    ``--gpus-per-task`` and ``--cpus-per-task`` size a Ray executor's tasks; ``slurm``: the fields of
    harness.executors.slurm.SlurmOptions, from the ``--slurm-*`` options; harness.cli.values checks that they come
    with their executor)."""
    if executor == "local":
        from .local import LocalExecutor

        return LocalExecutor()
    if executor == "ray":
        from .ray_cluster import RayExecutor

        return RayExecutor(address=ray_address, gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task)
    if executor == "slurm":
        from .slurm import SlurmExecutor, SlurmOptions

        return SlurmExecutor(SlurmOptions(**(slurm or {})))
    raise invalid_choice("--executor", executor, EXECUTORS)
