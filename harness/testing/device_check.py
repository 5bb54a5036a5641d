"""The device contract check :func:`check_model_device`: a model built for one device keeps every tensor of its
training and evaluation there, checked on a machine without a GPU; part of the test kit :mod:`harness.testing`.

The model is built, trained and evaluated with ``device="meta"``: its weights and everything it moves ``.to(device)``
live on PyTorch's ``meta`` device (shapes, no data), as they would on ``cuda``. A tensor the code leaves on the CPU
(a tokenizer's output it forgot to move, a ``torch.arange`` without ``device=``) then meets a meta tensor in one
operation, exactly where CUDA raises "Expected all tensors to be on the same device". Meta tensors carry no values,
so :class:`DeviceTracer` (a ``TorchDispatchMode``) gives each one a CPU twin and runs every operation twice: on the
meta tensors (shapes, views, the device each result lands on) and on their twins (the values, so training and
evaluation compute what they would anywhere). Values leave through ``.item()``/``float()`` and copies to the CPU,
answered from the twins. Every operation that mixes a meta tensor with a CPU tensor of one element or more is a
violation (CUDA accepts 0-dimensional CPU tensors, and so does the check); copies between devices are not.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map
from torch.utils.weak import WeakTensorKeyDictionary

from ..api import TRAINABLE, TRAINING_KINDS, Profile, TrainingSplits
from .behaviour import _outputs
from .contexts import _seed_everything, model_context
from .contract import ContractCheckError, _describe_exception
from .fakes import tiny_training_splits
from .model_check import PROBE_TEXTS, _build_model, _resolve_model_plugin

if TYPE_CHECKING:
    from ..api import ModelPlugin
    from ..registry import Registry

DEVICE = "meta"
_aten = torch.ops.aten
# Copies between devices are how tensors are meant to move; they may mix devices.
_COPIES = {
    _aten._to_copy.default,
    _aten.to.device,
    _aten.to.dtype_layout,
    _aten.to.other,
    _aten.copy_.default,
    _aten.copy.default,
    _aten._copy_from.default,
    _aten._copy_from_and_resize.default,
    _aten.lift_fresh.default,
    _aten.lift_fresh_copy.default,
}


@dataclass
class DeviceViolation:
    """One operation that mixed the model's device with CPU tensors, and where the plugin called it."""

    operation: str
    shapes: list[tuple[str, tuple[int, ...]]]
    where: str

    def describe(self) -> str:
        inputs = ", ".join(f"{device} {list(shape)}" for device, shape in self.shapes)
        return f"{self.operation} got tensors on several devices ({inputs}) at {self.where}"


def _caller() -> str:
    """The innermost frame outside torch and this module: the plugin's (or harness') line that ran the operation."""
    for frame in reversed(traceback.extract_stack()):
        name = frame.filename.replace("\\", "/")
        if "/torch/" in name or name.endswith("device_check.py") or "/transformers/" in name:
            continue
        return f"{name}:{frame.lineno} ({frame.line})"
    return "(unknown)"


class DeviceTracer(TorchDispatchMode):
    """Meta tensors with CPU twins (see the module docstring); ``violations`` lists every device mix, once per
    operation and call site."""

    def __init__(self) -> None:
        super().__init__()
        self.twins: WeakTensorKeyDictionary = WeakTensorKeyDictionary()
        self.violations: list[DeviceViolation] = []
        self._seen: set[tuple[str, str]] = set()
        self._parameter_new: Any = None

    def _twin(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.device.type == DEVICE:
            twin = self.twins.get(value)
            if twin is None:  # made outside the tracer (e.g. to_empty): zeros stand in for its missing values
                twin = torch.zeros(value.shape, dtype=value.dtype)
                self.twins[value] = twin
            return twin
        if isinstance(value, torch.device) and value.type == DEVICE:
            return torch.device("cpu")
        if isinstance(value, str) and value == DEVICE:
            return "cpu"
        return value

    def _check(self, func: Any, args: tuple, kwargs: dict) -> None:
        tensors = [value for value in (*args, *kwargs.values()) if isinstance(value, torch.Tensor)]
        tensors += [
            item
            for value in (*args, *kwargs.values())
            if isinstance(value, (list, tuple))
            for item in value
            if isinstance(item, torch.Tensor)
        ]
        on_meta = any(t.device.type == DEVICE for t in tensors)
        stray = [t for t in tensors if t.device.type != DEVICE and t.dim() > 0]
        if on_meta and stray and func not in _COPIES:
            where = _caller()
            if (str(func), where) not in self._seen:
                self._seen.add((str(func), where))
                self.violations.append(
                    DeviceViolation(
                        str(func.overloadpacket.__name__), [(t.device.type, tuple(t.shape)) for t in tensors], where
                    )
                )

    def __enter__(self):
        # nn.Module.to() wraps each moved weight in a new Parameter (a new tensor object, made without an operation
        # this mode sees): the new Parameter takes the twin of the tensor it wraps.
        self._parameter_new = torch.nn.Parameter.__new__
        original, twins = self._parameter_new, self.twins

        def parameter_with_twin(cls, data=None, requires_grad=True):
            made = original(cls, data, requires_grad)
            if isinstance(data, torch.Tensor) and data in twins:
                twins[made] = twins[data]
            return made

        torch.nn.Parameter.__new__ = parameter_with_twin
        return super().__enter__()

    def __exit__(self, *exc):
        torch.nn.Parameter.__new__ = self._parameter_new
        return super().__exit__(*exc)

    @staticmethod
    def _copies_off_the_device(func: Any, args: tuple, kwargs: dict) -> bool:
        """``_to_copy`` / ``to`` (seen as such under inference mode) of a meta tensor to another device."""
        if (
            func.overloadpacket not in (_aten._to_copy, _aten.to)
            or not isinstance(args[0], torch.Tensor)
            or args[0].device.type != DEVICE
        ):
            return False
        targets = [value for value in (*args[1:], kwargs.get("device")) if isinstance(value, (torch.device, str))]
        targets += [value.device for value in args[1:] if isinstance(value, torch.Tensor)]  # to(other)
        return any(torch.device(target).type != DEVICE for target in targets)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self._check(func, args, kwargs)
        twin_args, twin_kwargs = tree_map(self._twin, args), tree_map(self._twin, kwargs)
        if func is _aten._local_scalar_dense.default and args[0].device.type == DEVICE:
            return func(*twin_args, **twin_kwargs)  # .item(), float(), bool(): the twin's value
        twin_result = func(*twin_args, **twin_kwargs)
        if self._copies_off_the_device(func, args, kwargs):  # a copy off the model's device is the twin's value
            return twin_result.clone() if twin_result is twin_args[0] else twin_result
        try:
            result = func(*args, **kwargs)
        except (NotImplementedError, RuntimeError):  # data-dependent shapes (nonzero, masked_select): from the twin
            result = tree_map(
                lambda t: (
                    torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=DEVICE)
                    if isinstance(t, torch.Tensor)
                    else t
                ),
                twin_result,
            )
        flat_results = result if isinstance(result, (list, tuple)) else (result,)
        flat_twins = twin_result if isinstance(twin_result, (list, tuple)) else (twin_result,)
        for made, twin in zip(flat_results, flat_twins):
            if isinstance(made, torch.Tensor) and made.device.type == DEVICE and isinstance(twin, torch.Tensor):
                self.twins[made] = twin
        return result


@dataclass
class DeviceCheckReport:
    """What :func:`check_model_device` ran on the meta device."""

    name: str
    capabilities: tuple[str, ...]
    trained: bool = False
    operations_checked: list[str] = field(default_factory=list)


def check_model_device(
    model: ModelPlugin | str,
    *,
    registry: Registry | None = None,
    options: Mapping[str, Any] | None = None,
    backbone: str | None = None,
    training_data: TrainingSplits | None = None,
    profile: Profile | str | None = None,
    seed: int = 42,
) -> DeviceCheckReport:
    """Build the model for the ``meta`` device, train it (if trainable) on tiny data of its first training kind
    (or ``training_data``) under the smoke profile, and run each declared evaluation capability on probe texts, all
    under :class:`DeviceTracer`. Raises :class:`ContractCheckError` listing every operation that met a tensor left
    on the CPU, with the line that ran it, or naming the step that failed on the meta device."""
    plugin, registry = _resolve_model_plugin(model, registry)
    owner = f"model {plugin.name!r}"
    report = DeviceCheckReport(plugin.name, plugin.capabilities)
    tracer = DeviceTracer()
    texts = list(PROBE_TEXTS[:4])
    with contextlib.ExitStack() as cleanup:
        root = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="harness-check-device-")))
        ctx = model_context(
            backbone,
            options,
            plugin=plugin,
            profile=profile,
            seed=seed,
            device=DEVICE,
            artifact_dir=root / "artifacts",
            cache_dir=root / "cache",
            registry=registry,
        )
        step = "building it"
        try:
            with tracer:
                built = _build_model(plugin, ctx, owner)
                if TRAINABLE in plugin.capabilities:
                    splits = training_data
                    kinds = [kind for kind in plugin.training_kinds if kind in TRAINING_KINDS]
                    if splits is None and kinds:
                        splits = tiny_training_splits(kinds[0])
                    if splits is not None:
                        step = "training it"
                        _seed_everything(ctx.seed)
                        built.fit(splits, dataclasses.replace(ctx, train_on=splits.source))
                        report.trained = True
                for capability in plugin.capabilities:
                    step = f"evaluating it as {capability}"
                    if _outputs(built, [capability], texts):
                        report.operations_checked.append(capability)
        except ContractCheckError:
            raise
        except Exception as exc:
            _raise_step_failure(owner, step, exc, tracer)
    _raise_violations(owner, tracer)
    return report


def check_model_precision(
    model: ModelPlugin | str,
    precision: str,
    *,
    registry: Registry | None = None,
    options: Mapping[str, Any] | None = None,
    backbone: str | None = None,
    training_data: TrainingSplits | None = None,
    seed: int = 42,
) -> Any:
    """Train the model on the CPU under the smoke profile with ``precision`` (``bf16``: bfloat16 autocast; ``fp16``:
    float16 autocast with a real ``GradScaler``, the path of GPUs without bfloat16) and check that the loss stays
    finite and the trained model still computes finite outputs. Returns the training report; raises
    :class:`ContractCheckError` otherwise."""
    from .contexts import smoke_profile

    plugin, registry = _resolve_model_plugin(model, registry)
    owner = f"model {plugin.name!r}"
    kinds = [kind for kind in plugin.training_kinds if kind in TRAINING_KINDS]
    splits = training_data or (tiny_training_splits(kinds[0]) if kinds else None)
    if splits is None:
        raise ContractCheckError(f"{owner}: no tiny data of its training kinds; pass training_data=")
    ctx = model_context(
        backbone,
        options,
        plugin=plugin,
        profile=smoke_profile(precision=precision),
        seed=seed,
        device="cpu",
        registry=registry,
    )
    built = _build_model(plugin, ctx, owner)
    _seed_everything(ctx.seed)
    try:
        training_report = built.fit(splits, dataclasses.replace(ctx, train_on=splits.source))
    except Exception as exc:
        raise ContractCheckError(
            f"{owner} breaks the precision contract:\n- training with precision={precision} "
            f"raised {_describe_exception(exc)}"
        ) from exc
    record = training_report.as_record() if hasattr(training_report, "as_record") else dict(training_report or {})
    losses = record.get("mean_loss_per_epoch") or []
    import math

    problems = [f"the training loss became {loss}" for loss in losses if not math.isfinite(loss)]
    outputs = _outputs(built, [c for c in plugin.capabilities if c != TRAINABLE], list(PROBE_TEXTS[:3]))
    import numpy as np

    for capability, value in outputs.items():
        arrays = value if isinstance(value, list) else [value]
        if not all(np.isfinite(np.asarray(array, dtype=np.float64)).all() for array in arrays):
            problems.append(f"after training with precision={precision}, {capability} outputs are not finite")
    if problems:
        raise ContractCheckError(f"{owner} breaks the precision contract:\n" + "\n".join(f"- {p}" for p in problems))
    return record


def check_recipe_device(
    recipe: str,
    *,
    registry: Registry | None = None,
    backbone: str | None = None,
    training_data: TrainingSplits | None = None,
    profile: Profile | str | None = None,
    seed: int = 42,
) -> DeviceCheckReport:
    """The device contract of a recipe spec (e.g. ``"augsbert:teacher=ce,sampler=bm25"``): every model the recipe
    trains through its context (``ctx.trained_model``: teachers, search encoders, each on tiny data of its first
    training kind), its student (``ctx.build_student``), the recipe's own steps (sampling, scoring, filtering) and the
    trained student's evaluation all run for the ``meta`` device under :class:`DeviceTracer`, as
    :func:`check_model_device` does for a model. ``training_data`` (default: tiny data of the recipe's first training
    kind) is what ``--train-on`` would give it. Raises :class:`ContractCheckError` listing the violations."""
    from ..api import RecipeContext
    from ..options import parse_spec_text, resolve_options
    from ..registry import build_registry

    registry = registry or build_registry()
    name, raw_options = parse_spec_text(recipe)
    plugin = registry.recipe(name)
    owner = f"recipe {plugin.name!r}"
    options = resolve_options(owner, plugin.options, raw_options)
    student_name, student_options = parse_spec_text(options["student"])
    student_plugin = registry.model(student_name)
    report = DeviceCheckReport(plugin.name, student_plugin.capabilities)
    tracer = DeviceTracer()
    texts = list(PROBE_TEXTS[:4])
    kinds = [kind for kind in plugin.training_kinds if kind in TRAINING_KINDS]
    splits = training_data or tiny_training_splits(kinds[0])
    with contextlib.ExitStack() as cleanup:
        root = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="harness-check-recipe-device-")))

        def tiny_data(source: str, kind: str) -> TrainingSplits:
            return tiny_training_splits(kind, source)

        def context(
            model_plugin: ModelPlugin, model_options: Mapping[str, Any], model_backbone: str | None, folder: str
        ) -> Any:
            return model_context(
                model_backbone or backbone,
                model_options,
                plugin=model_plugin,
                profile=profile,
                seed=seed,
                device=DEVICE,
                artifact_dir=root / folder,
                cache_dir=root / "cache",
                registry=registry,
                trained_model=trained_model,
                training_data=tiny_data,
            )

        def trained_model(text: str, train_on: str | None = None, backbone: str | None = None) -> Any:
            model_name, model_options = parse_spec_text(text)
            model_plugin = registry.model(model_name)
            ctx = context(model_plugin, model_options, backbone, f"helper-{model_name}")
            built = _build_model(model_plugin, ctx, f"model {model_name!r} (trained by {owner})")
            helper_kinds = [kind for kind in model_plugin.training_kinds if kind in TRAINING_KINDS]
            if TRAINABLE in model_plugin.capabilities and helper_kinds:
                helper_splits = tiny_training_splits(helper_kinds[0], train_on or "harness.testing")
                built.fit(helper_splits, dataclasses.replace(ctx, train_on=helper_splits.source))
            return built

        def build_student(backbone: str | None = None) -> Any:
            ctx = context(student_plugin, student_options, backbone, "student")
            return _build_model(student_plugin, ctx, f"student {options['student']!r} of {owner}")

        base = model_context(
            backbone,
            options,
            profile=profile,
            seed=seed,
            device=DEVICE,
            artifact_dir=root / "artifacts",
            cache_dir=root / "cache",
            registry=registry,
            trained_model=trained_model,
            training_data=tiny_data,
            train_on=splits.source,
        )
        ctx = RecipeContext(
            **{f.name: getattr(base, f.name) for f in dataclasses.fields(base)},
            student=options["student"],
            build_student=build_student,
        )
        step = "training it"
        try:
            with tracer:
                _seed_everything(seed)
                student, _ = plugin.train(splits, ctx)
                report.trained = True
                for capability in student_plugin.capabilities:
                    step = f"evaluating its student as {capability}"
                    if _outputs(student, [capability], texts):
                        report.operations_checked.append(capability)
        except ContractCheckError:
            raise
        except Exception as exc:
            _raise_step_failure(owner, step, exc, tracer)
    _raise_violations(owner, tracer)
    return report


def _raise_step_failure(owner: str, step: str, exc: Exception, tracer: DeviceTracer) -> None:
    """A step that raised on the meta device; with violations, they are the cause (a stray tensor usually makes a
    later step fail) and :func:`_raise_violations` reports them instead."""
    if not tracer.violations:
        raise ContractCheckError(
            f"{owner} breaks the device contract:\n- {step} on the meta device raised {_describe_exception(exc)}"
        ) from exc


def _raise_violations(owner: str, tracer: DeviceTracer) -> None:
    if tracer.violations:
        raise ContractCheckError(
            f"{owner} breaks the device contract (built for device {DEVICE!r}, a tensor stayed "
            "on the CPU; on a GPU this is 'Expected all tensors to be on the same device'):\n"
            + "\n".join(f"- {v.describe()}" for v in tracer.violations[:10])
        )
