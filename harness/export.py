"""``harness export``: a model of the harness out as a sentence-transformers folder, with a model card.

The core knows no model: a model that can leave the harness has a method (a capability-like protocol, checked with
``isinstance`` against the runtime-checkable Protocols below):

- ``export_sentence_transformers(directory)``: writes a folder ``SentenceTransformer(directory)`` loads and whose
  ``encode`` equals the model's own ``encode``;
- ``export_cross_encoder(directory)``: writes a folder ``CrossEncoder(directory)`` loads and whose ``predict``
  equals the model's own ``score``.

The building blocks those methods use, :func:`harness.nn.st_export.write_sentence_transformer` and
``write_cross_encoder`` (public, in ``harness.nn``), put a Hugging Face transformer and its tokenizer under
sentence-transformers' own modules and let sentence-transformers write the folder.

:func:`export_model` names the model as ``harness run`` does (spec, ``--train-on``, ``--backbone``, ``--profile``,
one seed, ``--results``), loads its checkpoint from the store (it never trains: a missing checkpoint is an error
saying which ``harness run`` builds it), exports it into a temporary folder that is renamed into place when complete,
and writes ``README.md``: a model card with the spec, training source, profile, seed and every stored score.

Deviations: see :mod:`harness.nn.st_export` (the cross-encoder folder needs sentence-transformers 6).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import IncompatibleError
from .nn.st_export import ExportError
from .status import CellStatus

logger = logging.getLogger(__name__)

SENTENCE_TRANSFORMERS = "sentence-transformers"
CROSS_ENCODER = "sentence-transformers CrossEncoder"


@runtime_checkable
class SentenceTransformersExportable(Protocol):
    def export_sentence_transformers(self, directory: Path) -> None:
        """Write a folder that ``sentence_transformers.SentenceTransformer(directory)`` loads."""


@runtime_checkable
class CrossEncoderExportable(Protocol):
    def export_cross_encoder(self, directory: Path) -> None:
        """Write a folder that ``sentence_transformers.CrossEncoder(directory)`` loads."""


# -- the command ---------------------------------------------------------------------------------------------------
@dataclass
class ExportRequest:
    """What ``harness export`` was asked for: the model named as ``harness run`` names it, and where to write."""

    spec: str
    to: Path
    seed: int = 42
    profile: str = "quick"
    backbone: str | None = None
    train_on: str | None = None
    results_dir: Path = Path("results")
    device: str = "cpu"


@dataclass
class ExportReport:
    directory: Path
    format: str  # SENTENCE_TRANSFORMERS or CROSS_ENCODER
    label: str
    model_key: str
    scores: list[dict]  # the stored records' task, main score name and value


def exporter_of(model: Any, label: str) -> tuple[str, Any]:
    """(format, bound export method) of a built model; a clear error when it has none."""
    if isinstance(model, SentenceTransformersExportable):
        return SENTENCE_TRANSFORMERS, model.export_sentence_transformers
    if isinstance(model, CrossEncoderExportable):
        return CROSS_ENCODER, model.export_cross_encoder
    raise not_exportable(label, type(model).__name__)


def not_exportable(label: str, class_name: str) -> IncompatibleError:
    return IncompatibleError(
        f"model {label!r} ({class_name}) cannot be exported: it has no sentence-transformers equivalent (no "
        "export_sentence_transformers or export_cross_encoder method); its trained weights stay in the store's "
        "checkpoints/ folder."
    )


def _check_exportable_class(registry: Any, spec: Any, profile: Any) -> None:
    """Fail before loading anything when the model's class is known and has no export method (a recipe's class is
    its student's)."""
    from .registry import _model_class
    from .spec import student_spec

    name = student_spec(registry, spec, profile).name if spec.recipe else spec.name
    model_class = _model_class(registry.model(name))
    if model_class is not None and not any(
        callable(getattr(model_class, method, None))
        for method in ("export_sentence_transformers", "export_cross_encoder")
    ):
        raise not_exportable(spec.label, model_class.__name__)


def _check_target(target: Path) -> None:
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ExportError(f"{target} exists and is not an empty folder; give a new folder to export into.")


def stored_scores(records: list[dict]) -> list[dict]:
    """One row per stored record of a model and seed: task label, family, main score and value (ok records)."""
    from .leaderboard import sample_size

    rows = []
    for record in records:
        if record.get("status") != CellStatus.OK:
            continue
        task = record["task"]
        sample = sample_size(record)
        runtime = record.get("runtime")  # each runtime keeps its own cells: a card names the others'
        rows.append(
            {
                "task": task["label"] + (f" [runtime: {runtime}]" if runtime and runtime != "torch" else ""),
                "evaluated on": "full data" if sample is None else f"a sample of {sample}",
                "family": task["family"],
                "metric": task.get("main_score", "main"),
                "score": float(record["main_score"]),
                "created_at": record.get("created_at", ""),
            }
        )
    return sorted(rows, key=lambda row: (row["family"], row["task"]))


def model_card(
    spec_record: dict, seed: int, exported_format: str, scores: list[dict], harness_version: str, training: dict | None
) -> str:
    """README.md of an exported model: what it is, how it was trained, what the store says it scores."""
    is_cross = exported_format == CROSS_ENCODER
    loader = "CrossEncoder" if is_cross else "SentenceTransformer"
    pipeline = "text-ranking" if is_cross else "sentence-similarity"
    usage = (
        'scores = model.predict([("A man is eating food.", "A man is eating a meal.")])'
        if is_cross
        else 'embeddings = model.encode(["A man is eating food.", "A man is eating a meal."])'
    )
    lines = [
        "---",
        "library_name: sentence-transformers",
        f"pipeline_tag: {pipeline}",
        "tags: [sentence-transformers, harness]",
        "---",
        "",
        f"# {spec_record['label']} (exported by harness)",
        "",
        f"A `{spec_record['label']}` model trained and evaluated with the sentence-embedding harness "
        f"{harness_version}, exported as a sentence-transformers {loader} folder.",
        "",
        "```python",
        f"from sentence_transformers import {loader}",
        "",
        f'model = {loader}("path/to/this/folder")',
        usage,
        "```",
        "",
        "## How it was made",
        "",
        "| | |",
        "| --- | --- |",
        f"| model spec | `{spec_record['label']}` (spec hash `{spec_record['hash'][:12]}`) |",
        f"| options | `{spec_record.get('options', {})}` |",
        f"| backbone | `{spec_record['backbone']}` |",
        f"| training source | {('`' + spec_record['train_on'] + '`') if spec_record.get('train_on') else 'none (the backbone as is)'} |",  # noqa: E501
        f"| profile | `{spec_record['profile']}` |",
        f"| seed | {seed} |",
    ]
    if training:
        for key in ("steps", "examples_seen", "best_epoch"):
            if key in training and not isinstance(training[key], (dict, list)):
                lines.append(f"| training {key.replace('_', ' ')} | {training[key]} |")
        dev = training.get("best_dev_score")
        if isinstance(dev, (int, float)) and not isinstance(dev, bool):  # trainers keep it as a fraction
            lines.append(f"| training best dev score (x100, as the scores below) | {100 * dev:.2f} |")
    lines += ["", "## Stored scores", ""]
    if scores:
        lines += [
            "Main scores x100, as the harness' result store holds them for this spec and seed.",
            "",
            "| family | task | metric | score | evaluated on |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {row['family']} | {row['task']} | {row['metric']} | {row['score']:.2f} | "
            f"{row.get('evaluated on', 'full data')} |"
            for row in scores
        ]
    else:
        lines.append("The result store holds no evaluation of this spec and seed yet (`harness run` writes them).")
    lines += ["", f"Exported {datetime.now(timezone.utc).isoformat(timespec='seconds')} by `harness export`.", ""]
    return "\n".join(lines)


def export_model(registry: Any, request: ExportRequest) -> ExportReport:
    """Build the requested model from its stored checkpoint and export it into ``request.to`` (with README.md)."""
    from . import __version__
    from .checkpoints import trained_checkpoint_problem
    from .device import resolve_device
    from .matrix import ModelEntry
    from .profiles import get_profile
    from .run.config import RunConfig
    from .run.models import run_models
    from .spec import resolve_model_spec
    from .store import Store

    target = Path(request.to).expanduser()
    _check_target(target)
    profile = get_profile(request.profile)
    spec = resolve_model_spec(
        registry,
        request.spec,
        profile,
        request.backbone,
        request.train_on,
        content_cache=Path(request.results_dir) / "cache",
    )
    _check_exportable_class(registry, spec, profile)
    store = Store(request.results_dir)
    if spec.train_on is not None:
        checkpoint = store.checkpoint_dir(spec.key, request.seed)
        problem = trained_checkpoint_problem(checkpoint, spec_hash=spec.hash, seed=request.seed)
        if problem is not None:
            raise ExportError(
                f"no usable checkpoint of {spec.label} trained on {spec.train_on} (seed {request.seed}, profile "
                f"{profile.name}) in {store.root}: {problem}. Train it first: harness run --models {request.spec} "
                f"--train-on {spec.train_on} --seeds {request.seed} --profile {profile.name} --tasks TASK "
                f"--results {store.root}"
            )
    device = resolve_device(request.device)
    config = RunConfig(
        models=[ModelEntry(request.spec)],
        tasks=[],
        seeds=[request.seed],
        profile=profile.name,
        backbone=request.backbone,
        train_on=request.train_on,
        device=device,
        results_dir=store.root,
        progress=False,
    )
    checkpoints = run_models(registry, config, store).checkpoints
    model = checkpoints.trained_model(spec, profile, device, request.seed)
    exported_format, export = exporter_of(model, spec.label)
    records = [r for r in store.records() if r["model_key"] == spec.key and r["seed"] == request.seed]
    scores = stored_scores(records)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.export-", dir=target.parent))
    try:
        export(staging)
        card = model_card(
            spec.as_record(),
            request.seed,
            exported_format,
            scores,
            __version__,
            checkpoints.training_report(spec, request.seed),
        )
        (staging / "README.md").write_text(card, encoding="utf-8")
        if target.exists():
            target.rmdir()  # empty (checked above)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("exported %s (seed %d) as a %s folder: %s", spec.label, request.seed, exported_format, target)
    return ExportReport(target, exported_format, spec.label, spec.key, scores)
