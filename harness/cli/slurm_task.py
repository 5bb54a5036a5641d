"""`harness slurm-task JOB_FILE`: what each array task of `harness run --executor slurm` runs (one job file)."""

from __future__ import annotations

from pathlib import Path

from .common import load_registry
from .parsing import add_command


def add_parser(commands) -> None:
    """An internal command (the job script of each array task runs it), so `harness --help` does not list it."""
    slurm_task = add_command(
        commands,
        "slurm-task",
        "run one job file of `harness run --executor slurm` (what each SLURM array task runs)",
        hidden=True,
    )
    slurm_task.add_argument("job_file", type=Path, help="a job file under <store>/slurm/")
    slurm_task.set_defaults(handler=cmd_slurm_task)


def cmd_slurm_task(args) -> int:
    from ..executors.slurm import run_job_file

    return run_job_file(args.job_file, load_registry())
