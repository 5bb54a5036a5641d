"""Any MTEB task as a harness task: ``--tasks mteb:STS22,mteb:SciFact`` (family ``mteb``).

Reference: mteb 2 (``mteb.get_task``, ``mteb.evaluate``, the task's own ``load_data`` and evaluator); the numbers
are mteb's own, only scaled x100 as every harness score. How task names are resolved, how models are wrapped and
what is recorded: docs/tasks/mteb.md, section "MTEB tasks".
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import re
from typing import Any, ClassVar

from harness import (
    EMBEDDER,
    PAIR_SCORER,
    EvalResult,
    HarnessError,
    MissingDataError,
    PairScorer,
    Task,
    TaskMetadata,
)

logger = logging.getLogger(__name__)

FAMILY = "mteb"


class UnknownMtebTaskError(HarnessError):
    """A name after ``mteb:`` that mteb does not know."""


RERANKING_TYPES = ("Reranking", "InstructionReranking")  # where mteb takes a cross-encoder


def harness_task_name(mteb_name: str) -> str:
    """``STS22`` -> ``mteb.sts22``; ``SICK-R`` -> ``mteb.sick-r`` (a plain harness task name, also a file name)."""
    return f"{FAMILY}." + (re.sub(r"[^a-z0-9_.\-]+", "-", mteb_name.lower()).strip("-.") or "task")


def _import_mteb() -> Any:
    try:
        import mteb
    except ImportError:
        raise HarnessError(
            "mteb:* tasks need the mteb package; install it with `pip install 'sentence-harness[interop]'`."
        ) from None
    return mteb


def _custom_task_classes() -> dict[str, type]:
    """AbsTask subclasses defined outside mteb's registry (user-written tasks), by their metadata name."""
    from mteb.abstasks import AbsTask

    found: dict[str, type] = {}
    pending = list(AbsTask.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        metadata = getattr(cls, "metadata", None)
        name = getattr(metadata, "name", None)
        if isinstance(name, str) and not cls.__module__.startswith("mteb."):
            found.setdefault(name, cls)
    return found


def _registry_names() -> list[str]:
    try:
        from mteb.get_tasks import _TASKS_REGISTRY  # the names mteb.get_task knows (private; only for the hint)

        return list(_TASKS_REGISTRY)
    except ImportError:  # pragma: no cover - mteb reorganised
        return []


def load_mteb_task(name: str) -> Any:
    """mteb's task object for ``name`` (its registry first, then custom AbsTask subclasses)."""
    mteb = _import_mteb()
    try:
        return mteb.get_task(name)
    except KeyError:
        pass
    custom = _custom_task_classes()
    if name in custom:
        return custom[name]()
    candidates = [*_registry_names(), *custom]
    # The harness' own spelling (``sts22``, ``sick-r``, as in a stored record's ``mteb.sts22``) names one task.
    spelled = [c for c in candidates if harness_task_name(c) == harness_task_name(name)]
    if len(spelled) == 1:
        return mteb.get_task(spelled[0]) if spelled[0] not in custom else custom[spelled[0]]()
    matches = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
    matches += [c for c in candidates if c.lower() == name.lower() and c not in matches]
    hint = f" Did you mean: {', '.join(f'mteb:{m}' for m in matches)}?" if matches else ""
    raise UnknownMtebTaskError(
        f"mteb has no task {name!r}.{hint} `mteb.get_tasks()` lists them ({len(candidates)} known)."
    )


def _first_line(text: str, limit: int = 160) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def task_metadata(mteb_task: Any) -> TaskMetadata:
    """The harness metadata of an mteb task (its own name, type, main score, dataset, reference, license)."""
    meta = mteb_task.metadata
    dataset = dict(meta.dataset or {})
    path, revision = str(dataset.get("path", meta.name)), str(dataset.get("revision", "unpinned"))
    is_reranking = meta.type in RERANKING_TYPES
    return TaskMetadata(
        name=harness_task_name(meta.name),
        family=FAMILY,
        description=f"MTEB {meta.name} ({meta.type}): {_first_line(meta.description or meta.name, 120)}",
        main_score=meta.main_score,
        metric=f"mteb's {meta.type} evaluator, main score {meta.main_score} x100 (mean over the splits "
        f"{', '.join(meta.eval_splits)} and their subsets)",
        reference=str(meta.reference or "https://github.com/embeddings-benchmark/mteb"),
        dataset=path,
        dataset_source=f"{path} at revision {revision}, loaded by mteb",
        license=str(meta.license or "see the dataset card"),
        requires=(PAIR_SCORER,) if is_reranking else (EMBEDDER,),
        details={"mteb_task": meta.name, "mteb_type": meta.type},
    )


class MtebTask(Task):
    """One mteb task; ``mteb_name`` is mteb's name for it (set by :func:`task_class`)."""

    mteb_name: ClassVar[str]
    keeps_examples = False  # mteb's evaluators return only means

    def __init__(self, options=None, data_dir=None):
        super().__init__(options, data_dir)
        self._mteb_task: Any = None

    def mteb_task(self) -> Any:
        if self._mteb_task is None:
            self._mteb_task = load_mteb_task(self.mteb_name)
        return self._mteb_task

    def _load(self) -> Any:
        """The task with its data loaded; a failure to load is missing data, with mteb's reason."""
        task = self.mteb_task()
        if not task.data_loaded:
            from harness import hub_reachable, offline_reason

            reachable = hub_reachable()  # unreachable: offline, an uncached dataset fails now
            try:
                task.load_data()
            except Exception as exc:  # datasets/hub errors vary by version; any failure here means "no data"
                dataset = task.metadata.dataset or {}
                raise MissingDataError(
                    f"mteb could not load the data of {self.mteb_name} ({dataset.get('path')} at revision "
                    f"{str(dataset.get('revision'))[:12]}): {type(exc).__name__}: {_first_line(str(exc))}. mteb "
                    "loads it from the Hugging Face hub (or its local cache, HF_DATASETS_CACHE); run where either "
                    f"has it{'' if reachable else ' (' + offline_reason() + ')'}."
                ) from None
        return task

    def check_data(self) -> str:
        task = self._load()
        pinned = {"task": self.mteb_name, "dataset": {k: str(v) for k, v in (task.metadata.dataset or {}).items()}}
        return hashlib.sha256(json.dumps(pinned, sort_keys=True).encode()).hexdigest()

    def evaluate(self, model: Any, ctx: Any) -> EvalResult:
        import mteb

        from .adapters import HarnessCrossEncoder, HarnessEncoder

        checksum = self.check_data()
        task = self._load()
        is_reranking = task.metadata.type in RERANKING_TYPES
        name = f"harness/{type(model).__name__}"
        if is_reranking and isinstance(model, PairScorer):
            adapter: Any = HarnessCrossEncoder(model, name)
        else:
            adapter = HarnessEncoder(model, name)
        result = mteb.evaluate(
            adapter,
            task,
            cache=None,
            overwrite_strategy="always",
            co2_tracker=False,
            raise_error=True,
            show_progress_bar=ctx.progress,
            encode_kwargs={"batch_size": ctx.batch_size, "show_progress_bar": ctx.progress},
        )
        if not result.task_results:
            reasons = "; ".join(str(getattr(e, "exception", e)) for e in result.exceptions) or "no result"
            raise HarnessError(f"mteb returned no result for {self.mteb_name}: {reasons}")
        task_result = result.task_results[0]
        scores = {task.metadata.main_score: 100 * float(task_result.get_score())}
        subsets = [(split, entry) for split, entries in task_result.scores.items() for entry in entries]
        if len(subsets) > 1:
            for split, entry in subsets:
                scores[f"{task.metadata.main_score}.{split}.{entry['hf_subset']}"] = 100 * float(entry["main_score"])
        return EvalResult(
            scores,
            checksum,
            {
                "mteb_task": self.mteb_name,
                "mteb_version": task_result.mteb_version,
                "dataset_revision": task_result.dataset_revision,
                "adapter": type(adapter).__name__,
                "mteb_task_result": task_result.to_dict(),
            },
        )


_CLASSES: dict[str, type[MtebTask]] = {}


def task_class(mteb_name: str) -> type[MtebTask]:
    """The harness Task class of an mteb task (built once per name)."""
    mteb_task = load_mteb_task(mteb_name)
    canonical = mteb_task.metadata.name  # a renamed task's current name
    if canonical not in _CLASSES:
        cls = MtebTask.variant(task_metadata(mteb_task), mteb_name=canonical)
        _CLASSES[canonical] = cls  # type: ignore[assignment]
    return _CLASSES[canonical]


class MtebNamespace:
    """The ``task-namespace`` component ``mteb``: ``mteb:NAME`` -> the harness task of mteb's task NAME."""

    description = "any MTEB task by name: mteb:STS22, mteb:SciFact, ..."

    def resolve(self, name: str) -> type[MtebTask]:
        if not name:
            raise UnknownMtebTaskError("name an MTEB task after the prefix, e.g. --tasks mteb:STS22.")
        return task_class(name)
