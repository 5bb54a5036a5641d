"""The values given on the command line, each read and checked in exactly one function here (the commands call
these; nothing else in the CLI checks them): seeds, profile, batch size, --set budget, data dir, the executor and its
options, leaderboard formats, bootstrap resamples, and the run configuration built from them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import HarnessError, invalid_choice
from ..profiles import PROFILES
from ..spec_grammar import split_spec_list
from .common import results_dir

DEFAULT_SEED = 42


def seeds(text: str | None, default: list[int] | None = None) -> list[int]:
    """--seeds ``42,43`` -> checked seeds; ``default`` (else [42]) when it is not given (commands that build no
    RunConfig; `run`, `rescore` and `validate` leave the range check to RunConfig)."""
    from ..matrix import check_seeds

    if text is None:
        return default if default is not None else [DEFAULT_SEED]
    return check_seeds(parsed_seeds(text), "--seeds")


def parsed_seeds(text: str | None, default: list[int] | None = None) -> list[int]:
    """--seeds ``42,43`` read as integers (their range is RunConfig's check, harness.matrix.check_seeds)."""
    if text is None:
        return default if default is not None else [DEFAULT_SEED]
    try:
        parsed = [int(s) for s in split_spec_list(text)]
    except ValueError:
        raise HarnessError(f"--seeds takes comma-separated integers such as 42,43,44; got {text!r}.") from None
    if not parsed:
        raise HarnessError("--seeds needs at least one integer, e.g. --seeds 42.")
    return parsed


def profile_name(value: str) -> str:
    """--profile: one of the budget profiles."""
    if value not in PROFILES:
        raise invalid_choice("--profile", value, PROFILES)
    return value


def budget_set(items: list[str]) -> dict:
    """``--set epochs=5 --set learning_rate=3e-5`` -> a checked budget mapping."""
    from ..profiles import check_budget

    values: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise HarnessError(f"--set {item!r}: write --set KEY=VALUE, e.g. --set epochs=5.")
        if key.strip() in values:  # the last value would win silently
            raise HarnessError(
                f"--set {key.strip()} is given twice ({values[key.strip()]!r} and {value.strip()!r}); give it once."
            )
        values[key.strip()] = value.strip()
    return check_budget(values, "--set")


def data_dir(value: Path | None, matrix_value: Path | None = None) -> tuple[Path | None, str]:
    """--data-dir, else the matrix's data_dir, else HARNESS_DATA_DIR, with where it came from: RunConfig refuses one
    that does not exist, naming that source (never a silent fall-back to the bundled data while the record names the
    missing folder)."""
    if value is not None:
        return Path(value), "--data-dir"
    if matrix_value is not None:
        return Path(matrix_value), "data_dir of the matrix"
    environment = os.environ.get("HARNESS_DATA_DIR")
    return (Path(environment), "HARNESS_DATA_DIR") if environment else (None, "--data-dir")


def log_to(value: str | None, matrix_value: object = None) -> tuple[str, ...]:
    """--log-to, else the matrix's log_to, else HARNESS_LOG_TO (harness.trackers), checked in one line naming
    where the value came from."""
    from ..trackers import ENVIRONMENT, parse_log_to

    if value is not None:
        return parse_log_to(value, "--log-to")
    if matrix_value is not None:
        return parse_log_to(matrix_value, "log_to of the matrix")  # type: ignore[arg-type]
    return parse_log_to(os.environ.get(ENVIRONMENT), ENVIRONMENT)


def checked_data_dir(value: Path | None) -> Path | None:
    """The data dir of a command that builds no RunConfig (publish), checked here."""
    from ..data import check_data_dir

    return check_data_dir(*data_dir(value))


def executor(args, registry=None) -> tuple[str, dict]:
    """--executor and the values of its own options given on the command line, by keyword (harness.make_executor
    takes both); an option of another executor is a mistake, said in one line. ``registry``: where the executors
    are registered (default: the executors' plugins, harness.registry.executor_registry)."""
    from ..executors import executor_names
    from ..executors.builtin import add_default_executor
    from ..registry import executor_registry

    registry = add_default_executor(registry if registry is not None else executor_registry())
    names = executor_names(registry)
    chosen = getattr(args, "executor", "local")
    if chosen not in names:
        raise invalid_choice("--executor", chosen, names)
    given: dict[str, dict] = {}  # executor -> {option: value} of the options given
    for name in names:
        for option in registry.component("executor", name).options:
            value = getattr(args, option.dest, None)
            if value is not None:
                given.setdefault(name, {})[option] = tuple(value) if option.repeatable else value
    for name, options in given.items():
        if name != chosen:
            raise HarnessError(f"{', '.join(option.flag for option in options)} only applies with --executor {name}.")
    return chosen, {option.keyword: value for option, value in given.get(chosen, {}).items()}


def formats(text: str, known: Sequence[str] | None = None) -> tuple[str, ...]:
    """--formats ``md,csv``: leaderboard formats, each one of ``known`` (the registered ``leaderboard-format``
    components; default the built-in ones)."""
    if known is None:
        from ..leaderboard import FORMATS as known

    chosen = tuple(split_spec_list(text))
    for fmt in chosen:
        if fmt not in known:
            raise invalid_choice("--formats", fmt, tuple(known))
    return chosen


def resamples(value: int) -> int:
    """--resamples: enough bootstrap resamples for a 95% interval."""
    from ..compare import CompareError

    if value < 100:
        raise CompareError(f"--resamples {value} is too few for a 95% interval; use at least 100.")
    return value


def run_config(args):
    """The RunConfig of `run`, `rescore` and `validate`: the flags over the matrix file's values over defaults."""
    from ..matrix import ModelEntry, load_matrix
    from ..run.config import RunConfig

    base: dict = {}
    if args.matrix is not None:
        base = load_matrix(args.matrix)
    chosen_data_dir, data_dir_source = data_dir(args.data_dir, base.get("data_dir"))
    models = [ModelEntry(m) for m in split_spec_list(args.models)] or base.get("models", [])
    tasks = split_spec_list(args.tasks) or base.get("tasks", [])
    profile = profile_name(args.profile or base.get("profile", "quick"))
    return RunConfig(
        models=models,
        tasks=tasks,
        seeds=parsed_seeds(getattr(args, "seeds", None), base.get("seeds")),
        profile=profile,
        backbone=args.backbone or base.get("backbone"),
        train_on=args.train_on or base.get("train_on"),
        device=getattr(args, "device", "auto"),
        results_dir=results_dir(getattr(args, "results", None)),
        data_dir=chosen_data_dir,
        data_dir_source=data_dir_source,
        overwrite=getattr(args, "overwrite", False),
        rescore=getattr(args, "rescore", False),
        progress=not getattr(args, "no_progress", False),  # bars on a terminal, else lines at an interval
        batch_size=getattr(args, "batch_size", None),
        runtime=getattr(args, "runtime", None) or "torch",
        log_to=log_to(getattr(args, "log_to", None), base.get("log_to")),
        embedding_cache=False
        if getattr(args, "no_embedding_cache", False)
        else base.get("embedding_cache", embedding_cache_default()),
        store_only=getattr(args, "store_only", False),
        budget=budget_set(getattr(args, "budget_set", None) or []),
    )


def embedding_cache_default() -> bool:
    """On, unless HARNESS_EMBEDDING_CACHE turns it off (harness.embedding_cache; imported here only, it loads numpy)."""
    from ..embedding_cache import enabled_by_default

    return enabled_by_default()
