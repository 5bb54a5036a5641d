"""The built-in executors as ``executor`` components, registered exactly as a third-party package registers its own:
this module implements ``register_components`` and is named by the entry point ``builtin`` of the
``harness.executors`` group (pyproject.toml). Each component declares its command-line options and builds its
executor from their values; the executor modules (which load torch, Ray or the SLURM client) are imported only then,
so `harness run --help` stays light.

``local`` is the default; the core adds it too when no plugin offered it (plugin autoload off, or an allow-list
without the built-ins: :func:`add_default_executor`), as every run needs somewhere to run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..hookspecs import hookimpl
from ..plugin_api import Component, ExecutorFactory, ExecutorOption

if TYPE_CHECKING:
    from ..registry import Registry


def _local() -> Any:
    from .local import LocalExecutor

    return LocalExecutor()


def _ray(ray_address: str | None, gpus_per_task: float | None, cpus_per_task: float) -> Any:
    from .ray_cluster import RayExecutor

    return RayExecutor(address=ray_address, gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task)


def _slurm(**given: Any) -> Any:
    from .slurm import SlurmExecutor, SlurmOptions

    # An option not given keeps SlurmOptions' own default (the cluster's, or 2 retries).
    fields = {keyword.removeprefix("slurm_"): value for keyword, value in given.items() if value not in (None, ())}
    return SlurmExecutor(SlurmOptions(**fields))


LOCAL = ExecutorFactory(build=_local)
RAY = ExecutorFactory(
    build=_ray,
    options=(
        ExecutorOption(
            "--ray-address",
            "the cluster (default: join this machine's, else start one; local: always start one; auto; host:port; "
            "ray://host:port)",
        ),
        ExecutorOption(
            "--gpus-per-task",
            "GPUs per training or evaluation task (default 1 if the cluster has GPUs, else 0)",
            type=float,
        ),
        ExecutorOption("--cpus-per-task", "CPUs per task, also its PyTorch threads (default 1)", 1.0, type=float),
    ),
)
SLURM = ExecutorFactory(
    build=_slurm,
    options=(
        ExecutorOption("--slurm-partition", "the partition (sbatch -p)"),
        ExecutorOption("--slurm-account", "the account to charge (sbatch -A)"),
        ExecutorOption("--slurm-time", "time limit per array task, e.g. 4:00:00"),
        ExecutorOption("--slurm-gpus", "GPUs per array task", type=int),
        ExecutorOption("--slurm-cpus", "CPUs per array task (its PyTorch threads)", type=int),
        ExecutorOption("--slurm-mem", "memory per array task, e.g. 32G"),
        ExecutorOption("--slurm-qos", "the quality of service"),
        ExecutorOption(
            "--slurm-sbatch-line",
            "one more sbatch option, e.g. --constraint=a100 (repeatable)",
            (),
            repeatable=True,
            metavar="OPTION",
            keyword="slurm_sbatch_lines",
        ),
        ExecutorOption("--slurm-max-jobs", "array tasks running at once (%N)", type=int),
        ExecutorOption(
            "--slurm-retries", "submit a failed array task again up to this many times (default 2)", type=int
        ),
    ),
)

LOCAL_DESCRIPTION = "this process, one job after another on --device"


@hookimpl
def register_components(register) -> None:
    register(Component("executor", "local", LOCAL, LOCAL_DESCRIPTION))
    register(
        Component(
            "executor",
            "ray",
            RAY,
            "training and evaluation on the workers of a Ray cluster (pip install 'sentence-harness[ray]')",
        )
    )
    register(
        Component("executor", "slurm", SLURM, "a SLURM job array, one array task per model and seed (docs/scaling.md)")
    )


def add_default_executor(registry: Registry) -> Registry:
    """``registry`` with the default executor, ``local``: the core's own when no plugin offered it (plugin autoload
    off, or an allow-list without the built-ins)."""
    from ..registry import CORE_PACKAGE

    if ("executor", "local") not in registry.components:
        registry.add(Component("executor", "local", LOCAL, LOCAL_DESCRIPTION), CORE_PACKAGE)
    return registry
