"""`harness slurm-task JOB_FILE`: what each array task of `harness run --executor slurm` runs (one job file)."""

from __future__ import annotations

from .common import load_registry


def cmd_slurm_task(args) -> int:
    from ..executors.slurm import run_job_file

    return run_job_file(args.job_file, load_registry())
