"""The ``harness`` command line."""
from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from pathlib import Path
from typing import Sequence

from .errors import HarnessError, UnknownNameError, close_matches_hint, invalid_choice
from .profiles import PROFILES

DEFAULT_RESULTS = "results"  # the working store `harness run` writes to (git-ignored)
DEFAULT_PUBLISHED = "published"  # the published records `leaderboards/` is built from (committed)
DEFAULT_LEADERBOARDS = "leaderboards"


def _split(text: str | None) -> list[str]:
    """Comma-separated names; commas inside ``name:k=v,k=v`` options are kept with their spec when the next
    item contains '=' (it is an option, not a name)."""
    if not text:
        return []
    items: list[str] = []
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        # "key=value" continues the previous spec's options; "name" or "name:key=value" starts a new spec.
        continues = "=" in piece and ":" not in piece.split("=", 1)[0]
        if items and continues and ":" in items[-1]:
            items[-1] += "," + piece
        else:
            items.append(piece)
    return items


def _seeds(text: str) -> list[int]:
    from .matrix import check_seeds

    try:
        seeds = [int(s) for s in _split(text)]
    except ValueError:
        raise HarnessError(f"--seeds takes comma-separated integers such as 42,43,44; got {text!r}.") from None
    if not seeds:
        raise HarnessError("--seeds needs at least one integer, e.g. --seeds 42.")
    return check_seeds(seeds, "--seeds")


class _CliHandler(logging.StreamHandler):
    """The handler the CLI installs on the ``harness`` logger (replaced, not stacked, on every call of main)."""


def configure_logging(verbosity: int = 0) -> None:
    """Library modules log; the CLI decides what the user sees: INFO messages as plain lines on stdout (progress
    bars stay on stderr), warnings and errors on stderr; ``-v`` adds debug output, ``-q`` keeps warnings only."""
    package_logger = logging.getLogger("harness")
    for handler in [h for h in package_logger.handlers if isinstance(h, _CliHandler)]:
        package_logger.removeHandler(handler)
    level = logging.DEBUG if verbosity > 0 else logging.WARNING if verbosity < 0 else logging.INFO
    info = _CliHandler(sys.stdout)
    info.setFormatter(logging.Formatter("%(message)s"))
    info.addFilter(lambda record: record.levelno < logging.WARNING)
    problems = _CliHandler(sys.stderr)
    problems.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    problems.setLevel(logging.WARNING)
    package_logger.addHandler(info)
    package_logger.addHandler(problems)
    package_logger.setLevel(level)
    package_logger.propagate = False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description="Benchmark harness for sentence-embedding methods.")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug output")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    parser.add_argument("--version", action="store_true", help="print the harness version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    commands.add_parser("list", help="list model and task plugins, their packages and plugins that failed to load")

    describe = commands.add_parser("describe", help="show a model's or task's metadata and options")
    describe.add_argument("name")

    run = commands.add_parser("run", help="train what needs training, evaluate, store and print results")
    run.add_argument("--models", help="comma-separated model specs, e.g. be,ce or be:pooling=cls")
    run.add_argument("--tasks", help="comma-separated tasks or task families, e.g. senteval")
    run.add_argument("--matrix", type=Path, help="a YAML matrix file (models, tasks, seeds, ...)")
    run.add_argument("--seeds", default=None, help="comma-separated seeds (default 42)")
    run.add_argument("--backbone", default=None, help="Hugging Face id or local folder (default: the profile's)")
    run.add_argument("--profile", default=None, help=f"budget profile: {', '.join(PROFILES)} (default quick)")
    run.add_argument("--train-on", default=None, help="training source task for trainable models, e.g. stsb")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="budget_set",
                     help="training budget for every trained spec: epochs, max_steps, batch_size, learning_rate, "
                          "max_train_examples (repeatable; enters the spec hash), e.g. --set epochs=5")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N or mps")
    run.add_argument("--executor", default="local",
                     help="where cells run: local (this process, the default) or ray (tasks on a Ray cluster; "
                          "pip install 'sentence-harness[ray]')")
    run.add_argument("--ray-address", default=None,
                     help="with --executor ray: the cluster (default: join this machine's, else start one; local: "
                          "always start one; auto; host:port; ray://host:port)")
    run.add_argument("--gpus-per-task", type=float, default=None,
                     help="with --executor ray: GPUs per training or evaluation task (default 1 if the cluster has "
                          "GPUs, else 0)")
    run.add_argument("--cpus-per-task", type=float, default=1.0,
                     help="with --executor ray: CPUs per task, also its PyTorch threads (default 1)")
    run.add_argument("--results", type=Path, default=None,
                     help=f"working result store (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)")
    run.add_argument("--data-dir", type=Path, default=None, help="folder with datasets (or HARNESS_DATA_DIR)")
    run.add_argument("--batch-size", type=int, default=None,
                     help="encoding batch size for evaluation (default: the profile's)")
    run.add_argument("--overwrite", action="store_true",
                     help="recompute every cell and retrain every checkpoint, replacing what is stored")
    run.add_argument("--store-only", action="store_true",
                     help="compute nothing: answer every cell from the store, or stop and say which cells cannot be")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--leaderboards", type=Path, default=None,
                     help="also rebuild leaderboards into this folder after the run")

    rescore = commands.add_parser(
        "rescore", help="recompute the evaluation of stored cells from their stored checkpoints (adds per-example "
                        "data to old records); trains nothing",
        parents=[run], add_help=False, conflict_handler="resolve")
    rescore.set_defaults(overwrite=False)

    compare = commands.add_parser("compare", help="paired significance test of model A vs model B on the same test "
                                                  "examples (bootstrap interval, p-value, Holm across tasks)")
    compare.add_argument("model_a", metavar="A", help="a model spec as for `harness run`, e.g. be")
    compare.add_argument("model_b", metavar="B", help="another model spec, e.g. be:pooling=cls")
    compare.add_argument("--tasks", required=True, help="comma-separated tasks or task families, e.g. stsb,senteval")
    compare.add_argument("--seeds", default=None, help="comma-separated seeds to pool (default 42)")
    compare.add_argument("--profile", default="quick", help=f"as given to `harness run`: {', '.join(PROFILES)}")
    compare.add_argument("--backbone", default=None, help="as given to `harness run` (default: the profile's)")
    compare.add_argument("--train-on", default=None, help="as given to `harness run`, e.g. stsb")
    compare.add_argument("--results", type=Path, default=None,
                         help=f"store to read (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)")
    compare.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    compare.add_argument("--json", action="store_true", help="print the result as JSON instead of a table")

    validate = commands.add_parser("validate", help="check specs or a matrix without running anything")
    validate.add_argument("--models")
    validate.add_argument("--tasks")
    validate.add_argument("--matrix", type=Path)
    validate.add_argument("--profile", default=None)
    validate.add_argument("--train-on", default=None)
    validate.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="budget_set")
    validate.add_argument("--backbone", default=None)
    validate.add_argument("--data-dir", type=Path, default=None)

    data = commands.add_parser("data", help="list or download datasets that plugins offer")
    data_commands = data.add_subparsers(dest="data_command", metavar="ACTION")
    data_commands.add_parser("list", help="datasets that can be downloaded, and where they would go")
    download = data_commands.add_parser("download", help="download, verify and unpack a dataset")
    download.add_argument("name")
    download.add_argument("--data-dir", type=Path, default=None,
                          help="target folder (default: HARNESS_DATA_DIR, else ~/.cache/harness/data)")

    plot = commands.add_parser("plot", help="draw a plot that a plugin offers, from stored results and artifacts")
    plot.add_argument("name", help="plot name (see `harness list`, components of kind 'plot')")
    plot.add_argument("--results", type=Path, default=None,
                      help=f"store to read (default ./{DEFAULT_PUBLISHED}, the published records)")
    plot.add_argument("--output", type=Path, default=None,
                      help=f"folder for the PNG files (default ./{DEFAULT_LEADERBOARDS} for the published records, "
                           "else <results>/leaderboards)")

    board = commands.add_parser("leaderboard", help="rebuild leaderboards/ from the published records")
    board.add_argument("--results", type=Path, default=None,
                       help=f"store to build from (default ./{DEFAULT_PUBLISHED}; e.g. --results {DEFAULT_RESULTS} "
                            "for your own runs)")
    board.add_argument("--output", type=Path, default=None,
                       help=f"folder for the tables (default ./{DEFAULT_LEADERBOARDS} for the published records, "
                            "else <results>/leaderboards)")
    board.add_argument("--formats", default="md,csv", help="any of md, csv, tex, html")
    board.add_argument("--matrix", type=Path, default=None,
                       help="render one matrix file as its paper table (its entries as rows, its tasks as columns, "
                            "the paper's numbers from its paper: block), into <output>/matrices/<file name>")
    board.add_argument("--include-samples", action="store_true",
                       help="also show records computed on an evaluation sample (max_eval_examples, e.g. --profile "
                            "smoke), in sections of their own; left out by default")

    publish = commands.add_parser("publish", help="verify chosen records of your store and copy them into the "
                                                  "published set")
    publish.add_argument("--results", type=Path, default=None,
                         help=f"store to publish from (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)")
    publish.add_argument("--to", type=Path, default=Path(DEFAULT_PUBLISHED),
                         help=f"the published set (default ./{DEFAULT_PUBLISHED})")
    publish.add_argument("--models", help="model names, spec labels or model keys to publish (comma-separated)")
    publish.add_argument("--tasks", help="task names or families to publish (comma-separated)")
    publish.add_argument("--seeds", default=None, help="seeds to publish (comma-separated)")
    publish.add_argument("--all", action="store_true", help="publish every valid record of the store")
    publish.add_argument("--overwrite", action="store_true", help="replace published records of the same cells")
    publish.add_argument("--trust-unsigned", action="store_true",
                         help="accept records written by harness 0.1 (no content checksum) after the other checks, "
                              "and sign them")
    publish.add_argument("--data-dir", type=Path, default=None,
                         help="datasets to verify the records' dataset checksums against (or HARNESS_DATA_DIR)")

    export = commands.add_parser("export", help="write a trained model as a sentence-transformers folder (with a "
                                                "model card)")
    export.add_argument("--models", required=True, help="one model spec, named as for `harness run`, e.g. be")
    export.add_argument("--to", type=Path, required=True, help="the folder to write (new or empty)")
    export.add_argument("--seeds", default=None, help="the one seed of the trained model (default 42)")
    export.add_argument("--backbone", default=None, help="as given to `harness run` (default: the profile's)")
    export.add_argument("--profile", default="quick", help=f"as given to `harness run`: {', '.join(PROFILES)}")
    export.add_argument("--train-on", default=None, help="as given to `harness run`, e.g. stsb")
    export.add_argument("--results", type=Path, default=None,
                        help=f"the store holding its checkpoint (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)")
    export.add_argument("--device", default="cpu", help="device to load the model on while exporting")

    export_results = commands.add_parser("export-results", help="write stored results in another benchmark's "
                                                                "results layout (e.g. --format mteb)")
    export_results.add_argument("--format", required=True, help="a results format (`harness list`, components of "
                                                                "kind 'results-format'), e.g. mteb")
    export_results.add_argument("--to", type=Path, required=True, help="the folder to write into")
    export_results.add_argument("--include-samples", action="store_true",
                                help="also export records computed on an evaluation sample (max_eval_examples, e.g. "
                                     "--profile smoke), marked as samples; left out by default")
    export_results.add_argument("--results", type=Path, default=None,
                                help=f"store to read (default ./{DEFAULT_RESULTS}, or HARNESS_RESULTS_DIR)")
    export_results.add_argument("--overwrite", action="store_true",
                                help="write into a folder that already holds files (they may be replaced)")
    return parser


def _results_dir(value: Path | None) -> Path:
    return value or Path(os.environ.get("HARNESS_RESULTS_DIR", DEFAULT_RESULTS))


def _read_store_and_output(results: Path | None, output: Path | None) -> tuple[Path, Path]:
    """What `leaderboard` and `plot` read and write: the published records into leaderboards/ by default; another
    store into its own leaderboards/ folder, so a user's tables never overwrite the committed ones by accident."""
    store = results or Path(DEFAULT_PUBLISHED)
    if output is not None:
        return store, output
    if results is None or results.resolve() == Path(DEFAULT_PUBLISHED).resolve():
        return store, Path(DEFAULT_LEADERBOARDS)
    return store, store / DEFAULT_LEADERBOARDS


def _data_dir(value: Path | None, matrix_value: Path | None = None) -> Path | None:
    """--data-dir, else the matrix's data_dir, else HARNESS_DATA_DIR; one that does not exist is refused (never a
    silent fall-back to the bundled data while the record names the missing folder)."""
    from .data import check_data_dir

    if value is not None:
        return check_data_dir(value, "--data-dir")
    if matrix_value is not None:
        return check_data_dir(matrix_value, "data_dir of the matrix")
    environment = os.environ.get("HARNESS_DATA_DIR")
    return check_data_dir(environment, "HARNESS_DATA_DIR") if environment else None


def _run_config(args, for_validation: bool = False):
    from .matrix import ModelEntry, load_matrix
    from .run.config import RunConfig

    base: dict = {}
    if args.matrix is not None:
        base = load_matrix(args.matrix)
    models = [ModelEntry(m) for m in _split(args.models)] or base.get("models", [])
    tasks = _split(args.tasks) or base.get("tasks", [])
    profile = args.profile or base.get("profile", "quick")
    if profile not in PROFILES:
        raise invalid_choice("--profile", profile, PROFILES)
    config = RunConfig(
        models=models,
        tasks=tasks,
        seeds=_seeds(args.seeds) if getattr(args, "seeds", None) is not None else base.get("seeds", [42]),
        profile=profile,
        backbone=args.backbone or base.get("backbone"),
        train_on=args.train_on or base.get("train_on"),
        device=getattr(args, "device", "auto"),
        results_dir=_results_dir(getattr(args, "results", None)),
        data_dir=_data_dir(args.data_dir, base.get("data_dir")),
        overwrite=getattr(args, "overwrite", False),
        rescore=getattr(args, "rescore", False),
        progress=not getattr(args, "no_progress", False) and sys.stderr.isatty(),
        batch_size=_batch_size(getattr(args, "batch_size", None)),
        store_only=getattr(args, "store_only", False),
        budget=_budget_set(getattr(args, "budget_set", None) or []),
        **_executor_options(args),
    )
    return config


def _executor_options(args) -> dict:
    """--executor and its options (harness.executors); Ray's options without --executor ray are a mistake."""
    from .executors import EXECUTORS

    executor = getattr(args, "executor", "local")
    if executor not in EXECUTORS:
        raise invalid_choice("--executor", executor, EXECUTORS)
    options = {"ray_address": getattr(args, "ray_address", None),
               "gpus_per_task": getattr(args, "gpus_per_task", None),
               "cpus_per_task": getattr(args, "cpus_per_task", 1.0)}
    if executor != "ray":
        given = [name for name, value in (("--ray-address", options["ray_address"]),
                                          ("--gpus-per-task", options["gpus_per_task"])) if value is not None]
        if given or options["cpus_per_task"] != 1.0:
            raise HarnessError(f"{', '.join(given) or '--cpus-per-task'} only applies with --executor ray.")
    return {"executor": executor, **options}


def _budget_set(items: list[str]) -> dict:
    """``--set epochs=5 --set learning_rate=3e-5`` -> a checked budget mapping."""
    from .profiles import check_budget

    values: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise HarnessError(f"--set {item!r}: write --set KEY=VALUE, e.g. --set epochs=5.")
        values[key.strip()] = value.strip()
    return check_budget(values, "--set")


def _batch_size(value: int | None) -> int | None:
    from .run.config import check_batch_size  # RunConfig's own check: one message wherever the value comes from

    return check_batch_size(value)


def cmd_list(registry) -> int:
    print("Models:")
    for name, plugin in sorted(registry.models.items()):
        aliases = f" (aliases: {', '.join(plugin.aliases)})" if plugin.aliases else ""
        print(f"  {name:<14} {', '.join(plugin.capabilities):<28} [{registry.package_of('model', name)}]"
              f"{aliases}  {plugin.description}")
    if registry.recipes:
        print("Recipes (train a student model; written like a model spec):")
        for name, recipe in sorted(registry.recipes.items()):
            aliases = f" (aliases: {', '.join(recipe.aliases)})" if recipe.aliases else ""
            print(f"  {name:<14} student {recipe.default_student:<20} [{registry.package_of('recipe', name)}]"
                  f"{aliases}  {recipe.description}")
    print("Tasks:")
    for family, members in sorted(registry.families().items()):
        print(f"  {family} (family): {', '.join(sorted(members))}")
        for name in sorted(members):
            metadata = registry.task(name).metadata
            print(f"    {name:<14} main score {metadata.main_score:<16} [{registry.package_of('task', name)}]"
                  f"  {metadata.description}")
    kinds = sorted({kind for kind, _ in registry.components})
    if kinds:
        print("Components:")
        for kind in kinds:
            print(f"  {kind}: {', '.join(registry.component_names(kind))}")
    failed = [p for p in registry.plugins if p.error]
    if failed:
        print("Plugins that failed to load:")
        for info in failed:
            print(f"  {info.name} ({info.package}, {info.module}): {info.error}")
    return 0


def cmd_describe(registry, name: str) -> int:
    from .capabilities import TRAINABLE
    from .options import describe_options
    from .spec import budget_keys

    if registry.is_recipe(name):
        recipe = registry.recipe(name)
        print(f"recipe {recipe.name}  [{registry.package_of('recipe', recipe.name)}]")
        print(f"  {recipe.description}")
        print(f"  trains on: {', '.join(recipe.training_kinds)}; "
              f"student learns from: {', '.join(recipe.student_kinds)}")
        if recipe.reference:
            print(f"  reference: {recipe.reference}")
        for line in describe_options(recipe.options):
            print(f"  option {line}")
        print(f"  budget keys: {', '.join(budget_keys(recipe))}")
        return 0
    if name in registry.models or name in registry.model_aliases:
        plugin = registry.model(name)
        print(f"model {plugin.name}  [{registry.package_of('model', plugin.name)}]")
        print(f"  {plugin.description}")
        print(f"  capabilities: {', '.join(plugin.capabilities)}")
        print(f"  learns from: {', '.join(plugin.training_kinds) or '(not trainable)'}")
        if plugin.requires_training:
            print(f"  needs training; default source: {plugin.default_train_on}")
        if plugin.reference:
            print(f"  reference: {plugin.reference}")
        for line in describe_options(plugin.options):
            print(f"  option {line}")
        if TRAINABLE in plugin.capabilities:
            print(f"  budget keys: {', '.join(budget_keys(plugin))}")
        return 0
    try:
        members = registry.expand_task(name)
    except UnknownNameError:
        if ":" in name or "." in name:  # a namespaced task (mteb:NAME) says itself what is wrong
            raise
        known = sorted({*registry.models, *registry.model_aliases, *registry.recipes, *registry.recipe_aliases,
                        *registry.tasks, *registry.families(), *registry.task_aliases})
        raise UnknownNameError(f"unknown model or task {name!r}.{close_matches_hint(name, known)} `harness list` "
                               "shows them all.") from None
    for member in members:
        plugin = registry.task(member)
        print(f"task {member}  [{registry.package_of('task', member)}]")
        for key, value in plugin.metadata.as_record().items():
            if key != "name":
                print(f"  {key}: {value}")
        for line in describe_options(plugin.options):
            print(f"  option {line}")
    return 0


def cmd_run(registry, args) -> int:
    from tabulate import tabulate

    from .executors import make_executor
    from .leaderboard import write_leaderboards
    from .run.driver import Run, summary_rows

    config = _run_config(args)
    run = Run(registry, config)
    executor = make_executor(config)  # Ray missing, an unreachable --ray-address: said before the plan loads data
    plan = run.plan()
    outcomes = run.run(executor, plan)
    headers, rows = summary_rows(outcomes)
    print()
    print(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
    counts = {status: sum(o.status == status for o in outcomes) for status in ("ok", "cached", "missing", "failed")}
    print(f"\n{counts['ok']} cells computed, {counts['cached']} from the store, {counts['missing']} missing data"
          + (f", {counts['failed']} failed" if counts["failed"] else "") + f"; records in {config.results_dir}")
    missing: dict[str, int] = {}  # the reason was printed once per task during the run
    for outcome in outcomes:
        if outcome.status == "missing":
            missing[outcome.task.label] = missing.get(outcome.task.label, 0) + 1
    if missing:
        print("missing data (reason above): " + ", ".join(f"{label} ({count} cell{'s' * (count > 1)})"
                                                          for label, count in missing.items()))
    failures: dict[str, list[str]] = {}  # each distinct reason once, with the cells it failed
    for outcome in outcomes:
        if outcome.status == "failed":
            failures.setdefault(outcome.message or "", []).append(
                f"{outcome.spec.label} seed {outcome.seed} {outcome.task.label}")
    for message, cells in failures.items():
        print(f"failed: {', '.join(cells)}: {message}", file=sys.stderr)
    if args.leaderboards is not None:
        from .store import Store

        # The run's own tables show its sample records too (in sections marked as samples); `harness leaderboard`
        # leaves them out unless asked.
        for path in write_leaderboards(Store(config.results_dir), args.leaderboards, ("md", "csv"),
                                       registry.families(), include_samples=True,
                                       family_baselines=registry.family_baselines()):
            print(f"wrote {path}")
    return 1 if counts["failed"] else 0


def cmd_compare(registry, args) -> int:
    import json

    from tabulate import tabulate

    from .compare import CompareError, compare, comparison_rows, results_dir_exists

    if args.resamples < 100:
        raise CompareError(f"--resamples {args.resamples} is too few for a 95% interval; use at least 100.")
    store = results_dir_exists(_results_dir(args.results))
    seeds = _seeds(args.seeds) if args.seeds else [42]
    spec_a, spec_b, comparisons = compare(registry, store, args.model_a, args.model_b, _split(args.tasks), seeds,
                                          args.profile, args.backbone, args.train_on, args.resamples)
    if args.json:
        print(json.dumps({"a": {"label": spec_a.label, "model_key": spec_a.key},
                          "b": {"label": spec_b.label, "model_key": spec_b.key}, "seeds": seeds,
                          "resamples": args.resamples, "method": "paired bootstrap over test examples, seeds "
                          "pooled; two-sided p; Holm across tasks", "tasks": [c.as_dict() for c in comparisons]},
                         indent=2))
        return 0
    headers, rows = comparison_rows(comparisons)
    print(f"A = {spec_a.label} ({spec_a.key}), B = {spec_b.label} ({spec_b.key}); seeds {','.join(map(str, seeds))}; "
          f"paired bootstrap over test examples ({args.resamples} resamples)")
    print(tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True))
    print("* significant after Holm's correction across the tasks (p < 0.05)")
    return 0


def cmd_validate(registry, args) -> int:
    from dataclasses import replace

    from .profiles import format_budget
    from .run.driver import Run

    config = replace(_run_config(args, for_validation=True), device="cpu")
    plan = Run(registry, config).plan()  # loads every task's data and every training source once
    for planned in plan.models:
        budget = f", budget {format_budget(planned.spec.requested_budget)}" if planned.spec.requested_budget else ""
        print(f"model {planned.spec.label}: key {planned.spec.key}, backbone {planned.spec.backbone}, "
              f"train on {planned.spec.train_on or '-'}{budget}")
        if planned.spec.key in plan.training_problems:
            print(f"  training data: {plan.training_problems[planned.spec.key]}", file=sys.stderr)
    for task_spec in plan.tasks:
        if task_spec.key in plan.data_problems:
            print(f"task {task_spec.label}: {plan.data_problems[task_spec.key]}", file=sys.stderr)
            continue
        checksum = plan.data_checksums.get(task_spec.key)
        print(f"task {task_spec.label}: data ok" + (f" (sha256 {checksum[:16]})" if checksum else
                                                   " (the task cannot check its data before evaluating)"))
    problems = len(plan.data_problems) + len(plan.training_problems)
    if problems:
        print(f"error: {problems} data problem(s); `harness run` would store those cells as missing or failed and "
              "run the rest.", file=sys.stderr)
        return 2
    print(f"ok: {plan.cells} cells")
    return 0


def cmd_leaderboard(args) -> int:
    from .leaderboard import FORMATS, write_leaderboards
    from .store import Store

    formats = tuple(_split(args.formats))
    for fmt in formats:
        if fmt not in FORMATS:
            raise invalid_choice("--formats", fmt, FORMATS)
    root, output = _read_store_and_output(args.results, args.output)
    store = Store(root)
    if not store.root.is_dir():
        raise HarnessError(f"no result store at {store.root}; run `harness run` first or pass --results.")
    try:
        from .registry import default_registry

        registry = default_registry()
        family_members = registry.families()
        family_baselines = registry.family_baselines()
    except HarnessError:
        family_members, family_baselines = {}, {}  # ordering and notes only; the tables come from the store
    if args.matrix is not None:
        from .matrix_board import write_matrix_board

        written = write_matrix_board(args.matrix, store, output / "matrices", formats)
    else:
        written = write_leaderboards(store, output, formats, family_members, args.include_samples, family_baselines)
    for path in written:
        print(f"wrote {path}")
    left_out = getattr(store, "sample_records", [])
    if not written:
        print(f"no records in {store.root}" + (" other than those computed on an evaluation sample" if left_out
                                                else ""))
    if left_out:
        print(f"note: {len(left_out)} record(s) computed on an evaluation sample (max_eval_examples) left out; "
              "--include-samples shows them in sections of their own.", file=sys.stderr)
    for path, reason in store.skipped:
        print(f"error: invalid record {path}: {reason}", file=sys.stderr)
    if store.skipped:
        print(f"error: {len(store.skipped)} invalid record(s), shown as `invalid` and never ranked; recompute them "
              "(harness run --overwrite) or restore them from git.", file=sys.stderr)
        return 1
    return 0


def cmd_publish(registry, args) -> int:
    from .publish import Selection, publish
    from .store import Store

    if not (args.models or args.tasks or args.seeds or args.all):
        raise HarnessError("choose what to publish: --models, --tasks and/or --seeds, or --all for every record.")
    selection = Selection(_split(args.models), _split(args.tasks),
                          _seeds(args.seeds) if args.seeds is not None else [])
    source = Store(_results_dir(args.results))
    if not source.root.is_dir():
        raise HarnessError(f"no result store at {source.root}; pass the store to publish from with --results.")
    result = publish(source, Store(args.to), selection, registry=registry, data_dir=_data_dir(args.data_dir),
                     overwrite=args.overwrite, trust_unsigned=args.trust_unsigned, log=print)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def cmd_data(registry, args) -> int:
    """Datasets are ``dataset`` components: objects with ``description`` and ``download(target_dir, progress)``."""
    from .data import default_download_dir

    if args.data_command in (None, "list"):
        names = registry.component_names("dataset")
        target = default_download_dir()
        print(f"data dir: {target}")
        for name in names:
            source = registry.component("dataset", name)
            print(f"  {name:<14} {getattr(source, 'description', '')}")
        if not names:
            print("  (no plugin offers downloadable datasets)")
        return 0
    source = registry.component("dataset", args.name)
    target = args.data_dir or default_download_dir()
    for path in source.download(Path(target), progress=sys.stderr.isatty()):
        print(f"ready: {path}")
    return 0


def cmd_plot(registry, args) -> int:
    """Plots are ``plot`` components: callables ``(results_dir, output_dir) -> list of written paths``."""
    draw = registry.component("plot", args.name)
    root, output = _read_store_and_output(args.results, args.output)
    for path in draw(root, output):
        print(f"wrote {path}")
    return 0


def cmd_export(registry, args) -> int:
    """harness/export.py does the work: the model's own export method, the checkpoint from the store, a model card."""
    from .export import ExportRequest, export_model

    seeds = _seeds(args.seeds) if args.seeds is not None else [42]
    if len(seeds) != 1:
        raise HarnessError(f"export writes one trained model: give one seed (--seeds {seeds[0]}), not {len(seeds)}.")
    specs = _split(args.models)
    if len(specs) != 1:
        raise HarnessError(f"export writes one model: give one spec to --models, not {len(specs)}.")
    if args.profile not in PROFILES:
        raise invalid_choice("--profile", args.profile, PROFILES)
    report = export_model(registry, ExportRequest(
        spec=specs[0], to=args.to, seed=seeds[0], profile=args.profile, backbone=args.backbone,
        train_on=args.train_on, results_dir=_results_dir(args.results), device=args.device,
    ))
    print(f"wrote {report.directory} ({report.format} folder of {report.label}, seed {seeds[0]}; model card "
          f"with {len(report.scores)} stored scores)")
    return 0


def cmd_export_results(registry, args) -> int:
    """Results formats are ``results-format`` components: callables ``(records, output_dir) -> written paths``."""
    from .store import Store

    write = registry.component("results-format", args.format)
    store = Store(_results_dir(args.results))
    if not store.root.is_dir():
        raise HarnessError(f"no result store at {store.root}; run `harness run` first or pass --results.")
    target = Path(args.to).expanduser()
    if target.is_dir() and any(target.iterdir()) and not args.overwrite:  # never replace an earlier export silently
        raise HarnessError(f"{target} already holds files (an earlier export?); choose an empty or new folder, or "
                           "add --overwrite to replace what the export writes.")
    from .leaderboard import sample_size

    records = list(store.records())
    samples = [r for r in records if sample_size(r) is not None]
    if samples and not args.include_samples:
        sizes = ", ".join(str(n) for n in sorted({sample_size(r) for r in samples}))
        why = (f"{len(samples)} record(s) of {store.root} were computed on a sample of the evaluation data "
               f"(max_eval_examples={sizes}), so their scores are not the benchmark's")
        records = [r for r in records if sample_size(r) is None]
        if not records:
            raise HarnessError(f"{why}; nothing else to export. Run with --profile quick (or paper), or pass "
                               "--include-samples to export them marked as samples.")
        print(f"left out: {why} (--include-samples exports them, marked as samples).", file=sys.stderr)
    written = write(records, args.to)
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} files from {len(records)} records of {store.root}")
    return 0


def os_error_line(exc: OSError) -> str:
    """One line for an operating-system error that reached the command: the file, what went wrong, what to do."""
    where = f"{exc.filename}: " if exc.filename else ""
    what = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        advice = "free some space and run the same command again (finished cells are stored)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        advice = "make it writable (or choose another folder) and run again"
    elif exc.errno in (errno.EISDIR, errno.ENOTDIR):
        advice = "a folder stands where a file belongs (or the reverse); move it away and run again"
    else:
        advice = "fix that and run again"
    return f"{where}{what}; {advice}."


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(1 if args.verbose else -1 if args.quiet else 0)
    if args.version:
        from . import PLUGIN_API_VERSION, __version__

        print(f"harness {__version__} (plugin API {PLUGIN_API_VERSION})")
        return 0
    if args.command is None:
        parser.print_help()
        return 0
    try:
        if args.command == "leaderboard":
            return cmd_leaderboard(args)
        from .registry import default_registry

        registry = default_registry()
        if args.command == "list":
            return cmd_list(registry)
        if args.command == "describe":
            return cmd_describe(registry, args.name)
        if args.command == "run":
            return cmd_run(registry, args)
        if args.command == "compare":
            return cmd_compare(registry, args)
        if args.command == "rescore":
            if args.overwrite or args.store_only:
                raise HarnessError("rescore recomputes evaluations from stored checkpoints; --overwrite (retrain) "
                                   "and --store-only do not apply: use `harness run` for those.")
            args.rescore = True
            return cmd_run(registry, args)
        if args.command == "validate":
            return cmd_validate(registry, args)
        if args.command == "data":
            return cmd_data(registry, args)
        if args.command == "plot":
            return cmd_plot(registry, args)
        if args.command == "publish":
            return cmd_publish(registry, args)
        if args.command == "export":
            return cmd_export(registry, args)
        if args.command == "export-results":
            return cmd_export_results(registry, args)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the environment, not the input: a full disk, a folder that cannot be written
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: finished cells are stored; run the same command again to resume.", file=sys.stderr)
        return 130
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
