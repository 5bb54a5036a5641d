"""``harness compare A B --tasks ...``: is model A's difference to model B on each task more than noise?

Both specs are resolved exactly as ``harness run`` resolves them (profile, backbone, training source, budget), so
their model keys name their records in the store. Per task, the seeds both models have with per-example data are
pooled (each model's score is its seed mean) and the difference A - B is tested in both units of inference of
:func:`harness.evaluation.significance.compare_units`: over test examples (the paired bootstrap, these two sets of
runs) and across runs (training-run variance included) when either model was trained, which then decides; a
trained model with one seed gives "too few seeds to tell". The deciding p-values of all tasks are Holm-adjusted
(Holm 1979). ``--runtime-a``/``--runtime-b`` compare the cells of one spec (or two) under two evaluation runtimes
(e.g. ``harness compare be be --runtime-b onnx-int8``: the int8 variant's quality drop), and the table then adds
each task's speed-up of B: A's evaluation time over B's (from the records' ``timings``; cells whose vectors came
from the embedding cache have no comparable time and show none). A task without per-example data for either model
(records stored before harness kept it), or whose records of the two models name other versions of the task
(:func:`other_task_versions`), is listed with the reason and no test; one whose per-example file is missing
or damaged too, and the command then exits non-zero (`harness run` recomputes the cell).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .contamination import seen_text
from .errors import HarnessError
from .evaluation.bootstrap import DEFAULT_RESAMPLES, ExampleDataError, ExampleScores
from .evaluation.significance import (
    ACROSS_RUNS_QUESTION,
    ALPHA,
    EXAMPLES_QUESTION,
    MIN_TRAINED_SEEDS,
    TOO_FEW_SEEDS,
    UnitComparison,
    compare_units,
    detectable_text,
    holm,
)
from .profiles import get_profile
from .record import DEFAULT_RUNTIME
from .registry import Registry
from .spec import SELF_TRAINING, ModelSpec, resolve_model_spec, resolve_task_specs
from .spec_grammar import parse_spec_text
from .status import CellStatus
from .store import REPAIR_ADVICE, SIDE_FILE_PROBLEM, Store
from .stored_scores import NO_DATA, stored_run


class CompareError(HarnessError):
    """Two models cannot be compared as asked."""


@dataclass
class TaskComparison:
    task: str
    result: UnitComparison | None
    reason: str = ""  # why there is no result
    p_holm: float | None = None  # the deciding unit's p, Holm-adjusted (None: too few seeds to tell)
    damaged: int = 0  # how many of its records name a per-example file that is missing or damaged
    # A's evaluation seconds over B's (seed means; None: a record was missing or served from the embedding cache)
    speedup: float | None = None

    def as_dict(self) -> dict:
        entry = {"task": self.task}
        if self.result is None:
            return {**entry, "result": None, "reason": self.reason}
        examples = self.result.examples
        # interval and p_value: the deciding unit's (null: too few seeds to tell); both units under their names
        return {
            **entry,
            "score_a": examples.score_a,
            "score_b": examples.score_b,
            "difference": examples.difference,
            "examples": examples.examples,
            "seeds_a": examples.seeds_a,
            "seeds_b": examples.seeds_b,
            **self.result.as_dict(),
            "p_holm": self.p_holm,
            "verdict": self.verdict,
            "speedup": self.speedup,
        }

    @property
    def verdict(self) -> str:
        """significant, not significant or too few seeds to tell (by the deciding unit, after Holm)."""
        if self.result is None or self.result.too_few_seeds:
            return TOO_FEW_SEEDS if self.result is not None else ""
        return "significant" if self.p_holm is not None and self.p_holm < ALPHA else "not significant"


def runtime_label(spec: ModelSpec, runtime: str) -> str:
    """A spec's label with its runtime, as leaderboards show it (nothing added for torch)."""
    return spec.label if runtime == DEFAULT_RUNTIME else f"{spec.label} [runtime: {runtime}]"


def _examples(
    store: Store, spec: ModelSpec, seed: int, task_key: str, runtime: str = DEFAULT_RUNTIME
) -> tuple[ExampleScores | None, str, bool]:
    path = store.record_path(spec.key, seed, task_key, runtime)
    if not path.exists():
        return None, f"{runtime_label(spec, runtime)} seed {seed} has no record (run it first)", False
    data, reason, trained = stored_run(path)
    if data is None and SIDE_FILE_PROBLEM in reason:
        reason = f"{reason}; {REPAIR_ADVICE}"
    return data, "" if data is not None else f"{spec.label} seed {seed}: {reason}", trained


def mean_eval_seconds(records: list[dict | None]) -> float | None:
    """The mean evaluation seconds of a cell's seed records, or None when a record is missing or any of its vectors
    came from the embedding cache (its time then measures the cache, not the runtime). ``harness compare``'s and the
    results site's speed-up column both divide two of these."""
    seconds = []
    for record in records:
        timings = (record or {}).get("timings") or {}
        cache = timings.get("embedding_cache")
        if "eval_seconds" not in timings or (isinstance(cache, dict) and cache.get("hits")):
            return None
        seconds.append(float(timings["eval_seconds"]))
    return sum(seconds) / len(seconds) if seconds else None


def task_version(record: dict | None) -> tuple[str, str]:
    """The (task key, task version) a record was evaluated with ("?" where the record cannot be read)."""
    task = (record or {}).get("task") or {}
    return str(task.get("key", "?")), str(task.get("version", "?"))


def other_task_versions(
    label_a: str, versions_a: Iterable[tuple[str, str]], label_b: str, versions_b: Iterable[tuple[str, str]]
) -> str:
    """Why two models' records of a task are not compared when their (task key, version) pairs differ: another
    version of a task may score other data or score it another way, so the difference would not be the models'.
    Empty when both sides name the same versions. ``harness compare`` and the results site both apply this rule."""
    sides = [sorted(set(versions)) for versions in (versions_a, versions_b)]
    if sides[0] == sides[1]:
        return ""
    named = [", ".join(f"{key} version {version}" for key, version in side) for side in sides]
    return f"different task versions: {label_a} {named[0]}, {label_b} {named[1]}"


def _keeps_examples(registry: Registry, task_name: str) -> bool:
    """Whether the task's evaluation returns per-example data at all (``Task.keeps_examples``; a task registered
    through a factory that is not a Task class is assumed to)."""
    return bool(getattr(registry.task(task_name).factory, "keeps_examples", True))


UNTRAINED = "none"  # --train-on-a none / --train-on-b none: that side's model is evaluated untrained


def side_source(registry: Registry, model: str, common: str | None, own: str | None, flag: str) -> str | None:
    """One side's training source for :func:`compare`: ``own`` (``--train-on-a`` / ``--train-on-b``) where given,
    else ``common`` (``--train-on``); :data:`UNTRAINED` is no source, refused in one line for a model that cannot
    be evaluated untrained."""
    if own is None:
        return _known_source(registry, common, "--train-on")
    if own.strip().lower() != UNTRAINED:
        return _known_source(registry, own, flag)
    plugin = registry.spec_plugin(parse_spec_text(model)[0])
    if getattr(plugin, "requires_training", False):
        raise CompareError(
            f"{flag} {UNTRAINED}: {model!r} cannot be evaluated untrained; name its training source, e.g. {flag} stsb"
        )
    return None


def _known_source(registry: Registry, source: str | None, flag: str) -> str | None:
    """A training source names one task, as `harness run` requires (an unknown one, e.g. a path, is one line with the
    known tasks); None passes."""
    if source is None or source == SELF_TRAINING:
        return source
    try:
        found = resolve_task_specs(registry, source)
    except HarnessError as exc:
        raise CompareError(f"{flag}: {exc}") from None
    if len(found) != 1:
        raise CompareError(f"{flag} {source!r} names {len(found)} tasks; a training source is one task, e.g. stsb")
    return source


def compare(
    registry: Registry,
    store: Store,
    model_a: str,
    model_b: str,
    tasks: list[str],
    seeds: list[int],
    profile: str = "quick",
    backbone: str | None = None,
    train_on: str | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    runtime_a: str = DEFAULT_RUNTIME,
    runtime_b: str = DEFAULT_RUNTIME,
    train_on_a: str | None = None,
    train_on_b: str | None = None,
) -> tuple[ModelSpec, ModelSpec, list[TaskComparison]]:
    """The paired comparison of ``model_a`` - ``model_b`` on each task (specs as for ``harness run``), each one's
    cells evaluated under its runtime; with two runtimes, each task's speed-up too. ``train_on`` is both specs'
    training source; ``train_on_a`` / ``train_on_b`` replace it for one side (:data:`UNTRAINED`: that side's model
    untrained), so a trained row can be compared with an untrained one."""
    if not tasks:
        raise CompareError("name the tasks to compare on: --tasks stsb or --tasks senteval")
    chosen_profile = get_profile(profile)
    spec_a, spec_b = (
        resolve_model_spec(registry, model, chosen_profile, backbone, side_source(registry, model, train_on, own, flag))
        for model, own, flag in ((model_a, train_on_a, "--train-on-a"), (model_b, train_on_b, "--train-on-b"))
    )
    if spec_a.key == spec_b.key and runtime_a == runtime_b:
        raise CompareError(
            f"{model_a!r} and {model_b!r} are the same model spec ({spec_a.key}); compare two others, or one under "
            "two runtimes (--runtime-a, --runtime-b)"
        )
    runtimes = (runtime_a, runtime_b)
    task_specs = [task for text in tasks for task in resolve_task_specs(registry, text)]
    comparisons = []
    for task in task_specs:
        per_model: list[list[ExampleScores]] = [[], []]
        trained = [False, False]
        reasons = []
        for side, spec in enumerate((spec_a, spec_b)):
            for seed in seeds:
                data, reason, was_trained = _examples(store, spec, seed, task.key, runtimes[side])
                trained[side] = trained[side] or was_trained
                if data is None and reason.endswith(NO_DATA) and not _keeps_examples(registry, task.name):
                    reason = (
                        f"task {task.label} keeps no per-example data (its evaluator gives only the score), "
                        "so it cannot be tested; `harness rescore` would not add any"
                    )
                if data is None:
                    if reason not in reasons:
                        reasons.append(reason)
                else:
                    per_model[side].append(data)
        if reasons:
            comparisons.append(
                TaskComparison(
                    task.label, None, "; ".join(reasons), damaged=sum(SIDE_FILE_PROBLEM in reason for reason in reasons)
                )
            )
            continue
        records = [
            [store.lookup(spec.key, seed, task.key, runtime)[0] for seed in seeds]
            for spec, runtime in zip((spec_a, spec_b), runtimes)
        ]
        different = other_task_versions(
            runtime_label(spec_a, runtime_a),
            map(task_version, records[0]),
            runtime_label(spec_b, runtime_b),
            map(task_version, records[1]),
        )
        if different:
            comparisons.append(TaskComparison(task.label, None, different))
            continue
        seconds_a, seconds_b = (mean_eval_seconds(side) for side in records)
        speedup = seconds_a / seconds_b if seconds_a and seconds_b else None
        try:
            comparisons.append(
                TaskComparison(
                    task.label,
                    compare_units(per_model[0], per_model[1], *trained, resamples=resamples),
                    speedup=speedup,
                )
            )
        except ExampleDataError as exc:
            comparisons.append(TaskComparison(task.label, None, str(exc)))
    tested = [c for c in comparisons if c.result is not None and c.result.p_value is not None]
    for comparison, adjusted in zip(tested, holm([c.result.p_value for c in tested])):
        comparison.p_holm = adjusted
    return spec_a, spec_b, comparisons


def seen_notes(
    registry: Registry, store: Store, specs: dict[str, ModelSpec], tasks: list[str], seeds: list[int]
) -> list[str]:
    """One line per model and task whose stored records saw test texts in training (harness.contamination), e.g.
    "A on sts12: 32% of test pairs seen in training (seeds 42, 43)": a comparison of such cells is partly one of
    memory."""
    lines = []
    task_specs = [task for text in tasks for task in resolve_task_specs(registry, text)]
    for side, spec in specs.items():
        for task in task_specs:
            records = [(seed, store.lookup(spec.key, seed, task.key)[0]) for seed in seeds]
            lines += seen_lines(side, task.label, records)
    return lines


def seen_lines(side: str, task: str, records: Iterable[tuple[int, dict | None]]) -> list[str]:
    """The :func:`seen_notes` lines of one side on one task from its records by seed (None: no record): one line
    per distinct share seen, naming its seeds."""
    found: dict[str, list[int]] = {}
    for seed, record in records:
        text = seen_text(record) if record is not None and record.get("status") == CellStatus.OK else None
        if text:
            found.setdefault(text, []).append(seed)
    return [
        f"{side} on {task}: {text} (seed{'s' if len(found[text]) > 1 else ''} {', '.join(map(str, found[text]))})"
        for text in found
    ]


def comparison_rows(comparisons: list[TaskComparison], speed: bool = False) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the comparison table: both units' interval and p, which one decides, its Holm p; with
    ``speed`` (two runtimes), B's speed-up over A (A's evaluation time over B's)."""
    headers = [
        "task",
        "A",
        "B",
        "A - B",
        "examples: 95% interval, p",
        "across runs: 95% interval, p",
        "decides",
        "p (Holm)",
        "verdict",
        "detectable (80% power)",
        "examples",
        "seeds A/B",
    ]
    if speed:
        headers.append("speed-up B/A (eval time)")
    rows = []
    for c in comparisons:
        r = c.result
        if r is None:
            rows.append(
                [c.task, "", "", "", "", "", "", "", "", "", "", f"no test: {c.reason}", *([""] if speed else [])]
            )
            continue
        e, across = r.examples, r.across_runs
        mark = " *" if c.verdict == "significant" else ""
        across_text = (
            f"[{across.low:+.2f}, {across.high:+.2f}], p={across.p_value:.4f}"
            if across is not None
            else TOO_FEW_SEEDS
            if r.too_few_seeds
            else "- (neither model trained)"
        )
        rows.append(
            [
                c.task,
                f"{e.score_a:.2f}",
                f"{e.score_b:.2f}",
                f"{e.difference:+.2f}{mark}",
                f"[{e.low:+.2f}, {e.high:+.2f}], p={e.p_value:.4f}",
                across_text,
                r.unit,
                "" if c.p_holm is None else f"{c.p_holm:.4f}",
                c.verdict,
                "" if r.detectable is None else f"±{r.detectable:.2f}",
                str(e.examples),
                f"{e.seeds_a}/{e.seeds_b}",
                *([f"{c.speedup:.2f}x" if c.speedup is not None else "-"] if speed else []),
            ]
        )
    return headers, rows


UNITS_NOTE = (
    f"examples: paired bootstrap over the test examples, seeds held fixed ({EXAMPLES_QUESTION}). across runs: "
    "the seeds' variance plus the example bootstrap's, Cochran-Cox critical value "
    f"({ACROSS_RUNS_QUESTION}); it decides wherever a model was trained or its evaluation is seeded, and such a "
    f"model needs at least {MIN_TRAINED_SEEDS} seeds, else {TOO_FEW_SEEDS}. detectable: "
    f'{detectable_text()}. docs/core/statistics.md, "Two units of inference".'
)


def results_dir_exists(root: Path) -> Store:
    store = Store(root)
    if not store.root.is_dir():
        raise CompareError(f"no result store at {root}; run both models with `harness run` first or pass --results.")
    return store
