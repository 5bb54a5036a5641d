"""`harness compare`: paired significance test of two model specs on the same test examples (harness.compare)."""

from __future__ import annotations

import sys

from ..profiles import PROFILES
from ..spec_grammar import split_spec_list
from . import values
from .common import load_registry, results_dir
from .parsing import WORKING_STORE, add_command, add_results_option


def add_parser(commands) -> None:
    compare = add_command(
        commands,
        "compare",
        "paired significance test of model A vs model B on the same test examples (bootstrap interval, p-value, "
        "Holm across tasks)",
        (
            "harness compare be be:pooling=cls --tasks senteval --seeds 42,43,44",
            "harness compare cbe be --tasks sts12 --train-on-a stsb --train-on-b none",
            "harness compare be be --tasks stsb --runtime-b onnx-int8",
        ),
    )
    compare.add_argument("model_a", metavar="A", help="a model spec as for `harness run`, e.g. be")
    compare.add_argument("model_b", metavar="B", help="another model spec, e.g. be:pooling=cls")
    cells = compare.add_argument_group("which cells (as given to `harness run`)")
    cells.add_argument("--tasks", required=True, help="comma-separated tasks or task families, e.g. stsb,senteval")
    cells.add_argument("--seeds", default=None, help="comma-separated seeds to pool (default 42)")
    cells.add_argument("--profile", default="quick", help=f"as given to `harness run`: {', '.join(PROFILES)}")
    cells.add_argument("--backbone", default=None, help="as given to `harness run` (default: the profile's)")
    cells.add_argument("--train-on", default=None, help="as given to `harness run`, e.g. stsb")
    for side in ("a", "b"):
        cells.add_argument(
            f"--train-on-{side}",
            default=None,
            help=f"{side.upper()}'s own training source, replacing --train-on for {side.upper()} only; `none`: "
            f"{side.upper()} untrained (e.g. `harness compare cbe be --train-on-a stsb --train-on-b none`)",
        )
    cells.add_argument(
        "--runtime-a",
        default="torch",
        help="the runtime A's cells were evaluated under (default torch): compare a spec with itself under two "
        "runtimes, e.g. `harness compare be be --runtime-b onnx-int8`, to see a variant's quality drop and speed-up",
    )
    cells.add_argument(
        "--runtime-b", default="torch", help="the runtime B's cells were evaluated under (default torch)"
    )
    add_results_option(cells, f"store to read ({WORKING_STORE})")
    test = compare.add_argument_group("the test and its output")
    test.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    test.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")
    compare.set_defaults(handler=cmd_compare)


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
