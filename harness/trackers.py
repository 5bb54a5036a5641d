"""Experiment trackers (``harness run --log-to tensorboard,mlflow,wandb``), after the Hugging Face Trainer's
``report_to``: the run says what it does to TensorBoard, MLflow or Weights & Biases as it goes.

Each (trained or untrained) model and seed of a run is one tracker run, named ``<label> seed <seed>`` and grouped by
the label. For a trained model: its hyperparameters (the resolved spec, the requested budget and profile, then the
applied budget), every training step's loss (``train/loss``, ``train/<term>`` for each term of a combined
objective) and every dev score (``dev/score``), live from :func:`harness.training.fit` (through the recorder of
:mod:`harness.curves`). For each cell once it is stored: its scores (``<task>/<score>``), main score and 95%
bootstrap interval (``<task>/main_score``, ``<task>/ci_low``, ``<task>/ci_high``, where the record has per-example
data).

A backend is a :class:`Tracker` (three methods); :class:`RunTrackers` drives them and keeps the run safe: a tracker
that raises is logged once and dropped for the rest of the run, and nothing it does reaches a result or a record.
Where each backend writes: TensorBoard under ``<results>/tensorboard/`` (or ``HARNESS_TENSORBOARD_DIR``); MLflow
where ``MLFLOW_TRACKING_URI`` points (experiment ``MLFLOW_EXPERIMENT_NAME``, default ``harness``); W&B as ``wandb``
is set up (``WANDB_PROJECT``, default ``harness``; ``WANDB_MODE=offline`` for local files).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .errors import InvalidOptionError
from .status import CellStatus

logger = logging.getLogger(__name__)

ENVIRONMENT = "HARNESS_LOG_TO"
# name -> (the extra that installs it, the module that must be importable)
TRACKERS: dict[str, tuple[str, str]] = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "mlflow": ("mlflow", "mlflow"),
    "wandb": ("wandb", "wandb"),
}
NONE = ("", "none")  # the HF convention: report_to="none" turns every tracker off


def installed(name: str) -> bool:
    """Whether the package of tracker ``name`` can be imported here."""
    return importlib.util.find_spec(TRACKERS[name][1]) is not None


def parse_log_to(value: str | Sequence[str] | None, where: str = "--log-to") -> tuple[str, ...]:
    """The tracker names of a ``--log-to`` value (comma-separated text or a list): ``none`` for none, ``all`` for
    every installed one. An unknown name, or one whose package is missing, is refused in one line."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    names: list[str] = []
    for item in items:
        name = str(item).strip().lower()
        if name in NONE:
            continue
        if name == "all":
            names.extend(tracker for tracker in TRACKERS if installed(tracker))
            continue
        if name not in TRACKERS:
            raise InvalidOptionError(
                f"{where}: unknown tracker {item!r}; choose from {', '.join(TRACKERS)} (comma-separated), all or none."
            )
        if not installed(name):
            extra = TRACKERS[name][0]
            raise InvalidOptionError(
                f"{where} {name} needs the {TRACKERS[name][1]} package: pip install 'sentence-harness[{extra}]'."
            )
        names.append(name)
    return tuple(dict.fromkeys(names))


class Tracker(Protocol):
    """One backend: ``start`` a tracker run (:class:`RunTrackers` finishes the previous one first), ``add_params``
    to it, ``log`` numbers at a step, ``finish`` it. ``key`` (``<model key>/seed-<seed>``) is unique in the
    store where ``run_name`` (``<label> seed <seed>``) may not be."""

    name: str

    def start(self, run_name: str, group: str, params: Mapping[str, Any], key: str) -> None: ...

    def add_params(self, params: Mapping[str, Any]) -> None: ...

    def log(self, values: Mapping[str, float], step: int) -> None: ...

    def finish(self) -> None: ...


MAX_MESSAGE_CHARACTERS = 300  # a backend's error (MLflow's spans lines, with a server's reply) in a warning's line


def one_line(exc: BaseException) -> str:
    """A backend's error message on one line, cut to :data:`MAX_MESSAGE_CHARACTERS`."""
    text = " ".join(str(exc).split())
    return text if len(text) <= MAX_MESSAGE_CHARACTERS else text[: MAX_MESSAGE_CHARACTERS - 3] + "..."


def flat_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested hyperparameters as ``a.b.c`` -> text (what MLflow's params and TensorBoard's text take)."""
    flat: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flat_params(value, f"{name}."))
        else:
            flat[name] = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return flat


class TensorBoardTracker:
    """Event files under ``directory/<model key>/seed-<seed>/`` (torch's SummaryWriter); hyperparameters as text."""

    name = "tensorboard"

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.writer: Any = None

    def start(self, run_name: str, group: str, params: Mapping[str, Any], key: str) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(self.directory / key))
        table = "\n".join(f"| {key} | {value} |" for key, value in flat_params(params).items())
        self.writer.add_text("hyperparameters", "| parameter | value |\n|---|---|\n" + table, 0)

    def log(self, values: Mapping[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)

    def add_params(self, params: Mapping[str, Any]) -> None:
        table = "\n".join(f"| {key} | {value} |" for key, value in flat_params(params).items())
        self.writer.add_text("applied", "| parameter | value |\n|---|---|\n" + table, 0)

    def finish(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class MlflowTracker:
    """An MLflow run per model and seed through ``MlflowClient`` (the tracking URI of ``MLFLOW_TRACKING_URI``)."""

    name = "mlflow"
    MAX_PARAM = 500  # characters of a param value MLflow's stores accept everywhere

    def __init__(self) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient()
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME", "harness")
        found = self.client.get_experiment_by_name(experiment)
        self.experiment_id = found.experiment_id if found is not None else self.client.create_experiment(experiment)
        self.run_id: str | None = None

    def start(self, run_name: str, group: str, params: Mapping[str, Any], key: str) -> None:
        run = self.client.create_run(
            self.experiment_id, run_name=run_name, tags={"harness.model": group, "harness.key": key}
        )
        self.run_id = run.info.run_id
        self.add_params(params)

    def add_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        assert self.run_id is not None, "a started run"
        items = [Param(mlflow_key(key), value[: self.MAX_PARAM]) for key, value in flat_params(params).items()]
        for start in range(0, len(items), 100):  # MLflow takes at most 100 params a batch
            self.client.log_batch(self.run_id, params=items[start : start + 100])

    def log(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        assert self.run_id is not None, "a started run"
        import time

        now = int(time.time() * 1000)
        metrics = [Metric(mlflow_key(key), float(value), now, step) for key, value in values.items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def finish(self) -> None:
        if self.run_id is not None:
            self.client.set_terminated(self.run_id)
            self.run_id = None


def mlflow_key(name: str) -> str:
    """``name`` in the characters MLflow's stores take for a metric or param key (``ndcg@10`` -> ``ndcg_at_10``)."""
    return re.sub(r"[^A-Za-z0-9_\-. /]", "_", name.replace("@", "_at_"))


class WandbTracker:
    """A Weights & Biases run per model and seed (``wandb.init``; offline with ``WANDB_MODE=offline``)."""

    name = "wandb"

    def __init__(self, directory: Path | None = None):
        self.directory = directory
        self.run: Any = None

    def start(self, run_name: str, group: str, params: Mapping[str, Any], key: str) -> None:
        import wandb

        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "harness"),
            name=run_name,
            group=group,
            config=dict(params),
            tags=[key.split("/")[0]],
            reinit="create_new",
            **({"dir": str(self.directory)} if self.directory is not None else {}),
        )

    def add_params(self, params: Mapping[str, Any]) -> None:
        self.run.config.update(dict(params), allow_val_change=True)

    def log(self, values: Mapping[str, float], step: int) -> None:
        self.run.log(dict(values), step=step)

    def finish(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


def make_tracker(name: str, results_dir: Path) -> Tracker:
    """The backend ``name`` of a run whose store is ``results_dir``."""
    if name == "tensorboard":
        return TensorBoardTracker(Path(os.environ.get("HARNESS_TENSORBOARD_DIR") or Path(results_dir) / "tensorboard"))
    if name == "mlflow":
        return MlflowTracker()
    if name == "wandb":
        return WandbTracker(Path(os.environ["WANDB_DIR"]) if os.environ.get("WANDB_DIR") else None)
    raise InvalidOptionError(f"unknown tracker {name!r}; choose from {', '.join(TRACKERS)}.")


class RunTrackers:
    """The trackers of one run (none: every call does nothing). One tracker run is open at a time, for one model
    and seed (the local executor trains a model and evaluates its cells before the next). Every call into a backend
    is guarded: the first exception is logged once and that backend is dropped; the run goes on unchanged."""

    def __init__(self, names: Sequence[str] = (), results_dir: Path = Path("results"), factory: Callable | None = None):
        self.names = tuple(names)
        self.trackers: list[Any] = []
        self._open: tuple[str, int] | None = None
        self._step = 0  # the open run's last step: cell scores are logged there (W&B steps only grow)
        make = factory or make_tracker
        self._made: dict[str, Any] = {}  # the name each tracker was asked for -> the tracker made for it
        for name in self.names:
            tracker = self._guarded(name, "set up", lambda name=name: make(name, results_dir))
            if tracker is not None:
                self.trackers.append(tracker)
                self._made[name] = tracker

    def __bool__(self) -> bool:
        return bool(self.trackers)

    def working(self, named: Sequence[str]) -> list[str]:
        """Those of ``named`` (a record's ``log_to``) whose tracker is still reporting: one that failed to set up or
        was dropped since is left out, so a record never names a tracker that holds nothing of it."""
        alive = {id(tracker) for tracker in self.trackers}
        return [name for name in named if name in self._made and id(self._made[name]) in alive]

    def _guarded(self, name: str, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:  # a tracker must never stop or change a run
            logger.warning(
                "tracker %s failed to %s (%s: %s); it is off for the rest of this run (results are unaffected)",
                name,
                what,
                type(exc).__name__,
                one_line(exc),
            )
            self.trackers = [tracker for tracker in self.trackers if getattr(tracker, "name", None) != name]
            return None

    def _each(self, what: str, call: Callable[[Any], Any]) -> None:
        for tracker in list(self.trackers):
            self._guarded(tracker.name, what, lambda tracker=tracker: call(tracker))

    def open(self, model_key: str, seed: int, label: str, params: Mapping[str, Any]) -> None:
        """Make (model, seed) the open tracker run, finishing another open one first; already open: nothing."""
        if not self.trackers or self._open == (model_key, seed):
            return
        self.finish()
        self._open, self._step = (model_key, seed), 0
        self._each(
            "start a run",
            lambda tracker: tracker.start(f"{label} seed {seed}", label, params, f"{model_key}/seed-{seed}"),
        )

    def add_params(self, params: Mapping[str, Any]) -> None:
        """More hyperparameters of the open run (the budget a training applied, known when it ends)."""
        self._each("log parameters", lambda tracker: tracker.add_params(params))

    def log(self, values: Mapping[str, float], step: int | None = None) -> None:
        if step is None:
            step = self._step
        self._step = max(self._step, step)
        self._each("log", lambda tracker: tracker.log(values, step))

    def training(self, model_key: str, seed: int, label: str, params: Mapping[str, Any]) -> ModelRun | None:
        """The listener of one model's training (harness.curves.CurveListener); None without trackers."""
        return ModelRun(self, model_key, seed, label, params) if self.trackers else None

    def cell(self, record: Mapping[str, Any], interval: tuple[float, float] | None) -> None:
        """A stored ok cell's scores (and main score with its interval, when known) in its model's run."""
        if not self.trackers or record.get("status") != CellStatus.OK:
            return
        model = record["model"]
        profile = record.get("profile") if isinstance(record.get("profile"), dict) else {}
        params = {"spec": model, "seed": record["seed"], "profile": profile.get("name")}
        self.open(record["model_key"], record["seed"], model.get("label") or model.get("name"), params)
        task = record["task"]["label"]
        values = {f"{task}/{name}": float(value) for name, value in record.get("scores", {}).items()}
        values[f"{task}/main_score"] = float(record["main_score"])
        if interval is not None:
            values[f"{task}/ci_low"], values[f"{task}/ci_high"] = interval
        self.log(values)

    def stored_cell(self, record: Mapping[str, Any], path: Path) -> None:
        """:meth:`cell` for the record just stored at ``path`` (its interval from its per-example data); a
        failure is logged and turns the trackers off, never reaching the stored record."""
        if not self.trackers or record.get("status") != CellStatus.OK:
            return
        try:
            interval = record_interval(path)
        except Exception as exc:  # the interval is a courtesy to the tracker; the record is stored already
            logger.warning("no interval for the trackers from %s (%s: %s)", path, type(exc).__name__, one_line(exc))
            interval = None
        try:
            self.cell(record, interval)
        except Exception as exc:
            logger.warning(
                "trackers off for the rest of this run: %s: %s (results are unaffected)",
                type(exc).__name__,
                one_line(exc),
            )
            self.trackers = []

    def finish(self) -> None:
        """Finish the open tracker run (if any)."""
        if self._open is not None:
            self._each("finish a run", lambda tracker: tracker.finish())
            self._open = None


class ModelRun:
    """One trained model's tracker run, opened at its first step (a recipe's teacher, trained inside it, has its own
    run first; each call re-opens this one if another took its place)."""

    def __init__(self, trackers: RunTrackers, model_key: str, seed: int, label: str, params: Mapping[str, Any]):
        self.trackers, self.key, self.seed, self.label, self.params = trackers, model_key, seed, label, params

    def _open(self) -> RunTrackers:
        self.trackers.open(self.key, self.seed, self.label, self.params)
        return self.trackers

    def training_step(self, step: int, values: Mapping[str, float]) -> None:
        self._open().log({f"train/{term}": value for term, value in values.items()}, step)

    def dev_score(self, step: int, score: float) -> None:
        self._open().log({"dev/score": score}, step)

    def add_params(self, params: Mapping[str, Any]) -> None:
        self._open().add_params(params)


def record_interval(path: Path) -> tuple[float, float] | None:
    """The 95% bootstrap interval of the stored record at ``path`` from its per-example data (None without)."""
    from .evaluation.bootstrap import bootstrap_interval
    from .stored_scores import stored_examples

    data, _ = stored_examples(path)
    return bootstrap_interval(data) if data is not None else None
