"""``harness compare A B --tasks ...``: is model A's difference to model B on each task more than noise? (issue #25)

Both specs are resolved exactly as ``harness run`` resolves them (profile, backbone, training source, budget), so
their model keys name their records in the store. Per task, the seeds both models have with per-example data are
pooled (each model's score is its seed mean) and the difference A - B gets the paired bootstrap of
:func:`harness.evaluation.significance.paired_test` on the same test examples: its 95% interval and two-sided
p-value; the p-values of all tasks are Holm-adjusted (Holm 1979). A task without per-example data for either model
(records stored before harness kept it) is listed with the reason and no test.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import HarnessError
from .evaluation.bootstrap import DEFAULT_RESAMPLES, ExampleDataError, ExampleScores
from .evaluation.significance import ALPHA, PairedResult, holm, paired_test
from .leaderboard.stats import NO_DATA, stored_examples
from .profiles import get_profile
from .registry import Registry
from .spec import ModelSpec, resolve_model_spec, resolve_task_specs
from .store import Store


class CompareError(HarnessError):
    """Two models cannot be compared as asked."""


@dataclass
class TaskComparison:
    task: str
    result: PairedResult | None
    reason: str = ""  # why there is no result
    p_holm: float | None = None

    def as_dict(self) -> dict:
        entry = {"task": self.task}
        if self.result is None:
            return {**entry, "result": None, "reason": self.reason}
        return {**entry, **self.result.as_dict(), "p_holm": self.p_holm,
                "significant": bool(self.p_holm is not None and self.p_holm < ALPHA)}


def _examples(store: Store, spec: ModelSpec, seed: int, task_key: str) -> tuple[ExampleScores | None, str]:
    path = store.record_path(spec.key, seed, task_key)
    if not path.exists():
        return None, f"{spec.label} seed {seed} has no record (run it first)"
    data, reason = stored_examples(path)
    return data, "" if data is not None else f"{spec.label} seed {seed}: {reason}"


def _keeps_examples(registry: Registry, task_name: str) -> bool:
    """Whether the task's evaluation returns per-example data at all (``Task.keeps_examples``; a task registered
    through a factory that is not a Task class is assumed to)."""
    return bool(getattr(registry.task(task_name).factory, "keeps_examples", True))


def compare(registry: Registry, store: Store, model_a: str, model_b: str, tasks: list[str], seeds: list[int],
            profile: str = "quick", backbone: str | None = None, train_on: str | None = None,
            resamples: int = DEFAULT_RESAMPLES) -> tuple[ModelSpec, ModelSpec, list[TaskComparison]]:
    """The paired comparison of ``model_a`` - ``model_b`` on each task (specs as for ``harness run``)."""
    if not tasks:
        raise CompareError("name the tasks to compare on: --tasks stsb or --tasks senteval")
    chosen_profile = get_profile(profile)
    spec_a = resolve_model_spec(registry, model_a, chosen_profile, backbone, train_on)
    spec_b = resolve_model_spec(registry, model_b, chosen_profile, backbone, train_on)
    if spec_a.key == spec_b.key:
        raise CompareError(f"{model_a!r} and {model_b!r} are the same model spec ({spec_a.key}); compare two others")
    task_specs = [task for text in tasks for task in resolve_task_specs(registry, text)]
    comparisons = []
    for task in task_specs:
        per_model: list[list[ExampleScores]] = [[], []]
        reasons = []
        for side, spec in enumerate((spec_a, spec_b)):
            for seed in seeds:
                data, reason = _examples(store, spec, seed, task.key)
                if data is None and reason.endswith(NO_DATA) and not _keeps_examples(registry, task.name):
                    reason = (f"task {task.label} keeps no per-example data (its evaluator gives only the score), "
                              "so it cannot be tested; `harness rescore` would not add any")
                if data is None and reason not in reasons:
                    reasons.append(reason)
                else:
                    per_model[side].append(data)
        if reasons:
            comparisons.append(TaskComparison(task.label, None, "; ".join(reasons)))
            continue
        try:
            comparisons.append(TaskComparison(task.label, paired_test(per_model[0], per_model[1], resamples)))
        except ExampleDataError as exc:
            comparisons.append(TaskComparison(task.label, None, str(exc)))
    tested = [c for c in comparisons if c.result is not None]
    for comparison, adjusted in zip(tested, holm([c.result.p_value for c in tested])):
        comparison.p_holm = adjusted
    return spec_a, spec_b, comparisons


def comparison_rows(comparisons: list[TaskComparison]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of the comparison table."""
    headers = ["task", "A", "B", "A - B", "95% interval", "p", "p (Holm)", "examples", "seeds A/B"]
    rows = []
    for c in comparisons:
        r = c.result
        if r is None:
            rows.append([c.task, "", "", "", "", "", "", "", f"no test: {c.reason}"])
            continue
        mark = " *" if c.p_holm is not None and c.p_holm < ALPHA else ""
        rows.append([c.task, f"{r.score_a:.2f}", f"{r.score_b:.2f}", f"{r.difference:+.2f}{mark}",
                     f"[{r.low:+.2f}, {r.high:+.2f}]", f"{r.p_value:.4f}", f"{c.p_holm:.4f}", str(r.examples),
                     f"{r.seeds_a}/{r.seeds_b}"])
    return headers, rows


def results_dir_exists(root: Path) -> Store:
    store = Store(root)
    if not store.root.is_dir():
        raise CompareError(f"no result store at {root}; run both models with `harness run` first or pass --results.")
    return store
