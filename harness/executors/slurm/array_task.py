"""What a SLURM array task runs on its node (``harness slurm-task <job file>``, :func:`run_job_file`): plan the job
file's config, compute the job's pending cells with the local executor, write the done file; its PyTorch threads
are the CPUs SLURM gave it (:func:`task_threads`)."""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...files import atomic_write_json
from .client import SlurmError
from .job_files import config_from_payload, done_path, read_job_file

logger = logging.getLogger(__name__)


def task_threads() -> int:
    """An array task's PyTorch threads: the CPUs SLURM gave it (``--slurm-cpus``), else the CPUs it may run on (a
    cluster's default of one CPU per task must not become one thread per core of the node)."""
    cpus = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if cpus.isdigit() and int(cpus) > 0:
        return int(cpus)
    return max(1, len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else max(1, os.cpu_count() or 1)


def run_job_file(path: Path, registry: Any) -> int:
    """What an array task runs: the job of ``path`` (plan its config here, keep the job's pending cells, run them
    with the local executor, which claims the job and writes its records), then its done file. The exit code is 0
    once the job's cells are stored (failed cells included: they are results)."""
    import harness

    from ...run.cell import CellStatus
    from ...run.driver import Run
    from ...run.plan import trained_spec
    from ..local import LocalExecutor

    started = time.perf_counter()
    payload = read_job_file(path)
    if payload.get("harness_version") != harness.__version__:
        raise SlurmError(
            f"node {socket.gethostname()} runs harness {harness.__version__}, the driver "
            f"{payload.get('harness_version')}; install the same version everywhere."
        )
    import torch

    torch.set_num_threads(task_threads())
    config = config_from_payload(payload["config"])
    run = Run(registry, config)
    executor = LocalExecutor()
    plan = replace(run.plan(executor), data_dir_text=payload.get("data_dir_text"))
    wanted = (payload["model_key"], payload["seed"], payload["trained_key"])
    task_keys = set(payload["task_keys"])
    cells = tuple(
        cell
        for cell in plan.cells
        if cell.status == CellStatus.PENDING
        and (cell.spec.key, cell.seed, trained_spec(cell.spec, cell.task).key) == wanted
        and cell.task.key in task_keys
    )
    logger.info(
        "SLURM job %s_%s on %s (pid %d): %s, %d of its %d cell(s) to compute (the others are stored)",
        os.environ.get("SLURM_ARRAY_JOB_ID", "?"),
        os.environ.get("SLURM_ARRAY_TASK_ID", "?"),
        socket.gethostname(),
        os.getpid(),
        payload.get("label"),
        len(cells),
        len(task_keys),
    )
    computed = run.run(executor, replace(plan, cells=cells)) if cells else []
    atomic_write_json(
        done_path(Path(path)),
        {
            "host": socket.gethostname(),
            "slurm_job": f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{os.environ.get('SLURM_ARRAY_TASK_ID', '?')}",
            "cells": {o.task.key: str(o.status) for o in computed},
            "seconds": round(time.perf_counter() - started, 3),
        },
    )
    return 0
