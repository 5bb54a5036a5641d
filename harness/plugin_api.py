"""What plugins register: model plugins, task plugins (with metadata as validated data) and components."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from .capabilities import CAPABILITIES
from .data import TRAINING_KINDS, TrainingSplits
from .profiles import Profile

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")


def _check_name(kind: str, name: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"{kind} name {name!r} must be lower-case letters, digits, '-', '_' or '.'")


@dataclass
class ModelContext:
    """Everything a model factory may need; built by the runner."""

    options: dict[str, Any]
    backbone: str
    profile: Profile
    device: str
    seed: int
    progress: bool = True
    # Returns a trained model for another spec (e.g. a distillation teacher), from the shared checkpoint cache.
    trained_model: Callable[..., Any] | None = None
    # Resolves ``--train-on`` style names to TrainingSplits of a kind, for plugins that need extra data.
    training_data: Callable[[str, str], TrainingSplits] | None = None
    component: Callable[[str, str], Any] | None = None
    work_dir: Path | None = None  # a folder for this spec+seed's artifacts (silver pairs, plots inputs)
    train_on: str | None = None  # the spec's training source as given (task name with its options), or None


@dataclass
class ModelPlugin:
    name: str
    description: str
    factory: Callable[[ModelContext], Any]
    capabilities: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)  # name -> harness.Option
    aliases: tuple[str, ...] = ()
    training_kinds: tuple[str, ...] = ()  # kinds of training data it can learn from
    requires_training: bool = False  # cannot be evaluated untrained (e.g. a cross-encoder's fresh head)
    default_train_on: str | None = None  # training source used when it requires training and none is given
    reference: str = ""
    # Optional plan-time check of a resolved spec: validate(spec, registry) raises a HarnessError saying what would
    # work (e.g. a distillation teacher that cannot score pairs), so a bad combination fails before anything trains.
    validate: Callable[[Any, Any], None] | None = None

    def __post_init__(self) -> None:
        _check_name("model", self.name)
        for capability in self.capabilities:
            if capability not in CAPABILITIES:
                raise ValueError(f"model {self.name!r}: unknown capability {capability!r}; known: {CAPABILITIES}")
        for kind in self.training_kinds:
            if kind not in TRAINING_KINDS:
                raise ValueError(f"model {self.name!r}: unknown training kind {kind!r}; known: {TRAINING_KINDS}")


@dataclass(frozen=True)
class TaskMetadata:
    """Task metadata as data (mteb's TaskMetadata in spirit); validated on registration."""

    name: str
    family: str
    description: str
    main_score: str
    metric: str  # the protocol in one sentence
    reference: str  # paper or URL defining the task
    dataset: str  # dataset name, e.g. the folder under the data dir
    dataset_source: str  # where the data comes from
    license: str
    version: str = "1"
    eval_splits: tuple[str, ...] = ("test",)
    requires: tuple[str, ...] = ("pair_scorer",)  # the capability the task evaluates through
    training_kinds: tuple[str, ...] = ()  # training data it can offer (for --train-on)

    def __post_init__(self) -> None:
        _check_name("task", self.name)
        _check_name("task family", self.family)
        for key in ("description", "main_score", "metric", "reference", "dataset", "dataset_source", "license"):
            if not getattr(self, key):
                raise ValueError(f"task {self.name!r}: metadata field {key!r} is empty")
        for capability in self.requires:
            if capability not in CAPABILITIES:
                raise ValueError(f"task {self.name!r}: unknown capability {capability!r}")

    def as_record(self) -> dict:
        return asdict(self)


@dataclass
class EvalContext:
    profile: Profile
    device: str
    seed: int
    batch_size: int
    progress: bool = True
    data_dir: Path | None = None


@dataclass
class EvalResult:
    scores: dict[str, float]  # metric name -> value x 100 where the metric is a correlation or a ratio
    dataset_checksum: str
    details: dict[str, Any] = field(default_factory=dict)  # e.g. number of examples, first-stage retriever


class Task:
    """Base class for tasks. Subclasses set ``metadata`` and implement ``evaluate``."""

    metadata: TaskMetadata

    def __init__(self, options: Mapping[str, Any] | None = None, data_dir: Path | None = None):
        self.options = dict(options or {})
        self.data_dir = data_dir

    def evaluate(self, model: Any, ctx: EvalContext) -> EvalResult:  # pragma: no cover - interface
        raise NotImplementedError

    def training_data(self, kind: str, ctx: EvalContext | None = None) -> TrainingSplits | None:
        """Training data of ``kind`` this task offers (for ``--train-on``), or None."""
        return None

    def check_data(self) -> str:
        """Load the data (raising DataFileError/MissingDataError) and return its checksum."""
        raise NotImplementedError


@dataclass
class TaskPlugin:
    metadata: TaskMetadata
    factory: Callable[..., Task]  # factory(options, data_dir) -> Task
    options: Mapping[str, Any] = field(default_factory=dict)  # name -> harness.Option
    aliases: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.metadata.name


def task_factory(cls: type[Task], metadata: TaskMetadata) -> Callable[..., Task]:
    """A TaskPlugin factory for a Task subclass shared by several tasks that differ only in their metadata."""

    def build(options: Mapping[str, Any], data_dir: Path | None) -> Task:
        task = cls(options, data_dir)
        task.metadata = metadata
        return task

    return build


@dataclass
class Component:
    """A named piece other plugins look up by kind (e.g. kind="sampler")."""

    kind: str
    name: str
    obj: Any
    description: str = ""
