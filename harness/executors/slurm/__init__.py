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

One job per module (every name is importable from this package as well):

- :mod:`~harness.executors.slurm.options`: ``SlurmOptions``, what each array task asks SLURM for.
- :mod:`~harness.executors.slurm.client`: the SLURM commands (``SlurmClient``) and ``SlurmError``.
- :mod:`~harness.executors.slurm.job_files`: the plain-data job files, the run id and the done files.
- :mod:`~harness.executors.slurm.follow`: the driver following one run: submission, polling, retries, the state file.
- :mod:`~harness.executors.slurm.executor`: ``SlurmExecutor``, what ``harness run`` and ``harness validate`` call.
- :mod:`~harness.executors.slurm.array_task`: what an array task runs on its node (``run_job_file``).
"""

from .array_task import run_job_file, task_threads
from .client import COMMAND_TIMEOUT_SECONDS, PROBE_TIMEOUT_SECONDS, SlurmClient, SlurmError, TaskState
from .executor import POLL_SECONDS, SlurmExecutor
from .follow import CANCELLED, DONE_FILE_GRACE_SECONDS, LIVE_STATES, QUEUE_PATIENCE_SECONDS, last_line
from .job_files import (
    JOB_FILE_FORMAT,
    SLURM,
    config_from_payload,
    config_payload,
    done_path,
    job_key,
    read_job_file,
    run_id,
)
from .options import DEFAULT_RETRIES, SlurmOptions

__all__ = [
    "CANCELLED",
    "COMMAND_TIMEOUT_SECONDS",
    "DEFAULT_RETRIES",
    "DONE_FILE_GRACE_SECONDS",
    "JOB_FILE_FORMAT",
    "LIVE_STATES",
    "POLL_SECONDS",
    "PROBE_TIMEOUT_SECONDS",
    "QUEUE_PATIENCE_SECONDS",
    "SLURM",
    "SlurmClient",
    "SlurmError",
    "SlurmExecutor",
    "SlurmOptions",
    "TaskState",
    "config_from_payload",
    "config_payload",
    "done_path",
    "job_key",
    "last_line",
    "read_job_file",
    "run_id",
    "run_job_file",
    "task_threads",
]
