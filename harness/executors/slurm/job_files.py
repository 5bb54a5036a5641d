"""The plain-data job files of a SLURM run, the one thing the driver and its array tasks exchange besides the store:
a run config as JSON and back (never a pickle), a job's identity across drivers, the run's id (its folder under
``<store>/slurm/``), reading a job file on a node, and the done file an array task writes beside it."""

from __future__ import annotations

import hashlib
import json
import shlex
import socket
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...store_files import UnsafeFileError, read_store_text
from .client import SlurmError

if TYPE_CHECKING:
    from ...run.config import RunConfig
    from ...run.plan import TrainingJob

SLURM = "slurm"  # the store folder of the SLURM runs' job files, logs and state
JOB_FILE_FORMAT = 1


def config_payload(config: RunConfig) -> dict[str, Any]:
    """A run config as plain JSON data (paths as text, model entries as mappings); a field that is not plain data is
    one line here, in the driver, before anything is submitted."""
    payload: dict[str, Any] = {}
    for item in fields(config):
        value = getattr(config, item.name)
        if item.name == "models":
            value = [{**entry.__dict__, "own_budget_keys": _listed(entry.own_budget_keys)} for entry in value]
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise SlurmError(
                f"the run setting {item.name}={value!r} cannot be written into a SLURM job file (plain JSON "
                "only); run this config with --executor local or ray."
            ) from None
        payload[item.name] = value
    return payload


def _listed(value: tuple[str, ...] | None) -> list[str] | None:
    return None if value is None else list(value)


def config_from_payload(payload: dict[str, Any]) -> RunConfig:
    """The run config a job file carries (:func:`config_payload`)."""
    from ...matrix import ModelEntry
    from ...run.config import RunConfig

    values = dict(payload)
    values["models"] = [
        ModelEntry(**{**entry, "own_budget_keys": _tupled(entry.get("own_budget_keys"))}) for entry in values["models"]
    ]
    for item in fields(RunConfig):  # the fields typed Path (results_dir, data_dir) get their Path back
        if "Path" in str(item.type) and values.get(item.name) is not None:
            values[item.name] = Path(values[item.name])
    known = {item.name for item in fields(RunConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise SlurmError(
            f"the job file sets {', '.join(unknown)}, which this harness does not know: the nodes run another "
            "harness version than the driver; install the same version everywhere."
        )
    return RunConfig(**values)


def _tupled(value: list[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def job_key(job: TrainingJob) -> str:
    """A job's identity across drivers: its model spec, seed and the spec its model is trained as."""
    return f"{job.spec.key}/seed-{job.seed}/{job.trained.key}"


def run_id(config_data: dict[str, Any]) -> str:
    """The same command gives the same id (so a second driver finds the first one's state), another command
    another."""
    text = json.dumps({k: v for k, v in config_data.items() if k != "progress"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def done_path(job_file: Path | None) -> Path:
    """The file an array task writes beside its job file when the job is done."""
    assert job_file is not None
    return job_file.with_name(job_file.stem + ".done.json")


def read_job_file(path: Path) -> dict[str, Any]:
    """A job file's content; one line when it cannot be read here (a node that does not see the store)."""
    try:
        payload = json.loads(read_store_text(path))  # a regular file only: a FIFO never hangs the node
    except FileNotFoundError:
        raise SlurmError(
            f"no job file {path} on node {socket.gethostname()}: the store must be on a filesystem every node "
            "mounts at the same path (harness validate --executor slurm checks)."
        ) from None
    except (OSError, ValueError, UnsafeFileError) as exc:
        raise SlurmError(f"cannot read the job file {path}: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != JOB_FILE_FORMAT:
        raise SlurmError(f"{path} is not a harness SLURM job file (format {JOB_FILE_FORMAT}).")
    return payload


def job_payload(job: TrainingJob, data_dir_text: str | None, config_data: dict[str, Any]) -> dict[str, Any]:
    """The job file of one training job: what an array task needs to run it (:func:`config_from_payload` reads the
    config back) and the identity the driver matches its done file against."""
    import harness

    return {
        "format": JOB_FILE_FORMAT,
        "harness_version": harness.__version__,
        "label": job.label,
        "model_key": job.spec.key,
        "seed": job.seed,
        "trained_key": job.trained.key,
        "task_keys": [task.key for task in job.tasks],
        "data_dir_text": data_dir_text,
        "config": config_data,
    }


def array_script(folder: Path, run_name: str, directives: list[str], python: str) -> str:
    """The sbatch script of one array of a run: each array task runs the job of its job file in ``folder``."""
    lines = [
        f"--job-name=harness-{run_name[:8]}",
        f"--output={folder / 'logs' / '%A_%a.log'}",
        f"--chdir={Path.cwd()}",
        "--ntasks=1",
        "--requeue",  # a preempted task is queued again by SLURM and resumes from the store
        *directives,
    ]
    job_file = shlex.quote(str(folder)) + '/job-"${SLURM_ARRAY_TASK_ID}".json'
    return (
        "#!/bin/bash\n"
        + "".join(f"#SBATCH {line}\n" for line in lines)
        + "# Written by harness run --executor slurm: each array task runs the job of its job file.\n"
        + f"exec {shlex.quote(python)} -m harness slurm-task {job_file}\n"
    )
