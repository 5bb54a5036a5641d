"""`harness compare`: paired significance test of two model specs on the same test examples (harness.compare)."""

from __future__ import annotations

import sys

from ..spec_grammar import split_spec_list
from . import values
from .common import load_registry, results_dir


def cmd_compare(args) -> int:
    import json

    from tabulate import tabulate

    from ..compare import UNITS_NOTE, compare, comparison_rows, results_dir_exists, runtime_label, seen_notes
    from ..run.config import check_runtime_name

    registry = load_registry()
    resamples = values.resamples(args.resamples)
    store = results_dir_exists(results_dir(args.results))
    seeds = values.seeds(args.seeds)
    runtime_a, runtime_b = (check_runtime_name(value) for value in (args.runtime_a, args.runtime_b))
    spec_a, spec_b, comparisons = compare(
        registry,
        store,
        args.model_a,
        args.model_b,
        split_spec_list(args.tasks),
        seeds,
        args.profile,
        args.backbone,
        args.train_on,
        resamples,
        runtime_a,
        runtime_b,
        args.train_on_a,
        args.train_on_b,
    )
    label_a, label_b = runtime_label(spec_a, runtime_a), runtime_label(spec_b, runtime_b)
    if spec_a.train_on != spec_b.train_on:  # --train-on-a / --train-on-b: say which side trained on what
        label_a, label_b = (
            f"{label} [train: {spec.train_on or 'none'}]" for label, spec in ((label_a, spec_a), (label_b, spec_b))
        )
    seen = seen_notes(registry, store, {"A": spec_a, "B": spec_b}, split_spec_list(args.tasks), seeds)
    damaged = sum(c.damaged for c in comparisons)
    if args.json:
        print(
            json.dumps(
                {
                    "a": {"label": spec_a.label, "model_key": spec_a.key, "runtime": runtime_a},
                    "b": {"label": spec_b.label, "model_key": spec_b.key, "runtime": runtime_b},
                    "seeds": seeds,
                    "resamples": resamples,
                    "method": "two units of inference: 'examples' (paired "
                    "bootstrap over test examples, seeds pooled and held fixed) and 'across runs' (Welch t "
                    "over seeds plus the example bootstrap's variance), the latter deciding wherever a model "
                    "was trained ('unit' per task); two-sided p; Holm across tasks on the deciding p",
                    "tasks": [c.as_dict() for c in comparisons],
                    "seen_in_training": seen,
                },
                indent=2,
            )
        )
        return 1 if damaged else 0
    headers, rows = comparison_rows(comparisons, speed=runtime_a != runtime_b)
    print(
        f"A = {label_a} ({spec_a.key}), B = {label_b} ({spec_b.key}); seeds {','.join(map(str, seeds))}; "
        f"{resamples} bootstrap resamples"
    )
    print(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
    print(UNITS_NOTE)
    print("* significant by the deciding unit after Holm's correction across the tasks (p < 0.05)")
    for line in seen:  # measured train/test overlap (harness.contamination)
        print(f"seen in training: {line}")
    if damaged:
        print(
            f"error: {damaged} per-example file(s) missing or damaged, so those tasks have no test; `harness run` "
            "with the arguments that computed them recomputes those cells.",
            file=sys.stderr,
        )
        return 1
    return 0
