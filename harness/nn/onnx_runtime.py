"""An optional ONNX Runtime path for a transformer encoder's inference (issue 24, point 1).

Not a method from a paper: an execution path for the encoders of SBERT-style models (Reimers & Gurevych 2019,
section 3). :func:`onnx_transformer` exports a Hugging Face transformer (the backbone inside a
:class:`~harness.nn.encoder.SentenceEncoder` or a pair scorer) once to ONNX with ``torch.onnx.export`` (dynamic batch
and sequence axes; ``input_ids`` plus ``attention_mask`` and ``token_type_ids`` when the model takes them), caches the
file under a key of the weights' sha256 (:func:`export_key`) through :func:`harness.files.cached_bytes`, and runs it
in an ``onnxruntime.InferenceSession`` on the CPU with torch's thread count. :class:`OnnxTransformer` returns the same
last hidden states ``[b, L, d]`` the torch transformer returns, so pooling stays in torch and the rest of an
encoding loop (:func:`~harness.nn.encoder.encode_distinct`) is unchanged. sentence-transformers counterpart:
``SentenceTransformer(..., backend="onnx")`` (which exports through optimum).

Deviations: none in the numbers beyond float rounding (ONNX Runtime fuses and reorders float32 operations; the tests
check agreement to 1e-4). Uses the TorchScript exporter (``dynamo=False``): the dynamo exporter needs ``onnxscript``,
which the ``onnx`` extra does not install. A model over 2 GB (ONNX's single-file limit) cannot be exported this way.
"""
from __future__ import annotations

import hashlib
import logging
import tempfile
import warnings
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn

from harness.errors import HarnessError, IncompatibleError
from harness.files import cached_bytes

from .backbone import MODEL_INPUTS
from .pooling import pool

logger = logging.getLogger(__name__)

RUNTIMES = ("torch", "onnx")
# The opset the export targets; part of the cache key, so changing it never serves an old export.
ONNX_OPSET = 17
OUTPUT_NAME = "last_hidden_state"
EXPORT_SUFFIX = ".onnx"


class OnnxRuntimeUnavailable(HarnessError):
    """``--runtime onnx`` was asked for but onnxruntime (or onnx) is not installed."""


def require_onnx_runtime() -> None:
    """Raise :class:`OnnxRuntimeUnavailable` (one line, saying what to install) unless onnx and onnxruntime import."""
    missing = []
    for module in ("onnx", "onnxruntime"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise OnnxRuntimeUnavailable(
            f"the onnx runtime needs {' and '.join(missing)}: install the extra with "
            "pip install 'sentence-harness[onnx]', or use --runtime torch"
        )


def model_input_names(transformer: nn.Module) -> tuple[str, ...]:
    """The inputs of :data:`~harness.nn.backbone.MODEL_INPUTS` that ``transformer.forward`` accepts, in that order."""
    import inspect

    parameters = inspect.signature(transformer.forward).parameters
    names = tuple(name for name in MODEL_INPUTS if name in parameters)
    if "input_ids" not in names or "attention_mask" not in names:
        raise IncompatibleError(
            f"{type(transformer).__name__} does not take input_ids and attention_mask; use --runtime torch"
        )
    return names


def export_key(transformer: nn.Module) -> str:
    """sha256 over everything that determines the export: the weights (names, dtypes, shapes, bytes), the model's
    config, the input names and :data:`ONNX_OPSET`."""
    digest = hashlib.sha256()
    config = getattr(transformer, "config", None)
    digest.update(type(transformer).__name__.encode())
    digest.update((config.to_json_string() if config is not None else "").encode())
    digest.update(repr((model_input_names(transformer), ONNX_OPSET)).encode())
    for name, tensor in sorted(transformer.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        # bytes of the raw storage (bfloat16 has no numpy dtype, so view every tensor as bytes first)
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


class _LastHiddenState(nn.Module):
    """Positional inputs -> last hidden states: the function the exporter traces."""

    def __init__(self, transformer: nn.Module, input_names: tuple[str, ...]):
        super().__init__()
        self.transformer = transformer
        self.input_names = input_names

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        return self.transformer(**dict(zip(self.input_names, inputs))).last_hidden_state


def export_onnx_bytes(transformer: nn.Module) -> bytes:
    """The ONNX model (one file's bytes) of ``transformer``'s last hidden states, with dynamic batch and sequence
    axes. The transformer is traced on the CPU in eval mode; its device and training flag are restored."""
    input_names = model_input_names(transformer)
    sample = {name: torch.ones(2, 8, dtype=torch.long) for name in input_names}
    sample["attention_mask"][1, 5:] = 0  # trace with padding, so no mask path is folded away as all-ones
    if "token_type_ids" in sample:
        sample["token_type_ids"].zero_()
    wrapper = _LastHiddenState(transformer, input_names)
    device = next(transformer.parameters()).device
    was_training = transformer.training
    # torch.onnx.export restores the *wrapper's* training flag on exit, and a fresh module is in training mode:
    # without .eval() here the transformer would be left in training mode (dropout on) after the export.
    wrapper.eval()
    axes = {"batch": 0, "sequence": 1}
    dynamic_axes = {name: {index: axis for axis, index in axes.items()} for name in (*input_names, OUTPUT_NAME)}
    try:
        wrapper.to("cpu")
        with tempfile.TemporaryDirectory(prefix="harness-onnx-") as folder, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and deprecation warnings say nothing a user can act on
            path = Path(folder) / f"model{EXPORT_SUFFIX}"
            torch.onnx.export(
                wrapper, tuple(sample[name] for name in input_names), str(path), dynamo=False,
                input_names=list(input_names), output_names=[OUTPUT_NAME], dynamic_axes=dynamic_axes,
                opset_version=ONNX_OPSET, do_constant_folding=True,
            )
            return path.read_bytes()
    finally:
        transformer.to(device)
        transformer.train(was_training)


def _looks_like_onnx(content: bytes) -> bool:
    import onnx

    try:
        model = onnx.load_from_string(content)
    except Exception:  # noqa: BLE001  (any parse failure means the cached bytes are not a model)
        return False
    return [output.name for output in model.graph.output] == [OUTPUT_NAME]


class OnnxTransformer:
    """A transformer's last hidden states computed by ONNX Runtime on the CPU.

    ``token_states(features)`` takes a tokenised batch (torch tensors or arrays; keys beyond the model's inputs are
    ignored) and returns ``[b, L, d]`` float32 on the CPU, as ``transformer(**inputs).last_hidden_state`` would.
    """

    def __init__(self, content: bytes, input_names: tuple[str, ...], threads: int | None = None):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = onnxruntime.InferenceSession(content, options, providers=["CPUExecutionProvider"])
        self.input_names = input_names

    def token_states(self, features: dict) -> torch.Tensor:
        feeds = {}
        for name in self.input_names:
            value = features[name]
            value = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
            feeds[name] = value.astype(np.int64, copy=False)
        (states,) = self.session.run([OUTPUT_NAME], feeds)
        return torch.from_numpy(states)


def onnx_transformer(transformer: nn.Module, cache_dir: Path | str | None = None,
                     key: str | None = None) -> OnnxTransformer:
    """``transformer`` exported to ONNX and loaded in ONNX Runtime. With ``cache_dir`` the export is kept there as
    ``onnx/<export_key>.onnx`` (checksummed; a damaged entry is exported again), so each checkpoint is exported once
    per store; without it the export is made in memory each time. ``key``: :func:`export_key` of ``transformer``
    when the caller has it already (hashing a large model's weights takes a moment)."""
    require_onnx_runtime()
    input_names = model_input_names(transformer)

    def export() -> bytes:
        logger.info("exporting %s to ONNX (once per checkpoint)", type(transformer).__name__)
        return export_onnx_bytes(transformer)

    if cache_dir is None:
        content = export()
    else:
        path = Path(cache_dir) / "onnx" / f"{key or export_key(transformer)}{EXPORT_SUFFIX}"
        path.parent.mkdir(parents=True, exist_ok=True)
        content, cached = cached_bytes(path, export, check=_looks_like_onnx, what="ONNX export")
        if cached:
            logger.info("ONNX export of %s read from %s", type(transformer).__name__, path)
    return OnnxTransformer(content, input_names)


def onnx_pooled_forward(
    transformer: nn.Module, pooling: str, cache_dir: Path | str | None = None, key: str | None = None
) -> Callable[[dict[str, torch.Tensor]], torch.Tensor]:
    """A ``forward`` for :func:`~harness.nn.encoder.encode_distinct` (token batch -> ``[b, d]``): the token states
    from ONNX Runtime, pooled in torch exactly as :class:`~harness.nn.encoder.SentenceEncoder.forward` pools them.
    Pass ``device="cpu"`` to ``encode_distinct`` with it."""
    runtime = onnx_transformer(transformer, cache_dir, key)

    def forward(features: dict[str, torch.Tensor]) -> torch.Tensor:
        return pool(runtime.token_states(features), features["attention_mask"].cpu(), pooling)

    return forward
