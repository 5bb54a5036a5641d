"""Inference runtimes: the optional ONNX Runtime path (``--runtime onnx``) a model offers through
:class:`RuntimeSwitch`, and the exports it caches.
"""

from __future__ import annotations

from harness.nn.onnx_runtime import (
    RUNTIMES,
    OnnxFunction,
    OnnxRuntimeUnavailable,
    OnnxTransformer,
    OnnxTransformerModule,
    RuntimeSwitch,
    export_key,
    model_input_names,
    onnx_function,
    onnx_transformer,
    quiet_torch,
    require_onnx_runtime,
)

__all__ = [
    "RUNTIMES",
    "OnnxRuntimeUnavailable",
    "OnnxTransformer",
    "OnnxTransformerModule",
    "RuntimeSwitch",
    "export_key",
    "onnx_transformer",
    "require_onnx_runtime",
    "OnnxFunction",
    "model_input_names",
    "onnx_function",
    "quiet_torch",
]
