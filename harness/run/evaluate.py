"""A cell and its model -> the cell (status ok, missing or failed) with its record, not yet stored: workers compute
these (in this process or on a Ray worker) and only the driver (harness.run.driver) writes them. A cell whose score
is not finite (or undefined) or whose training diverged is recorded as ``failed`` with the reason, never a number.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from ..capabilities import ModelOutputError
from ..device import seed_everything
from ..embedding_cache import FOLDER as EMBEDDINGS_FOLDER
from ..embedding_cache import EmbeddingCache, evaluation_scope, limit_mib_from_environment
from ..environment import RUNTIME_PACKAGES, environment_record, package_version
from ..errors import DataFileError, HarnessError, IncompatibleError, MissingDataError
from ..evaluation.bootstrap import example_side_file
from ..fingerprint import stable_hash
from ..metrics import ScoreError
from ..plugin_api import PluginContractError, plugin_failure
from ..registry import Registry
from ..spec import ModelSpec, TaskSpec
from .cell import Cell, CellStatus
from .config import CACHE, RunConfig
from .cost import CostMeter
from .jobs import JobModels
from .models import RunModels
from .plan import Plan, TrainingJob

logger = logging.getLogger(__name__)


def build_record(
    registry: Registry,
    plan: Plan,
    spec: ModelSpec,
    seed: int,
    task_spec: TaskSpec,
    hardware: str,
    status: CellStatus,
    **fields: Any,
) -> dict:
    """A cell's record: what identifies the cell and the run, its status, and ``fields`` (the message of a problem;
    the scores, checksums, training report, budget and timings of an ok cell). The only place records are made."""
    metadata = registry.task(task_spec.name).metadata
    return {
        "model": spec.as_record(),
        "model_key": spec.key,
        "model_package": registry.package_of("model", spec.name),
        # the plugin's distribution version (None: registered in code): the leaderboard tells rows apart by it
        "model_version": package_version(registry.package_of("model", spec.name)),
        "seed": seed,
        "task": {
            "name": task_spec.name,
            "key": task_spec.key,
            "label": task_spec.label,
            "options": task_spec.options,
            **({"option_contents": task_spec.option_contents} if task_spec.option_contents else {}),
            "family": metadata.family,
            "version": str(metadata.version),
            "main_score": metadata.main_score,
            "package": registry.package_of("task", task_spec.name),
        },
        "profile": plan.profile.as_record(),
        "device": plan.device,
        # absent means torch, so records of torch runs keep the content they had before runtimes existed
        **({"runtime": plan.runtime} if plan.runtime != "torch" else {}),
        "hardware": hardware,
        "environment": environment_record(RUNTIME_PACKAGES if plan.runtime != "torch" else ()),
        "config_hash": stable_hash(
            {
                "model": spec.hash,
                "seed": seed,
                "task": task_spec.name,
                "task_options": task_spec.options,
                "task_version": metadata.version,
                **({"task_contents": task_spec.option_contents} if task_spec.option_contents else {}),
            }
        ),
        "data_dir": plan.data_dir_text,
        # the trackers the run reported to (harness.trackers); absent when none, so other records keep their content
        **({"log_to": list(plan.log_to)} if plan.log_to else {}),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "status": status,
        **fields,
    }


class CellWork:
    """What a worker does for a plan: train (or load) a job's model and evaluate its cells (computed Cells).
    ``plan.device`` is the device this worker computes on. Of the run's models it uses each piece by itself: the
    builder (task objects, evaluation contexts), the job models, the checkpoints (what a training left for the
    records) and the overlap of test texts with training data."""

    def __init__(self, registry: Registry, config: RunConfig, plan: Plan, models: RunModels, hardware: str):
        self.registry, self.config, self.plan, self.hardware = registry, config, plan, hardware
        self.builder = models.builder
        self.checkpoints = models.checkpoints
        self.jobs = JobModels(registry, config, models.checkpoints)
        self.overlap = models.overlap
        # the store's embedding cache (harness.embedding_cache), consulted by encoders during evaluation only
        self.embedding_cache = (
            EmbeddingCache(
                config.results_dir / CACHE / EMBEDDINGS_FOLDER,
                limit_mib_from_environment(),
                store=config.results_dir,
            )
            if config.embedding_cache
            else None
        )

    def model(self, job: TrainingJob) -> tuple[Any, float, Exception | None]:
        """The job's model, the seconds it took, and the problem that stops it (or None)."""
        plan = self.plan
        return self.jobs.model_for_job(
            job.trained, job.seed, plan.profile, plan.device, plan.training_problems.get(job.trained.key)
        )

    def release(self) -> None:
        self.jobs.release()

    def problem(self, spec: ModelSpec, seed: int, task_spec: TaskSpec, error: Exception) -> Cell:
        """The cell of a data or training problem: missing (data not available) or failed (anything else). A
        malformed data file does not replace a stored ``ok`` result (``keeps_ok``), as missing data does not."""
        if isinstance(error, MissingDataError):
            return self._problem(spec, seed, task_spec, CellStatus.MISSING, str(error))
        keeps_ok = isinstance(error, DataFileError) and not self.config.overwrite
        return self._problem(spec, seed, task_spec, CellStatus.FAILED, str(error), keeps_ok)

    def _problem(
        self,
        spec: ModelSpec,
        seed: int,
        task_spec: TaskSpec,
        status: CellStatus,
        message: str,
        keeps_ok: bool = False,
    ) -> Cell:
        """A cell that could not produce a score (diverged training, non-finite or undefined score, malformed or
        missing data): stored as ``failed`` or ``missing`` with the reason, never as a number; recomputed on the
        next run."""
        record = build_record(self.registry, self.plan, spec, seed, task_spec, self.hardware, status, message=message)
        return Cell(spec, seed, task_spec, status, record=record, message=message, keeps_ok=keeps_ok)

    def evaluate(self, job: TrainingJob, task_spec: TaskSpec, model: Any, model_seconds: float) -> Cell:
        """Evaluate one cell of ``job`` with its model and build its record without storing it."""
        spec, seed, trained, plan = job.spec, job.seed, job.trained, self.plan
        metadata = self.registry.task(task_spec.name).metadata
        task = self.builder.task(task_spec)
        # what the model trained on, read again from its provenance (harness.contamination), before the seeding
        seen = self.overlap.seen_texts(trained, seed)
        context = self.builder.eval_context(plan.profile, plan.device, seed, seen)
        started = time.perf_counter()
        seed_everything(seed)
        meter = CostMeter(plan.device)  # what the cell cost (its record's ``cost``)
        try:
            with evaluation_scope(self.embedding_cache) as cache_counts:
                result = task.evaluate(model, context)
            eval_seconds = time.perf_counter() - started
            meter.stop()
            evaluated = task.evaluated_texts(context)
            contamination = self.overlap.contamination(trained, seed, evaluated)
        except MissingDataError as exc:
            return self._problem(spec, seed, task_spec, CellStatus.MISSING, str(exc))
        except DataFileError as exc:  # malformed data found only now: a stored ok result is kept, as at plan time
            return self.problem(spec, seed, task_spec, exc)
        except ScoreError as exc:  # a score undefined for these predictions
            return self._problem(spec, seed, task_spec, CellStatus.FAILED, str(exc))
        except IncompatibleError as exc:  # found only at evaluation (e.g. a reranker's first stage): this cell alone
            return self._problem(spec, seed, task_spec, CellStatus.FAILED, str(exc))
        except (ModelOutputError, PluginContractError) as exc:  # a model's output broke its contract: this cell alone
            return self._problem(spec, seed, task_spec, CellStatus.FAILED, f"{spec.label}: {exc}")
        except (HarnessError, OSError):  # the user's input or the machine (a full disk): one line, the run stops
            raise
        except Exception as exc:  # noqa: BLE001  a plugin's bug fails its own cell, never the rest of the matrix
            return self._problem(spec, seed, task_spec, CellStatus.FAILED, plugin_failure("the evaluation", exc))
        if metadata.main_score not in result.scores:
            raise HarnessError(
                f"task {task_spec.name!r} returned no {metadata.main_score!r} score (it returned "
                f"{', '.join(result.scores)}); this is a bug in the task plugin."
            )
        non_finite = {k: v for k, v in result.scores.items() if not math.isfinite(float(v))}
        if non_finite:
            shown = ", ".join(f"{k}={v}" for k, v in list(non_finite.items())[:4])
            return self._problem(
                spec,
                seed,
                task_spec,
                CellStatus.FAILED,
                f"the evaluation produced non-finite scores ({shown}); the model's predictions or the data are "
                "broken (e.g. diverged training: lower the learning rate).",
            )
        planned_checksum = plan.data_checksums.get(task_spec.key)
        if planned_checksum is not None and planned_checksum != result.dataset_checksum:
            logger.warning(
                "task %s: the dataset checksum of the evaluation differs from its check_data(); its "
                "cells cannot be reused until they agree",
                task_spec.label,
            )
        main_score = float(result.scores[metadata.main_score])
        description, side_file = example_side_file(result.examples, main_score, task_spec.label)
        record = build_record(
            self.registry,
            plan,
            spec,
            seed,
            task_spec,
            self.hardware,
            CellStatus.OK,
            scores={k: float(v) for k, v in result.scores.items()},
            main_score=main_score,
            details=result.details,
            dataset_checksum=result.dataset_checksum,
            training_data_checksum=self.checkpoints.training_data_checksum(trained, seed),
            training=self.checkpoints.training_report(trained, seed),
            **self.checkpoints.budget_record(trained, seed),
            timings={
                "model_seconds": round(model_seconds, 3),
                "eval_seconds": round(eval_seconds, 3),
                # how much of eval_seconds the cache saved: texts served and computed, or that it was off
                "embedding_cache": cache_counts.as_record() if cache_counts is not None else {"enabled": False},
            },
            cost=meter.record(
                model=model,
                runtime=plan.runtime,
                training_report=self.checkpoints.training_report(trained, seed),
                trained=trained.train_on is not None,
                texts=evaluated,
                examples=description,
            ),
            **({"examples": description} if description is not None else {}),
            **({"contamination": contamination} if contamination is not None else {}),
        )
        return Cell(spec, seed, task_spec, CellStatus.OK, record=record, examples=side_file)

    def job_results(self, job: TrainingJob) -> Iterator[Cell]:
        """Train (or load) the job's model once and evaluate each of its tasks in this process: yields each cell's
        result as it is computed (the caller stores it before the next cell runs)."""
        model, model_seconds, problem = self.model(job)
        try:
            for task_spec in job.tasks:
                if problem is not None:
                    yield self.problem(job.spec, job.seed, task_spec, problem)
                else:
                    yield self.evaluate(job, task_spec, model, model_seconds)
        finally:
            del model
            self.release()


def __getattr__(name: str) -> Any:
    # The two cell types of harness 0.2 are one (harness.run.cell.Cell); the old names work for one more version.
    if name in ("CellOutcome", "CellResult"):
        import warnings

        warnings.warn(
            f"harness.run.evaluate.{name} is deprecated; use harness.run.cell.Cell", DeprecationWarning, stacklevel=2
        )
        return Cell
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
