"""The SLURM executor as ``harness run --executor slurm`` and ``harness validate --executor slurm`` use it
(:class:`SlurmExecutor`): the device check, the run (one driver per run folder, the following is
:mod:`harness.executors.slurm.follow`'s) and the probe job that checks that the nodes see the store."""

from __future__ import annotations

import logging
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from ...device import check_device_name
from ...errors import InvalidOptionError
from ...files import atomic_write_text
from ...locks import StoreLock
from ...store_files import read_store_text, remove_store_file
from .client import SlurmClient, SlurmError, _first_line
from .follow import _Follow, last_line
from .job_files import SLURM, config_payload, run_id
from .options import SlurmOptions

if TYPE_CHECKING:
    from ...run.cell import Cell
    from ...run.driver import Worker
    from ...run.plan import Plan

logger = logging.getLogger(__name__)

POLL_SECONDS = 3.0


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

    def validate(self, results_dir: Path) -> str:
        """What `harness validate --executor slurm` checks beyond the plan: SLURM answers and a probe job's node sees
        the store (:meth:`check_store_shared`); the line it prints."""
        host = self.check_store_shared(results_dir)
        return f"sbatch answers and node {host} sees the store {results_dir.resolve()}"

    def check_store_shared(self, store_root: Path) -> str:
        """Submit a probe job (with this executor's options) that looks for a marker file written into the store
        here: (node, harness version) it ran on; one line when the node does not see the store, runs another
        harness or the job does not run."""
        import harness

        self.client.check()
        root = store_root.resolve()
        folder = root / SLURM / "probes"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"probe-{uuid.uuid4().hex[:12]}"
        marker, answer = folder / f"{name}.marker", folder / f"{name}.answer"
        atomic_write_text(marker, "written by a harness driver to check that SLURM's nodes see this store\n", root)
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
        atomic_write_text(
            script,
            "#!/bin/bash\n"
            + "".join(f"#SBATCH {line}\n" for line in directives)
            + f"exec {shlex.quote(self.python)} -c {shlex.quote(check)} {shlex.quote(str(marker))} "
            f"{shlex.quote(str(answer))}\n",
            root,
        )
        probe_log = folder / f"{name}.log"
        logger.info("submitted a probe job to check that SLURM's nodes see %s (waiting for it)", store_root.resolve())
        try:
            done = self.client.run_waiting(script)
            if not answer.exists():
                raise SlurmError(self._probe_problem(store_root, probe_log, done))
            host, _, version = read_store_text(answer, root).partition(" ")
            if version != harness.__version__:
                raise SlurmError(
                    f"node {host} runs harness {version}, this driver {harness.__version__}; install the same "
                    "version everywhere."
                )
            remove_store_file(probe_log, root)  # kept when the probe failed: the user reads it
            return host
        finally:
            for path in (marker, answer, script):
                remove_store_file(path, root)

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
