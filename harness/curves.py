"""Training curves: the per-step losses (each term of a combined objective) and dev scores of a training, kept in its
checkpoint's ``training.json`` under ``curves``, and read back as a pandas long frame (:func:`load_training_curves`).

While a model of a run trains (harness.run.trainer), a :class:`TrainingCurves` is the *current* recorder of this
thread; :func:`harness.training.fit` reports each optimiser step and each dev score to it, so every plugin that
trains through ``fit`` has its curves without doing anything. One training may call ``fit`` several times (seed
trials, a domain-MLM stage): each call is one *fit* of the curves, numbered from 0, with its own seed.

Bounded: a series keeps every step up to :data:`MAX_POINTS` points; past that, adjacent points are merged pairwise
(the mean of their values, at the later step) and the window doubles, so a series never holds more than
``MAX_POINTS`` points and each point is the mean over ``stride`` consecutive steps (``stride`` is stored with it: 1
means every step). A dev score series is bounded the same way (it rarely has more than a few points).
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas

logger = logging.getLogger(__name__)

MAX_POINTS = 1024  # points per series in training.json; beyond, windows of 2, 4, 8, ... steps are averaged
CURVES_FORMAT = 1
DOWNSAMPLING = (
    f"every step up to {MAX_POINTS} points; beyond, adjacent points are averaged pairwise (window doubles), so each "
    "point is the mean over 'stride' consecutive steps at the window's last step"
)
# The columns of load_training_curves' frame, in order.
CURVE_COLUMNS = (
    "model_key",
    "model",
    "spec_hash",
    "train_on",
    "seed",
    "fit",
    "fit_seed",
    "step",
    "stride",
    "term",
    "value",
    "kind",
)


class Series:
    """One bounded curve: (step, value) points, every step until :data:`MAX_POINTS`, then windowed means."""

    def __init__(self, max_points: int = MAX_POINTS):
        self.max_points = max_points
        self.steps: list[int] = []
        self.values: list[float] = []
        self.stride = 1
        self._pending_sum = 0.0
        self._pending_count = 0

    def add(self, step: int, value: float) -> None:
        self._pending_sum += value
        self._pending_count += 1
        if self._pending_count < self.stride:
            return
        self.steps.append(step)
        self.values.append(self._pending_sum / self._pending_count)
        self._pending_sum, self._pending_count = 0.0, 0
        if len(self.steps) >= self.max_points:
            self._halve()

    def _halve(self) -> None:
        # Pairs of windows become one window of twice the steps; an odd last point waits for its partner.
        pairs = len(self.steps) // 2
        merged_steps = [self.steps[2 * i + 1] for i in range(pairs)]
        merged_values = [(self.values[2 * i] + self.values[2 * i + 1]) / 2 for i in range(pairs)]
        if len(self.steps) % 2:
            self._pending_sum, self._pending_count = self.values[-1] * self.stride, self.stride
        self.steps, self.values = merged_steps, merged_values
        self.stride *= 2

    def as_record(self, last_step: int | None = None) -> dict[str, Any]:
        """The JSON form; a partial window at the end (fewer steps than ``stride``) is kept as its own mean."""
        steps, values = list(self.steps), list(self.values)
        if self._pending_count:
            steps.append(last_step if last_step is not None else (steps[-1] if steps else 0) + self._pending_count)
            values.append(self._pending_sum / self._pending_count)
        return {"stride": self.stride, "step": steps, "value": [round(value, 6) for value in values]}


class CurveListener(Protocol):
    """What a recorder tells as it goes (the run's trackers, harness.trackers): each step's values and each dev
    score, with a step counted over every fit of the training so it only grows."""

    def training_step(self, step: int, values: Mapping[str, float]) -> None: ...

    def dev_score(self, step: int, score: float) -> None: ...


class FitCurves:
    """The curves of one :func:`harness.training.fit` call: a loss series per term and the dev scores."""

    def __init__(self, index: int, seed: int, description: str, offset: int, listener: CurveListener | None):
        self.index, self.seed, self.description = index, seed, description
        self.offset = offset  # steps of the earlier fits of the same training (trackers need growing steps)
        self.listener = listener
        self.losses: dict[str, Series] = {}
        self.dev = Series()
        self.steps = 0

    def step(self, step: int, values: Mapping[str, float]) -> None:
        """Optimiser step ``step`` (from 1) of this fit, with its loss and, for a combined objective, each term."""
        self.steps = step
        for term, value in values.items():
            self.losses.setdefault(term, Series()).add(step, float(value))
        if self.listener is not None:
            self.listener.training_step(self.offset + step, values)

    def dev_score(self, step: int, score: float) -> None:
        """A dev score taken after ``step`` steps of this fit (per epoch, or every n steps under selection)."""
        self.dev.add(step, float(score))
        if self.listener is not None:
            self.listener.dev_score(self.offset + step, float(score))

    def as_record(self) -> dict[str, Any]:
        return {
            "fit": self.index,
            "seed": self.seed,
            "description": self.description,
            "steps": self.steps,
            "loss": {term: series.as_record(self.steps) for term, series in self.losses.items()},
            **({"dev": self.dev.as_record(self.steps)} if self.dev.steps or self.dev._pending_count else {}),
        }


class TrainingCurves:
    """The recorder of one model's training: every fit it runs (see the module docstring)."""

    def __init__(self, listener: CurveListener | None = None):
        self.listener = listener
        self.fits: list[FitCurves] = []

    def start_fit(self, seed: int, description: str) -> FitCurves:
        offset = sum(fit.steps for fit in self.fits)
        self.fits.append(FitCurves(len(self.fits), seed, description, offset, self.listener))
        return self.fits[-1]

    def as_record(self) -> dict[str, Any]:
        """What training.json keeps under ``curves``."""
        return {
            "format": CURVES_FORMAT,
            "max_points": MAX_POINTS,
            "downsampling": DOWNSAMPLING,
            "fits": [fit.as_record() for fit in self.fits],
        }


_CURRENT: contextvars.ContextVar[TrainingCurves | None] = contextvars.ContextVar("harness_curves", default=None)


def current_curves() -> TrainingCurves | None:
    """The recorder of the training running in this thread (None outside a run's training, e.g. a probe's fit)."""
    return _CURRENT.get()


@contextmanager
def recording(curves: TrainingCurves | None) -> Iterator[TrainingCurves | None]:
    """Make ``curves`` the current recorder inside the block (a nested training, e.g. a recipe's teacher, records
    into its own and gives the outer one back when it ends)."""
    token = _CURRENT.set(curves)
    try:
        yield curves
    finally:
        _CURRENT.reset(token)


# -- reading them back ----------------------------------------------------------------------------------------------
def read_training_record(path: Path, root: Path | None = None) -> dict:
    """The content of the training.json at ``path`` (``<store>/checkpoints/<model key>/seed-<n>/training.json``),
    read only from a checkpoint that verifies: its ``COMPLETE`` manifest names every file's sha256, training.json's
    included (:func:`harness.checkpoints.checkpoint_problem`), so an edited, half-written or planted file is never
    shown as a seed's curves. Read through the store's safe open inside ``root`` (the store, by default four levels
    up): a link out of the store or a FIFO is refused, never opened. ValueError with the reason otherwise."""
    from .checkpoints import checkpoint_problem
    from .store_files import UnsafeFileError, read_store_json

    path = Path(path)
    root = Path(root) if root is not None else (path.parents[3] if len(path.parents) > 3 else path.parent)
    problem = checkpoint_problem(path.parent, lock=False)
    if problem is not None:
        raise ValueError(f"its checkpoint does not verify: {problem}")
    try:
        record = read_store_json(path, root)
    except UnsafeFileError as exc:
        raise ValueError(f"it is {exc.reason}") from None
    except OSError as exc:
        raise ValueError(f"it cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"it is not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise ValueError(f"a JSON {type(record).__name__}, not an object")
    return record


def has_curves(path: Path) -> bool:
    """Whether the training.json at ``path`` exists in a checkpoint that verifies and keeps curves
    (:func:`read_training_record`; an unreadable one: no)."""
    if not Path(path).parent.is_dir():
        return False
    try:
        record = read_training_record(path)
    except ValueError:
        return False
    return isinstance(record.get("curves"), dict)


def training_records(store_root: Path) -> list[Path]:
    """The training.json path of every checkpoint folder ``<store>/checkpoints/<model key>/seed-<n>``, listed through
    the store's safe listing (:func:`harness.store_files.list_store_folder`): a folder linking out of the store is left
    out with a warning, never read."""
    from .checkpoints import TRAINING_RECORD
    from .store import CHECKPOINTS
    from .store_files import UnsafeFileError, list_store_folder

    found = []
    try:
        models = list_store_folder(Path(store_root) / CHECKPOINTS, store_root)
    except UnsafeFileError as exc:
        logger.warning("%s is left out: %s", exc.path, exc.reason)
        return []
    for model in models:
        if not model.is_dir():
            continue
        try:
            seeds = list_store_folder(model, store_root)
        except UnsafeFileError as exc:
            logger.warning("%s is left out: %s", exc.path, exc.reason)
            continue
        found.extend(
            seed / TRAINING_RECORD
            for seed in seeds
            if seed.name.startswith("seed-") and seed.is_dir() and os.path.lexists(seed / TRAINING_RECORD)
        )
    return found


def training_record_paths(record_paths: Iterable[tuple[int, str | Path]]) -> dict[int, Path]:
    """Seed -> the training.json path of the checkpoint beside each ``(seed, record path)`` (a record sits at
    ``<store>/<model key>/seed-<seed>/<task>.json``, its checkpoint at ``<store>/checkpoints/<model key>/seed-<seed>``)
    where something stands at that path; not read or verified (:func:`read_training_record` does that)."""
    from .checkpoints import TRAINING_RECORD
    from .store import CHECKPOINTS

    found: dict[int, Path] = {}
    for seed, record_path in record_paths:
        record = Path(record_path)
        training = record.parent.parent.parent / CHECKPOINTS / record.parent.parent.name / record.parent.name
        if seed not in found and os.path.lexists(training / TRAINING_RECORD):
            found[seed] = training / TRAINING_RECORD
    return found


def curve_files(record_paths: Iterable[tuple[int, str | Path]]) -> dict[int, Path]:
    """Seed -> the training.json, with curves, of the checkpoint beside each ``(seed, record path)``
    (:func:`training_record_paths`); seeds whose checkpoint is absent, does not verify or keeps no curves are left
    out."""
    return {seed: path for seed, path in training_record_paths(record_paths).items() if has_curves(path)}


def curve_rows(training_record: Mapping[str, Any], model_key: str) -> list[dict[str, Any]]:
    """The long-form rows (:data:`CURVE_COLUMNS`) of one checkpoint's training.json content; none when it has no
    curves (a checkpoint trained before curves were kept). A malformed ``curves`` value raises ValueError."""
    curves = training_record.get("curves")
    if curves is None:
        return []
    if not isinstance(curves, dict) or not isinstance(curves.get("fits"), list):
        raise ValueError("its 'curves' is not an object with a list of fits")
    spec = training_record.get("spec") if isinstance(training_record.get("spec"), dict) else {}
    base = {
        "model_key": model_key,
        "model": spec.get("label"),
        "spec_hash": spec.get("hash"),
        "train_on": spec.get("train_on"),
        "seed": training_record.get("seed"),
    }
    rows = []
    for fit in curves["fits"]:
        series = [("loss", term, values) for term, values in (fit.get("loss") or {}).items()]
        if fit.get("dev"):
            series.append(("dev", "dev", fit["dev"]))
        for kind, term, values in series:
            steps, points = values.get("step"), values.get("value")
            if not isinstance(steps, list) or not isinstance(points, list) or len(steps) != len(points):
                raise ValueError(f"fit {fit.get('fit')} {kind} {term!r}: steps and values do not pair up")
            if not all(_is_number(step) for step in steps) or not all(
                value is None or _is_number(value) for value in points
            ):
                # a plot or table would otherwise fail on a text half-way: the file is skipped
                raise ValueError(f"fit {fit.get('fit')} {kind} {term!r}: a step or value is not a number")
            for step, value in zip(steps, points):
                rows.append(
                    {
                        **base,
                        "fit": fit.get("fit"),
                        "fit_seed": fit.get("seed"),
                        "step": step,
                        "stride": values.get("stride", 1),
                        "term": term,
                        "value": value,
                        "kind": kind,
                    }
                )
    return rows


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _wanted(record: Mapping[str, Any], models: Sequence[str] | None, train_on: Sequence[str] | None) -> bool:
    spec = record.get("spec") if isinstance(record.get("spec"), dict) else {}
    if models and not ({spec.get("label"), spec.get("name")} & set(models)):
        return False
    return not train_on or spec.get("train_on") in set(train_on)


def load_training_curves(
    store: str | Path | Sequence[str | Path] = "results",
    *,
    models: Sequence[str] | str | None = None,
    train_on: Sequence[str] | str | None = None,
    seeds: Sequence[int] | None = None,
) -> pandas.DataFrame:
    """The training curves of the trained checkpoints of a result store (or several) as a pandas long frame.

    One row per point: ``model_key``, ``model`` (the spec's label), ``spec_hash``, ``train_on``, ``seed``, ``fit``
    (which ``fit`` call of the training: seed trials and stages have several), ``fit_seed``, ``step``, ``stride``
    (1: that step alone; n: the mean over the n steps up to ``step``, see :mod:`harness.curves`), ``term`` (``loss``,
    each term of a combined objective, or ``dev``), ``value`` and ``kind`` (``loss`` or ``dev``).

    ``models`` keeps specs whose label or name is listed, ``train_on`` those trained on one of the listed sources,
    ``seeds`` those seeds. Curves come only from checkpoints that verify (:func:`read_training_record`). A
    ``training.json`` that cannot be read (or whose checkpoint does not verify) is logged as a warning and listed in
    the frame's ``attrs["skipped"]`` as ``(path, why)``, never dropped silently; checkpoints trained before curves
    were kept are listed in ``attrs["without_curves"]``.
    """
    import pandas as pd

    stores = [store] if isinstance(store, (str, Path)) else list(store)
    wanted_models = [models] if isinstance(models, str) else list(models or [])
    wanted_sources = [train_on] if isinstance(train_on, str) else list(train_on or [])
    rows: list[dict[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    without: list[str] = []
    for root in stores:
        if not Path(root).is_dir():
            raise FileNotFoundError(f"{root}: no such result store; pass the folder `harness run --results` wrote.")
        for path in training_records(Path(root)):
            try:
                record = read_training_record(path, Path(root))
                if not _wanted(record, wanted_models, wanted_sources):
                    continue
                if seeds is not None and record.get("seed") not in set(seeds):
                    continue
                found = curve_rows(record, path.parent.parent.name)
            except (OSError, ValueError, AttributeError, TypeError) as exc:
                logger.warning("%s cannot be read (%s); its curves are left out", path, exc)
                skipped.append((str(path), str(exc)))
                continue
            if "curves" not in record:
                without.append(str(path))
            rows.extend(found)
    frame = pd.DataFrame(rows, columns=list(CURVE_COLUMNS))
    frame.attrs["skipped"] = skipped
    frame.attrs["without_curves"] = without
    return frame
