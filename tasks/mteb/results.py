"""``harness export-results --format mteb``: stored harness results in MTEB's results layout.

Reference: mteb 2's ``ResultCache`` layout and schema (``mteb.TaskResult``); files are written with mteb's own
``TaskResult.from_task_results(...).to_disk`` and ``ModelMeta.to_dict``, so ``mteb.ResultCache(DIR).load_results()``
reads them (tests/test_mteb.py does). The layout, the mapping of harness tasks to mteb tasks (:data:`COUNTERPARTS`)
and what each mapping's fidelity note means: docs/tasks/mteb.md, section "MTEB results export".
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import CellStatus, StoreError, atomic_write_file, atomic_write_text, path_inside

logger = logging.getLogger(__name__)

REVISION_PREFIX = "seed-"
MANIFEST = "harness_export.json"


@dataclass(frozen=True)
class Counterpart:
    """How one harness task's scores become one mteb task's scores."""

    harness_task: str
    mteb_task: str
    scores: dict[str, str]  # mteb score key -> harness score key (x100)
    main: str  # the mteb key written as main_score
    fidelity: str
    exact_when: dict[str, Any] = field(default_factory=dict)  # task options under which the mapping is exact
    required: dict[str, Any] = field(default_factory=dict)  # task options without which there is no counterpart


_STS_SCORES = {"cosine_spearman": "spearman_all", "cosine_pearson": "pearson_all"}
_STS_FIDELITY = "same test pairs, every pair pooled (mteb); exact with text=raw, SentEval's tokenised text otherwise"
_RERANK_SCORES = {
    "map_at_1000": "map",
    "mrr_at_1000": "mrr",
    "mrr_at_10": "mrr@10",
    "precision_at_1": "p@1",
    "precision_at_5": "p@5",
}

COUNTERPARTS: tuple[Counterpart, ...] = (
    *(
        Counterpart(f"sts{year}", f"STS{year}", _STS_SCORES, "cosine_spearman", _STS_FIDELITY, {"text": "raw"})
        for year in (12, 13, 14, 15, 16)
    ),
    Counterpart("stsb", "STSBenchmark", _STS_SCORES, "cosine_spearman", _STS_FIDELITY, {"text": "raw"}),
    Counterpart(
        "sickr", "SICK-R", _STS_SCORES, "cosine_spearman", "all 9927 pairs, as mteb", {"split": "all"}, {"split": "all"}
    ),
    Counterpart(
        "twitterpara",
        "TwitterSemEval2015",
        {"cosine_ap": "ap.pit"},
        "cosine_ap",
        "approximate: useb's PIT-2015 test cut; mteb scores a larger set, main score max_ap over four "
        "similarities (cosine only here)",
    ),
    Counterpart(
        "twitterpara",
        "TwitterURLCorpus",
        {"cosine_ap": "ap.twitterurl"},
        "cosine_ap",
        "approximate: useb's Twitter URL test cut; mteb scores the whole corpus, main score max_ap over "
        "four similarities (cosine only here)",
    ),
    Counterpart(
        "askubuntu",
        "AskUbuntuDupQuestions",
        _RERANK_SCORES,
        "map_at_1000",
        "approximate: same 20-candidate reranking, useb's split instead of mteb's 361 test queries",
    ),
    Counterpart(
        "scidocs",
        "SciDocsRR",
        {"map_at_1000": "map", "ndcg_at_1000": "ndcg"},
        "map_at_1000",
        "approximate: useb's SciDocs; the harness averages cite/cocite/coread/coview, mteb pools them",
    ),
)


def counterparts_of(record: dict) -> tuple[list[Counterpart], str | None]:
    """The counterparts of a record's task, or ([], why there is none)."""
    task = record["task"]
    matches = [c for c in COUNTERPARTS if c.harness_task == task["name"]]
    if not matches:
        return [], f"task {task['label']!r} has no MTEB counterpart"
    options = task.get("options") or {}
    usable = [c for c in matches if all(options.get(k) == v for k, v in c.required.items())]
    if not usable:
        needed = ",".join(f"{k}={v}" for k, v in matches[0].required.items())
        return [], (
            f"task {task['label']!r} has no MTEB counterpart with these options ({matches[0].mteb_task} "
            f"needs {task['name']}:{needed})"
        )
    return usable, None


def is_exact(counterpart: Counterpart, record: dict) -> bool:
    options = record["task"].get("options") or {}
    return bool(counterpart.exact_when) and all(options.get(k) == v for k, v in counterpart.exact_when.items())


def readable_names(records: list[dict]) -> dict[str, str]:
    """Model key -> a readable model name for mteb (``cbe-trained-on-stsb``, ``be_pooling-cls``): the spec's label
    and training source, with the profile and then the key's hash added where two exported specs would share it."""

    def text(record: dict, *extra: str) -> str:
        model = record["model"]
        parts = [model["label"], *([f"trained-on-{model['train_on']}"] if model.get("train_on") else []), *extra]
        return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts).replace("=", "-")).strip("_")

    by_key = {record["model_key"]: record for record in records}
    names = {key: text(record) for key, record in by_key.items()}

    def shared() -> list[str]:  # keys whose name another exported spec has too
        counts = Counter(names.values())
        return [key for key, name in names.items() if counts[name] > 1]

    for key in shared():
        names[key] = text(by_key[key], f"profile-{by_key[key]['model']['profile']}")
    for key in shared():
        names[key] = text(by_key[key], f"profile-{by_key[key]['model']['profile']}", key.rsplit("-", 1)[-1])
    return names


def _model_meta(record: dict, name: str) -> Any:
    from mteb.models.model_meta import ModelMeta, ScoringFunction

    model = record["model"]
    # mteb's tables keep one revision per model name (to_dataframe joins revisions), and every seed is another
    # trained model: the seed goes into the name, the spec hash (what identifies the spec's version) is the revision.
    return ModelMeta.create_empty(
        overwrites={
            "name": f"harness/{name}-{REVISION_PREFIX}{record['seed']}",
            "revision": record["model"].get("hash", record["model_key"].rsplit("-", 1)[-1])[:12],
            "framework": ["PyTorch"],
            "modalities": ["text"],
            "similarity_fn_name": ScoringFunction.COSINE,
            "reference": f"harness spec {model['label']} (backbone {model['backbone']}, trained on "
            f"{model.get('train_on') or 'nothing'}, profile {model['profile']})",
        }
    )


def _task_result(record: dict, counterpart: Counterpart | None) -> Any:
    import mteb
    from mteb import TaskResult

    if counterpart is None:  # an mteb:* record: mteb's own result
        return TaskResult.from_dict(record["details"]["mteb_task_result"])
    task = mteb.get_task(counterpart.mteb_task)
    scores = {
        key: float(record["scores"][source]) / 100.0
        for key, source in counterpart.scores.items()
        if source in record["scores"]
    }
    if counterpart.main not in scores:
        raise KeyError(counterpart.scores[counterpart.main])
    scores["main_score"] = scores[counterpart.main]
    split = task.metadata.eval_splits[0]
    subset = task.hf_subsets[0] if task.hf_subsets else "default"
    seconds = float((record.get("timings") or {}).get("eval_seconds") or 0.0)
    return TaskResult.from_task_results(task, {split: {subset: scores}}, evaluation_time=seconds)


def _preference(record: dict, exact: bool) -> tuple[bool, bool]:
    return exact, not record.get("runtime") or record.get("runtime") == "torch"


def write_mteb_results(records: list[dict], output_dir: Path) -> list[Path]:
    """Write every record that has an MTEB counterpart under ``output_dir/results/``; returns the written files.
    Each skipped record is logged with one line saying why."""
    output_dir = Path(output_dir)
    written: list[Path] = []
    manifest: list[dict] = []
    chosen: dict[tuple[str, int, str], tuple[dict, Counterpart | None, bool]] = {}
    for record in records:
        path = record.get("_path", record["model_key"])
        if record.get("status") != CellStatus.OK:
            logger.warning("skipped %s: status %s, no scores to export", path, record.get("status"))
            continue
        mteb_result = (record.get("details") or {}).get("mteb_task_result")
        if mteb_result is not None:
            candidates: list[tuple[str, Counterpart | None, bool]] = [(mteb_result["task_name"], None, True)]
        else:
            found, why = counterparts_of(record)
            if why:
                logger.warning("skipped %s: %s", path, why)
                continue
            candidates = [(c.mteb_task, c, is_exact(c, record)) for c in found]
        for mteb_task, counterpart, exact in candidates:
            key = (record["model_key"], record["seed"], mteb_task)
            # an exact counterpart first, then torch's record of the cell (each runtime keeps its own)
            if key in chosen and _preference(*chosen[key][::2]) >= _preference(record, exact):
                logger.warning(
                    "skipped %s for %s: another record of the same model and seed already maps there "
                    "(an exact one is preferred, then one of --runtime torch)",
                    path,
                    mteb_task,
                )
                continue
            chosen[key] = (record, counterpart, exact)
    names = readable_names([record for record, _, _ in chosen.values()])
    for (_, seed, mteb_task), (record, counterpart, exact) in sorted(chosen.items(), key=lambda item: item[0]):
        try:
            result = _task_result(record, counterpart)
        except KeyError as missing:
            logger.warning("skipped %s: it has no %s score to map to %s", record.get("_path"), missing, mteb_task)
            continue
        sample = (record.get("profile") or {}).get("max_eval_examples")  # the smoke profile's evaluation sample
        meta = _model_meta(record, names[record["model_key"]])
        try:  # names come from the records: never a path outside output_dir (harness.store_files.path_inside)
            folder = path_inside(output_dir, "results", meta.model_name_as_path(), meta.revision)
            path = path_inside(folder, f"{result.task_name}.json")
        except StoreError as refused:
            logger.warning("skipped %s: %s", record.get("_path"), refused)
            continue
        atomic_write_file(path, result.to_disk)
        atomic_write_text(folder / "model_meta.json", json.dumps(meta.to_dict(), default=str, indent=4) + "\n")
        written.append(path)
        manifest.append(
            {
                "file": str(path.relative_to(output_dir)),
                "record": record.get("_path"),
                "harness_task": record["task"]["label"],
                "mteb_task": mteb_task,
                "model": record["model"]["label"],
                "seed": seed,
                "exact": exact and sample is None,
                "sample": sample,
                "fidelity": (
                    f"a sample of {sample} evaluation examples (harness --profile {record['model']['profile']}), "
                    "not the benchmark's test set"
                    if sample is not None
                    else "mteb's own evaluation"
                    if counterpart is None
                    else counterpart.fidelity
                ),
            }
        )
    if written:
        atomic_write_text(output_dir / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return written


def _main_metric(scores: dict) -> str | None:
    """The name of the score that ``main_score`` repeats (mteb stores the value, not the name)."""
    main = scores.get("main_score")
    return next((key for key, value in scores.items() if key != "main_score" and value == main), None)


def read_mteb_results(folder: Path) -> tuple[list[dict], list[tuple[Path, str]]]:
    """The rows of an MTEB results folder (``results/<model>/<revision>/<Task>.json``, as :func:`write_mteb_results`
    writes it, or mteb itself): one per result file, scores x100 as the harness reports them, the seed and harness
    task from the export's manifest when there is one. Files that cannot be read are returned with the reason."""
    folder = Path(folder)
    manifest: dict[str, dict] = {}
    problems: list[tuple[Path, str]] = []
    manifest_path = folder / MANIFEST
    if manifest_path.is_file():
        try:
            manifest = {entry["file"]: entry for entry in json.loads(manifest_path.read_text(encoding="utf-8"))}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append((manifest_path, f"the export's manifest cannot be read ({exc}); rows lack seeds"))
    rows: list[dict] = []
    for path in sorted((folder / "results").glob("*/*/*.json")):
        if path.name == "model_meta.json":
            continue
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
            splits = result["scores"]
            split, entries = next(iter(splits.items()))
            scores = entries[0]
            main = float(scores["main_score"])
        except (OSError, ValueError, KeyError, TypeError, IndexError, StopIteration) as exc:
            problems.append((path, f"not an MTEB task result ({type(exc).__name__}: {exc})"))
            continue
        model_name = path.parent.parent.name
        meta_path = path.parent / "model_meta.json"
        try:
            model_name = json.loads(meta_path.read_text(encoding="utf-8")).get("name") or model_name
        except (OSError, ValueError, AttributeError):
            pass  # the folder's name is the model's name with "/" replaced
        entry = manifest.get(str(path.relative_to(folder)), {})
        short = model_name.removeprefix("harness/")
        seed = entry.get("seed")
        if seed is not None:
            short = short.removesuffix(f"-{REVISION_PREFIX}{seed}")
        rows.append(
            {
                "source": "mteb",
                "path": str(path),
                "status": "ok",
                "family": "mteb",
                "task": result.get("task_name", path.stem),
                "task_name": result.get("task_name", path.stem),
                "task_key": result.get("task_name", path.stem),
                "task_version": result.get("dataset_revision"),
                "metric": _main_metric(scores),
                "score": main * 100.0,
                "model": entry.get("model", short),
                "spec": short,
                "model_name": model_name,
                "model_key": short,
                "model_hash": path.parent.name,
                "seed": seed,
                "harness_version": None,
                "plugin": "mteb",
                "plugin_version": result.get("mteb_version"),
                "eval_seconds": result.get("evaluation_time"),
                "message": entry.get("fidelity"),
                "sample": entry.get("sample"),
                "exported_from": entry.get("record"),
                "scores": json.dumps({key: value * 100.0 for key, value in scores.items() if isinstance(value, float)}),
            }
        )
    return rows, problems
