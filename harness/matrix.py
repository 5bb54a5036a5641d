"""Matrix files: YAML that names models, tasks, seeds and budgets, e.g.

    description: thesis table 6.8, STS-B -> BWS transfer
    profile: quick
    seeds: [42, 43]
    tasks: [bws-cross-topic, senteval]
    models:
      - be                                # evaluated as is
      - {model: be, train_on: stsb}
      - {model: "be:teacher=cbe,sampler=kde-iterative", train_on: bws-cross-topic}
      - {model: ce, train_on: stsb, epochs: 3, learning_rate: 3e-5}   # this entry's own training budget

Training budgets (harness.profiles.BUDGET_KEYS: epochs, max_steps, batch_size, learning_rate, max_train_examples)
can be set per entry (keys of the entry) or for every entry (``budget:`` mapping); an entry's own values win, and
``harness run --set key=value`` is the matrix-wide form on the command line. A set budget enters the spec hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .errors import DataFileError, HarnessError, close_matches_hint, data_error
from .profiles import BUDGET_KEYS, check_budget


@dataclass
class ModelEntry:
    """One model of a matrix: its spec text and, optionally, its own training source and backbone."""

    spec: str
    train_on: str | None = None
    backbone: str | None = None
    budget: dict = field(default_factory=dict)  # training budget overrides (harness.profiles.BUDGET_KEYS)
    # The keys of ``budget`` the entry set itself (refused when its spec cannot honour them); the others came from a
    # matrix-wide ``budget:`` and, like --set, need only one trained spec of the run that honours them. None: all.
    own_budget_keys: tuple[str, ...] | None = None


# ``paper`` (the source table's numbers), ``claims`` (what the paper claims, judged on the records:
# harness.leaderboard.claims) and an entry's ``name`` are read by ``harness leaderboard`` only.
ALLOWED_KEYS = {
    "description",
    "profile",
    "seeds",
    "tasks",
    "models",
    "backbone",
    "train_on",
    "data_dir",
    "budget",
    "embedding_cache",
    "paper",
    "claims",
    "log_to",  # experiment trackers (harness.trackers), as --log-to: text or a list
}
MODEL_KEYS = {"model", "name", "train_on", "backbone", *BUDGET_KEYS}


def check_seeds(seeds: object, where: str = "--seeds") -> list[int]:
    """A non-empty list of integer seeds in 0..2**32-1 (numpy's range); an InvalidOptionError saying what is wrong
    otherwise. Booleans are not seeds."""
    from .errors import InvalidOptionError
    from .record import MAX_SEED

    example = "e.g. 42 or 42,43,44" if where == "--seeds" else "e.g. [42, 43, 44]"
    if not isinstance(seeds, (list, tuple)):
        raise InvalidOptionError(f"{where} must be a list of integers, {example}; got {seeds!r}.")
    if not seeds:
        raise InvalidOptionError(f"{where} is empty: nothing would run. Give at least one seed, {example}.")
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InvalidOptionError(f"{where}: seed {seed!r} is not an integer; {example}.")
        if not 0 <= seed <= MAX_SEED:
            raise InvalidOptionError(
                f"{where}: seed {seed} is outside 0..{MAX_SEED} (the range numpy and torch accept)."
            )
    return list(seeds)


# Examples in messages: the core names no particular model or task.
TASK_EXAMPLE = "NAME (a task of `harness list`)"
MODEL_EXAMPLE = "NAME (a model of `harness list`)"


def _optional_text(path: Path, document: dict, key: str, example: str) -> str | None:
    value = document.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise data_error(path, None, f"{key} must be a text such as {example}; got {value!r}.")
    return value


def numbered_mistakes(mistakes: list[str]) -> str:
    """``3 mistakes: (1) ... (2) ... (3) ...``: several messages as one line."""
    texts = [text.strip() + ("" if text.strip().endswith((".", "?", "!")) else ".") for text in mistakes]
    return f"{len(texts)} mistakes: " + " ".join(f"({number}) {text}" for number, text in enumerate(texts, 1))


def load_matrix(path: Path) -> dict:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"{path}: matrix file not found.")
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise data_error(path, None, "not UTF-8 text; a matrix file is YAML.") from None
    except RecursionError:  # PyYAML builds nested collections recursively
        raise data_error(
            path,
            None,
            "nested too deeply to be a matrix (lists or mappings inside each other hundreds of levels deep).",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise data_error(path, line, f"not valid YAML ({getattr(exc, 'problem', exc)}).") from None
    if not isinstance(document, dict):
        raise data_error(path, None, "a matrix file is a YAML mapping with keys models, tasks, seeds, ...")
    unknown = set(document) - ALLOWED_KEYS
    if unknown:
        hints = "".join(close_matches_hint(str(key), ALLOWED_KEYS) for key in sorted(unknown, key=str))
        raise data_error(
            path, None, f"unknown key(s) {sorted(unknown, key=str)};{hints} allowed keys: {sorted(ALLOWED_KEYS)}."
        )
    raw_models = document.get("models") or []
    if not isinstance(raw_models, list):
        raise data_error(path, None, f"models must be a list, e.g. models: [{MODEL_EXAMPLE}]; got {raw_models!r}.")
    shared_budget = document.get("budget") or {}
    if not isinstance(shared_budget, dict):
        raise data_error(path, None, f"budget must be a mapping such as budget: {{epochs: 5}}; got {shared_budget!r}.")
    try:
        shared_budget = check_budget(shared_budget, "budget")
    except HarnessError as exc:
        raise data_error(path, None, str(exc)) from None
    models = []
    mistakes: list[str] = []  # every mistake of the entries, tasks and seeds is said at once
    for position, item in enumerate(raw_models, start=1):
        try:
            models.append(_model_entry(path, position, item, shared_budget))
        except DataFileError as exc:
            mistakes.append(str(exc).removeprefix(f"{path}: "))
    tasks = document.get("tasks") or []
    if not isinstance(tasks, list) or not all(isinstance(t, str) and t.strip() for t in tasks):
        mistakes.append(f"tasks must be a list of task or family names, e.g. tasks: [{TASK_EXAMPLE}]; got {tasks!r}.")
    seeds = document.get("seeds", [42])
    try:
        seeds = check_seeds(seeds, "seeds")
    except HarnessError as exc:
        mistakes.append(str(exc))
    if len(mistakes) == 1:
        raise data_error(path, None, mistakes[0])
    if mistakes:
        raise data_error(path, None, numbered_mistakes(mistakes))
    result = {"models": models, "tasks": tasks, "seeds": seeds}
    for key, example in (
        ("profile", "quick"),
        ("backbone", "bert-base-uncased"),
        ("train_on", TASK_EXAMPLE),
        ("data_dir", "~/data"),
    ):
        value = _optional_text(path, document, key, example)
        if value is not None:
            result[key] = value
    if "data_dir" in result:
        result["data_dir"] = Path(result["data_dir"]).expanduser()
    log_to = document.get("log_to")
    if log_to is not None:
        if not (isinstance(log_to, str) or (isinstance(log_to, list) and all(isinstance(n, str) for n in log_to))):
            raise data_error(path, None, f"log_to must be tracker names such as log_to: [tensorboard]; got {log_to!r}.")
        result["log_to"] = log_to
    if "embedding_cache" in document:  # harness.embedding_cache: false turns it off for the matrix's runs
        if not isinstance(document["embedding_cache"], bool):
            raise data_error(path, None, f"embedding_cache must be true or false, got {document['embedding_cache']!r}.")
        result["embedding_cache"] = document["embedding_cache"]
    return result


def _model_entry(path: Path, position: int, item: object, shared_budget: dict) -> ModelEntry:
    """Models entry ``position`` of a matrix file (a spec text or a mapping), or a DataFileError saying what is
    wrong."""
    if isinstance(item, str) and item.strip():
        return ModelEntry(item, budget=dict(shared_budget), own_budget_keys=())
    if isinstance(item, dict) and isinstance(item.get("model"), str) and set(item) - MODEL_KEYS:
        typos = "; ".join(
            f"{key!r}.{close_matches_hint(str(key), MODEL_KEYS)}" for key in sorted(set(item) - MODEL_KEYS, key=str)
        )
        raise data_error(
            path,
            None,
            f"models entry {position} ({item['model']}): unknown key {typos} Keys: {', '.join(sorted(MODEL_KEYS))}.",
        )
    if isinstance(item, dict) and isinstance(item.get("model"), str):
        for key in ("train_on", "backbone"):
            if item.get(key) is not None and not isinstance(item[key], str):
                raise data_error(
                    path,
                    None,
                    f"models entry {position}: {key} must be a text such as "
                    f"{TASK_EXAMPLE if key == 'train_on' else 'bert-base-uncased'}; got "
                    f"{item[key]!r}.",
                )
        try:
            own_budget = check_budget({k: v for k, v in item.items() if k in BUDGET_KEYS}, f"models entry {position}")
        except HarnessError as exc:
            raise data_error(path, None, str(exc)) from None
        return ModelEntry(
            item["model"],
            item.get("train_on"),
            item.get("backbone"),
            {**shared_budget, **own_budget},
            own_budget_keys=tuple(own_budget),
        )
    raise data_error(
        path,
        None,
        f"models entry {position} ({item!r}) must be a spec string or a mapping with keys "
        f"{sorted(MODEL_KEYS)} ('model' required, a text; the budget keys {', '.join(BUDGET_KEYS)} set this "
        "entry's training budget).",
    )
