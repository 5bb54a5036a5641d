"""The task contract check :func:`check_task`: build a task as the runner does and check ``check_data``,
``evaluate`` (scores, checksum, the profile's cut) and ``training_data``; part of the test kit
:mod:`harness.testing`."""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..api import (
    EMBEDDER,
    MULTI_VECTOR_EMBEDDER,
    PAIR_SCORER,
    SPAN_ENCODER,
    TRAINING_KINDS,
    EvalContext,
    EvalResult,
    HarnessError,
    MissingDataError,
    Profile,
    Task,
    TaskMetadata,
    TaskPlugin,
    TrainingSplits,
)
from ..capabilities import reachable_capabilities
from ..options import resolve_options
from .contexts import _profile, _seed_everything, eval_context
from .contract import ContractCheckError, _describe_exception, _fail
from .fakes import _TINY_MODEL_CLASSES, tiny_model_for

if TYPE_CHECKING:  # the registry is private; the kit hands it around but plugins only pass it back
    from ..registry import Registry

logger = logging.getLogger(__name__)


@dataclass
class TaskCheckReport:
    """What :func:`check_task` checked."""

    name: str
    checksum: str
    scores: dict[str, float]
    main_score: float
    texts_seen: int  # distinct texts the model saw under the checked profile (smoke: max_eval_examples=200)
    texts_seen_with_small_cut: int | None = None  # ... the tiny model saw with max_eval_examples = the small cut
    training_kinds: tuple[str, ...] = ()  # offered kinds whose TrainingSplits were checked
    training_kinds_unavailable: tuple[str, ...] = ()  # offered kinds whose data is not here (MissingDataError)


class _TextCounter:
    def __init__(self) -> None:
        self.texts: set[str] = set()

    def add(self, texts: Iterable[str]) -> None:
        self.texts.update(str(text) for text in texts)


def _counting(model: Any, counter: _TextCounter) -> Any:
    """A stand-in for ``model`` with exactly its capability methods, recording every text they are given."""
    methods: dict[str, Callable[..., Any]] = {}
    if callable(getattr(model, "encode", None)):
        methods["encode"] = lambda self, texts: (counter.add(texts), model.encode(texts))[1]
    if callable(getattr(model, "score", None)):
        methods["score"] = lambda self, first, second: (counter.add([*first, *second]), model.score(first, second))[1]
    if callable(getattr(model, "encode_multi", None)):
        methods["encode_multi"] = lambda self, texts: (counter.add(texts), model.encode_multi(texts))[1]
    if callable(getattr(model, "encode_spans", None)):
        methods["encode_spans"] = lambda self, items: (counter.add(t for t, _ in items), model.encode_spans(items))[1]
    return type(f"Counting{type(model).__name__}", (), methods)()


def _resolve_task_plugin(task: Any, registry: Registry | None) -> tuple[TaskPlugin, Registry | None]:
    if isinstance(task, TaskPlugin):
        return task, registry
    if inspect.isclass(task) and issubclass(task, Task):
        return TaskPlugin.from_class(task), registry
    if isinstance(task, str):
        if registry is None:
            from ..registry import build_registry

            registry = build_registry()
        return registry.task(registry.resolve_task(task)), registry
    raise TypeError(
        f"check_task takes a harness.Task subclass, a harness.TaskPlugin or a task name, got {type(task).__name__}"
    )


def check_task(
    task: type[Task] | TaskPlugin | str,
    model: Any = None,
    *,
    registry: Registry | None = None,
    options: Mapping[str, Any] | None = None,
    data_dir: Path | str | None = None,
    profile: Profile | str | None = None,
    seed: int = 42,
    small_cut: int | None = 5,
) -> TaskCheckReport:
    """Build a task the way the runner does and check ``check_data``, ``evaluate`` and ``training_data``.

    ``task`` is a Task subclass, a TaskPlugin or a registered name (looked up in ``registry``, default: the
    installed plugins); it is built with ``options`` (defaults filled) and the root ``data_dir``. ``model`` defaults
    to a tiny hashing model with the capabilities the task requires. Checked: ``check_data()`` returns a non-empty
    string, the same on a second call; ``evaluate(model, ctx)`` under the smoke profile returns an EvalResult whose
    scores include ``metadata.main_score``, are finite numbers, whose ``dataset_checksum`` equals ``check_data()``
    and whose details are JSON; the evaluation data is cut to ``profile.max_eval_examples`` (with a tiny model, a
    cut of ``small_cut`` must feed the model fewer texts than the profile's cut; None skips this);
    ``training_data(kind, ctx)`` returns well-formed TrainingSplits for each kind in ``metadata.training_kinds``
    (kinds whose data is missing here are listed in the report, not failed) and None for other kinds. Raises
    ContractCheckError listing every problem; returns a report otherwise.
    """
    plugin, registry = _resolve_task_plugin(task, registry)
    metadata = plugin.metadata
    owner = f"task {metadata.name!r}"
    resolved_options = resolve_options(owner, plugin.options, dict(options or {}))
    root_data_dir = Path(data_dir) if data_dir is not None else None
    try:
        instance = plugin.factory(resolved_options, root_data_dir)
    except Exception as exc:
        raise ContractCheckError(
            f"{owner}: building it with factory(options, data_dir) raised {_describe_exception(exc)}."
        ) from exc
    problems: list[str] = []
    if getattr(instance, "metadata", None) is not metadata and getattr(instance, "metadata", None) != metadata:
        problems.append("the built task's metadata is not the registered metadata.")
    checksum = _checked_checksum(instance, problems)
    _fail(owner, problems)

    resolved_profile = _profile(profile)
    if model is None:
        model = tiny_model_for(metadata.requires)
    elif not set(metadata.requires) <= reachable_capabilities(
        capability
        for capability, protocol_methods in _CAPABILITY_METHODS.items()
        if all(callable(getattr(model, method, None)) for method in protocol_methods)
    ):
        raise TypeError(
            f"the model given to check_task cannot serve {owner}, which requires {', '.join(metadata.requires)}."
        )
    counter = _TextCounter()
    result = _evaluate(
        instance,
        _counting(model, counter),
        eval_context(resolved_profile, data_dir=root_data_dir, seed=seed, registry=registry),
        owner,
    )
    main_score = _check_result(result, metadata.main_score, checksum, problems)
    _fail(owner, problems)
    report = TaskCheckReport(
        metadata.name, checksum, {k: float(v) for k, v in result.scores.items()}, main_score, len(counter.texts)
    )

    if small_cut is not None:
        # The tiny model's count under the checked profile is the reference; with another model, count it again.
        reference = len(counter.texts) if isinstance(model, _TINY_MODEL_CLASSES) else None
        _check_cut(
            instance, metadata, resolved_profile, small_cut, reference, root_data_dir, seed, registry, report, problems
        )
    report.training_kinds, report.training_kinds_unavailable = _check_training_data(
        instance,
        metadata,
        eval_context(resolved_profile, data_dir=root_data_dir, seed=seed, registry=registry),
        problems,
    )
    _fail(owner, problems)
    return report


# The methods a model needs for each evaluation capability (for checking a model handed to check_task).
_CAPABILITY_METHODS = {
    EMBEDDER: ("encode",),
    PAIR_SCORER: ("score",),
    MULTI_VECTOR_EMBEDDER: ("encode_multi",),
    SPAN_ENCODER: ("encode_spans",),
}


def _checked_checksum(instance: Task, problems: list[str]) -> str:
    checksums = []
    for _ in range(2):
        try:
            checksums.append(instance.check_data())
        except HarnessError as exc:  # missing or malformed data: the message is for the user, pass it on
            raise ContractCheckError(
                f"task {instance.metadata.name!r}: check_data() raised {type(exc).__name__}: {exc}"
            ) from exc
        except Exception as exc:
            problems.append(
                f"check_data() raised {_describe_exception(exc)}; raise harness.MissingDataError or "
                "harness.DataFileError (with the file and what to do) for data problems."
            )
            return ""
    first, second = checksums
    if not isinstance(first, str) or not first:
        problems.append(
            f"check_data() returned {first!r}; return the data's checksum, e.g. harness.files_checksum(paths)."
        )
    elif first != second:
        problems.append("check_data() returned different checksums on two calls over the same data.")
    return first if isinstance(first, str) else ""


def _evaluate(instance: Task, model: Any, ctx: EvalContext, owner: str) -> Any:
    _seed_everything(ctx.seed)
    try:
        return instance.evaluate(model, ctx)
    except Exception as exc:
        raise ContractCheckError(
            f"{owner}: evaluate(model, ctx) raised {_describe_exception(exc)} (profile "
            f"{ctx.profile.name}, max_eval_examples {ctx.profile.max_eval_examples})."
        ) from exc


def _check_examples(examples: Any, score: float, main_score: str, problems: list[str]) -> None:
    """EvalResult.examples must reproduce the main score, or no interval could be trusted."""
    from ..evaluation.bootstrap import ExampleScores, reproduces

    if not isinstance(examples, ExampleScores):
        problems.append(
            f"EvalResult.examples is {type(examples).__name__}; give a "
            "harness.evaluation.bootstrap.ExampleScores (or None)."
        )
    elif not reproduces(examples.value(), score):
        problems.append(
            f"EvalResult.examples give {examples.value():.6f}, not the main score {main_score} = "
            f"{score:.6f}; they must hold what that score is computed from."
        )


def _check_result(result: Any, main_score: str, checksum: str, problems: list[str]) -> float:
    if not isinstance(result, EvalResult):
        problems.append(
            f"evaluate returned {type(result).__name__}; return harness.EvalResult(scores, dataset_checksum, details)."
        )
        return math.nan
    if not isinstance(result.scores, dict) or not result.scores:
        problems.append(
            "EvalResult.scores must be a non-empty dict of metric name -> number (x100 for correlations and ratios)."
        )
        return math.nan
    if main_score not in result.scores:
        problems.append(
            f"EvalResult.scores has no {main_score!r} (metadata.main_score); it has "
            f"{', '.join(map(str, result.scores))}."
        )
    for key, value in result.scores.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            problems.append(f"score {key!r} is {value!r}, not a number.")
            continue
        if not math.isfinite(number):
            problems.append(
                f"score {key!r} is {number}; scores must be finite (for input a metric is undefined "
                "on, raise a HarnessError saying why, as harness.spearman does)."
            )
    if result.examples is not None and main_score in result.scores:
        _check_examples(result.examples, float(result.scores[main_score]), main_score, problems)
    if result.dataset_checksum != checksum:
        problems.append(
            f"EvalResult.dataset_checksum ({str(result.dataset_checksum)[:16]}...) differs from "
            f"check_data() ({checksum[:16]}...); both must be the checksum of the data evaluated, so a "
            "stored result is reused only for the same data."
        )
    try:
        json.dumps(result.details)
    except (TypeError, ValueError) as exc:
        problems.append(
            f"EvalResult.details cannot be stored as JSON ({exc}); use plain numbers, strings, lists and dicts."
        )
    value = result.scores.get(main_score)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _check_cut(
    instance: Task,
    metadata: TaskMetadata,
    profile: Profile,
    small_cut: int,
    reference: int | None,
    data_dir: Path | None,
    seed: int,
    registry: Registry | None,
    report: TaskCheckReport,
    problems: list[str],
) -> None:
    """With a tiny model: ``max_eval_examples=small_cut`` must feed the model fewer texts than the checked profile
    does (unless the data is so small that both take everything). Comparing with the profile's own cut rather than
    with no cut keeps the check as cheap as the smoke evaluation, whatever the size of the data."""

    def texts_seen(limit: int | None) -> int:
        counter = _TextCounter()
        ctx = eval_context(
            dataclasses.replace(profile, max_eval_examples=limit), data_dir=data_dir, seed=seed, registry=registry
        )
        _evaluate(instance, _counting(tiny_model_for(metadata.requires), counter), ctx, f"task {metadata.name!r}")
        return len(counter.texts)

    if reference is None:
        reference = texts_seen(profile.max_eval_examples)
    report.texts_seen_with_small_cut = with_small_cut = texts_seen(small_cut)
    # A pair has two texts, a query its candidates: only more texts than a generous multiple of the small cut can
    # show whether the cut was applied.
    if reference > 4 * small_cut and with_small_cut >= reference:
        problems.append(
            f"evaluate gave the model all {reference} texts with max_eval_examples={small_cut}; cut "
            "the evaluation items with harness.evaluation.sampling.evaluation_sample(len(items), "
            "ctx.profile.max_eval_examples) (the smoke profile relies on it)."
        )


def _check_training_data(
    instance: Task, metadata: TaskMetadata, ctx: EvalContext, problems: list[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(kinds checked, offered kinds whose data is missing here): a task may offer training data that needs a
    download its evaluation data does not."""
    checked, unavailable = [], []
    for kind in TRAINING_KINDS:
        try:
            splits = instance.training_data(kind, ctx)
        except MissingDataError as exc:
            logger.warning("task %s: training data %s not checked: %s", metadata.name, kind, exc)
            unavailable.append(kind)
            continue
        except HarnessError as exc:
            raise ContractCheckError(
                f"task {metadata.name!r}: training_data({kind!r}, ctx) raised {type(exc).__name__}: {exc}"
            ) from exc
        except Exception as exc:
            problems.append(f"training_data({kind!r}, ctx) raised {_describe_exception(exc)}.")
            continue
        if kind not in metadata.training_kinds:
            if splits is not None:
                problems.append(
                    f"training_data({kind!r}) returned data, but metadata.training_kinds does not list "
                    f"{kind!r}; add it there (or return None)."
                )
            continue
        if not isinstance(splits, TrainingSplits):
            problems.append(
                f"training_data({kind!r}) returned {type(splits).__name__}; metadata.training_kinds "
                "lists it, so return harness.TrainingSplits."
            )
            continue
        if getattr(splits.train, "kind", None) != kind or not len(splits.train):
            problems.append(
                f"training_data({kind!r}) returned a train split of kind "
                f"{getattr(splits.train, 'kind', None)!r} with {len(splits.train)} examples; expected a "
                f"non-empty {kind}."
            )
        if splits.dev is not None and getattr(splits.dev, "kind", None) != kind:
            problems.append(f"training_data({kind!r}) returned a dev split of another kind.")
        if not isinstance(splits.checksum, str) or not splits.checksum:
            problems.append(
                f"training_data({kind!r}) returned no checksum; set TrainingSplits.checksum (e.g. "
                "harness.files_checksum of the files read) so trained models are retrained when the "
                "data changes."
            )
        checked.append(kind)
    return tuple(checked), tuple(unavailable)
