"""The model of a training job, ready for its cells: trained or loaded (:mod:`harness.run.checkpoints`), probed for
batch dependence (third-party embedders, once per plugin version), switched to the run's runtime, and the problem that
stops it classified: a data, training or model problem fails the job's cells, the user's input or the machine stops
the run.
"""

from __future__ import annotations

import importlib.metadata as importlib_metadata
import json
import logging
import time
from pathlib import Path
from typing import Any

from ..capabilities import ModelOutputError
from ..consistency import batch_dependence
from ..errors import DataFileError, HarnessError
from ..files import cached_bytes
from ..fingerprint import stable_hash
from ..metrics import ScoreError
from ..plugin_api import PluginFailure, plugin_failure
from ..profiles import Profile
from ..registry import BUILTIN_PACKAGES, Registry
from ..spec import ModelSpec, student_spec
from ..training import NonFiniteLossError
from .checkpoints import Checkpoints
from .config import CACHE, RunConfig, runtime_refused

logger = logging.getLogger(__name__)


class BatchDependenceError(HarnessError):
    """An embedder whose vectors depend on the other texts of the batch (harness.consistency); its cells fail."""


class JobModels:
    """The model of a training job, ready for its cells: trained or loaded (``checkpoints``), probed for batch
    dependence, switched to the run's runtime; a problem that stops it is returned, not raised, so its cells are
    stored as missing or failed."""

    def __init__(self, registry: Registry, config: RunConfig, checkpoints: Checkpoints):
        self.registry = registry
        self.config = config
        self.checkpoints = checkpoints
        self.cache_dir = Path(config.results_dir) / CACHE  # the store's shared cache: verdicts and runtime exports

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
            model = self.checkpoints.trained_model(trained, profile, device, seed)
            check_batch_independence(self.registry, self.cache_dir, trained, model, profile)
            self.use_runtime(trained, model)
        except (DataFileError, NonFiniteLossError, ScoreError, BatchDependenceError, ModelOutputError) as exc:
            self.checkpoints.release()
            return None, time.perf_counter() - started, exc
        except (HarnessError, OSError):  # the user's input or the machine (a full disk): one line, the run stops
            raise
        except Exception as exc:  # noqa: BLE001  a plugin's bug fails the cells of its own model, not the matrix
            self.checkpoints.release()
            return None, time.perf_counter() - started, PluginFailure(plugin_failure(f"model {trained.label}", exc))
        return model, time.perf_counter() - started, None

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
        use(runtime, self.cache_dir)

    def release(self) -> None:
        """Forget the job's model (and the teachers it trained with) before the next job's."""
        self.checkpoints.release()


def check_batch_independence(
    registry: Registry, cache_dir: Path, spec: ModelSpec, model: Any, profile: Profile
) -> None:
    """Third-party embedders are probed (harness.consistency) before their first cell, once per plugin version
    (the verdict is cached in the store's ``cache_dir``); one whose vectors depend on the rest of the batch raises
    BatchDependenceError, so its cells fail instead of storing scores. Built-in models are covered by tests."""
    name = student_spec(registry, spec, profile).name if spec.recipe else spec.name
    package = registry.package_of("model", name)
    if package in BUILTIN_PACKAGES or not callable(getattr(model, "encode", None)):
        return
    try:
        version = importlib_metadata.version(package)
    except (importlib_metadata.PackageNotFoundError, ValueError):
        version = None  # not an installed distribution (e.g. registered in code): probed in every run
    verdict_path = cache_dir / "batch-probe" / f"{name}-{stable_hash([package, version], 16)}.json"
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
