"""Training and checkpoints: the one place that trains a model, saves its checkpoint and loads it again (``harness
run`` and ``harness export`` both use it), and what a trained model leaves for its records (its training report,
budget and the data it saw, harness.contamination). Building a model and the contexts its code receives are
:mod:`harness.run.build`'s.

A trained spec's model is trained once per seed and stored as a checkpoint (harness.store), which later runs (and
other processes sharing the store) load instead of training again; a recipe spec builds its student and trains it with
the recipe.
"""

from __future__ import annotations

import gc
import importlib.metadata as importlib_metadata
import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .. import distributed
from ..capabilities import ModelOutputError
from ..checkpoints import build_checkpoint, check_checkpoint_target, trained_checkpoint_problem
from ..consistency import batch_dependence
from ..contamination import EvaluatedTexts, TextSet, measure
from ..curves import TrainingCurves, recording
from ..data import TrainingSplits
from ..device import seed_everything
from ..errors import DataFileError, HarnessError
from ..files import atomic_write_json, cached_bytes
from ..fingerprint import stable_hash
from ..metrics import ScoreError
from ..plugin_api import (
    PluginFailure,
    RecipeContext,
    RecipePlugin,
    plugin_failure,
)
from ..profiles import Profile, budget_differences, format_budget, get_profile, precision_problem
from ..registry import BUILTIN_PACKAGES, Registry
from ..spec import ModelSpec, resolve_model_spec, student_spec
from ..store import Store
from ..store_files import NOT_WRITABLE, StoreError, read_store_json
from ..trackers import RunTrackers
from ..training import NonFiniteLossError
from .build import ModelBuilder, TaskSet, train_examples
from .config import CACHE, RunConfig, runtime_refused

logger = logging.getLogger(__name__)


class RescoreError(HarnessError):
    """``harness rescore`` met a trained spec without a usable checkpoint."""


class BatchDependenceError(HarnessError):
    """An embedder whose vectors depend on the other texts of the batch (harness.consistency); its cells fail."""


class Models:
    """Trains, checkpoints and loads the models of one run (its :class:`~harness.run.build.ModelBuilder`, ``builder``,
    builds them). ``training_checksums`` (by spec key): the training data each planned spec would train on now; a
    checkpoint trained on other data is trained again."""

    def __init__(
        self,
        registry: Registry,
        config: RunConfig,
        store: Store,
        log: Callable[[str], None] | None = None,
        training_checksums: Mapping[str, str] | None = None,
        tasks: TaskSet | None = None,
        trackers: RunTrackers | None = None,
    ):
        self.registry = registry
        # The run's experiment trackers (harness.trackers); none unless the run's driver hands them over.
        self.trackers = trackers if trackers is not None else RunTrackers()
        self.config = config
        self.store = store
        self.log = log or logger.info
        # The builder hands this object's trained models to the contexts it makes (teachers, search encoders).
        self.builder = ModelBuilder(registry, config, store, self.trained_model, tasks)
        self.training_checksums: Mapping[str, str] = dict(training_checksums or {})
        self._loaded: dict[tuple[str, int], Any] = {}  # in-process cache of trained models (teachers)
        self._reports: dict[tuple[str, int], Any] = {}  # training report per (spec hash, seed)
        self._training_data_checksums: dict[tuple[str, int], str | None] = {}  # what each loaded model learnt from
        # Training provenance (harness.contamination) per (spec hash, seed): the sources handed to its training (and
        # to the teachers it trained or loaded) and the data its recipe made and reported; the builder's
        # ``collecting`` holds the provenance of every training in progress (a teacher trains inside its recipe's).
        self._provenance: dict[tuple[str, int], dict] = {}
        self._seen: dict[tuple[str, int], TextSet | None] = {}

    def for_plan(self, training_checksums: Mapping[str, str]) -> Models:
        """The models of a planned run: the same task objects, checkpoints checked against the planned data."""
        return Models(
            self.registry, self.config, self.store, self.log, training_checksums, self.builder.tasks, self.trackers
        )

    # -- training and checkpoints ------------------------------------------------------------------------------------
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
                provenance = training_record.get("training_data") or self.derived_provenance(spec, profile, seed)
                self._provenance[cache_key] = provenance
                for outer in self.builder.collecting:  # a teacher loaded inside a recipe's training
                    outer["sources"].extend(provenance["sources"])
                    outer["made"].extend(provenance["made"])
            else:
                if self.config.rescore:  # rescore evaluates what was trained; it never trains
                    raise RescoreError(
                        f"cannot rescore {spec.label} seed {seed}: its checkpoint {checkpoint} "
                        f"cannot be loaded ({problem}); train it with `harness run` instead."
                    )
                if problem not in ("--overwrite", "not built yet"):
                    logger.warning("checkpoint %s cannot be used: %s; training it again", checkpoint, problem)
                model, report_record = self._train(spec, model, checkpoint, profile, device, seed)
        self._reports[cache_key] = report_record
        self._loaded[cache_key] = model
        return model

    def _train(
        self, spec: ModelSpec, model: Any, checkpoint: Path, profile: Profile, device: str, seed: int
    ) -> tuple[Any, dict]:
        """Train ``model`` on the spec's (cut) training data and save its checkpoint; (model, report record)."""
        assert spec.train_on is not None, "a trained spec"
        check_checkpoint_target(checkpoint)  # before training, not after it
        budgeted = profile.with_budget(spec.requested_budget)
        provenance: dict = {"sources": [], "made": [], "how": "recorded"}
        self.builder.collecting.append(provenance)
        try:
            splits = self.builder.training_splits(spec.train_on, self.builder.training_kinds(spec), budgeted, seed)
            self.log(
                f"  training {spec.label} on {spec.train_on} ({train_examples(splits)} examples, seed {seed}, "
                f"profile {profile.name}, budget {format_budget(spec.requested_budget)})"
            )
            tracking = self.trackers.training(spec.key, seed, spec.label, self._tracked_params(spec, profile, seed))
            curves = TrainingCurves(listener=tracking)
            with recording(curves):
                model, report = self._fit(spec, model, splits, profile, device, seed)
        finally:  # trainings nest (a teacher inside its recipe): this one is the last on the stack
            collecting = self.builder.collecting
            collecting[:] = [item for item in collecting if item is not provenance]
        self._provenance[(spec.hash, seed)] = provenance
        report_record = dict(report.as_record() if hasattr(report, "as_record") else report)
        # The cut of the training data is applied here, not by the method: record it with what it applied.
        report_record["applied_budget"] = {
            **dict(report_record.get("applied_budget") or {}),
            "max_train_examples": budgeted.max_train_examples,
            "train_examples": train_examples(splits),
        }
        differences = budget_differences(spec.requested_budget, report_record["applied_budget"])
        if differences:
            logger.warning(
                "%s seed %s: the training applied another budget than requested (%s)",
                spec.label,
                seed,
                "; ".join(differences),
            )
        if tracking is not None:
            tracking.add_params({"applied_budget": report_record["applied_budget"]})
        trained = model

        def save(directory: Path) -> None:
            trained.save(directory)
            atomic_write_json(
                directory / "training.json",
                {
                    "spec": spec.as_record(),
                    "seed": seed,
                    "source_checksum": splits.checksum,
                    "train_examples": train_examples(splits),
                    "requested_budget": spec.requested_budget,
                    "report": report_record,
                    "training_data": provenance,
                    # Per-step losses and dev scores, bounded (harness.curves)
                    "curves": curves.as_record(),
                },
            )

        if distributed.is_main_process():  # torchrun: rank 0 writes; the others hold the same weights in memory
            build_checkpoint(checkpoint, save)
        distributed.barrier()
        self._training_data_checksums[(spec.hash, seed)] = splits.checksum
        return model, report_record

    @staticmethod
    def _tracked_params(spec: ModelSpec, profile: Profile, seed: int) -> dict:
        """A trained model's hyperparameters for the trackers: the resolved spec, seed, profile and budget."""
        return {
            "spec": spec.as_record(),
            "seed": seed,
            "profile": profile.name,
            "requested_budget": dict(spec.requested_budget),
        }

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

    def _fit(
        self, spec: ModelSpec, model: Any, splits: TrainingSplits, profile: Profile, device: str, seed: int
    ) -> tuple[Any, Any]:
        """Train a model with its own ``fit``, or a recipe's student with the recipe; returns (model, report)."""
        if not spec.recipe:
            ctx = self.builder.model_context(spec, profile, device, seed)
            seed_everything(seed)
            return model, model.fit(splits, ctx)
        recipe: RecipePlugin = self.registry.recipe(spec.name)
        ctx = self.builder.model_context(spec, profile, device, seed, prebuilt_student=model)
        assert isinstance(ctx, RecipeContext), "a recipe's context"
        seed_everything(seed)
        result = recipe.train(splits, ctx)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise HarnessError(
                f"recipe {recipe.name!r} returned {type(result).__name__}; train() must return (student, report). "
                "This is a bug in the recipe plugin."
            )
        return result

    # -- what a trained model saw (harness.contamination) --------------------------------------------------------------
    def derived_provenance(
        self, spec: ModelSpec, profile: Profile, seed: int, limit: Any = "budget", how: str = "derived from the spec"
    ) -> dict:
        """The provenance of a model whose training did not record one (a checkpoint or record older than it): its
        training source cut to ``limit`` (default: its budget's max_train_examples), plus the extra sources its
        plugin declares (``training_sources``), each cut by the budget of the model that trains on it; data a recipe
        made (silver pairs) cannot be derived."""
        plugin = self.registry.recipe(spec.name) if spec.recipe else self.registry.model(spec.name)
        if limit == "budget":
            limit = profile.with_budget(spec.requested_budget).max_train_examples
        sources = [
            {
                "source": spec.train_on,
                "kinds": list(self.builder.training_kinds(spec)),
                "seed": seed,
                "max_train_examples": limit,
            }
        ]
        extra = getattr(plugin, "training_sources", None)
        for source, kinds, trainee in extra(spec.options, spec.train_on) if callable(extra) else []:
            # the model that trains on it (e.g. the teacher) gets its own budget, as when the recipe trained it
            trained = resolve_model_spec(
                self.registry, trainee, profile, spec.backbone, source, spec.budget_overrides or spec.budget
            )
            sources.append(
                {
                    "source": source,
                    "kinds": list(kinds),
                    "seed": seed,
                    "max_train_examples": profile.with_budget(trained.requested_budget).max_train_examples,
                }
            )
        return {"sources": sources, "made": [], "how": how}

    def provenance(self, spec: ModelSpec, seed: int) -> dict | None:
        """What the (spec, seed) model trained on (None: untrained, or not trained or loaded here)."""
        return self._provenance.get((spec.hash, seed))

    def seen_texts(self, spec: ModelSpec, seed: int, provenance: dict | None = None) -> TextSet | None:
        """The texts the (spec, seed) model trained on, read again from its provenance's sources (cut as in
        training) plus the data it made; None for an untrained model or one whose sources cannot be read now."""
        key = (spec.hash, seed)
        provenance = provenance or self._provenance.get(key)
        if spec.train_on is None or provenance is None:
            return None
        if key in self._seen:
            return self._seen[key]
        seen: TextSet | None = None
        texts = TextSet()
        base = get_profile(spec.profile)
        for source in provenance["sources"]:
            kinds = (source["kind"],) if source.get("kind") else tuple(source.get("kinds") or ())
            limited = base.with_budget({"max_train_examples": source.get("max_train_examples")})
            try:
                splits = self.builder.source_splits(source["source"], kinds, limited, int(source["seed"]))
            except (HarnessError, KeyError, ValueError) as exc:
                logger.warning(
                    "%s seed %s: training source %s cannot be read again (%s); its overlap with test "
                    "sets is not measured",
                    spec.label,
                    seed,
                    source.get("source"),
                    exc,
                )
                break
            if not texts.add(splits.train):
                break
        else:  # every source read again
            seen = texts
            for made in provenance["made"]:
                seen.add_pairs(tuple(pair) for pair in made.get("pairs", ()))
                seen.add_sentences(made.get("sentences", ()))
        self._seen[key] = seen
        return seen

    def contamination(
        self, spec: ModelSpec, seed: int, evaluated: EvaluatedTexts | None, provenance: dict | None = None
    ) -> dict | None:
        """The record's ``contamination``: the overlap of a cell's test texts with what its model trained on, and
        the training data it was measured against; None for an untrained model or a task that exposes no texts."""
        provenance = provenance or self._provenance.get((spec.hash, seed))
        seen = self.seen_texts(spec, seed, provenance)
        if seen is None or evaluated is None or provenance is None:
            return None
        sources = [
            {
                key: source[key]
                for key in ("source", "kind", "kinds", "max_train_examples", "train_examples")
                if key in source
            }
            for source in provenance["sources"]
        ]
        made = [
            {"what": item["what"], "pairs": len(item.get("pairs", ())), "sentences": len(item.get("sentences", ()))}
            for item in provenance["made"]
        ]
        return {
            **measure(seen, evaluated),
            "training_data": sources,
            "made": made,
            "how": provenance.get("how", "recorded"),
        }

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
        ``applied_budget`` and this module's cut of the training data)."""
        if trained.train_on is None:
            return {}
        report = self.training_report(trained, seed)
        applied = report.get("applied_budget") if isinstance(report, dict) else None
        return {"budget": {"requested": dict(trained.requested_budget), "applied": dict(applied or {})}}

    def release(self) -> None:
        self._loaded.clear()
        gc.collect()

    def use_runtime(self, spec: ModelSpec, model: Any) -> None:
        """Switch ``model``'s evaluation to the run's runtime (``--runtime``) through its ``use_runtime(runtime,
        cache_dir)``; exports go to the store's shared cache. A model without the method is refused under any runtime
        but torch (its scores would silently come from torch)."""
        runtime = self.config.runtime
        use = getattr(model, "use_runtime", None)
        if use is None:
            if runtime != "torch":
                raise runtime_refused(spec.label, runtime, model)
            return
        use(runtime, self.store.root / CACHE)

    def model_for_job(
        self, trained: ModelSpec, seed: int, profile: Profile, device: str, training_problem: Exception | None = None
    ) -> tuple[Any, float, Exception | None]:
        """The model of a training job (trained, loaded from its checkpoint, or built as is), the seconds that took,
        and the data, training or batch-dependence problem that stops it (its cells are then stored as
        missing/failed) or None."""
        started = time.perf_counter()
        try:
            if training_problem is not None:
                raise training_problem
            model = self.trained_model(trained, profile, device, seed)
            check_batch_independence(self.registry, self.store, trained, model, profile)
            self.use_runtime(trained, model)
        except (DataFileError, NonFiniteLossError, ScoreError, BatchDependenceError, ModelOutputError) as exc:
            self.release()
            return None, time.perf_counter() - started, exc
        except (HarnessError, OSError):  # the user's input or the machine (a full disk): one line, the run stops
            raise
        except Exception as exc:  # noqa: BLE001  a plugin's bug fails the cells of its own model, not the matrix
            self.release()
            return None, time.perf_counter() - started, PluginFailure(plugin_failure(f"model {trained.label}", exc))
        return model, time.perf_counter() - started, None


def check_batch_independence(registry: Registry, store: Store, spec: ModelSpec, model: Any, profile: Profile) -> None:
    """Third-party embedders are probed (harness.consistency) before their first cell, once per plugin version
    (the verdict is cached in the store); one whose vectors depend on the rest of the batch raises
    BatchDependenceError, so its cells fail instead of storing scores. Built-in models are covered by tests."""
    name = student_spec(registry, spec, profile).name if spec.recipe else spec.name
    package = registry.package_of("model", name)
    if package in BUILTIN_PACKAGES or not callable(getattr(model, "encode", None)):
        return
    try:
        version = importlib_metadata.version(package)
    except (importlib_metadata.PackageNotFoundError, ValueError):
        version = None  # not an installed distribution (e.g. registered in code): probed in every run
    verdict_path = store.root / CACHE / "batch-probe" / f"{name}-{stable_hash([package, version], 16)}.json"
    verdict: str | None
    if version is None:
        verdict = batch_dependence(model)
    else:  # a cache entry like any other: a damaged, edited or swapped verdict is probed again
        made_from = {"model": name, "package": package, "version": version}
        content, _ = cached_bytes(
            verdict_path,
            lambda: json.dumps({**made_from, "problem": batch_dependence(model)}).encode("utf-8"),
            check=_is_verdict,
            what="batch-probe verdict",
            made_from=made_from,
        )
        verdict = json.loads(content)["problem"]
    if verdict:
        raise BatchDependenceError(f"model {spec.label!r} ({package} {version or ''}): {verdict}.")


def _is_verdict(content: bytes) -> bool:
    try:
        verdict = json.loads(content)
    except (UnicodeDecodeError, ValueError):
        return False
    return isinstance(verdict, dict) and isinstance(verdict.get("problem"), (str, type(None)))
