"""What plugins register: model plugins, recipe plugins, task plugins (a Task class with its metadata and options)
and components, plus the contexts the core hands to them.

Everything here is re-exported by :mod:`harness.api` (and so by ``harness``); docs/writing-plugins.md explains each
field. Registration-time checks raise :class:`PluginContractError`; the registry turns that into "plugin failed to
load" for the one plugin at fault, so a broken plugin never breaks the others.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .capabilities import CAPABILITIES
from .data import SCORED_PAIRS, TRAINING_KINDS, TrainingSplits
from .errors import HarnessError, close_matches_hint
from .options import Option, resolve_options
from .profiles import Profile

if TYPE_CHECKING:
    from .cache import ArtifactCache

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]*$")


class PluginContractError(HarnessError, ValueError):
    """A plugin registered something that breaks the plugin contract (bad name, unknown capability, ...)."""


def plugin_failure(what: str, exc: BaseException) -> str:
    """One line for an exception a plugin raised inside a cell (stored as the failed cell's message; ``-v`` logs the
    traceback): its type, message and the innermost place it was raised."""
    import traceback

    logging.getLogger(__name__).debug("%s raised", what, exc_info=exc)

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    return (
        f"{what} raised {type(exc).__name__}{': ' + text if text else ''}{where}: a bug in the model or task "
        "plugin (run with -v for the traceback)"
    )


class PluginFailure(HarnessError):
    """A plugin raised an unexpected exception while its model was built, trained or probed: the cells of that
    model and seed fail with :func:`plugin_failure`'s line, the rest of the matrix runs."""


def _check_name(kind: str, name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise PluginContractError(
            f"{kind} name {name!r} must be lower-case letters, digits, '-', '_' or '.', starting with a letter or "
            "digit."
        )


def _check_known(owner: str, what: str, values: tuple[str, ...], known: tuple[str, ...]) -> None:
    """``what`` is the singular noun, e.g. "capability"."""
    if isinstance(values, str):
        raise PluginContractError(f"{owner}: the {what} list must be a tuple of names, got the string {values!r}.")
    for value in values:
        if value not in known:
            raise PluginContractError(
                f"{owner}: unknown {what} {value!r}.{close_matches_hint(str(value), known)} Known: {', '.join(known)}."
            )


def _check_options(owner: str, options: Mapping[str, Any]) -> None:
    for key, option in options.items():
        if not isinstance(option, Option):
            raise PluginContractError(f"{owner}: option {key!r} must be a harness.Option, got {type(option).__name__}.")


# -- callables the run stages put into contexts (typed, so a plugin author need not read harness/run/build.py) --------
class TrainedModelLookup(Protocol):
    def __call__(self, spec: str, train_on: str | None = None, backbone: str | None = None) -> Any:
        """The model of ``spec`` (e.g. ``"ce"`` or ``"cbe:lr=3e-5"``), trained on ``train_on`` (default: the spec's
        own default source) from ``backbone`` (default: the caller's backbone), for the caller's seed and profile;
        its checkpoint is cached and shared with every other cell that needs it."""


class TrainingDataLookup(Protocol):
    def __call__(self, source: str, kind: str) -> TrainingSplits:
        """Training data of ``kind`` offered by the task ``source`` (a task spec text), cut to the profile."""


class ComponentLookup(Protocol):
    def __call__(self, kind: str, name: str) -> Any:
        """The registered component object of ``kind`` called ``name`` (an error lists the known names)."""


class EmbedderLookup(Protocol):
    def __call__(self, spec: str) -> Any:
        """A model for ``spec`` (untrained unless the spec says so), e.g. a first-stage retriever of a task."""


@dataclass
class ModelContext:
    """Everything a model factory (and ``fit``) may use; built by the runner.

    Plugins must honour ``profile`` (``max_seq_length``, ``epochs``, ``batch_size``, ``max_steps``; it carries the
    spec's requested budget, where ``epochs`` None means "as many as ``max_steps`` needs", which
    ``harness.training.fit`` does) and ``eval_batch_size``, write only under ``artifact_dir`` / ``cache_dir``, and log
    through ``logger``.
    """

    options: dict[str, Any]  # the spec's options, resolved: every declared option is present
    backbone: str  # a local folder or Hugging Face id (backbone aliases already resolved)
    profile: Profile
    device: str
    seed: int
    progress: bool = True
    trained_model: TrainedModelLookup | None = None
    training_data: TrainingDataLookup | None = None
    component: ComponentLookup | None = None
    artifact_dir: Path | None = None  # this spec+seed's own files (silver pairs, plot inputs)
    cache_dir: Path | None = None  # shared by every spec in the store: content-addressed artifacts (MLM checkpoints)
    train_on: str | None = None  # the spec's training source as given (task name with its options), or None
    # Tell the core about training data the method made itself (e.g. a recipe's silver pairs):
    # ``report_training_data("silver pairs", scored_pairs)``; it is measured against test sets with the rest of the
    # model's training data (harness.contamination). None outside a run.
    report_training_data: Callable[[str, Any], None] | None = None
    # sha256 of the backbone's files when ``backbone`` is a local folder (None for a registered backbone or a hub
    # id): a cache entry derived from the backbone (e.g. an MLM-adapted copy) names it in its key.
    backbone_content: str | None = None
    eval_batch_size: int = 64  # --batch-size, else the profile's eval batch size
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("harness.plugin"))

    @property
    def cache(self) -> ArtifactCache | None:
        """The store's shared cache (:class:`harness.cache.ArtifactCache` over ``cache_dir``), or None without one."""
        from .cache import ArtifactCache

        return None if self.cache_dir is None else ArtifactCache(self.cache_dir)


@dataclass
class RecipeContext(ModelContext):
    """A ModelContext for a recipe; ``options`` are the recipe's own options (``student`` included)."""

    student: str = ""  # the student's spec text, e.g. "be" or "be:pooling=cls"
    # A fresh (untrained) student built from its spec; ``backbone`` starts it from another checkpoint folder.
    build_student: Callable[..., Any] | None = None


@dataclass
class ModelPlugin:
    """A model: a factory ``factory(ctx: ModelContext) -> model`` plus what the model can do.

    ``capabilities`` are checked against the Protocols in :mod:`harness.capabilities`: at registration when the
    model's class is known (``model_class``, a class given as ``factory``, or the factory's return annotation), and
    always when the runner builds the model.
    """

    name: str
    description: str
    factory: Callable[[ModelContext], Any]
    capabilities: tuple[str, ...]
    options: Mapping[str, Option] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    training_kinds: tuple[str, ...] = ()  # kinds of training data it can learn from
    requires_training: bool = False  # cannot be evaluated untrained (e.g. a cross-encoder's fresh head)
    default_train_on: str | None = None  # training source used when it requires training and none is given
    reference: str = ""
    # Optional plan-time check of a resolved spec: validate(spec, registry) raises a HarnessError saying what would
    # work, so a bad combination fails before anything trains.
    validate: Callable[[Any, Any], None] | None = None
    model_class: type | None = None
    # Training budget per profile name, e.g. {"quick": {"max_steps": 360}} (keys: harness.profiles.BUDGET_KEYS);
    # replaces the profile's values when this model trains. Matrix entries and --set override it.
    budgets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # A budget that depends on the spec's options: ``budget_for(options, profile_name) -> {key: value}`` (e.g. the
    # training setup an objective combination picks); above ``budgets``, below matrix entries and --set.
    budget_for: Callable[[Mapping[str, Any], str], Mapping[str, Any]] | None = None
    # The budget keys (harness.profiles.BUDGET_KEYS) its training honours; others are refused at plan time. None:
    # harness.profiles.DEFAULT_BUDGET_KEYS (seed_trials only where scored-pair training runs seed trials).
    budget_keys: tuple[str, ...] | None = None
    # Training sources read besides ``train_on`` (e.g. a teacher's), for records whose training did not record its
    # provenance: ``training_sources(options, train_on) -> [(task spec text, training kinds, model spec text that
    # trains on it), ...]`` (harness.contamination; `harness contamination` derives such records' overlap from it).
    training_sources: Callable[[Mapping[str, Any], str | None], list[tuple[str, tuple[str, ...], str]]] | None = None

    def __post_init__(self) -> None:
        _check_name("model", self.name)
        owner = f"model {self.name!r}"
        for alias in self.aliases:
            _check_name("model alias", alias)
        _check_known(owner, "capability", tuple(self.capabilities), CAPABILITIES)
        _check_known(owner, "training kind", tuple(self.training_kinds), TRAINING_KINDS)
        _check_options(owner, self.options)
        if not callable(self.factory):
            raise PluginContractError(f"{owner}: factory must be callable, got {type(self.factory).__name__}.")
        self.capabilities = tuple(self.capabilities)
        self.training_kinds = tuple(self.training_kinds)
        self.aliases = tuple(self.aliases)


@dataclass
class RecipePlugin:
    """A training procedure applied to a student model (Augmented SBERT, domain MLM, topic distillation, ...).

    A recipe spec reads like a model spec (``augsbert:teacher=cbe,sampler=bm25``); the core adds the option
    ``student`` (a model spec text, default ``default_student``). ``train(splits, ctx: RecipeContext)`` returns
    ``(student_model, report)``; the runner saves and loads the student with the student's own ``save``/``load``,
    and the recipe spec has the student's capabilities.
    """

    name: str
    description: str
    train: Callable[[TrainingSplits, RecipeContext], tuple[Any, Any]]
    options: Mapping[str, Option] = field(default_factory=dict)
    training_kinds: tuple[str, ...] = (SCORED_PAIRS,)  # what --train-on may offer the recipe
    student_kinds: tuple[str, ...] = (SCORED_PAIRS,)  # what the student must be able to learn from
    # The student's model spec when the user names none, declared by the recipe (the core names no model); empty:
    # the user must give ``student=``.
    default_student: str = ""
    aliases: tuple[str, ...] = ()
    reference: str = ""
    validate: Callable[[Any, Any], None] | None = None
    budgets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # as ModelPlugin.budgets
    budget_for: Callable[[Mapping[str, Any], str], Mapping[str, Any]] | None = None  # as ModelPlugin.budget_for
    budget_keys: tuple[str, ...] | None = None  # as ModelPlugin.budget_keys
    training_sources: Callable[[Mapping[str, Any], str | None], list[tuple[str, tuple[str, ...], str]]] | None = None

    def __post_init__(self) -> None:
        _check_name("recipe", self.name)
        owner = f"recipe {self.name!r}"
        for alias in self.aliases:
            _check_name("recipe alias", alias)
        _check_known(owner, "training kind", tuple(self.training_kinds), TRAINING_KINDS)
        _check_known(owner, "student training kind", tuple(self.student_kinds), TRAINING_KINDS)
        _check_options(owner, self.options)
        if "student" in self.options:
            raise PluginContractError(f"{owner}: the option 'student' is added by the core; do not declare it.")
        if not callable(self.train):
            raise PluginContractError(f"{owner}: train must be callable.")
        self.options = {
            "student": Option(self.default_student, "the student model spec the recipe trains", type=str),
            **self.options,
        }
        self.training_kinds = tuple(self.training_kinds)
        self.student_kinds = tuple(self.student_kinds)
        self.aliases = tuple(self.aliases)


@dataclass(frozen=True)
class TaskMetadata:
    """Task metadata as data (mteb's TaskMetadata in spirit); validated on registration."""

    name: str
    family: str  # tasks of one family share a leaderboard table; ``--tasks FAMILY`` runs all members
    description: str
    main_score: str  # the key of EvalResult.scores that leaderboards rank by
    metric: str  # the protocol in one sentence
    reference: str  # paper or URL defining the task
    dataset: str  # dataset name, e.g. the folder under the data dir
    dataset_source: str  # where the data comes from
    license: str
    version: str = "1"  # bump when the task's numbers change: stored results of other versions are recomputed
    requires: tuple[str, ...] = ("pair_scorer",)  # the capabilities the task evaluates through
    training_kinds: tuple[str, ...] = ()  # training data it can offer (for --train-on)
    details: Mapping[str, Any] = field(default_factory=dict)  # task-specific facts recorded with every result

    def __post_init__(self) -> None:
        _check_name("task", self.name)
        _check_name("task family", self.family)
        for key in ("description", "main_score", "metric", "reference", "dataset", "dataset_source", "license"):
            if not getattr(self, key):
                raise PluginContractError(f"task {self.name!r}: metadata field {key!r} is empty")
        _check_known(f"task {self.name!r}", "capability", tuple(self.requires), CAPABILITIES)
        _check_known(f"task {self.name!r}", "training kind", tuple(self.training_kinds), TRAINING_KINDS)

    def as_record(self) -> dict:
        record = asdict(self)
        if not record["details"]:
            record.pop("details")
        return record


@dataclass
class EvalContext:
    """What a task's ``evaluate`` gets besides the model."""

    profile: Profile  # honour ``max_eval_examples`` (the smoke cut) through harness.evaluation's sample helper
    device: str
    seed: int
    batch_size: int
    progress: bool = True
    data_dir: Path | None = None  # the ROOT data dir (--data-dir); a task resolves its own folder under it
    component: ComponentLookup | None = None
    embedder: EmbedderLookup | None = None  # builds another model by spec (e.g. a first-stage retriever)
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("harness.task"))
    # What the evaluated model trained on (harness.contamination.TextSet), None for an untrained model: a task with
    # the option ``unseen`` drops the test pairs found in it (harness.unseen_indices).
    training_texts: Any = None


@dataclass
class EvalResult:
    """What a task's ``evaluate`` returns: its scores, the checksum of the data it read, details and the
    per-example scores the bootstrap resamples."""

    scores: dict[str, float]  # metric name -> value x 100 where the metric is a correlation or a ratio
    dataset_checksum: str
    details: dict[str, Any] = field(default_factory=dict)  # e.g. number of examples, first-stage retriever
    # What resampling the main score needs (harness.evaluation.bootstrap.ExampleScores): stored beside the record,
    # it gives the score's bootstrap interval and paired tests (`harness compare`). None: no interval.
    examples: Any = None


class Task:
    """Base class for tasks: one class carries the metadata, the options and the code.

    Subclasses set ``metadata`` and ``options`` as class attributes and implement ``check_data`` and ``evaluate``
    (and ``training_data`` if they offer training data). Register the class itself: ``register(MyTask)``. The core
    always constructs a task with resolved options (every declared option present, defaults filled).
    """

    metadata: ClassVar[TaskMetadata]
    options: ClassVar[Mapping[str, Option]] = {}
    # Training kinds (of metadata.training_kinds) this task is the default source of: a model that must be trained,
    # declares no default_train_on and learns from such a kind trains on this task (the model names no task).
    default_source_for: ClassVar[tuple[str, ...]] = ()
    # False: ``evaluate`` never returns per-example data (``EvalResult.examples``), e.g. an evaluator that gives only
    # means; `harness compare` then says the task cannot be tested rather than advising `harness rescore`.
    keeps_examples: ClassVar[bool] = True
    # True: ``evaluate`` trains something seeded by ``ctx.seed`` (e.g. a linear probe on frozen embeddings), so its
    # score depends on the run seed even for an untrained model; such a row is tested across runs like a trained
    # one and needs as many seeds (docs/core/statistics.md, "Two units of inference").
    seeded_evaluation: ClassVar[bool] = False

    def __init__(self, options: Mapping[str, Any] | None = None, data_dir: Path | None = None):
        declared = type(self).options
        given = dict(options or {})
        if declared:
            # Already-resolved options pass through unchanged; raw strings are parsed; defaults are filled.
            given = resolve_options(f"task {self._name()!r}", declared, given)
        self.options = given  # type: ignore[misc]  # the instance holds resolved values, the class declarations
        self.data_dir = data_dir

    @classmethod
    def _name(cls) -> str:
        metadata = getattr(cls, "metadata", None)
        return metadata.name if metadata is not None else cls.__name__

    @classmethod
    def variant(cls, metadata: TaskMetadata, **class_attributes: Any) -> type[Task]:
        """A subclass that differs only in metadata (and the given class attributes), e.g. one STS year."""
        name = "".join(part.capitalize() for part in re.split(r"[^a-z0-9]+", metadata.name)) or "Variant"
        return type(name, (cls,), {"metadata": metadata, **class_attributes, "__module__": cls.__module__})

    def evaluate(self, model: Any, ctx: EvalContext) -> EvalResult:  # pragma: no cover - interface
        raise NotImplementedError

    def training_data(self, kind: str, ctx: EvalContext | None = None) -> TrainingSplits | None:
        """Training data of ``kind`` this task offers (for ``--train-on``), or None. ``ctx`` is always given by the
        core (its ``profile`` and ``seed``)."""
        return None

    def check_data(self) -> str:
        """Load the data (raising DataFileError/MissingDataError) and return its checksum; `harness validate` and
        the runner's plan call it before anything is computed."""
        raise NotImplementedError

    def evaluated_texts(self, ctx: EvalContext) -> Any:
        """The texts ``evaluate(model, ctx)`` scores, as a :class:`harness.EvaluatedTexts` (its pairs and/or
        sentences, after the profile's cut), so the core measures how many the model saw in training; None (the
        default): the overlap is not measured for this task."""
        return None

    def ranked_texts(self, ctx: EvalContext, queries: Collection[str], documents: Collection[str]) -> Any:
        """For a ranking task that stores each query's top hits (``ExampleScores.hits``): the texts of the given
        query and document ids (the stored ids as text) as a :class:`harness.RankedTexts` holding exactly those
        ids, read as ``evaluate(model, ctx)`` reads its data; an id its data does not have raises
        :class:`harness.DataFileError` (:func:`harness.texts_by_id` does both). None (the default): the task does
        not provide texts, and the results site names its queries and documents by id."""
        return None


# Names of the tasks whose evaluation is seeded (Task.seeded_evaluation: e.g. a trained probe), declared as each
# TaskPlugin is made: the stores' readers (leaderboards, site, compare) see records, not task classes
# (harness.stored_scores.seed_dependent reads it).
_SEEDED_EVALUATIONS: set[str] = set()


def seeded_evaluation(task_name: str) -> bool:
    """Whether the registered task ``task_name`` declared a seeded evaluation (its score depends on the run seed)."""
    return task_name in _SEEDED_EVALUATIONS


@dataclass
class TaskPlugin:
    """A registered task. Prefer ``register(MyTaskClass)``; this form (metadata + factory) remains supported."""

    metadata: TaskMetadata
    factory: Callable[..., Task]  # factory(options, data_dir) -> Task, options already resolved
    options: Mapping[str, Option] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    default_source_for: tuple[str, ...] = ()  # as Task.default_source_for
    seeded_evaluation: bool = False  # as Task.seeded_evaluation

    def __post_init__(self) -> None:
        if not isinstance(self.metadata, TaskMetadata):
            raise PluginContractError(f"TaskPlugin needs a harness.TaskMetadata, got {type(self.metadata).__name__}.")
        self.default_source_for = tuple(self.default_source_for)
        offered = set(self.metadata.training_kinds)
        if not set(self.default_source_for) <= offered:
            raise PluginContractError(
                f"task {self.metadata.name!r}: default_source_for {list(self.default_source_for)} names training "
                f"kinds it does not offer (training_kinds: {sorted(offered)})."
            )
        if not callable(self.factory):
            raise PluginContractError(f"task {self.metadata.name!r}: factory must be callable.")
        _check_options(f"task {self.metadata.name!r}", self.options)
        for alias in self.aliases:
            _check_name("task alias", alias)
        self.aliases = tuple(self.aliases)
        if self.seeded_evaluation:
            _SEEDED_EVALUATIONS.add(self.metadata.name)

    @property
    def name(self) -> str:
        return self.metadata.name

    @classmethod
    def from_class(cls, task_class: type[Task], aliases: tuple[str, ...] = ()) -> TaskPlugin:
        metadata = getattr(task_class, "metadata", None)
        if not isinstance(metadata, TaskMetadata):
            raise PluginContractError(
                f"task class {task_class.__name__} has no `metadata = harness.TaskMetadata(...)` class attribute."
            )
        return cls(
            metadata,
            task_class,
            dict(getattr(task_class, "options", {}) or {}),
            tuple(getattr(task_class, "aliases", ()) or aliases),
            tuple(getattr(task_class, "default_source_for", ()) or ()),
            bool(getattr(task_class, "seeded_evaluation", False)),
        )


@dataclass
class Component:
    """A named piece other plugins look up by kind (e.g. kind="sampler")."""

    kind: str
    name: str
    obj: Any
    description: str = ""

    def __post_init__(self) -> None:
        _check_name("component kind", self.kind)
        if not isinstance(self.name, str) or not self.name.strip():
            raise PluginContractError(f"component of kind {self.kind!r} needs a non-empty name.")


@dataclass
class ComponentKind:
    """Declares a component kind and the Protocol its objects must satisfy (checked at registration)."""

    name: str
    protocol: type | None
    description: str = ""

    def __post_init__(self) -> None:
        _check_name("component kind", self.name)


@dataclass(frozen=True)
class ExecutorOption:
    """One command-line option of an ``executor`` component: ``harness run --executor NAME`` (and ``rescore``,
    ``validate``) show it in the executor's own group of ``--help``; given with another executor it is refused in one
    line. ``keyword`` (default: the flag without its dashes, ``-`` read as ``_``) is the argument ``build`` receives
    it as; ``type`` converts the text (``int``, ``float``); a ``repeatable`` option may be given several times and
    arrives as a tuple."""

    flag: str  # e.g. "--ray-address": spelled with the executor's name, so two executors never share a flag
    help: str
    default: Any = None  # what ``build`` receives when the option is not given
    type: Callable[[str], Any] = str
    repeatable: bool = False
    metavar: str | None = None
    keyword: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.flag, str) or not re.fullmatch(r"--[a-z0-9][a-z0-9-]*", self.flag):
            raise PluginContractError(
                f"executor option {self.flag!r}: a flag is '--' and lower-case letters, digits or '-'."
            )
        if not self.keyword:
            object.__setattr__(self, "keyword", self.flag[2:].replace("-", "_"))

    @property
    def dest(self) -> str:
        """The attribute of the parsed command line that holds the option (None when it was not given)."""
        return self.flag[2:].replace("-", "_")


@dataclass(frozen=True)
class ExecutorFactory:
    """The object of an ``executor`` component: where a run's cells run (``harness run --executor NAME``).
    ``build(**values)`` returns the executor (``device(requested)``, ``start(plan, worker)``, ``run(plan, worker)``;
    docs/architecture.md), ``values`` holding every option's ``keyword``: the value given on the command line, else
    the option's ``default``. An executor may also offer ``validate(results_dir) -> str``, what ``harness validate
    --executor NAME`` checks beyond the plan (the line it prints). Import heavy modules inside ``build``: the command
    line reads the options of every executor to build its ``--help``."""

    build: Callable[..., Any]
    options: tuple[ExecutorOption, ...] = ()

    def __post_init__(self) -> None:
        if not callable(self.build):
            raise PluginContractError(f"ExecutorFactory.build must be callable, got {self.build!r}.")
        flags = [option.flag for option in self.options]
        if len(set(flags)) != len(flags) or len({o.keyword for o in self.options}) != len(flags):
            raise PluginContractError(f"executor options {', '.join(flags)}: each flag and keyword once.")

    def create(self, given: Mapping[str, Any] | None = None) -> Any:
        """The executor, built from the option values ``given`` (by keyword) over the options' defaults."""
        values = {option.keyword: option.default for option in self.options}
        unknown = sorted(set(given or {}) - set(values))
        if unknown:
            raise PluginContractError(f"no executor option {', '.join(unknown)}; known: {', '.join(values) or '-'}.")
        values.update(given or {})
        return self.build(**values)
