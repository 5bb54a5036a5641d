"""The SLURM commands the executor runs (``sbatch``, ``squeue``, ``sacct``, ``scontrol``), each failure one line
(:class:`SlurmError`), and how a task that left the queue ended (:class:`TaskState`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...errors import HarnessError

# What `sbatch --parsable` prints: the job id, then `;<cluster>` on a multi-cluster setup; nothing else is a job id.
PARSABLE_JOB_ID = re.compile(r"(\d+)(?:;[\w.-]+)?")
COMMAND_TIMEOUT_SECONDS = 60.0
PROBE_TIMEOUT_SECONDS = 600.0


class SlurmError(HarnessError):
    """SLURM cannot be used (its commands missing or failing, a store the nodes do not share, a bad job file)."""


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
        printed = done.stdout.strip()
        parsed = PARSABLE_JOB_ID.fullmatch(printed)
        if parsed is None:  # polled as a job id, it would never be found and the jobs would be submitted again
            raise SlurmError(
                f"sbatch printed {_first_line(printed)[:80]!r}, not a job id (`sbatch --parsable` prints "
                "<id> or <id>;<cluster>); check with squeue whether the job was queued before running again."
            )
        return parsed.group(1)

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
