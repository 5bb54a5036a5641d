"""What a cell cost, measured while it ran: the ``cost`` object of every new record (docs/guide/results-as-data.md,
"Cost columns").

Times are wall-clock seconds on the machine the record's ``hardware`` names; memory is in bytes. Records written
before cost was measured have no ``cost`` object: every reader treats its fields as unknown (empty), never zero.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..contamination import EvaluatedTexts

# The record's cost fields, in the order the tables show them.
COST_FIELDS = (
    "training_seconds",
    "evaluation_seconds",
    "items_per_second",
    "items",
    "item_unit",
    "peak_rss_bytes",
    "peak_gpu_bytes",
    "parameters",
    "device",
    "runtime",
    "precision",
)


def peak_rss_bytes() -> int:
    """The process's peak resident memory so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def _cuda(device: str) -> Any:
    """torch.cuda when ``device`` is a CUDA device and torch is already loaded (never imports torch), else None."""
    torch = sys.modules.get("torch")
    if not device.startswith("cuda") or torch is None or not torch.cuda.is_available():
        return None
    return torch.cuda


def _modules(model: Any) -> list[Any]:
    """The torch modules a model holds: itself, or its attributes one level down (plugins wrap their encoders)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    if isinstance(model, torch.nn.Module):
        return [model]
    try:
        attributes = list(vars(model).values())
    except TypeError:  # no __dict__ (slots, builtins)
        return []
    return [value for value in attributes if isinstance(value, torch.nn.Module)]


def evaluation_precision(device: str, runtime: str, weights_dtype: str | None) -> str | None:
    """The precision evaluation computes in: "int8" under a quantised runtime (whatever dtype the torch weights it
    came from have); on CUDA under the torch runtime the autocast dtype that encoding runs under (e.g. "bfloat16
    autocast": float32 weights, bfloat16 matrix products), else the weights' dtype."""
    if runtime.endswith("-int8"):
        return "int8"
    if runtime == "torch" and device.startswith("cuda"):
        from ..device import autocast_dtype

        mixed = autocast_dtype(device)
        if mixed is not None:
            return f"{str(mixed).removeprefix('torch.')} autocast"
    return weights_dtype


def parameter_facts(model: Any) -> tuple[int | None, str | None]:
    """(number of parameters, dtype of most of them, e.g. "float32") of the torch modules ``model`` holds; (None,
    None) when it holds none (e.g. a model evaluated through ONNX Runtime, or no torch at all). Shared tensors are
    counted once."""
    seen: dict[int, Any] = {}
    for module in _modules(model):
        for parameter in module.parameters():
            seen.setdefault(id(parameter), parameter)
    if not seen:
        return None, None
    by_dtype: dict[str, int] = {}
    for parameter in seen.values():
        name = str(parameter.dtype).removeprefix("torch.")
        by_dtype[name] = by_dtype.get(name, 0) + parameter.numel()
    return sum(by_dtype.values()), max(by_dtype, key=lambda name: by_dtype[name])


def evaluated_items(texts: EvaluatedTexts | None, examples: Mapping[str, Any] | None) -> tuple[int | None, str | None]:
    """How many things the evaluation scored and what they are: the task's pairs, else its sentences
    (``Task.evaluated_texts``), else the count of its per-example file; (None, None) when the task says neither."""
    if isinstance(texts, EvaluatedTexts):
        if texts.pairs:
            return len(texts.pairs), "pairs"
        if texts.sentences:
            return len(texts.sentences), "sentences"
    count = (examples or {}).get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count, "examples"
    return None, None


@dataclass
class CostMeter:
    """Measures one cell's evaluation: create it right before the evaluation starts (it resets the GPU's peak
    counter, so ``peak_gpu_bytes`` is this evaluation's), call :meth:`stop` right after it ends."""

    device: str
    started: float = field(default_factory=time.perf_counter)
    seconds: float | None = None

    def __post_init__(self) -> None:
        cuda = _cuda(self.device)
        if cuda is not None:
            cuda.reset_peak_memory_stats()
        self.started = time.perf_counter()

    def stop(self) -> float:
        self.seconds = time.perf_counter() - self.started
        return self.seconds

    def record(
        self,
        *,
        model: Any,
        runtime: str,
        training_report: Any,
        trained: bool,
        texts: EvaluatedTexts | None,
        examples: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The record's ``cost`` object. ``training_seconds``: the wall time of the training that made the
        checkpoint this cell used (0 for an untrained model, None when its report does not say); ``peak_rss_bytes``:
        the process's peak so far (training in the same process included); ``peak_gpu_bytes``: this evaluation's
        peak on the GPU (None off CUDA)."""
        seconds = self.seconds if self.seconds is not None else self.stop()
        report = training_report if isinstance(training_report, Mapping) else {}
        wall = report.get("wall_seconds", report.get("seconds"))
        training_seconds = round(float(wall), 3) if isinstance(wall, (int, float)) else None if trained else 0.0
        items, unit = evaluated_items(texts, examples)
        parameters, dtype = parameter_facts(model)
        cuda = _cuda(self.device)
        return {
            "training_seconds": training_seconds,
            "evaluation_seconds": round(seconds, 3),
            "items": items,
            "item_unit": unit,
            "items_per_second": round(items / seconds, 3) if items and seconds > 0 else None,
            "peak_rss_bytes": peak_rss_bytes(),
            "peak_gpu_bytes": int(cuda.max_memory_allocated()) if cuda is not None else None,
            "parameters": parameters,
            "device": self.device,
            "runtime": runtime,
            "precision": evaluation_precision(self.device, runtime, dtype),
        }
