"""`harness run` and `harness rescore`: plan, compute or look up every cell, store and print the results."""

from __future__ import annotations

import sys
import time
from collections import Counter

from .. import distributed
from ..errors import HarnessError
from ..status import CellStatus
from . import values
from .common import load_registry


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
    from ..executors import make_executor
    from ..run.driver import Run

    config = values.run_config(args)
    executor_options = values.executor_options(args)
    if distributed.launched_world_size() > 1:  # torchrun: this process is one rank of a distributed training
        config = _distributed_config(config, executor_options["executor"])
    run = Run(registry, config)
    executor = make_executor(**executor_options)  # Ray missing, an unreachable --ray-address: before loading data
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
