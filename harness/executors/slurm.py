"""The SLURM executor: a run's pending jobs as one SLURM job array, each array task running the harness on one job
against the shared store, the driver following them with ``squeue`` (and ``sacct`` or ``scontrol`` for the state of
a task that left the queue).

What each side does:

- The **driver** (``harness run --executor slurm``) plans, answers stored cells, and writes one job file per pending
  job (a model spec and seed with the tasks its trained model serves, as ``Plan.jobs`` groups them, the same jobs
  the Ray executor sends to one worker) under ``<store>/slurm/<run id>/submit-<n>/``: plain JSON (the run's config,
  the job's spec key, seed and task keys), never a pickle. It submits them as one array (``sbatch --array=0-N%M``),
  follows the tasks, reads each finished job's records from the store and prints the run's table.
- An **array task** (``harness slurm-task <job file>``, :func:`run_job_file`) plans the same config on its node,
  keeps the cells of its job that are still pending and runs them with the local executor: it claims the job's cells
  lock, trains or loads the model once, writes each record and finally a ``.done.json`` file beside its job file.
  Records are written by the array task (one driver per job, as several drivers share a store through the per-job
  locks); the SLURM driver writes none.

The store must be one folder that every node reaches at the same path with working ``flock`` (NFS, CephFS, GPFS,
Lustre mounted with ``flock``), and the same harness environment (the driver's Python, ``sys.executable``) must run
on the nodes; ``harness validate --executor slurm`` checks both with a probe job.

Failures: a task that ends without its done file (failed, killed, out of memory, timed out, its node lost, preempted)
is submitted again, in a new array holding only the jobs to retry, up to ``retries`` times; it resumes from the store
(cells stored by the failed attempt are answered, a partial checkpoint is a temporary the next build removes). A
task that keeps failing is reported in one line with its SLURM job id and log path. A task cancelled with
``scancel`` is not retried: the run reports it. The driver keeps a state file (``state.json``) naming the SLURM task
of every job it submitted; a driver killed while the array runs loses nothing: the same command re-attaches to the
tasks still queued or running and submits only the jobs that are neither stored nor in the queue.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..device import check_device_name
from ..errors import HarnessError, InvalidOptionError
from ..files import atomic_write_json, atomic_write_text, read_store_text
from ..locks import StoreLock
from .progress import CellProgress

if TYPE_CHECKING:
    from ..run.cell import Cell
    from ..run.config import RunConfig
    from ..run.driver import Worker
    from ..run.plan import Plan, TrainingJob

logger = logging.getLogger(__name__)

SLURM = "slurm"  # the store folder of the SLURM runs' job files, logs and state
JOB_FILE_FORMAT = 1
POLL_SECONDS = 3.0
COMMAND_TIMEOUT_SECONDS = 60.0
PROBE_TIMEOUT_SECONDS = 600.0
DEFAULT_RETRIES = 2
QUEUE_PATIENCE_SECONDS = 300.0  # how long squeue may keep failing before the driver stops (the array runs on)
# A task that left the queue COMPLETED before its done file shows (a shared filesystem's attribute cache): waited for.
DONE_FILE_GRACE_SECONDS = 60.0
# squeue states of a task still queued or running (it may yet finish).
LIVE_STATES = {
    "PENDING",
    "RUNNING",
    "CONFIGURING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
    "RESV_DEL_HOLD",
}
CANCELLED = "CANCELLED"
_TIME = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$")
_MEMORY = re.compile(r"^\d+[KMGT]?$")


class SlurmError(HarnessError):
    """SLURM cannot be used (its commands missing or failing, a store the nodes do not share, a bad job file)."""


# -- options -----------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlurmOptions:
    """What each array task asks SLURM for (``harness run``'s ``--slurm-*`` options; None: the cluster's default),
    how many tasks run at once (``max_jobs``) and how often a failed task is submitted again (``retries``)."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gpus: int | None = None
    cpus: int | None = None
    mem: str | None = None
    qos: str | None = None
    sbatch_lines: tuple[str, ...] = ()
    max_jobs: int | None = None
    retries: int = DEFAULT_RETRIES

    def __post_init__(self) -> None:
        for name in ("partition", "account", "qos"):
            value = getattr(self, name)
            if value is not None and (not value.strip() or any(c.isspace() for c in value)):
                raise InvalidOptionError(f"--slurm-{name} {value!r}: give one name without spaces.")
        if self.time is not None and not _TIME.match(self.time):
            raise InvalidOptionError(
                f"--slurm-time {self.time!r}: give minutes, MM:SS, HH:MM:SS, D-HH or D-HH:MM:SS (SLURM's formats)."
            )
        if self.mem is not None and not _MEMORY.match(self.mem):
            raise InvalidOptionError(f"--slurm-mem {self.mem!r}: give a size such as 16G or 4000M.")
        for name, least in (("gpus", 0), ("cpus", 1), ("max_jobs", 1), ("retries", 0)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                flag = "--slurm-" + name.replace("_", "-")
                raise InvalidOptionError(f"{flag} must be an integer of at least {least}, got {value!r}.")
        for line in self.sbatch_lines:
            if not line.startswith("--") or "\n" in line:
                raise InvalidOptionError(
                    f"--slurm-sbatch-line {line!r}: give one sbatch option, e.g. --slurm-sbatch-line "
                    "'--constraint=a100' (it is written as an #SBATCH line)."
                )

    def directives(self) -> list[str]:
        """The ``#SBATCH`` options every array task of the run gets."""
        lines = []
        for name, value in (
            ("partition", self.partition),
            ("account", self.account),
            ("qos", self.qos),
            ("time", self.time),
            ("cpus-per-task", self.cpus),
            ("mem", self.mem),
        ):
            if value is not None:
                lines.append(f"--{name}={value}")
        if self.gpus:
            lines.append(f"--gres=gpu:{self.gpus}")
        return [*lines, *self.sbatch_lines]


# -- the SLURM commands ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskState:
    """A finished array task as SLURM reports it: its state word (FAILED, CANCELLED, TIMEOUT...) and exit code."""

    state: str
    exit_code: str = ""

    def text(self) -> str:
        return self.state + (f", exit code {self.exit_code}" if self.exit_code else "")


class SlurmClient:
    """The SLURM commands the executor runs (``sbatch``, ``squeue``, ``sacct``, ``scontrol``), each failure one
    line. ``env``: their environment (None: this process's)."""

    def __init__(self, env: dict[str, str] | None = None):
        self.env = env

    def _run(self, command: list[str], timeout: float = COMMAND_TIMEOUT_SECONDS) -> subprocess.CompletedProcess:
        path = (self.env or os.environ).get("PATH")
        if shutil.which(command[0], path=path) is None:
            raise SlurmError(
                f"{command[0]} is not on PATH: --executor slurm runs on a machine that submits SLURM jobs "
                "(a login node); use --executor local or ray elsewhere."
            )
        try:
            return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{command[0]} did not answer within {timeout:g} s; is slurmctld up?") from None

    def check(self) -> str:
        """The SLURM version (``sbatch --version``); one line when sbatch or squeue cannot run here."""
        for name in ("squeue", "sbatch"):
            if shutil.which(name, path=(self.env or os.environ).get("PATH")) is None:
                self._run([name])  # says it is missing
        done = self._run(["sbatch", "--version"])
        if done.returncode != 0:
            raise SlurmError(f"sbatch --version failed: {_first_line(done.stderr or done.stdout)}")
        return done.stdout.strip()

    def submit(self, script: Path, array: str | None = None) -> str:
        """Submit ``script`` (as an array of ``array`` indices, e.g. ``0-3%2``); its job id."""
        command = ["sbatch", "--parsable", *([f"--array={array}"] if array else []), str(script)]
        done = self._run(command)
        if done.returncode != 0:
            raise SlurmError(f"sbatch refused the job ({_first_line(done.stderr or done.stdout)}); check --slurm-*.")
        return done.stdout.strip().split(";")[0]

    def run_waiting(self, script: Path) -> subprocess.CompletedProcess:
        """Submit ``script`` and wait until its job ends (``sbatch --wait``)."""
        try:
            return self._run(["sbatch", "--parsable", "--wait", str(script)], timeout=PROBE_TIMEOUT_SECONDS)
        except SlurmError:
            raise SlurmError(
                f"the probe job {script} did not end within {PROBE_TIMEOUT_SECONDS:g} s (a busy queue?); run "
                "harness validate again when the partition has room, or check --slurm-partition."
            ) from None

    def queued(self, array_ids: list[str]) -> dict[str, str]:
        """The tasks of these arrays still in the queue: ``"<array>_<index>"`` -> state (PENDING, RUNNING...)."""
        if not array_ids:
            return {}
        done = self._run(["squeue", "-h", "-r", "-j", ",".join(array_ids), "-o", "%i|%T"])
        if done.returncode != 0:
            if "Invalid job id" in done.stderr:  # every array has left the queue (and slurmctld's memory)
                return {}
            raise SlurmError(f"squeue failed: {_first_line(done.stderr or done.stdout)}")
        states = {}
        for line in done.stdout.splitlines():
            task, _, state = line.strip().partition("|")
            if task:
                states[task] = state
        return states

    def final_state(self, task: str) -> TaskState:
        """How a task that left the queue ended: ``sacct`` where accounting is kept, else ``scontrol`` (which knows
        a finished job for ``MinJobAge`` seconds), else UNKNOWN."""
        done = self._run(["sacct", "-n", "-P", "-X", "-j", task, "-o", "JobID,State,ExitCode"])
        if done.returncode == 0:
            for line in done.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 3 and parts[0] == task:
                    return TaskState(parts[1].split()[0], parts[2])
        done = self._run(["scontrol", "show", "job", "-o", task])
        if done.returncode == 0:
            values = dict(item.split("=", 1) for item in done.stdout.split() if "=" in item)
            if "JobState" in values:
                return TaskState(values["JobState"], values.get("ExitCode", ""))
        return TaskState("UNKNOWN")


def _first_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else "no output"


# -- plain-data job files ----------------------------------------------------------------------------------------------
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
    from ..matrix import ModelEntry
    from ..run.config import RunConfig

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


# -- the driver --------------------------------------------------------------------------------------------------------
@dataclass
class _Tracked:
    """One job of this run: the SLURM task now computing it (``task``: ``<array>_<index>``), its job file, how many
    times it was submitted by this driver, and how it ended (``outcome``: None while it runs)."""

    job: TrainingJob
    key: str
    task: str | None = None
    job_file: Path | None = None
    log: Path | None = None
    attempts: int = 0
    state: str = ""
    settled: bool = False
    failures: list[str] = field(default_factory=list)
    completed_at: float = 0.0  # when SLURM first said COMPLETED while its done file was not there


class SlurmExecutor:
    """Runs a plan's pending jobs as a SLURM job array (:mod:`harness.executors.slurm`). ``options`` sizes each array
    task; ``client`` runs the SLURM commands; ``poll_seconds``: how often the driver asks ``squeue``."""

    name = "slurm"

    def __init__(
        self,
        options: SlurmOptions | None = None,
        client: SlurmClient | None = None,
        poll_seconds: float = POLL_SECONDS,
        python: str | None = None,
    ):
        self.options = options or SlurmOptions()
        self.client = client or SlurmClient()
        self.poll_seconds = poll_seconds
        self.python = python or sys.executable
        self.submitted: list[str] = []  # the array job ids this driver submitted, in order
        self.run_folder: Path | None = None

    def device(self, requested: str) -> str:
        """Each array task resolves the device on its node (this login node may have no GPU): the name only is
        checked here, with the GPUs the tasks ask for."""
        check_device_name(requested)
        if ":" in requested:
            raise InvalidOptionError(
                f"--device {requested} picks a GPU by number, but under --executor slurm each array task gets its "
                "own GPUs from SLURM (it sees them from cuda:0); use --device cuda or auto, and --slurm-gpus."
            )
        if requested == "cuda" and not self.options.gpus:
            raise InvalidOptionError(
                "--device cuda under --executor slurm needs --slurm-gpus 1 (or more): SLURM shows an array task only "
                "the GPUs it asked for."
            )
        if requested == "cpu" and self.options.gpus:
            raise InvalidOptionError(
                f"--device cpu with --slurm-gpus {self.options.gpus} would hold GPUs it never uses; "
                "drop one of the two."
            )
        return requested

    def start(self, plan: Plan, worker: Worker) -> None:
        """The store locks files (the array tasks claim their jobs with flock) and SLURM's commands answer here."""
        worker.check_locking()
        version = self.client.check()
        logger.debug("SLURM: %s", version)

    # -- running -------------------------------------------------------------------------------------------------------
    def run(self, plan: Plan, worker: Worker) -> list[Cell]:
        jobs = plan.jobs()
        if not jobs:
            return []
        config_data = config_payload(worker.remote_config())
        folder = worker.store_root.resolve() / SLURM / run_id(config_data)
        folder.mkdir(parents=True, exist_ok=True)
        self.run_folder = folder
        lock = StoreLock(folder / "driver.lock", "following this SLURM run", root=worker.store_root.resolve())
        if not lock.acquire(blocking=False):
            raise SlurmError(
                f"another harness driver follows this run's SLURM jobs ({lock.holder()}); wait for it to finish, "
                "or stop it and run again."
            )
        try:
            return _Follow(self, plan, worker, jobs, folder, config_data).run()
        finally:
            lock.release()

    def check_store_shared(self, store_root: Path) -> str:
        """Submit a probe job (with this executor's options) that looks for a marker file written into the store
        here: (node, harness version) it ran on; one line when the node does not see the store, runs another
        harness or the job does not run."""
        import harness

        self.client.check()
        folder = store_root.resolve() / SLURM / "probes"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"probe-{uuid.uuid4().hex[:12]}"
        marker, answer = folder / f"{name}.marker", folder / f"{name}.answer"
        atomic_write_text(marker, "written by a harness driver to check that SLURM's nodes see this store\n")
        check = (
            "import pathlib, socket, sys\n"
            "marker = pathlib.Path(sys.argv[1])\n"
            "import harness\n"
            "if marker.is_file():\n"
            "    pathlib.Path(sys.argv[2]).write_text(socket.gethostname() + ' ' + harness.__version__)\n"
            "else:\n"
            "    print('the store is not visible here', file=sys.stderr)\n"
        )
        script = folder / f"{name}.sbatch"
        directives = [f"--job-name=harness-{name}", f"--output={folder / (name + '.log')}"]
        directives += [line for line in self.options.directives() if not line.startswith("--time")]
        directives.append("--time=5")
        script.write_text(
            "#!/bin/bash\n"
            + "".join(f"#SBATCH {line}\n" for line in directives)
            + f"exec {shlex.quote(self.python)} -c {shlex.quote(check)} {shlex.quote(str(marker))} "
            f"{shlex.quote(str(answer))}\n"
        )
        probe_log = folder / f"{name}.log"
        logger.info("submitted a probe job to check that SLURM's nodes see %s (waiting for it)", store_root.resolve())
        try:
            done = self.client.run_waiting(script)
            if not answer.exists():
                raise SlurmError(self._probe_problem(store_root, probe_log, done))
            host, _, version = answer.read_text().partition(" ")
            if version != harness.__version__:
                raise SlurmError(
                    f"node {host} runs harness {version}, this driver {harness.__version__}; install the same "
                    "version everywhere."
                )
            probe_log.unlink(missing_ok=True)  # kept when the probe failed: the user reads it
            return host
        finally:
            for path in (marker, answer, script):
                path.unlink(missing_ok=True)

    def _probe_problem(self, store_root: Path, probe_log: Path, done: subprocess.CompletedProcess) -> str:
        """Why a probe job left no answer, from its log (which a node that does not see the store cannot write)."""
        last = last_line(probe_log)
        if last and "the store is not visible here" not in last:
            return (
                f"the probe job failed on its node ({last}); install the harness environment at {self.python} on "
                f"every node (e.g. on the shared filesystem); its log: {probe_log}"
            )
        if not last and done.returncode != 0 and (done.stderr or "").strip():
            return f"the probe job did not run ({_first_line(done.stderr)}); check --slurm-partition and the others."
        return (
            f"the probe job ran but did not see the result store {store_root.resolve()}: put --results on a "
            "filesystem every node mounts at the same path (e.g. NFS), with the harness installed there too."
        )


class _Follow:
    """One run of the SLURM executor: submit what is not queued, follow the queue, resubmit what failed, collect
    every finished job's records from the store. The state file names the SLURM task of each job submitted, so a
    later driver of the same command re-attaches to the tasks still queued."""

    def __init__(
        self,
        executor: SlurmExecutor,
        plan: Plan,
        worker: Worker,
        jobs: list[TrainingJob],
        folder: Path,
        config_data: dict[str, Any],
    ):
        self.executor, self.plan, self.worker, self.folder = executor, plan, worker, folder
        self.client, self.options = executor.client, executor.options
        self.config_data = config_data
        self.tracked = [_Tracked(job, job_key(job)) for job in jobs]
        self.state_path = folder / "state.json"
        self.state = self._load_state()
        self.outcomes: list[Cell] = []
        self._said = ""
        self._queue_errors = 0

    def _load_state(self) -> dict[str, Any]:
        try:
            state = json.loads(read_store_text(self.state_path))
        except FileNotFoundError:
            return {"submissions": 0, "jobs": {}}
        except (OSError, ValueError) as exc:
            logger.warning("ignoring the unreadable SLURM state file %s (%s)", self.state_path, exc)
            return {"submissions": 0, "jobs": {}}
        if not isinstance(state, dict) or not isinstance(state.get("jobs"), dict):
            return {"submissions": 0, "jobs": {}}
        return state

    def _save_state(self) -> None:
        atomic_write_json(self.state_path, self.state)

    def run(self) -> list[Cell]:
        worker = self.worker
        total = sum(len(t.job.tasks) for t in self.tracked)
        worker.log(f"  SLURM: {total} cells of {len(self.tracked)} job(s); job files, logs and state in {self.folder}")
        self._reattach()
        with CellProgress(worker.log, total, worker.progress) as progress:
            try:
                self._submit([t for t in self.tracked if t.task is None])
                while not all(t.settled for t in self.tracked):
                    time.sleep(self.executor.poll_seconds)
                    self._poll(progress)
            except KeyboardInterrupt:
                arrays = sorted({t.task.split("_")[0] for t in self.tracked if t.task and not t.settled})
                if arrays:
                    logger.warning(
                        "the SLURM array(s) %s keep running: run the same command again to follow them, or "
                        "scancel %s to stop them",
                        ", ".join(arrays),
                        " ".join(arrays),
                    )
                raise
        self._report_unfinished()
        return self.outcomes

    def _reattach(self) -> None:
        """Follow the tasks an earlier driver of this command submitted that are still queued or running."""
        entries = {t.key: self.state["jobs"].get(t.key) for t in self.tracked}
        arrays = sorted({e["task"].split("_")[0] for e in entries.values() if isinstance(e, dict) and "task" in e})
        if not arrays:
            return
        queued = self.client.queued(arrays)
        for tracked in self.tracked:
            entry = entries[tracked.key]
            if isinstance(entry, dict) and entry.get("task") in queued:
                tracked.task, tracked.state = entry["task"], queued[entry["task"]]
                tracked.job_file, tracked.log = Path(entry["job_file"]), Path(entry["log"])
                self.worker.log(
                    f"  {tracked.job.label}: following SLURM job {tracked.task} ({tracked.state.lower()}), "
                    "submitted by an earlier driver of this command"
                )

    def _submit(self, batch: list[_Tracked]) -> None:
        """One array for ``batch``: a job file per job, the sbatch script, ``sbatch --array``."""
        if not batch:
            return
        number = int(self.state.get("submissions", 0))
        while (self.folder / f"submit-{number}").exists():  # a driver killed before it saved the state used it
            number += 1
        self.state["submissions"] = number + 1
        folder = self.folder / f"submit-{number}"
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        for index, tracked in enumerate(batch):
            tracked.job_file = folder / f"job-{index}.json"
            atomic_write_json(tracked.job_file, self._job_payload(tracked.job))
        script = folder / "array.sbatch"
        atomic_write_text(script, self._script(folder))
        array = f"0-{len(batch) - 1}" + (f"%{self.options.max_jobs}" if self.options.max_jobs else "")
        array_id = self.client.submit(script, array)
        self.executor.submitted.append(array_id)
        for index, tracked in enumerate(batch):
            tracked.task, tracked.state, tracked.completed_at = f"{array_id}_{index}", "PENDING", 0.0
            tracked.log = folder / "logs" / f"{array_id}_{index}.log"
            tracked.attempts += 1
            self.state["jobs"][tracked.key] = {
                "task": tracked.task,
                "job_file": str(tracked.job_file),
                "log": str(tracked.log),
                "label": tracked.job.label,
            }
        self._save_state()
        limit = f", at most {self.options.max_jobs} at once" if self.options.max_jobs else ""
        self.worker.log(
            f"  submitted SLURM array {array_id}: {len(batch)} job(s) ({', '.join(t.job.label for t in batch)})"
            f"{limit}; logs in {folder / 'logs'}"
        )

    def _job_payload(self, job: TrainingJob) -> dict[str, Any]:
        import harness

        return {
            "format": JOB_FILE_FORMAT,
            "harness_version": harness.__version__,
            "label": job.label,
            "model_key": job.spec.key,
            "seed": job.seed,
            "trained_key": job.trained.key,
            "task_keys": [task.key for task in job.tasks],
            "data_dir_text": self.plan.data_dir_text,
            "config": self.config_data,
        }

    def _script(self, folder: Path) -> str:
        directives = [
            f"--job-name=harness-{self.folder.name[:8]}",
            f"--output={folder / 'logs' / '%A_%a.log'}",
            f"--chdir={Path.cwd()}",
            "--ntasks=1",
            "--requeue",  # a preempted task is queued again by SLURM and resumes from the store
            *self.options.directives(),
        ]
        job_file = shlex.quote(str(folder)) + '/job-"${SLURM_ARRAY_TASK_ID}".json'
        return (
            "#!/bin/bash\n"
            + "".join(f"#SBATCH {line}\n" for line in directives)
            + "# Written by harness run --executor slurm: each array task runs the job of its job file.\n"
            + f"exec {shlex.quote(self.executor.python)} -m harness slurm-task {job_file}\n"
        )

    # -- following -----------------------------------------------------------------------------------------------------
    def _poll(self, progress: CellProgress) -> None:
        running = [t for t in self.tracked if not t.settled]
        try:
            queued = self.client.queued(sorted({t.task.split("_")[0] for t in running if t.task}))
        except SlurmError as exc:  # a busy or restarting slurmctld: ask again at the next poll, for a while
            self._queue_errors += 1
            if self._queue_errors * self.executor.poll_seconds > QUEUE_PATIENCE_SECONDS:
                raise
            logger.warning("%s; asking again in %g s", exc, self.executor.poll_seconds)
            return
        self._queue_errors = 0
        retry = []
        for tracked in running:
            assert tracked.task is not None and tracked.job_file is not None
            if done_path(tracked.job_file).exists():
                self._collect(tracked, progress)
            elif tracked.task in queued:
                tracked.state = queued[tracked.task]
            elif self._ended(tracked):
                retry.append(tracked)
        self._say_queue()
        self._submit(retry)

    def _ended(self, tracked: _Tracked) -> bool:
        """A task left the queue without its done file: True when it is to be submitted again."""
        assert tracked.task is not None
        if done_path(tracked.job_file).exists():  # finished between squeue and the look at its folder
            return False
        ended = self.client.final_state(tracked.task)
        if ended.state == "COMPLETED":
            tracked.completed_at = tracked.completed_at or time.monotonic()
            if time.monotonic() - tracked.completed_at < DONE_FILE_GRACE_SECONDS:
                return False  # its done file may not be visible here yet
            ended = TaskState("COMPLETED without finishing its job", ended.exit_code)
        tracked.failures.append(f"{tracked.task} {ended.text()}")
        if ended.state.startswith(CANCELLED):
            tracked.settled, tracked.state = True, CANCELLED
            return False
        if tracked.attempts > self.options.retries:
            tracked.settled, tracked.state = True, "FAILED"
            return False
        logger.warning(
            "SLURM job %s (%s) ended early (%s); submitting it again (attempt %d of %d); its log: %s",
            tracked.task,
            tracked.job.label,
            ended.text(),
            tracked.attempts + 1,
            self.options.retries + 1,
            tracked.log,
        )
        return True

    def _say_queue(self) -> None:
        counts: dict[str, int] = {}
        for tracked in self.tracked:
            word = (tracked.state or "pending").lower()
            counts[word] = counts.get(word, 0) + 1
        line = ", ".join(f"{count} {word}" for word, count in sorted(counts.items()))
        if line != self._said:
            self._said = line
            self.worker.log(f"  SLURM jobs: {line}")

    def _collect(self, tracked: _Tracked, progress: CellProgress) -> None:
        """A finished job: its cells as the store has them (written by the array task)."""
        from ..run.cell import Cell, CellStatus

        store = self._store()
        tracked.settled, tracked.state = True, "finished"
        job = tracked.job
        for task_spec in job.tasks:
            record, invalid = store.lookup(job.spec.key, job.seed, task_spec.key, self.plan.runtime)
            if record is None:
                why = f"its record is invalid ({invalid})" if invalid else "it stored no record"
                cell = Cell(
                    job.spec,
                    job.seed,
                    task_spec,
                    status=CellStatus.FAILED,
                    message=f"SLURM job {tracked.task} finished but {why}; see its log {tracked.log}",
                )
                self.worker.log(f"  {cell.label}: failed")
            else:
                status = CellStatus(record["status"])
                cell = Cell(job.spec, job.seed, task_spec, status=status, record=record)
                if status == CellStatus.OK:
                    seconds = record.get("timings", {}).get("eval_seconds", 0.0)
                    self.worker.log(f"  {cell.label}: {record['main_score']:.2f} ({seconds:.1f}s)")
                else:
                    cell = replace(cell, message=str(record.get("message", "")))
                    self.worker.log(f"  {cell.label}: {status}")
            self.outcomes.append(cell)
            progress.advance()

    def _store(self) -> Any:
        from ..store import Store

        return Store(self.worker.store_root)

    def _report_unfinished(self) -> None:
        """Jobs cancelled or failing every attempt: their cells are failed outcomes with one line naming the SLURM
        job and its log (nothing is stored for them; the same command submits them again)."""
        from ..run.cell import Cell, CellStatus

        cancelled = [t for t in self.tracked if t.state == CANCELLED]
        if cancelled:
            logger.error(
                "SLURM job(s) %s were cancelled (scancel): %d cell(s) not computed; finished cells are stored, run the "
                "same command again to submit the rest",
                ", ".join(t.task or "?" for t in cancelled),
                sum(len(t.job.tasks) for t in cancelled),
            )
        for tracked in self.tracked:
            if tracked.state == CANCELLED:
                message = (
                    f"SLURM job {tracked.task} was cancelled (scancel); its log: {tracked.log}; run the same "
                    "command again to submit it"
                )
            elif tracked.state == "FAILED":
                last = last_line(tracked.log)
                log_text = (
                    f"it left no log at {tracked.log} (does the node see the store? harness validate "
                    "--executor slurm checks)"
                    if last is None
                    else f"its log: {tracked.log}" + (f" (last line: {last})" if last else "")
                )
                message = (
                    f"SLURM job {tracked.task} failed {len(tracked.failures)} time(s) ({'; '.join(tracked.failures)}); "
                    f"{log_text}"
                )
                logger.error("%s: %s", tracked.job.label, message)
            else:
                continue
            for task_spec in tracked.job.tasks:
                self.outcomes.append(
                    Cell(tracked.job.spec, tracked.job.seed, task_spec, status=CellStatus.FAILED, message=message)
                )


def last_line(log: Path | None, tail_bytes: int = 4096) -> str | None:
    """The last non-empty line of a task's log (None: no log), to say why it failed in the run's one line."""
    if log is None:
        return None
    try:
        with open(log, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - tail_bytes))
            lines = [line.strip() for line in handle.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return None
    return lines[-1][:300] if lines else ""


def done_path(job_file: Path | None) -> Path:
    """The file an array task writes beside its job file when the job is done."""
    assert job_file is not None
    return job_file.with_name(job_file.stem + ".done.json")


# -- the array task ----------------------------------------------------------------------------------------------------
def read_job_file(path: Path) -> dict[str, Any]:
    """A job file's content; one line when it cannot be read here (a node that does not see the store)."""
    try:
        payload = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SlurmError(
            f"no job file {path} on node {socket.gethostname()}: the store must be on a filesystem every node "
            "mounts at the same path (harness validate --executor slurm checks)."
        ) from None
    except (OSError, ValueError) as exc:
        raise SlurmError(f"cannot read the job file {path}: {exc}") from None
    if not isinstance(payload, dict) or payload.get("format") != JOB_FILE_FORMAT:
        raise SlurmError(f"{path} is not a harness SLURM job file (format {JOB_FILE_FORMAT}).")
    return payload


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

    from ..run.cell import CellStatus
    from ..run.driver import Run
    from ..run.plan import trained_spec
    from .local import LocalExecutor

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
