"""The driver's side of one SLURM run: submit the jobs not queued as an array (job files and the sbatch script),
follow the queue with ``squeue``, submit again what ended without its done file, collect every finished job's records
from the store, and keep the state file (``state.json``) through which a later driver of the same command re-attaches
to the tasks still queued."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...files import atomic_write_json, atomic_write_text
from ...store_files import UnsafeFileError, open_store_file, read_store_text
from ..progress import CellProgress
from .client import SlurmClient, SlurmError, TaskState
from .job_files import array_script, done_path, job_key, job_payload
from .options import SlurmOptions

if TYPE_CHECKING:
    from ...run.cell import Cell
    from ...run.driver import Worker
    from ...run.plan import Plan, TrainingJob

logger = logging.getLogger(__name__)

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


class FollowedExecutor(Protocol):
    """What the following reads of its executor (:class:`harness.executors.slurm.SlurmExecutor`): the SLURM
    commands, the task options, the poll interval, the nodes' Python, and the list of arrays submitted."""

    client: SlurmClient
    options: SlurmOptions
    poll_seconds: float
    python: str
    submitted: list[str]


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


class _Follow:
    """One run of the SLURM executor: submit what is not queued, follow the queue, resubmit what failed, collect
    every finished job's records from the store. The state file names the SLURM task of each job submitted, so a
    later driver of the same command re-attaches to the tasks still queued."""

    def __init__(
        self,
        executor: FollowedExecutor,
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
            atomic_write_json(tracked.job_file, job_payload(tracked.job, self.plan.data_dir_text, self.config_data))
        script = folder / "array.sbatch"
        atomic_write_text(
            script, array_script(folder, self.folder.name, self.options.directives(), self.executor.python)
        )
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
        from ...run.cell import Cell, CellStatus

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
                status = record["status"]  # a CellStatus: the store read it
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
        from ...store import Store

        return Store(self.worker.store_root)

    def _report_unfinished(self) -> None:
        """Jobs cancelled or failing every attempt: their cells are failed outcomes with one line naming the SLURM
        job and its log (nothing is stored for them; the same command submits them again)."""
        from ...run.cell import Cell, CellStatus

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
        with os.fdopen(open_store_file(log), "rb") as handle:  # a regular file: a FIFO never hangs the driver
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - tail_bytes))
            lines = [line.strip() for line in handle.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except (OSError, UnsafeFileError):
        return None
    return lines[-1][:300] if lines else ""
