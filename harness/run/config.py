"""What a run is asked to do (``harness run``'s options or a matrix file), checked once when it is built."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data import check_data_dir
from ..errors import IncompatibleError, InvalidOptionError
from ..matrix import ModelEntry, check_seeds
from ..trackers import parse_log_to

CACHE = "cache"  # store folder shared by every spec: content-addressed artifacts (e.g. domain-MLM checkpoints)
# The evaluation runtimes (harness.nn.onnx_runtime.RUNTIMES, which imports torch: a config is checked without it).
RUNTIMES = ("torch", "onnx", "onnx-int8")


def check_runtime_name(value: str) -> str:
    """``value`` if it names a runtime; for one other than torch, its packages must be installed (checked by
    harness.nn.onnx_runtime, which loads torch only then: that run needs it anyway)."""
    if value not in RUNTIMES:
        raise InvalidOptionError(f"--runtime must be one of {', '.join(RUNTIMES)}, got {value!r}.")
    if value != "torch":
        from ..nn.onnx_runtime import check_runtime

        check_runtime(value)
    return value


def runtime_refused(label: str, runtime: str, model: Any) -> IncompatibleError:
    """The one line for a model (object or class) that cannot evaluate through ``runtime``: its ``runtime_refusal``
    says why, else that it has no ``use_runtime``."""
    reason = getattr(model, "runtime_refusal", None) or "it has no use_runtime method"
    return IncompatibleError(
        f"{label} cannot evaluate through --runtime {runtime} ({reason}); run it with --runtime torch."
    )


def check_batch_size(value: object) -> int | None:
    """None (the profile's) or a positive integer; one line saying so otherwise."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidOptionError(f"--batch-size must be a positive integer, got {value!r}.")
    return value


@dataclass(frozen=True)
class RunConfig:
    """A run's settings. Seeds, batch size, runtime and data dir are checked here, once, with the CLI's messages; the
    rest (names, options, budgets, data) is checked while planning (harness.run.plan). Where the cells run, and the
    options of that, belong to the executor (harness.executors), which the caller passes to ``Run.plan``/``run``."""

    models: list[ModelEntry]
    tasks: list[str]
    seeds: list[int] = field(default_factory=lambda: [42])
    profile: str = "quick"
    backbone: str | None = None
    train_on: str | None = None
    device: str = "auto"
    results_dir: Path = Path("results")
    data_dir: Path | None = None
    data_dir_source: str = "--data-dir"  # where data_dir came from, for the message when it does not exist
    overwrite: bool = False
    rescore: bool = False  # recompute every cell's evaluation from stored checkpoints; never train (harness rescore)
    progress: bool = True
    # Experiment trackers the run reports to (harness.trackers: --log-to, the matrix's log_to, HARNESS_LOG_TO);
    # recorded in each record, never part of a cell's key.
    log_to: tuple[str, ...] = ()
    batch_size: int | None = None
    store_only: bool = False  # answer every cell from the store; refuse (saying why) if one would be computed
    budget: dict = field(default_factory=dict)  # --set overrides for every trained spec (entries' own win)
    # How models that support it (``use_runtime``) run their encoders for evaluation: "torch", "onnx" or "onnx-int8"
    # (harness.nn.onnx_runtime; needs the `onnx` extra). Training always runs in torch.
    runtime: str = "torch"
    # Whether encoders serve vectors they computed before from the store's embedding cache (harness.embedding_cache)
    # during evaluation; --no-embedding-cache, the matrix key ``embedding_cache: false`` or HARNESS_EMBEDDING_CACHE=0
    # turn it off. Records say which in ``timings.embedding_cache`` (``enabled``, hits, misses).
    embedding_cache: bool = True

    def __post_init__(self) -> None:
        # Values that would otherwise fail late (numpy's seed range) or pass silently (a data dir that does not
        # exist). Normalised while the (frozen) config is being built, never after.
        object.__setattr__(
            self, "seeds", check_seeds(list(self.seeds) if isinstance(self.seeds, tuple) else self.seeds, "--seeds")
        )
        check_batch_size(self.batch_size)
        object.__setattr__(self, "log_to", parse_log_to(self.log_to, "log_to"))
        check_runtime_name(self.runtime)
        if not isinstance(self.embedding_cache, bool):
            raise InvalidOptionError(f"embedding_cache must be true or false, got {self.embedding_cache!r}.")
        object.__setattr__(self, "results_dir", Path(self.results_dir))
        if self.data_dir is not None:
            object.__setattr__(self, "data_dir", check_data_dir(self.data_dir, self.data_dir_source))
