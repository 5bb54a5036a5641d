"""The local executor: every job in this process, one after another, on the run's device.

Before computing a job the driver claims its cells (``Store.cells_lock``). A job another process has claimed is put
off: the driver does the other jobs first, then waits for it, and afterwards answers from the store whatever the
other process stored (so two identical runs on one store train each model once: one trains, the other waits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import distributed
from ..device import resolve_device
from .progress import CellProgress

if TYPE_CHECKING:
    from ..locks import StoreLock
    from ..run.cell import Cell
    from ..run.driver import RankLock, Worker
    from ..run.plan import Plan, TrainingJob


@dataclass
class Claim:
    """A job and the lock on its cells."""

    job: TrainingJob
    lock: StoreLock | RankLock
    deferred: bool = False  # another process held it when this run first tried


def waiting_line(worker: Worker, label: str) -> Callable[[str], None]:
    """What a job's lock says while this run waits for it, as one of the run's lines."""
    return lambda message: worker.log(f"  {label}: {message}")


def try_claim(worker: Worker, claim: Claim) -> bool:
    """Take the job's lock if it is free; the first time it is not, say who holds it."""
    if claim.lock.acquire(blocking=False):
        return True
    if not claim.deferred:
        claim.deferred = True
        worker.log(
            f"  {claim.job.label}: another process is computing these cells ({claim.lock.holder()}); "
            "doing the others first"
        )
    return False


def after_claim(worker: Worker, claim: Claim) -> tuple[list[Cell], TrainingJob | None]:
    """Cells stored meanwhile by another process (as ``cached``) and what is left to compute (None: nothing; the
    lock is then released at once)."""
    cached, remaining = worker.recheck(claim.job)
    if cached:
        worker.log(
            f"  {claim.job.label}: {len(cached)} cell(s) answered from the store (stored by another process "
            "while this run " + ("waited)" if claim.deferred else "was planning)")
        )
    if remaining is None:
        claim.lock.release()
    return cached, remaining


class LocalExecutor:
    """Every job in this process, one after another, on the device the run asked for (resolved here)."""

    name = "local"

    def device(self, requested: str) -> str:
        return resolve_device(requested)

    def start(self, plan: Plan, worker: Worker) -> None:
        worker.check_locking()

    def run(self, plan: Plan, worker: Worker) -> list[Cell]:
        outcomes: list[Cell] = []
        jobs = plan.jobs()
        claims = [Claim(job, worker.cells_lock(job)) for job in jobs]
        with CellProgress(worker.log, sum(len(job.tasks) for job in jobs), worker.progress) as progress:
            deferred = []
            for claim in claims:
                if distributed.active():  # torchrun: every rank takes the jobs in plan order, in step
                    claim.lock.acquire(on_wait=waiting_line(worker, claim.job.label))
                    outcomes += self._run_claimed(worker, claim, progress)
                elif try_claim(worker, claim):
                    outcomes += self._run_claimed(worker, claim, progress)
                else:
                    deferred.append(claim)
            for claim in deferred:  # everything else is done: now wait for the other process
                claim.lock.acquire(on_wait=waiting_line(worker, claim.job.label))
                outcomes += self._run_claimed(worker, claim, progress)
        return outcomes

    @staticmethod
    def _run_claimed(worker: Worker, claim: Claim, progress: CellProgress) -> list[Cell]:
        try:
            # Under torchrun what is left to compute is rank 0's view of the store, the same on every rank.
            cached, job = distributed.broadcast_from_main(after_claim(worker, claim))
        except BaseException:
            claim.lock.release()
            raise
        progress.advance(len(cached))
        if job is None:
            return cached
        try:
            return cached + worker.run_job(job, on_cell=lambda outcome: progress.advance())
        finally:
            claim.lock.release()
