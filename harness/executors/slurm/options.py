"""What each array task of a SLURM run asks SLURM for (:class:`SlurmOptions`, ``harness run``'s ``--slurm-*``
options), checked when the options are made, and written as the ``#SBATCH`` lines of the run's scripts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import InvalidOptionError

DEFAULT_RETRIES = 2
_TIME = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$")
_MEMORY = re.compile(r"^\d+[KMGT]?$")


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
