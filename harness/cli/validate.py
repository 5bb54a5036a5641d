"""`harness validate`: plan specs or a matrix (every task's data, every training source) without running anything."""

from __future__ import annotations

import sys

from . import values
from .common import load_registry


def cmd_validate(args) -> int:
    from dataclasses import replace

    from ..profiles import format_budget
    from ..run.driver import Run

    registry = load_registry()
    config = replace(values.run_config(args), device="cpu")
    executor = values.executor_options(args)  # an option without its executor: one line before any data is read
    plan = Run(registry, config).plan()  # loads every task's data and every training source once
    for planned in plan.models:
        budget = f", budget {format_budget(planned.spec.requested_budget)}" if planned.spec.requested_budget else ""
        print(
            f"model {planned.spec.label}: key {planned.spec.key}, backbone {planned.spec.backbone}, "
            f"train on {planned.spec.train_on or '-'}{budget}"
        )
        if planned.spec.key in plan.training_problems:
            print(f"  training data: {plan.training_problems[planned.spec.key]}", file=sys.stderr)
    for task_spec in plan.tasks:
        if task_spec.key in plan.data_problems:
            print(f"task {task_spec.label}: {plan.data_problems[task_spec.key]}", file=sys.stderr)
            continue
        checksum = plan.data_checksums.get(task_spec.key)
        print(
            f"task {task_spec.label}: data ok"
            + (f" (sha256 {checksum[:16]})" if checksum else " (the task cannot check its data before evaluating)")
        )
    if executor["executor"] == "slurm":
        from ..executors import make_executor

        host = make_executor(**executor).check_store_shared(config.results_dir)
        print(f"slurm: sbatch answers and node {host} sees the store {config.results_dir.resolve()}")
    elif executor["executor"] != "local":
        print(f"note: --executor {executor['executor']} checks its cluster when `harness run` starts it")
    problems = len(plan.data_problems) + len(plan.training_problems)
    if problems:
        print(
            f"error: {problems} data problem(s); `harness run` would store those cells as missing or failed and "
            "run the rest.",
            file=sys.stderr,
        )
        return 2
    print(f"ok: {plan.cell_count} cells")
    return 0
