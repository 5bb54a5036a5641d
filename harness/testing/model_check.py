"""The model contract check :func:`check_model`: build a model as the runner does, check each declared
capability's behaviour and a trainable model's fit/save/load round trip; part of the test kit :mod:`harness.testing`."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..api import (
    EMBEDDER,
    TRAINABLE,
    TRAINING_KINDS,
    ModelContext,
    ModelPlugin,
    Profile,
    TrainingSplits,
)
from ..capabilities import missing_methods
from .backbones import TINY_SENTENCES
from .behaviour import _BEHAVIOUR_CHECKS, _outputs, _same_outputs
from .contexts import _seed_everything, model_context
from .contract import ContractCheckError, _describe_exception, _fail
from .fakes import tiny_training_splits

if TYPE_CHECKING:  # the registry is private; the kit hands it around but plugins only pass it back
    from ..registry import Registry

logger = logging.getLogger(__name__)


# Probe texts: short and distinct, one with non-ASCII characters, one far longer than the smoke profile's 64 tokens
# (a model that ignores ``profile.max_seq_length`` overflows the tiny backbones' 128 positions on it).
PROBE_TEXTS = [
    *dict.fromkeys(TINY_SENTENCES),
    "Café au lait, naïve façade — 東京 and Zürich.",
    " ".join(["the quick brown fox jumps over the lazy dog near the river bank"] * 25),
]

# Files that hold pickled objects: a checkpoint must be safetensors (plus plain text such as JSON) only.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")


@dataclass
class ModelCheckReport:
    """What :func:`check_model` checked."""

    name: str
    capabilities: tuple[str, ...]
    dimension: int | None = None  # embedding size, for embedders
    training_report: Any = None  # what fit returned, for trainable models
    checkpoint_files: list[str] = field(default_factory=list)


def _resolve_model_plugin(model: ModelPlugin | str, registry: Registry | None) -> tuple[ModelPlugin, Registry]:
    if isinstance(model, ModelPlugin):
        return model, registry
    if not isinstance(model, str):
        raise TypeError(f"check_model takes a harness.ModelPlugin or a model name, got {type(model).__name__}")
    if registry is None:
        from ..registry import build_registry

        registry = build_registry()
    return registry.model(model), registry


def check_model(
    model: ModelPlugin | str,
    *,
    registry: Registry | None = None,
    options: Mapping[str, Any] | None = None,
    backbone: str | None = None,
    training_data: TrainingSplits | None = None,
    texts: Sequence[str] | None = None,
    profile: Profile | str | None = None,
    seed: int = 42,
    device: str = "cpu",
    directory: Path | str | None = None,
) -> ModelCheckReport:
    """Build a model the way the runner does and check each declared capability's behaviour.

    ``model`` is a ModelPlugin or a registered name (looked up in ``registry``, default: the installed plugins).
    The model is built by its factory from a ModelContext with ``options`` (defaults filled), the smoke profile and
    a tiny BERT (or ``backbone``). Checked: the built object has every declared capability's methods; ``encode``
    returns float32 [n, d] with finite values, the same row for the same text (within a call and across calls), a
    text longer than ``max_seq_length`` included; ``score`` returns [n] finite floats, deterministically;
    ``encode_multi`` / ``encode_spans`` likewise; a trainable model's ``fit`` on ``training_data`` (default: tiny
    data of its first training kind) returns a JSON-serialisable report, ``save`` writes safetensors (no pickle
    files), and a fresh model that ``load``s the checkpoint computes the same outputs. Raises ContractCheckError
    listing every problem; returns a report otherwise. ``directory`` keeps the checkpoint (default: a temporary one).
    """
    plugin, registry = _resolve_model_plugin(model, registry)
    owner = f"model {plugin.name!r}"
    probe_texts = list(texts) if texts is not None else list(PROBE_TEXTS)
    if len(probe_texts) < 2:
        raise ValueError("check_model needs at least two texts")
    with contextlib.ExitStack() as cleanup:
        if directory is None:
            directory = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="harness-check-model-"))
        root = Path(directory)
        ctx = model_context(
            backbone,
            options,
            plugin=plugin,
            profile=profile,
            seed=seed,
            device=device,
            artifact_dir=root / "artifacts",
            cache_dir=root / "cache",
            registry=registry,
        )
        built = _build_model(plugin, ctx, owner)
        report = ModelCheckReport(plugin.name, plugin.capabilities)
        problems: list[str] = []
        for capability in plugin.capabilities:
            check = _BEHAVIOUR_CHECKS.get(capability)
            result = check(built, probe_texts, problems) if check else None
            if capability == EMBEDDER and result is not None:
                report.dimension = int(result.shape[1])
        _fail(owner, problems)
        if TRAINABLE in plugin.capabilities:
            _check_training_round_trip(plugin, built, ctx, training_data, probe_texts, root / "checkpoint", report)
    return report


def _build_model(plugin: ModelPlugin, ctx: ModelContext, owner: str) -> Any:
    _seed_everything(ctx.seed)
    try:
        built = plugin.factory(ctx)
    except Exception as exc:
        raise ContractCheckError(
            f"{owner}: its factory raised {_describe_exception(exc)} when given a ModelContext "
            f"(backbone {ctx.backbone}, profile {ctx.profile.name})."
        ) from exc
    missing = missing_methods(built, plugin.capabilities)
    if missing:
        lacking = "; ".join(f"{capability} needs {', '.join(methods)}" for capability, methods in missing.items())
        raise ContractCheckError(
            f"{owner} breaks the plugin contract:\n- the factory built a "
            f"{type(built).__name__}, which lacks methods of declared capabilities: {lacking}."
        )
    return built


def _check_training_round_trip(
    plugin: ModelPlugin,
    model: Any,
    ctx: ModelContext,
    splits: TrainingSplits | None,
    texts: list[str],
    checkpoint: Path,
    report: ModelCheckReport,
) -> None:
    owner = f"model {plugin.name!r}"
    if splits is None:
        kinds = [kind for kind in plugin.training_kinds if kind in TRAINING_KINDS]
        if not plugin.training_kinds:
            _fail(owner, ["it declares 'trainable' but no training_kinds; list the kinds of data fit() learns from."])
        if not kinds:
            logger.warning(
                "%s: no tiny data of its training kinds %s; pass training_data= to check fit/save/load",
                owner,
                ", ".join(plugin.training_kinds),
            )
            return
        splits = tiny_training_splits(kinds[0])
    problems: list[str] = []
    evaluation_capabilities = [c for c in plugin.capabilities if c in _BEHAVIOUR_CHECKS]
    _seed_everything(ctx.seed)
    try:
        training_report = model.fit(splits, dataclasses.replace(ctx, train_on=splits.source))
    except Exception as exc:
        raise ContractCheckError(
            f"{owner} breaks the plugin contract:\n- fit raised {_describe_exception(exc)} on "
            f"{len(splits.train)} examples of {splits.kind}."
        ) from exc
    if training_report is None:
        problems.append(
            "fit returned None; return the training report (a dict, or an object with as_record()), "
            "the runner stores it with every result."
        )
    else:
        record = training_report.as_record() if hasattr(training_report, "as_record") else training_report
        try:
            json.dumps(record, allow_nan=True)
        except (TypeError, ValueError) as exc:
            problems.append(
                f"fit's report cannot be stored as JSON ({exc}); return plain numbers, strings, lists "
                "and dicts (or an object whose as_record() does)."
            )
        report.training_report = record
    behaviour_problems: list[str] = []
    for capability in evaluation_capabilities:
        _BEHAVIOUR_CHECKS[capability](model, texts, behaviour_problems)
    if behaviour_problems:  # the trained model's outputs are unusable: no point in comparing them after a reload
        _fail(owner, problems + [f"after fit: {problem}" for problem in behaviour_problems])
    trained_outputs = _outputs(model, evaluation_capabilities, texts)
    checkpoint.mkdir(parents=True, exist_ok=True)
    try:
        model.save(checkpoint)
    except Exception as exc:
        raise ContractCheckError(
            f"{owner} breaks the plugin contract:\n- save raised {_describe_exception(exc)} "
            "(save(directory) gets an existing, empty folder)."
        ) from exc
    files = sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file())
    report.checkpoint_files = files
    if not files:
        problems.append("save wrote no file into the checkpoint folder.")
    pickled = [name for name in files if name.endswith(PICKLE_SUFFIXES)]
    if pickled:
        problems.append(
            f"save wrote pickle-format files {', '.join(pickled)}; write weights with safetensors "
            "(safetensors.torch.save_model / safetensors.numpy.save_file) and settings as JSON."
        )
    fresh = _build_model(plugin, ctx, owner)
    try:
        fresh.load(checkpoint)
    except Exception as exc:
        raise ContractCheckError(
            f"{owner} breaks the plugin contract:\n- load raised {_describe_exception(exc)} "
            "on the folder its own save wrote (the runner loads into a freshly built model)."
        ) from exc
    loaded_outputs = _outputs(fresh, evaluation_capabilities, texts)
    for capability in evaluation_capabilities:
        if not _same_outputs(trained_outputs[capability], loaded_outputs[capability]):
            problems.append(
                f"a fresh model that loaded the checkpoint computes different {capability} outputs than "
                "the trained model that saved it; save every trained weight (and load them all)."
            )
    _fail(owner, problems)
