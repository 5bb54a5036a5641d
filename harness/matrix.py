"""Matrix files: YAML that names models, tasks, seeds and budgets, e.g.

    description: thesis table 6.8, STS-B -> BWS transfer
    profile: quick
    seeds: [42, 43]
    tasks: [bws-cross-topic, senteval]
    models:
      - be                                # evaluated as is
      - {model: be, train_on: stsb}
      - {model: "be:teacher=cbe,sampler=kde-iterative", train_on: bws-cross-topic}
"""
from __future__ import annotations

from pathlib import Path

from .errors import DataFileError, data_error

ALLOWED_KEYS = {"description", "profile", "seeds", "tasks", "models", "backbone", "train_on", "data_dir"}
MODEL_KEYS = {"model", "train_on", "backbone"}


def load_matrix(path: Path) -> dict:
    import yaml

    from .runner import ModelEntry

    path = Path(path)
    if not path.is_file():
        raise DataFileError(f"{path}: matrix file not found.")
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise data_error(path, line, f"not valid YAML ({getattr(exc, 'problem', exc)}).") from None
    if not isinstance(document, dict):
        raise data_error(path, None, "a matrix file is a YAML mapping with keys models, tasks, seeds, ...")
    unknown = set(document) - ALLOWED_KEYS
    if unknown:
        raise data_error(path, None, f"unknown key(s) {sorted(unknown)}; allowed keys: {sorted(ALLOWED_KEYS)}.")
    models = []
    for position, item in enumerate(document.get("models") or [], start=1):
        if isinstance(item, str):
            models.append(ModelEntry(item))
        elif isinstance(item, dict) and "model" in item and set(item) <= MODEL_KEYS:
            models.append(ModelEntry(str(item["model"]), item.get("train_on"), item.get("backbone")))
        else:
            raise data_error(
                path, None, f"models entry {position} ({item!r}) must be a spec string or a mapping with keys "
                f"{sorted(MODEL_KEYS)} ('model' required)."
            )
    tasks = document.get("tasks") or []
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise data_error(path, None, "tasks must be a list of task or family names.")
    seeds = document.get("seeds", [42])
    if not isinstance(seeds, list) or not all(isinstance(s, int) for s in seeds):
        raise data_error(path, None, "seeds must be a list of integers, e.g. [42, 43, 44].")
    result = {"models": models, "tasks": tasks, "seeds": seeds}
    for key in ("profile", "backbone", "train_on", "data_dir"):
        if document.get(key) is not None:
            result[key] = document[key]
    if "data_dir" in result:
        result["data_dir"] = Path(result["data_dir"])
    return result
