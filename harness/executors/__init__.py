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

An executor is an ``executor`` component (a harness.ExecutorFactory that declares its command-line options and builds
the executor from their values; the built-ins are registered by :mod:`harness.executors.builtin` through the
``harness.executors`` entry-point group, as a third-party executor is). The executor it builds (the ``Executor``
Protocol of harness.run.driver, re-exported here) owns its device choice: ``device(requested)`` (the device the plan
is made for: the local executor resolves it here, Ray's workers each resolve it on their own machine),
``start(plan, worker)`` (checks that can fail, e.g. Ray missing or the cluster unreachable; called before any cell
runs) and ``run(plan, worker) -> list[Cell]`` (the cells of ``plan.jobs()``).
``worker`` (harness.run.driver.Worker) is what the driver lends it: cell locks, ``recheck``, ``run_job`` (this
process), ``remote_config`` (another process), ``record`` (the driver's writer) and ``log`` (the run's lines). Only
the CLI chooses an executor (``make_executor``); the run stages never import this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import invalid_choice

if TYPE_CHECKING:
    from ..registry import Registry
    from ..run.driver import Executor

__all__ = ["Executor", "executor_names", "make_executor"]


def __getattr__(name: str) -> object:
    # The Protocol lives with the driver that calls it (the run stages import no executor); named here too.
    if name == "Executor":
        from ..run.driver import Executor

        return Executor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def executor_names(registry: Registry | None = None) -> list[str]:
    """The registered ``executor`` components (``registry``: default the executors' plugins alone,
    harness.registry.executor_registry, with the core's ``local``)."""
    return _with_local(registry).component_names("executor")


def make_executor(
    executor: str = "local", options: Mapping[str, Any] | None = None, registry: Registry | None = None
) -> Executor:
    """The executor ``--executor`` names, built by its component (a harness.ExecutorFactory) from ``options``, the
    values of its own options by keyword (the ones not given take their defaults; harness.cli.values reads them
    from the command line and refuses one given without its executor)."""
    registry = _with_local(registry)
    names = registry.component_names("executor")
    if executor not in names:
        raise invalid_choice("--executor", executor, names)
    return registry.component("executor", executor).create(dict(options or {}))


def _with_local(registry: Registry | None) -> Registry:
    from ..registry import executor_registry
    from .builtin import add_default_executor

    return add_default_executor(registry if registry is not None else executor_registry())
