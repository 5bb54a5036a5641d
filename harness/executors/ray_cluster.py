"""The Ray executor: training jobs and evaluation cells on long-lived Ray workers over a cluster's CPUs or GPUs.

A run starts one long-lived worker (a Ray actor, ``CellServer``, in :mod:`harness.executors.ray_worker`) per slot of
the cluster (as many as its CPUs and GPUs hold at once with ``--cpus-per-task`` CPUs and ``--gpus-per-task`` GPUs
each; never more than there are jobs), while the driver probes the nodes. A worker builds the registry (plugin
discovery), the plan and the run's task objects (whose datasets stay loaded) once, and lives until the run ends. Per
job (a model spec and seed, and the tasks one trained model serves) the driver sends every call to one worker:
``prepare`` (train the model, or load its checkpoint, or build it) and one ``evaluate`` per cell, which the worker
runs in order with the model it keeps in memory; so a job's model is trained or loaded once, as under the local
executor. Different jobs go to whichever worker has the fewest unfinished jobs (at most two each: the one it runs
and the next). Ray gives a worker the GPUs it asked for through ``CUDA_VISIBLE_DEVICES``, so on the worker it is
``cuda`` (= ``cuda:0``); its PyTorch threads are its CPUs.

What each side does:

- The **driver** plans, answers cells from the store, claims jobs (``Store.cells_lock``, as the local executor does),
  sends calls and hands every record that comes back to the driver's writer (``Worker.record``). Nothing else
  writes records.
- A **worker** trains a job's model (or finds its checkpoint) and saves the checkpoint into the store under the
  checkpoint's lock (``harness.locks``), then evaluates the job's cells one by one and returns each record. It keeps
  one job's model (key: the trained spec's key and the seed) and releases it before the next job's.

The store must be one folder that every node reaches at the same path (a shared filesystem such as NFS, CephFS,
Lustre mounted with ``flock``, GPFS); the driver checks this on every node before any cell runs. Object storage
(S3, GCS) is not a filesystem with locks and atomic renames: ``fsspec`` gives a file API over it but neither of those,
so a store there needs a FUSE mount with locking, or checkpoints synced to and from a local staging folder (see
docs/scaling.md).

Failures: a worker that dies mid-call (killed, out of memory, its node lost) is replaced by the driver with a new one
(Ray places it wherever the resources are free), which gets every unfinished call of the dead worker's jobs and
loads their models from their checkpoints; a job whose worker died more than ``max_retries`` times stops the run with
one line. A partial checkpoint folder is a temporary that the next build removes, the lock is released by the kernel,
and since only the driver writes records there is no half record. A driver that dies loses nothing stored: the next
run resumes from the store. Results of calls are small (a record), so they live with the driver, not on the node
that computed them.

This module starts or joins the cluster, checks the task resources and every node, and starts and stops the
long-lived workers (:class:`RayExecutor`); how a run's jobs go to those workers and their records come back is
:mod:`harness.executors.ray_dispatch` (:class:`Dispatch`), what runs on a worker :mod:`harness.executors.ray_worker`.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any

from ..device import check_device_name
from ..errors import HarnessError, InvalidOptionError
from ..files import atomic_write_text
from ..locks import LOCKS
from ..store_files import remove_store_file
from .progress import CellProgress
from .ray_dispatch import JOBS_PER_SERVER, Dispatch, _Pending, _ServerLost  # noqa: F401 (JOBS_PER_SERVER re-exported)
from .ray_worker import CellServer, Served, TaskResources, probe_node

if TYPE_CHECKING:
    from ..run.cell import Cell
    from ..run.driver import Worker
    from ..run.plan import Plan

logger = logging.getLogger(__name__)

LOCAL = "local"  # --ray-address local: always start a new local cluster (None: join the machine's, else start one)
CONNECT_TIMEOUT_SECONDS = 5.0
NODE_CHECK_SECONDS = 5.0  # how often the driver looks for lost nodes while tasks run
PROBE_TIMEOUT_SECONDS = 180.0
# Environment passed on to every worker (a remote cluster's workers do not inherit the driver's environment).
FORWARDED_ENVIRONMENT = (
    "HARNESS_EXTRA_PLUGINS",
    "HARNESS_PLUGINS",
    "HARNESS_DISABLE_PLUGIN_AUTOLOAD",
    "HARNESS_DATA_DIR",
    "HARNESS_NO_AMP",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TOKENIZERS_PARALLELISM",
    "HF_HOME",
    "PYTHONPATH",
)


class RayNotInstalledError(HarnessError):
    """--executor ray without Ray installed."""


class RayClusterError(HarnessError):
    """A Ray cluster that cannot be reached or used (address, store not shared, harness missing on a node)."""


class ResourceRequestError(HarnessError):
    """Task resources the cluster cannot give (GPUs on a cluster without GPUs, more than a node has)."""


# -- resources (pure functions: tested without Ray or a GPU; TaskResources, worker_device and threads_for are in
# ray_worker.py, with the worker that uses them) ---------------------------------------------------------------------
def task_resources(
    gpus_per_task: float | None, cpus_per_task: float, device: str, nodes: list[dict], where: str = "the Ray cluster"
) -> TaskResources:
    """What each training and cell task asks Ray for, checked against the cluster's alive ``nodes`` (``ray.nodes()``
    entries: ``{"Alive": bool, "Resources": {"CPU": n, "GPU": n}}``). ``gpus_per_task`` None: one GPU if the
    cluster has GPUs and the device allows them, else none. Requests no node can meet are refused (Ray would wait
    for them forever)."""
    alive = [node.get("Resources", {}) for node in nodes if node.get("Alive", True)]
    total_gpus = sum(resources.get("GPU", 0) for resources in alive)
    most_gpus = max((resources.get("GPU", 0) for resources in alive), default=0)
    most_cpus = max((resources.get("CPU", 0) for resources in alive), default=0)
    if ":" in device:
        raise InvalidOptionError(
            f"--device {device} picks a GPU by number, but under --executor ray each task gets its own GPU from Ray "
            "(it sees it as cuda:0); use --device cuda or auto, and --gpus-per-task."
        )
    if not cpus_per_task > 0:
        raise InvalidOptionError(f"--cpus-per-task must be positive, got {cpus_per_task:g}.")
    if gpus_per_task is not None and gpus_per_task < 0:
        raise InvalidOptionError(f"--gpus-per-task must be 0 or more, got {gpus_per_task:g}.")
    if gpus_per_task is not None and gpus_per_task > 1 and not float(gpus_per_task).is_integer():
        raise InvalidOptionError(f"--gpus-per-task {gpus_per_task:g}: above 1, ask for whole GPUs (Ray's rule).")
    if gpus_per_task is not None and gpus_per_task > 1:
        raise InvalidOptionError(
            f"--gpus-per-task {gpus_per_task:g}: a Ray task trains on one GPU (or a share of "
            "one); to train one model on several GPUs, run it with torchrun --nproc-per-node N "
            "-m harness run (docs/scaling.md)."
        )
    if gpus_per_task is None:
        gpus = 1.0 if total_gpus > 0 and device in ("auto", "cuda") else 0.0
    else:
        gpus = float(gpus_per_task)
    if device == "cpu" and gpus > 0:
        raise InvalidOptionError(
            f"--device cpu with --gpus-per-task {gpus:g} would hold GPUs it never uses; drop one of the two."
        )
    if gpus > 0 and total_gpus == 0:
        raise ResourceRequestError(
            f"--gpus-per-task {gpus:g}: {where} has no GPUs (CPUs: {sum(r.get('CPU', 0) for r in alive):g}); use "
            "--gpus-per-task 0 to run on its CPUs, or a cluster with GPUs."
        )
    if device == "cuda" and gpus == 0:
        raise ResourceRequestError(
            "--device cuda under --executor ray needs --gpus-per-task 1 (or more): Ray shows a task only the GPUs "
            "it asked for" + ("." if total_gpus else f", and {where} has none; use --device cpu.")
        )
    if gpus > most_gpus:
        raise ResourceRequestError(
            f"--gpus-per-task {gpus:g}: no node of {where} has that many GPUs (the most on "
            f"one node: {most_gpus:g}); ask for at most {most_gpus:g}."
        )
    if cpus_per_task > most_cpus:
        raise ResourceRequestError(
            f"--cpus-per-task {cpus_per_task:g}: no node of {where} has that many CPUs (the "
            f"most on one node: {most_cpus:g}); ask for at most {most_cpus:g}."
        )
    return TaskResources(num_cpus=float(cpus_per_task), num_gpus=gpus)


def check_address(address: str | None, timeout: float = CONNECT_TIMEOUT_SECONDS) -> None:
    """Refuse at once an address nothing listens on (ray.init would retry for a minute or more)."""
    if address in (None, "auto", LOCAL):
        return
    host_port = address.split("://", 1)[1] if "://" in address else address
    host, _, port = host_port.rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        raise RayClusterError(
            f"--ray-address {address!r}: give host:port (the head's GCS port, 6379 by default), "
            "ray://host:port (Ray Client, port 10001), auto or local."
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as exc:
        raise RayClusterError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start it with `ray start --head` "
            "on that host, or check --ray-address."
        ) from None


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayNotInstalledError(
            "--executor ray needs Ray, which is not installed; install it with pip install 'sentence-harness[ray]' "
            "(or pip install 'ray>=2.9'), or use --executor local."
        ) from None
    return ray


class RayExecutor:
    """``address``: None (join the machine's running cluster, else start one), ``"local"`` (always start one),
    ``"auto"`` or ``host:port`` / ``ray://host:port``. ``num_cpus`` sizes a cluster this executor starts (its number
    of concurrent 1-CPU tasks; default: every core). ``workers``: long-lived workers of a run (default and most: one
    per slot of the cluster, i.e. as many as its CPUs and GPUs hold at once; never more than there are jobs).
    ``max_retries``: how often Ray restarts a worker that died and sends its unfinished calls again.
    ``max_in_flight``: calls sent and not yet finished at any time (default: 4 per worker, at least 64)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        gpus_per_task: float | None = None,
        cpus_per_task: float = 1.0,
        num_cpus: int | None = None,
        max_retries: int = 3,
        max_in_flight: int | None = None,
        workers: int | None = None,
    ):
        if workers is not None and workers < 1:
            raise InvalidOptionError(f"workers must be 1 or more, got {workers}.")
        self.workers = workers
        self.address = address
        self.gpus_per_task = gpus_per_task
        self.cpus_per_task = cpus_per_task
        self.num_cpus = num_cpus
        self.max_retries = max_retries
        self._alive_nodes: dict[str, dict] = {}  # NodeID -> ray.nodes() entry at the last check
        self._nodes_checked_at = 0.0
        self.max_in_flight = max_in_flight  # calls sent and not finished (None: 4 per worker, at least 64)
        self.resources: TaskResources | None = None
        self._started_cluster = False
        self.startup_seconds = 0.0  # connecting (or starting a local cluster) and probing the nodes
        self._servers: list[Any] = []  # the long-lived workers (Ray actors) of the run, started by start()
        self._new_server: Any = None
        self.served: list[tuple[str, str, Served]] = []  # the last run's cells: (job label, task label, who computed)
        # The last run's driver time: "submit" (claims and calls), "wait" (for results), "get" (results fetched and
        # unpickled), "record" (records written) (benchmarks/executor_scaling.py shows where a cell's time goes).
        self.driver_seconds: dict[str, float] = {}
        self.prepare_seconds = 0.0  # the last run's time preparing models on the workers (training, loading, building)
        self.first_answer_seconds = 0.0  # from the last run's first call to its first answer (a worker's start)
        # The mistakes that need no cluster are reported at once, before the runner plans anything.
        self._ray: Any = import_ray()
        check_address(address)

    # -- before any cell -----------------------------------------------------------------------------------------------
    def device(self, requested: str) -> str:
        """Each worker resolves the device on its own machine (this driver may have no GPU at all): the name only is
        checked here."""
        return check_device_name(requested)

    def start(self, plan: Plan, worker: Worker) -> None:
        """Ray installed, the cluster reachable, the task resources available, the store and harness on every node;
        each failure is one line, and comes before any cell runs. Started once: a second call does nothing."""
        ray = self._ray
        if self.resources is not None and ray.is_initialized():
            return
        started = time.perf_counter()
        worker.check_locking()
        if ":" in plan.device:  # the same message as task_resources, before connecting to anything
            task_resources(None, self.cpus_per_task, plan.device, [])
        self._connect(ray)
        try:
            where = "the local Ray cluster" if self.address in (None, LOCAL) else f"the Ray cluster at {self.address}"
            self.resources = task_resources(self.gpus_per_task, self.cpus_per_task, plan.device, ray.nodes(), where)
            self._start_servers(ray, plan, worker)  # their processes start (imports, registry) while nodes are probed
            self._probe_nodes(ray, worker)
        except BaseException:
            self._stop_servers()
            self._disconnect()
            raise
        self.startup_seconds = time.perf_counter() - started

    def _connect(self, ray: Any) -> None:
        if ray.is_initialized():  # a caller (a notebook, a test) connected already: use that cluster, leave it up
            return
        environment = {name: os.environ[name] for name in FORWARDED_ENVIRONMENT if os.environ.get(name)}
        options: dict[str, Any] = {"logging_level": logging.WARNING, "runtime_env": {"env_vars": environment}}
        if not (self.address or "").startswith("ray://"):
            options["include_dashboard"] = False
        if self.address == LOCAL and self.num_cpus is not None:
            options["num_cpus"] = self.num_cpus
        try:
            ray.init(address=self.address, **options)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError... : one line whatever it is
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            hint = (
                "start one with `ray start --head`, or leave --ray-address out to start a local one"
                if self.address == "auto"
                else "check --ray-address, or leave it out to start a local cluster"
            )
            raise RayClusterError(
                f"cannot connect to Ray at {self.address or 'a local cluster'}: {first_line}; {hint}."
            ) from None
        self._started_cluster = True

    def _disconnect(self) -> None:
        if self._started_cluster and self._ray is not None:
            self._ray.shutdown()
            self._started_cluster = False

    def _probe_nodes(self, ray: Any, worker: Worker) -> None:
        """Every alive node must see the store at the same path and import harness: a marker file written here must
        be visible from a task pinned to each node."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        root = worker.store_root.resolve()
        marker = root / LOCKS / f"reach-{uuid.uuid4().hex}"
        atomic_write_text(marker, "written by a harness driver to check that every Ray node sees this store\n", root)
        try:
            probe = ray.remote(num_cpus=0, max_retries=0)(probe_node)
            nodes = [node for node in ray.nodes() if node.get("Alive", True)]
            refs = [
                probe.options(
                    name="harness-probe", scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
                ).remote(str(marker))
                for node in nodes
            ]
            try:
                answers = ray.get(refs, timeout=PROBE_TIMEOUT_SECONDS)
            except Exception as exc:
                first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise RayClusterError(
                    f"a Ray node cannot run harness ({first_line}); install the same harness environment on every node."
                ) from None
        finally:
            remove_store_file(marker, root)
        import harness

        for host, visible, version in answers:
            if not visible:
                raise RayClusterError(
                    f"node {host} does not see the result store {worker.store_root.resolve()}; put --results on a "
                    "filesystem every node mounts at the same path (e.g. NFS)."
                )
            if version != harness.__version__:
                raise RayClusterError(
                    f"node {host} runs harness {version}, this driver {harness.__version__}; "
                    "install the same version everywhere."
                )

    # -- running -------------------------------------------------------------------------------------------------------
    def run(self, plan: Plan, worker: Worker) -> list[Cell]:
        """Claim the plan's jobs while a server can take one, send each job's calls to one server, and record every
        cell that comes back (the steps are :class:`Dispatch`'s); the servers stop and the claims are released
        whatever happens."""
        ray = self._ray
        assert ray is not None and self.resources is not None, "start() first"
        jobs = plan.jobs()
        dispatch = Dispatch(ray, worker, jobs, self._servers, self._new_server, self.max_retries, self.max_in_flight)
        self.served, self.driver_seconds = dispatch.served, dispatch.spent
        self.prepare_seconds, self.first_answer_seconds = 0.0, 0.0
        total, count = sum(len(job.tasks) for job in jobs), len(self._servers)
        worker.log(
            f"  Ray: {total} cells of {len(jobs)} jobs on {count} long-lived worker(s) of "
            f"{self.resources.num_cpus:g} CPU and {self.resources.num_gpus:g} GPU each "
            f"({cluster_text(ray)})"
        )
        try:
            with CellProgress(worker.log, total, worker.progress) as progress:
                dispatch.claim_what_is_free(progress, blocking=False)
                while dispatch.waiting or dispatch.unclaimed:
                    if not dispatch.waiting:  # nothing in flight: claim what is free, else wait for another driver's
                        dispatch.claim_what_is_free(progress, blocking=False)
                        if not dispatch.waiting:
                            dispatch.claim_what_is_free(progress, blocking=True)
                        continue
                    ready = dispatch.ready()
                    self._report_lost_nodes(ray)
                    for ref in ready:
                        dispatch.answer(ref, self, progress)
                    if dispatch.unclaimed:
                        dispatch.claim_what_is_free(progress, blocking=False)
        finally:
            self._stop_servers()
            dispatch.release_claims()
            self._disconnect()
            self.resources = None  # a later run starts (or joins) a cluster again
        self.prepare_seconds, self.first_answer_seconds = dispatch.prepare_seconds, dispatch.first_answer_seconds
        return dispatch.outcomes

    def _start_servers(self, ray: Any, plan: Plan, worker: Worker) -> None:
        """The run's long-lived workers: one per slot of the cluster (or ``workers``), never more than there are
        jobs. Each holds its slot's CPUs and GPUs until the run ends."""
        assert self.resources is not None
        jobs = len(plan.jobs())
        count = min(self.workers or jobs, task_slots(ray, self.resources), jobs)  # more would wait for free resources
        # Workers reach the store and data by absolute paths; records keep the data dir as the user gave it.
        shared = (ray.put(worker.remote_config()), ray.put(plan)) if count else ()
        server_class = ray.remote(CellServer).options(**self.resources.as_options(), max_restarts=0)
        resources = self.resources

        def new_server() -> Any:
            return server_class.remote(*shared, resources)

        self._new_server = new_server
        self._servers = [new_server() for _ in range(count)]

    def _stop_servers(self) -> None:
        """On a cluster that outlives this driver, do not leave its servers running."""
        for server in self._servers:
            self._ray.kill(server, no_restart=True)
        self._servers = []

    def get(self, ray: Any, ref: Any, kind: str, pending: _Pending, index: int) -> Any:
        """The task's value; a task that failed for good becomes one clear error (a HarnessError raised on the
        worker is raised as it is)."""
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, HarnessError):
                raise cause from None
            raise
        except ray.exceptions.RayActorError as exc:
            if exc.actor_init_failed:  # the same on any worker: say why, once
                last_line = ([line for line in str(exc).splitlines() if line.strip()] or ["?"])[-1].strip()
                raise HarnessError(f"a Ray worker could not start: {last_line}") from None
            raise _ServerLost() from None  # the server died (killed, out of memory, its node lost)
        except ray.exceptions.RayError as exc:  # a task cancelled, an object gone...
            what = (
                f"training {pending.job.label}"
                if kind == "train"
                else f"cell {pending.job.label} {pending.job.tasks[index].label}"
            )
            node = (
                " (a Ray node was lost)"
                if isinstance(exc, (ray.exceptions.NodeDiedError, ray.exceptions.LocalRayletDiedError))
                else ""
            )
            raise HarnessError(
                f"the Ray worker computing {what} died {self.max_retries + 1} times "
                f"({type(exc).__name__}){node}; finished cells are stored: fix the cause (see the "
                "worker logs) and run again "
                "to resume."
            ) from None

    def _report_lost_nodes(self, ray: Any) -> None:
        """Say in one line of its own when a node of the cluster is lost (its tasks are retried elsewhere, or fail
        with the line of ``get``); checked every few seconds."""
        now = time.monotonic()
        if now - self._nodes_checked_at < NODE_CHECK_SECONDS:
            return
        self._nodes_checked_at = now
        try:
            alive = {node["NodeID"]: node for node in ray.nodes() if node.get("Alive", True)}
        except Exception:  # noqa: BLE001 - the check only informs; Ray itself reports a cluster that is gone
            return
        for line in lost_node_lines(self._alive_nodes, alive, self.max_retries):
            logger.error(line)
        self._alive_nodes = alive


def task_slots(ray: Any, resources: Any) -> int:
    """How many tasks of one executor task's size (``resources``: its CPUs and GPUs) the cluster runs at once."""
    available = ray.cluster_resources()
    slots = available.get("CPU", 0) / resources.num_cpus
    if resources.num_gpus:
        slots = min(slots, available.get("GPU", 0) / resources.num_gpus)
    return max(1, int(slots))


def cluster_text(ray: Any) -> str:
    """The cluster in a few words: alive nodes, CPUs and GPUs."""
    resources = ray.cluster_resources()
    nodes = sum(1 for node in ray.nodes() if node.get("Alive", True))
    return f"{nodes} node(s), {resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs"


def lost_node_lines(before: dict[str, dict], alive: dict[str, dict], max_retries: int) -> list[str]:
    """One line per node alive at the last check and gone now (``ray.nodes()`` entries by NodeID)."""
    lines = []
    for node_id, node in before.items():
        if node_id not in alive:
            where = node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or "?"
            lines.append(
                f"Ray node {where} ({node_id[:8]}) was lost: its running tasks are retried on the other "
                f"nodes (up to {max_retries} times); finished cells are stored, and a rerun resumes."
            )
    return lines
