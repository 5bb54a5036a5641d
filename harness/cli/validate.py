"""`harness validate`: plan specs or a matrix (every task's data, every training source) without running anything."""

from __future__ import annotations

import sys

from . import values
from .common import load_registry
from .parsing import WORKING_STORE, add_command, add_data_dir_option, add_executor_options, add_results_option
from .run import add_what_to_run


def add_parser(commands) -> None:
    validate = add_command(
        commands,
        "validate",
        "check specs or a matrix without running anything",
        (
            "harness validate --models be,ce --tasks senteval --train-on stsb",
            "harness validate --matrix matrices/thesis-tables-6-7-6-8.yaml",
            "harness validate --models be --tasks stsb --executor slurm --slurm-partition gpu",
        ),
    )
    what = validate.add_argument_group("what would run (as for `harness run`)")
    add_what_to_run(what)
    what.add_argument("--profile", default=None, help="budget profile (default quick)")
    what.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", dest="budget_set", help="training budget key"
    )
    add_data_dir_option(what)
    what.add_argument("--runtime", default="torch", help="torch, onnx or onnx-int8")
    where = validate.add_argument_group("where it would run")
    add_executor_options(
        validate, where, "also check an executor (slurm: sbatch answers, and a probe job sees the store at --results)"
    )
    add_results_option(where, f"the store the run would use ({WORKING_STORE})")
    validate.set_defaults(handler=cmd_validate)


def cmd_validate(args) -> int:
    from dataclasses import replace

    from ..profiles import format_budget
    from ..run.driver import Run

    registry = load_registry()
    config = replace(values.run_config(args), device="cpu")
    executor_name, executor_options = values.executor(args, registry)  # a stray option: before any data is read
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
    if executor_name != "local":
        from ..executors import make_executor

        executor = make_executor(executor_name, executor_options, registry)
        if hasattr(executor, "validate"):  # what the executor checks beyond the plan (harness.ExecutorFactory)
            print(f"{executor_name}: {executor.validate(config.results_dir)}")
        else:
            print(f"note: --executor {executor_name} checks its cluster when `harness run` starts it")
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
