"""A one-node SLURM cluster on this machine for the SLURM executor's tests: munged, slurmctld and slurmd (Debian's
``munge`` and ``slurm-wlm``), run as root with every file (config, state, spool, sockets, logs) in one folder.

``start_cluster(folder)`` starts it and returns the environment its clients need (``SLURM_CONF``); ``None`` with the
reason when it cannot start here (no binaries, not root, munge or a daemon failing), which the tests turn into a skip.
No accounting daemon (slurmdbd needs a database): ``sacct`` answers nothing, so the executor reads the state of
finished array tasks from ``scontrol`` (slurmctld keeps finished jobs for ``MinJobAge`` seconds).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
START_SECONDS = 30.0


@dataclass
class Cluster:
    folder: Path
    env: dict[str, str]
    pids: list[int] = field(default_factory=list)

    def run(self, *command: str) -> str:
        """A SLURM client command's output (sinfo, squeue, ...) against this cluster."""
        return subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60).stdout

    def stop(self) -> None:
        """Stop the daemons this cluster started (by their pids only)."""
        for pid in reversed(self.pids):
            try:
                os.kill(pid, 15)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        for pid in self.pids:
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of this process counts as gone
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def why_not() -> str | None:
    """Why a cluster cannot start on this machine (None: it can try)."""
    missing = [
        name for name in DAEMONS + CLIENTS if shutil.which(name) is None and not Path(f"/usr/sbin/{name}").exists()
    ]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)} missing; apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "starting slurmd needs root (the test cluster runs its daemons as root)"
    if not Path("/etc/munge/munge.key").is_file():
        return "no munge key (/etc/munge/munge.key; the munge package creates it)"
    return None


def _daemon(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def start_cluster(folder: Path, cpus: int = 2) -> tuple[Cluster | None, str]:
    """Start the one-node cluster under ``folder``: (cluster, "") or (None, why it could not start)."""
    reason = why_not()
    if reason:
        return None, reason
    folder.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool", "munge", "logs"):
        (folder / sub).mkdir(exist_ok=True)
    os.chmod(folder / "munge", 0o700)
    host = socket.gethostname().split(".")[0]
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20 // 2
    munge_socket = folder / "munge" / "munge.socket"
    conf = folder / "slurm.conf"
    conf.write_text(
        f"""ClusterName=harnesstest
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={folder / "state"}
SlurmdSpoolDir={folder / "spool"}
SlurmctldPidFile={folder / "slurmctld.pid"}
SlurmdPidFile={folder / "slurmd.pid"}
SlurmctldLogFile={folder / "logs" / "slurmctld.log"}
SlurmdLogFile={folder / "logs" / "slurmd.log"}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=600
SchedulerParameters=sched_interval=2
MessageTimeout=30
NodeName={host} CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = Cluster(folder, env)
    munge_log = folder / "logs" / "munged.log"
    commands = [
        (
            "munged",
            [
                _daemon("munged"),
                "--foreground",
                "--force",
                f"--socket={munge_socket}",
                f"--pid-file={folder / 'munge' / 'munged.pid'}",
                f"--log-file={munge_log}",
                f"--seed-file={folder / 'munge' / 'munged.seed'}",
            ],
            munge_socket,
        ),
        ("slurmctld", [_daemon("slurmctld"), "-D", "-i", "-f", str(conf)], None),
        ("slurmd", [_daemon("slurmd"), "-D", "-f", str(conf)], None),
    ]
    for name, command, ready in commands:
        log = open(folder / "logs" / f"{name}.out", "wb")  # noqa: SIM115 - the daemon owns it until it stops
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        cluster.pids.append(process.pid)
        deadline = time.monotonic() + START_SECONDS
        while ready is not None and not ready.exists() and time.monotonic() < deadline:
            if process.poll() is not None:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        if process.poll() is not None:
            cluster.stop()
            tail = (folder / "logs" / f"{name}.out").read_text(errors="replace").strip().splitlines()[-3:]
            return None, f"{name} did not start ({' / '.join(tail) or 'no output'}; logs in {folder / 'logs'})"
    deadline = time.monotonic() + START_SECONDS
    state = ""
    while time.monotonic() < deadline:
        state = cluster.run("sinfo", "-h", "-o", "%t").strip()
        if state in ("idle", "mix", "alloc"):
            return cluster, ""
        time.sleep(0.5)
    cluster.stop()
    return None, f"the SLURM node did not come up (sinfo says {state or 'nothing'}; logs in {folder / 'logs'})"
