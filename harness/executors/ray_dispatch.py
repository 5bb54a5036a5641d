"""The Ray executor's driver at work (:class:`Dispatch`, the steps of ``RayExecutor.run``): claim the jobs while a
long-lived worker can take one, send every call of a job to one worker, hand each record that comes back to the
driver's writer, and replace a worker that died with a new one that gets its unfinished calls. The cluster itself (its
start, the resources, the node checks, the workers' start) is :mod:`harness.executors.ray_cluster`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import HarnessError
from .local import Claim, after_claim, try_claim, waiting_line
from .progress import CellProgress
from .ray_worker import Served, TrainingResult

if TYPE_CHECKING:
    from ..run.cell import Cell
    from ..run.driver import Worker
    from ..run.plan import TrainingJob

logger = logging.getLogger(__name__)

JOBS_PER_SERVER = 2  # jobs sent to one long-lived worker and not finished: the one it runs and the next


@dataclass
class _Pending:
    job: TrainingJob
    claim: Claim
    cells_left: int
    server: int  # the index of the server its calls went to
    done: set[int] = field(default_factory=set)  # its task indices whose records came back
    attempts: int = 1  # servers its calls were sent to (another one each time a server died)


class _ServerLost(Exception):
    """A call's server died (killed, out of memory, its node lost): its unfinished calls go to a new server."""


class ResultGetter(Protocol):
    """What :meth:`Dispatch.answer` asks of the executor (:meth:`harness.executors.ray_cluster.RayExecutor.get`): a
    call's value, or ``_ServerLost`` when its server died."""

    def get(self, ray: Any, ref: Any, kind: str, pending: _Pending, index: int) -> Any: ...


class Dispatch:
    """One run of the Ray executor, step by step: the jobs not yet claimed (``unclaimed``) and the claims held
    (``held``), the calls sent and not answered (``waiting``: ref -> ("train" | "cell", job, task index)), the
    unfinished jobs on each server (``jobs_on``), the cells recorded (``outcomes``), who served each (``served``) and
    the driver's time (``spent``: "submit" claims and calls, "wait" for results, "get" results fetched and
    unpickled, "record" records written). One long-lived server per slot holds its slot's CPUs and GPUs for the run;
    one that dies is replaced by a new one, which gets the unfinished calls of the dead one's jobs (and loads their
    models from their checkpoints); a job whose server died more than ``max_retries`` times stops the run."""

    def __init__(
        self,
        ray: Any,
        worker: Worker,
        jobs: list[TrainingJob],
        servers: list[Any],
        new_server: Callable[[], Any],
        max_retries: int,
        max_in_flight: int | None,
    ):
        self.ray, self.worker, self.servers, self.new_server = ray, worker, servers, new_server
        self.max_retries = max_retries
        self.waiting: dict[Any, tuple[str, _Pending, int]] = {}
        self.unclaimed = [Claim(job, worker.cells_lock(job)) for job in jobs]
        self.held: list[Claim] = []
        self.jobs_on = [0] * len(servers)
        self.window = max_in_flight or max(64, 4 * max(1, len(servers)))
        self.outcomes: list[Cell] = []
        self.served: list[tuple[str, str, Served]] = []
        self.spent = dict.fromkeys(("submit", "wait", "get", "record"), 0.0)
        self.prepare_seconds = 0.0
        self.first_answer_seconds = 0.0
        self._started = time.perf_counter()

    # -- sending -------------------------------------------------------------------------------------------------------
    def send(self, pending: _Pending, with_prepare: bool = True) -> None:
        """Every call of a job goes to one server (which keeps its model between them), in order."""
        server = self.servers[pending.server]
        if with_prepare:
            self.waiting[server.prepare.remote(pending.job)] = ("train", pending, -1)
        for index in range(len(pending.job.tasks)):
            if index not in pending.done:
                self.waiting[server.evaluate.remote(pending.job, index)] = ("cell", pending, index)

    def submit(self, claim: Claim, job: TrainingJob, server: int) -> None:
        pending = _Pending(job, claim, len(job.tasks), server)
        self.jobs_on[server] += 1
        self.send(pending)

    def free_server(self) -> int | None:
        """The server with the fewest unfinished jobs, if it has fewer than JOBS_PER_SERVER: a server always has its
        next job queued behind the one it runs, and jobs still go to whichever server frees up first."""
        if not self.servers or len(self.waiting) >= self.window:
            return None
        server = min(range(len(self.servers)), key=self.jobs_on.__getitem__)
        return server if self.jobs_on[server] < JOBS_PER_SERVER else None

    def claim_what_is_free(self, progress: CellProgress, blocking: bool) -> None:
        """Claim and submit jobs while a server can take one: the driver's work per finished cell stays bounded
        however large the matrix, and jobs not yet claimed are left to other drivers."""
        started = time.perf_counter()
        try:
            self._claim_jobs(progress, blocking)
        finally:
            self.spent["submit"] += time.perf_counter() - started

    def _claim_jobs(self, progress: CellProgress, blocking: bool) -> None:
        worker = self.worker
        for claim in list(self.unclaimed):
            server = self.free_server()
            if server is None:
                return
            if not try_claim(worker, claim):
                if not blocking:
                    continue
                claim.lock.acquire(on_wait=waiting_line(worker, claim.job.label))
            self.unclaimed.remove(claim)
            self.held.append(claim)
            cached, job = after_claim(worker, claim)
            self.outcomes.extend(cached)
            progress.advance(len(cached))
            if job is None:
                self.held.remove(claim)
            else:
                self.submit(claim, job, server)
            if blocking:
                return  # one at a time: its cells may finish before the next is free

    # -- answers ---------------------------------------------------------------------------------------------------
    def ready(self) -> list[Any]:
        """The calls answered now, else the first within a second."""
        started = time.perf_counter()
        ready, _ = self.ray.wait(list(self.waiting), num_returns=len(self.waiting), timeout=0)
        if not ready:
            ready, _ = self.ray.wait(list(self.waiting), num_returns=1, timeout=1.0)
        self.spent["wait"] += time.perf_counter() - started
        return list(ready)

    def answer(self, ref: Any, executor: ResultGetter, progress: CellProgress) -> None:
        """Take one answered call: a prepared model is said, a cell is recorded (by the driver's writer) and its
        job finished when it was the last; a call whose server died sends the server's unfinished calls to a new
        one."""
        if ref not in self.waiting:  # a call of a server that died and was replaced meanwhile
            return
        kind, pending, index = self.waiting.pop(ref)
        started = time.perf_counter()
        try:
            value = executor.get(self.ray, ref, kind, pending, index)
        except _ServerLost:
            self.replace_server(pending)
            return
        finally:
            self.spent["get"] += time.perf_counter() - started
        if not self.first_answer_seconds:
            self.first_answer_seconds = time.perf_counter() - self._started
        if kind == "train":
            self.prepare_seconds += value.seconds
            log_training(self.worker, pending.job, value)
            return
        result, served = value
        self.served.append((pending.job.label, pending.job.tasks[index].label, served))
        self.record(pending, index, result, progress)

    def record(self, pending: _Pending, index: int, result: Cell, progress: CellProgress) -> None:
        started = time.perf_counter()
        self.outcomes.append(self.worker.record(result))  # the driver writes the record
        self.spent["record"] += time.perf_counter() - started
        progress.advance()
        pending.cells_left -= 1
        pending.done.add(index)
        if pending.cells_left == 0:
            self.jobs_on[pending.server] -= 1
            pending.claim.lock.release()
            self.held.remove(pending.claim)

    def replace_server(self, lost: _Pending) -> None:
        """The server of ``lost`` died: a new server takes its place and gets every unfinished call of its jobs (the
        dead server's calls still listed as waiting will never answer)."""
        index = lost.server
        affected = {id(p): p for _, p, _ in self.waiting.values() if p.server == index}
        affected[id(lost)] = lost
        for ref in [ref for ref, (_, p, _) in self.waiting.items() if p.server == index]:
            del self.waiting[ref]
        for pending in affected.values():
            pending.attempts += 1
            if pending.attempts > self.max_retries + 1:
                raise HarnessError(
                    f"the Ray worker computing {pending.job.label} died {pending.attempts - 1} time(s); finished "
                    "cells are stored: fix the cause (see the worker logs; e.g. memory) and run again to resume."
                )
        logger.warning(
            "a Ray worker died while computing %s; a new worker computes their %d unfinished cell(s) again",
            ", ".join(p.job.label for p in affected.values()),
            sum(p.cells_left for p in affected.values()),
        )
        self.ray.kill(self.servers[index], no_restart=True)
        self.servers[index] = self.new_server()
        for pending in affected.values():
            self.send(pending, with_prepare=pending.done == set())

    def release_claims(self) -> None:
        for claim in self.held:
            claim.lock.release()


def log_training(worker: Worker, job: TrainingJob, result: TrainingResult) -> None:
    if result.problem is None and job.trained.train_on is not None:
        worker.log(f"  {job.trained.label} seed {job.seed}: model ready in {result.seconds:.1f}s (on {result.where})")
