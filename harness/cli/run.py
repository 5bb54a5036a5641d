"""`harness run` and `harness rescore`: plan, compute or look up every cell, store and print the results."""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path

from ..errors import HarnessError
from ..profiles import PROFILES
from ..status import CellStatus
from . import values
from .common import load_registry
from .parsing import WORKING_STORE, add_command, add_data_dir_option, add_executor_options, add_results_option

EXAMPLES = (
    "harness run --models be,ce --tasks useb",
    "harness run --models ce --tasks senteval --train-on stsb --seeds 42,43,44 --profile paper",
    "harness run --matrix matrices/thesis-tables-6-7-6-8.yaml --leaderboards results/leaderboards",
    "harness run --models cbe --tasks stsb --executor slurm --slurm-gpus 1 --device cuda",
)


def add_parser(commands) -> None:
    run = add_command(commands, "run", "train what needs training, evaluate, store and print results", EXAMPLES)
    add_run_arguments(run)
    run.set_defaults(handler=cmd_run)
    rescore = add_command(
        commands,
        "rescore",
        "recompute the evaluation of stored cells from their stored checkpoints (adds per-example data to old "
        "records); trains nothing",
        ("harness rescore --models be,ce --tasks senteval --train-on stsb",),
    )
    add_run_arguments(rescore)
    rescore.set_defaults(handler=cmd_rescore, overwrite=False)


def add_what_to_run(what) -> None:
    """The options that say what runs (`run`, `rescore` and `validate`): models, tasks or a matrix, seeds, backbone
    and training source."""
    what.add_argument("--models", help="comma-separated model specs, e.g. be,ce or be:pooling=cls")
    what.add_argument("--tasks", help="comma-separated tasks or task families, e.g. senteval")
    what.add_argument("--matrix", type=Path, help="a YAML matrix file (models, tasks, seeds, ...)")
    what.add_argument("--seeds", default=None, help="comma-separated seeds (default 42)")
    what.add_argument("--backbone", default=None, help="Hugging Face id or local folder (default: the profile's)")
    what.add_argument("--train-on", default=None, help="training source task for trainable models, e.g. stsb")


def add_run_arguments(parser) -> None:
    """The options of `run` (and `rescore`), in groups: what to run, its training budget, how it evaluates, where
    it runs (each executor's own options in a group of its own), and where its results go."""
    add_what_to_run(parser.add_argument_group("what to run"))
    budget = parser.add_argument_group("training budget")
    budget.add_argument("--profile", default=None, help=f"budget profile: {', '.join(PROFILES)} (default quick)")
    budget.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="budget_set",
        help="training budget for every trained spec: epochs, max_steps, batch_size, learning_rate, "
        "max_train_examples, seed_trials, precision, group_by_length (repeatable; enters the spec hash), "
        "e.g. --set epochs=5",
    )
    evaluation = parser.add_argument_group("evaluation")
    evaluation.add_argument(
        "--batch-size", type=int, default=None, help="encoding batch size for evaluation (default: the profile's)"
    )
    evaluation.add_argument(
        "--runtime",
        default="torch",
        help="how models evaluate their encoders: torch (default), onnx (ONNX Runtime on the CPU) or onnx-int8 "
        "(its dynamic int8 quantisation: faster, slightly lower scores, its own cells and leaderboard rows); onnx "
        "ones need pip install 'sentence-harness[onnx]'; models without it are refused",
    )
    evaluation.add_argument(
        "--no-embedding-cache",
        action="store_true",
        help="encode every text again instead of serving vectors computed before from the store's embedding cache "
        "(on by default; also HARNESS_EMBEDDING_CACHE=0 or the matrix key embedding_cache: false)",
    )
    where = parser.add_argument_group("where to run")
    where.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    add_executor_options(parser, where, "where cells run")
    output = parser.add_argument_group("results and output")
    add_results_option(output, f"working result store ({WORKING_STORE})")
    add_data_dir_option(output)
    output.add_argument(
        "--overwrite",
        action="store_true",
        help="recompute every cell and retrain every checkpoint, replacing what is stored",
    )
    output.add_argument(
        "--store-only",
        action="store_true",
        help="compute nothing: answer every cell from the store, or stop and say which cells cannot be",
    )
    output.add_argument(
        "--leaderboards", type=Path, default=None, help="also rebuild leaderboards into this folder after the run"
    )
    output.add_argument(
        "--log-to",
        default=None,
        help="experiment trackers to report training and scores to: tensorboard, mlflow, wandb (comma-separated), "
        "all (every installed one) or none; default the matrix's log_to, else HARNESS_LOG_TO",
    )
    output.add_argument("--no-progress", action="store_true", help="hide progress bars")


def cmd_run(args) -> int:
    started = time.perf_counter()  # the summary's wall time counts plugin discovery too
    return _run(load_registry(), args, started)


def cmd_rescore(args) -> int:
    """`harness run` that recomputes evaluations from stored checkpoints (RunConfig.rescore); trains nothing."""
    started = time.perf_counter()
    registry = load_registry()
    if args.overwrite or args.store_only:
        raise HarnessError(
            "rescore recomputes evaluations from stored checkpoints; --overwrite (retrain) "
            "and --store-only do not apply: use `harness run` for those."
        )
    args.rescore = True
    return _run(registry, args, started)


def _run(registry, args, started: float) -> int:
    from .. import distributed
    from ..executors import make_executor
    from ..run.driver import Run

    config = values.run_config(args)
    executor_name, executor_options = values.executor(args, registry)
    if distributed.launched_world_size() > 1:  # torchrun: this process is one rank of a distributed training
        config = _distributed_config(config, executor_name)
    run = Run(registry, config)
    # Ray missing, an unreachable --ray-address: before loading data
    executor = make_executor(executor_name, executor_options, registry)
    plan = run.plan(executor)  # for the device the executor computes on
    outcomes = run.run(executor, plan)
    if not distributed.is_main_process():  # rank 0 reports (and wrote every record)
        return 1 if any(o.status == CellStatus.FAILED for o in outcomes) else 0
    counts = _print_summary(outcomes, config.results_dir, time.perf_counter() - started)
    if args.leaderboards is not None:
        from ..leaderboard import write_leaderboards
        from ..store import Store

        # The run's own tables show its sample records too (in sections marked as samples); `harness leaderboard`
        # leaves them out unless asked.
        for path in write_leaderboards(
            Store(config.results_dir),
            args.leaderboards,
            ("md", "csv"),
            registry.families(),
            include_samples=True,
            family_baselines=registry.family_baselines(),
        ):
            print(f"wrote {path}")
    if counts[CellStatus.FAILED]:
        return 1
    if outcomes and counts[CellStatus.MISSING] == len(
        outcomes
    ):  # nothing evaluated: a script must not read that as success
        print(
            "error: no cell has its data (each task's reason is above); get the data (`harness data list`, "
            "--data-dir) or choose other tasks.",
            file=sys.stderr,
        )
        return 1
    return 0


def _distributed_config(config, executor: str):
    """The run config of one torchrun rank: its own device (cuda:LOCAL_RANK, or the CPU with gloo); every rank but
    rank 0 without progress bars and with warnings only (rank 0 says what the run does)."""
    import logging
    from dataclasses import replace

    from .. import distributed

    if executor != "local":
        raise HarnessError(
            f"--executor {executor} under torchrun: torchrun already starts one process per "
            "GPU for one model at a time; use the local executor (drop --executor)."
        )
    device = distributed.setup(config.device)
    if not distributed.is_main_process():
        logging.getLogger("harness").setLevel(logging.WARNING)
    return replace(config, device=device, progress=config.progress and distributed.is_main_process())


def _print_summary(outcomes, results_dir, seconds: float) -> Counter[CellStatus]:
    """The table of the run's cells, the counts by status with the run's wall time, missing data per task and each
    failure reason once."""
    from tabulate import tabulate

    from ..run.driver import summary_rows

    headers, rows = summary_rows(outcomes)
    print()
    print(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
    counts = Counter(outcome.status for outcome in outcomes)
    print(
        f"\n{counts[CellStatus.OK]} cells computed, {counts[CellStatus.CACHED]} from the store, "
        f"{counts[CellStatus.MISSING]} missing data"
        + (f", {counts[CellStatus.FAILED]} failed" if counts[CellStatus.FAILED] else "")
        + f"; records in {results_dir}; {wall_time_text(seconds)} in all"
    )
    missing: dict[str, int] = {}  # the reason was printed once per task during the run
    for outcome in outcomes:
        if outcome.status == CellStatus.MISSING:
            missing[outcome.task.label] = missing.get(outcome.task.label, 0) + 1
    if missing:
        print(
            "missing data (reason above): "
            + ", ".join(f"{label} ({count} cell{'s' * (count > 1)})" for label, count in missing.items())
        )
    failures: dict[str, list[str]] = {}  # each distinct reason once, with the cells it failed
    for outcome in outcomes:
        if outcome.status == CellStatus.FAILED:
            failures.setdefault(outcome.message or "", []).append(
                f"{outcome.spec.label} seed {outcome.seed} {outcome.task.label}"
            )
    for message, cells in failures.items():
        print(f"failed: {', '.join(cells)}: {message}", file=sys.stderr)
    return counts


def wall_time_text(seconds: float) -> str:
    """``12 min 5 s`` (``41.3 s`` under a minute): how long the command took, from plugin discovery to the summary."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"
