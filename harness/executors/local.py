"""The local executor: every job in this process, one after another, on the run's device.

Before computing a job the driver claims its cells (``Store.cells_lock``). A job another process has claimed is put
off: the driver does the other jobs first, then waits for it, and afterwards answers from the store whatever the
other process stored (so two identical runs on one store train each model once: one trains, the other waits).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..locks import StoreLock
from .progress import CellProgress

if TYPE_CHECKING:
    from ..runner import CellOutcome, Plan, Runner, TrainingJob


@dataclass
class Claim:
    """A job and the lock on its cells."""

    job: TrainingJob
    lock: StoreLock
    deferred: bool = False  # another process held it when this run first tried


def job_lock(runner: Runner, job: TrainingJob) -> StoreLock:
    return runner.store.cells_lock(job.trained.key, job.seed, f"computing {len(job.tasks)} cell(s) of {job.label}")


def try_claim(runner: Runner, claim: Claim) -> bool:
    """Take the job's lock if it is free; the first time it is not, say who holds it."""
    if claim.lock.acquire(blocking=False):
        return True
    if not claim.deferred:
        claim.deferred = True
        runner.log(f"  {claim.job.label}: another process is computing these cells ({claim.lock.holder()}); "
                   "doing the others first")
    return False


def after_claim(runner: Runner, plan: Plan, claim: Claim) -> tuple[list[CellOutcome], TrainingJob | None]:
    """Cells stored meanwhile by another process (as ``cached``) and what is left to compute (None: nothing; the
    lock is then released at once)."""
    cached, remaining = runner.recheck(claim.job, plan)
    if cached:
        runner.log(f"  {claim.job.label}: {len(cached)} cell(s) answered from the store (stored by another process "
                   "while this run " + ("waited)" if claim.deferred else "was planning)"))
    if remaining is None:
        claim.lock.release()
    return cached, remaining


class LocalExecutor:
    name = "local"

    def start(self, runner: Runner, plan: Plan) -> None:
        runner.store.check_locking()

    def run(self, runner: Runner, plan: Plan, jobs: list[TrainingJob], hardware: str) -> list[CellOutcome]:
        outcomes: list[CellOutcome] = []
        claims = [Claim(job, job_lock(runner, job)) for job in jobs]
        with CellProgress(runner, sum(len(job.tasks) for job in jobs), runner.config.progress) as progress:
            deferred = []
            for claim in claims:
                if try_claim(runner, claim):
                    outcomes += self._run_claimed(runner, plan, claim, hardware, progress)
                else:
                    deferred.append(claim)
            for claim in deferred:  # everything else is done: now wait for the other process
                claim.lock.acquire(on_wait=lambda message, label=claim.job.label: runner.log(f"  {label}: {message}"))
                outcomes += self._run_claimed(runner, plan, claim, hardware, progress)
        return outcomes

    @staticmethod
    def _run_claimed(runner: Runner, plan: Plan, claim: Claim, hardware: str,
                     progress: CellProgress) -> list[CellOutcome]:
        try:
            cached, job = after_claim(runner, plan, claim)
        except BaseException:
            claim.lock.release()
            raise
        progress.advance(len(cached))
        if job is None:
            return cached
        try:
            return cached + runner.run_job(job, plan, hardware, on_cell=lambda outcome: progress.advance())
        finally:
            claim.lock.release()
