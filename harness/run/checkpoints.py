"""Checkpoints of a run's trained models: the one place that decides whether a model is loaded from its checkpoint
or trained again (``harness run`` and ``harness export`` both go through it), under the checkpoint's lock, and what
the model's training left for its records (report, budget, the checksum of its data).

A trained spec's model is trained once per seed and stored as a checkpoint (harness.store), which later runs (and
other processes sharing the store) load instead of training again; a recipe spec builds its student and trains it with
the recipe (:mod:`harness.run.trainer`).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Callable, Mapping
from typing import Any

from .. import distributed
from ..checkpoints import trained_checkpoint_problem
from ..errors import HarnessError
from ..profiles import Profile, precision_problem
from ..registry import Registry
from ..spec import ModelSpec, student_spec
from ..store import Store
from ..store_files import NOT_WRITABLE, StoreError, read_store_json
from .build import ModelBuilder
from .config import RunConfig
from .plan import Plan, trained_spec
from .provenance import ProvenanceLog, derived_provenance
from .trainer import Trainer

logger = logging.getLogger(__name__)


class RescoreError(HarnessError):
    """``harness rescore`` met a trained spec without a usable checkpoint."""


class Checkpoints:
    """Loads or trains the models of one run (``trained_model``) and keeps them for its cells. ``training_checksums``
    (by spec key): the training data each planned spec would train on now; a checkpoint trained on other data is
    trained again."""

    def __init__(
        self,
        registry: Registry,
        config: RunConfig,
        store: Store,
        builder: ModelBuilder,
        trainer: Trainer,
        provenance: ProvenanceLog,
        log: Callable[[str], None],
        training_checksums: Mapping[str, str] | None = None,
    ):
        self.registry = registry
        self.config = config
        self.store = store
        self.builder = builder
        self.trainer = trainer
        self.provenance = provenance
        self.log = log
        self.training_checksums: Mapping[str, str] = dict(training_checksums or {})
        self._loaded: dict[tuple[str, int], Any] = {}  # in-process cache of trained models (teachers)
        self._reports: dict[tuple[str, int], Any] = {}  # training report per (spec hash, seed)
        self._training_data_checksums: dict[tuple[str, int], str | None] = {}  # what each loaded model learnt from

    def trained_model(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> Any:
        """Build the model; if it is trained, load its checkpoint or train it and save one (shared by all cells).
        A recipe spec builds its student, and trains it with the recipe.

        A trained spec's checkpoint is checked, trained, built and loaded under its lock (harness.locks): of several
        processes sharing the store (other runs, Ray workers) one trains, the others wait and then load it."""
        if spec.train_on is None or (spec.hash, seed) in self._loaded or not distributed.is_main_process():
            return self._trained_model(spec, profile, device, seed)  # torchrun: rank 0 holds the lock for all
        lock = self.store.checkpoint_lock(spec.key, seed, f"training {spec.label} seed {seed}")
        try:
            lock.acquire(on_wait=lambda message: self.log(f"  {spec.label} seed {seed}: {message}"))
        except OSError as exc:  # a read-only store (e.g. `harness export` from a shared one or a read-only mount)
            if exc.errno not in NOT_WRITABLE:
                raise
            if self.config.overwrite or self.checkpoint_problem(spec, seed) is not None:
                raise StoreError(
                    f"cannot train {spec.label} seed {seed}: the store {self.store.root} is not "
                    f"writable ({exc.strerror}); choose a writable store."
                ) from None
            return self._trained_model(spec, profile, device, seed)  # nobody can replace it from here: load it
        try:
            return self._trained_model(spec, profile, device, seed)
        finally:
            lock.release()

    def _trained_model(self, spec: ModelSpec, profile: Profile, device: str, seed: int) -> Any:
        cache_key = (spec.hash, seed)
        if cache_key in self._loaded:
            return self._loaded[cache_key]
        if spec.recipe:
            model = self.builder.build(student_spec(self.registry, spec, profile), profile, device, seed)
        else:
            model = self.builder.build(spec, profile, device, seed)
        report_record = None
        if spec.train_on is not None:
            checkpoint = self.store.checkpoint_dir(spec.key, seed)
            problem = None
            if distributed.is_main_process():
                problem = "--overwrite" if self.config.overwrite else self.checkpoint_problem(spec, seed)
            # torchrun: rank 0 (which holds the checkpoint lock) decides for every rank whether to train or load.
            problem = distributed.broadcast_from_main(problem)
            if problem is None:
                self.log(f"  loading checkpoint {checkpoint}")
                model.load(checkpoint)
                training_record = read_store_json(checkpoint / "training.json", self.store.root)
                report_record = training_record.get("report")
                self._training_data_checksums[cache_key] = training_record.get("source_checksum")
                self.provenance.loaded(
                    spec,
                    seed,
                    training_record.get("training_data") or derived_provenance(self.registry, spec, profile, seed),
                )
            else:
                if self.config.rescore:  # rescore evaluates what was trained; it never trains
                    raise RescoreError(
                        f"cannot rescore {spec.label} seed {seed}: its checkpoint {checkpoint} "
                        f"cannot be loaded ({problem}); train it with `harness run` instead."
                    )
                if problem not in ("--overwrite", "not built yet"):
                    logger.warning("checkpoint %s cannot be used: %s; training it again", checkpoint, problem)
                trained = self.trainer.train(spec, model, checkpoint, profile, device, seed)
                model, report_record = trained.model, trained.report
                self._training_data_checksums[cache_key] = trained.data_checksum
        self._reports[cache_key] = report_record
        self._loaded[cache_key] = model
        return model

    def checkpoint_problem(self, spec: ModelSpec, seed: int) -> str | None:
        """Why a stored checkpoint cannot be loaded: not built, damaged (a file differs from the checksum recorded
        when it was built), built for another spec or seed (a checkpoint folder copied or moved by hand: its
        ``training.json`` names the spec hash and seed it was trained for), or trained on data that has changed
        since (planned specs only). None: load it."""
        checkpoint = self.store.checkpoint_dir(spec.key, seed)
        problem = trained_checkpoint_problem(
            checkpoint,
            spec_hash=spec.hash,
            seed=seed,
            training_data_checksum=self.training_checksums.get(spec.key),
            train_on=spec.train_on,
        )
        if problem is not None or spec.requested_budget.get("precision", "auto") == "auto":
            return problem
        report = read_store_json(checkpoint / "training.json", self.store.root).get("report")
        return precision_problem(
            spec.requested_budget, report.get("applied_budget") if isinstance(report, dict) else None
        )

    # -- what a trained model leaves for its records -------------------------------------------------------------------
    def training_report(self, spec: ModelSpec, seed: int) -> Any:
        """The report of the training that produced the (spec, seed) model in this process, or None."""
        return self._reports.get((spec.hash, seed))

    def training_data_checksum(self, spec: ModelSpec, seed: int) -> str | None:
        """The checksum of the data the (spec, seed) model learnt from (None: untrained or not loaded here)."""
        return self._training_data_checksums.get((spec.hash, seed))

    def budget_record(self, trained: ModelSpec, seed: int) -> dict:
        """``{"budget": {"requested": ..., "applied": ...}}`` for a cell of a trained spec (empty otherwise): what
        the spec asked for (harness.profiles.requested_budget) and what its training applied (the training loop's
        ``applied_budget`` and the trainer's cut of the training data)."""
        if trained.train_on is None:
            return {}
        report = self.training_report(trained, seed)
        applied = report.get("applied_budget") if isinstance(report, dict) else None
        return {"budget": {"requested": dict(trained.requested_budget), "applied": dict(applied or {})}}

    def release(self) -> None:
        """Forget the models kept in this process (the job's model and the teachers it trained with)."""
        self._loaded.clear()
        gc.collect()


def check_rescore(plan: Plan, checkpoints: Checkpoints) -> None:
    """``harness rescore`` needs every trained spec's checkpoint: refuse before any cell runs when one is not usable
    (rescore never trains)."""
    problems = {}
    for planned in plan.models:
        for task_spec in planned.tasks:
            trained = trained_spec(planned.spec, task_spec)
            for seed in plan.seeds if trained.train_on is not None else ():
                problem = checkpoints.checkpoint_problem(trained, seed)
                if problem is not None:
                    problems[(trained.label, seed)] = problem
    if problems:
        shown = "; ".join(f"{label} seed {seed}: {why}" for (label, seed), why in list(problems.items())[:4])
        raise RescoreError(
            f"cannot rescore {len(problems)} trained model(s) without a usable checkpoint "
            f"({shown}); train them with `harness run`, rescore recomputes evaluations only."
        )
