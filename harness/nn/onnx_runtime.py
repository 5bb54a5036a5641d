"""An optional ONNX Runtime path for a transformer encoder's inference.

Not a method from a paper: an execution path for the encoders of SBERT-style models (Reimers & Gurevych 2019,
section 3). :func:`onnx_transformer` exports a Hugging Face transformer (the backbone inside a
:class:`~harness.nn.encoder.SentenceEncoder` or a pair scorer) once to ONNX with ``torch.onnx.export`` (dynamic batch
and sequence axes; ``input_ids`` plus ``attention_mask`` and ``token_type_ids`` when the model takes them), caches the
file under a key of the weights' sha256 (:func:`export_key`) through :func:`harness.files.cached_bytes`, and runs it
in an ``onnxruntime.InferenceSession`` on the CPU with torch's thread count. :class:`OnnxTransformer` returns the same
last hidden states ``[b, L, d]`` the torch transformer returns (or, for a model with a head, another output of
:data:`EXPORTABLE_OUTPUTS`: a sequence classifier's ``logits``). :class:`RuntimeSwitch` is how a model uses it: for
the length of an inference call it puts an :class:`OnnxTransformerModule` (called like the transformer) in place of
the model's transformer, so pooling, heads and segment masks stay the model's own torch code and training and
checkpoints only ever see torch. sentence-transformers counterpart:
``SentenceTransformer(..., backend="onnx")`` (which exports through optimum).

A model whose inference reaches inside the transformer (a hook between its layers) exports a larger function of the
same inputs instead: :func:`onnx_function` exports ``function(**inputs)`` of a module to named outputs with dynamic
axes, cached under :func:`export_key` of the module's weights plus whatever else shapes the graph, and
:meth:`RuntimeSwitch.session_for` rebuilds it when the weights change.

``--runtime onnx-int8`` runs every such export after ONNX Runtime's dynamic int8 quantisation
(:func:`quantised_bytes`, kept beside the float export); sentence-transformers counterpart:
``export_dynamic_quantized_onnx_model``.

Deviations: none in the numbers beyond float rounding (ONNX Runtime fuses and reorders float32 operations; the tests
check agreement to 1e-4); under onnx-int8, the quantisation's error (all-MiniLM-L6-v2: STS-B 82.03 -> 81.74, SICK-R
77.15 -> 76.41), which is why its cells and leaderboard rows are its own. Uses the TorchScript exporter
(``dynamo=False``): the dynamo exporter needs ``onnxscript``, which the ``onnx`` extra does not install. A model over
2 GB (ONNX's single-file limit) cannot be exported this way.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from harness.errors import HarnessError, IncompatibleError, InvalidOptionError
from harness.files import cached_bytes

from .backbone import MODEL_INPUTS

logger = logging.getLogger(__name__)

RUNTIMES = ("torch", "onnx", "onnx-int8")  # the values of --runtime
# The runtimes whose exports are quantised (weights int8, activations quantised per batch: ONNX Runtime's dynamic
# quantisation) and the tag their cached exports carry: ``onnx/<key>-int8.onnx`` beside the float export.
QUANTISED_RUNTIMES = {"onnx-int8": "int8"}
# The opset the export targets; part of the cache key, so changing it never serves an old export.
ONNX_OPSET = 17
OUTPUT_NAME = "last_hidden_state"
EXPORT_SUFFIX = ".onnx"
# The inputs' dynamic axes (every input is [batch, sequence]); the last hidden states' axes
INPUT_AXES = {0: "batch", 1: "sequence"}
# The outputs a transformer's export can return: the transformers output class the stand-in returns it in
# (attribute and key access as the torch model's output) and its dynamic axes. Hidden states of a bare transformer,
# or the logits ``[batch, labels]`` of a sequence classifier (its head reads the pooler output, so exporting the
# hidden states alone would not do).
EXPORTABLE_OUTPUTS = {
    OUTPUT_NAME: ("BaseModelOutput", INPUT_AXES),
    "logits": ("SequenceClassifierOutput", {0: "batch"}),
}
Built = TypeVar("Built")


# torch's thread count outside a :func:`quiet_torch` block (None outside one): what a session built inside one uses
_threads_outside: int | None = None


@contextmanager
def quiet_torch() -> Iterator[None]:
    """Torch on one thread for the block, while ONNX Runtime does the heavy work with its own pool (as many threads as
    torch has outside the block). Torch's pool would otherwise wake for the small operations between session runs
    (pooling, heads, masks) and spin-wait while the session's threads want the same cores: on 2 cores the harness'
    ONNX encoding ran at 0.84x a bare session with torch on 2 threads and 0.95-0.98x on one
    (benchmarks/runtime_speed.py)."""
    global _threads_outside
    threads = torch.get_num_threads()
    outer = _threads_outside
    _threads_outside = outer or threads
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        _threads_outside = outer


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


def check_runtime(value: str) -> str:
    """``value`` if it is one of :data:`RUNTIMES` and, for an onnx one, onnxruntime is installed; one line saying
    what to use or install otherwise (``--runtime``, and a plugin's ``use_runtime``)."""
    if value not in RUNTIMES:
        raise InvalidOptionError(f"--runtime must be one of {', '.join(RUNTIMES)}, got {value!r}.")
    if value != "torch":
        require_onnx_runtime()
    return value


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


def check_output(output: str) -> str:
    """``output`` if a transformer's export can return it (:data:`EXPORTABLE_OUTPUTS`), else one line saying so."""
    if output not in EXPORTABLE_OUTPUTS:
        raise IncompatibleError(
            f"an ONNX export returns one of {', '.join(EXPORTABLE_OUTPUTS)}, not {output!r}; use --runtime torch"
        )
    return output


def output_determinants(output: str) -> tuple:
    """What a transformer export of ``output`` adds to :func:`export_key`: nothing for the last hidden states (their
    keys stay as they were), the output's name otherwise."""
    return () if check_output(output) == OUTPUT_NAME else (output,)


def export_key(
    transformer: nn.Module, input_names: Sequence[str] | None = None, determinants: Sequence[Any] = ()
) -> str:
    """sha256 over everything that determines the export: the weights (names, dtypes, shapes, bytes), the model's
    config, the input names (default: :func:`model_input_names`), :data:`ONNX_OPSET` and ``determinants``: what
    else shapes an :func:`onnx_function` graph (a plugin's options, a version of its graph code), by ``repr``."""
    digest = hashlib.sha256()
    config = getattr(transformer, "config", None)
    digest.update(type(transformer).__name__.encode())
    digest.update((config.to_json_string() if config is not None else "").encode())
    names = model_input_names(transformer) if input_names is None else tuple(input_names)
    digest.update(repr((names, ONNX_OPSET)).encode())
    if determinants:  # nothing added without them: the transformer exports' keys stay as they were
        digest.update(repr(tuple(determinants)).encode())
    for name, tensor in sorted(transformer.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        # bytes of the raw storage (bfloat16 has no numpy dtype, so view every tensor as bytes first)
        digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


class _Traced(nn.Module):
    """Positional inputs -> ``function(**named inputs)``: what the exporter traces. ``module`` (whose weights the
    function uses) is a submodule, so ``eval()`` and ``to()`` reach it."""

    def __init__(self, module: nn.Module, function: Callable[..., Any], input_names: tuple[str, ...]):
        super().__init__()
        self.module = module
        self.function = function
        self.input_names = input_names

    def forward(self, *inputs: torch.Tensor) -> Any:
        return self.function(**dict(zip(self.input_names, inputs)))


def export_function_bytes(
    module: nn.Module,
    function: Callable[..., Any],
    input_names: Sequence[str],
    outputs: Mapping[str, Mapping[int, str]],
) -> bytes:
    """The ONNX model (one file's bytes) of ``function(**inputs)``, a function of ``module`` taking the tokenised
    ``input_names`` (each ``[batch, sequence]`` int64) and returning the tensors named by ``outputs`` in its order,
    whose dynamic axes ``outputs`` gives (``{name: {axis index: axis name}}``; "batch" and "sequence" are the
    inputs'). Traced on the CPU in eval mode; the module's device and training flag are restored. The trace keeps
    no value computed from the data: a shape read into a Python int would be a constant of the graph."""
    input_names = tuple(input_names)
    sample = {name: torch.ones(2, 8, dtype=torch.long) for name in input_names}
    sample["attention_mask"][1, 5:] = 0  # trace with padding, so no mask path is folded away as all-ones
    if "token_type_ids" in sample:
        sample["token_type_ids"].zero_()
    wrapper = _Traced(module, function, input_names)
    device = next(module.parameters()).device
    was_training = module.training
    # torch.onnx.export restores the *wrapper's* training flag on exit, and a fresh module is in training mode:
    # without .eval() here the module would be left in training mode (dropout on) after the export.
    wrapper.eval()
    dynamic_axes = {
        **{name: dict(INPUT_AXES) for name in input_names},
        **{name: dict(axes) for name, axes in outputs.items()},
    }
    try:
        wrapper.to("cpu")
        with tempfile.TemporaryDirectory(prefix="harness-onnx-") as folder, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # tracer and deprecation warnings say nothing a user can act on
            path = Path(folder) / f"model{EXPORT_SUFFIX}"
            torch.onnx.export(
                wrapper,
                tuple(sample[name] for name in input_names),
                str(path),
                dynamo=False,
                input_names=list(input_names),
                output_names=list(outputs),
                dynamic_axes=dynamic_axes,
                opset_version=ONNX_OPSET,
                do_constant_folding=True,
            )
            return path.read_bytes()
    finally:
        module.to(device)
        module.train(was_training)


def _transformer_output(transformer: nn.Module, output: str, **inputs: torch.Tensor) -> torch.Tensor:
    return getattr(transformer(**inputs), output)


def _looks_like_onnx(content: bytes, output_names: Sequence[str] = (OUTPUT_NAME,)) -> bool:
    import onnx

    try:
        model = onnx.load_from_string(content)
    except Exception:  # noqa: BLE001  (any parse failure means the cached bytes are not a model)
        return False
    return [output.name for output in model.graph.output] == list(output_names)


class OnnxFunction:
    """An exported function of tokenised inputs computed by ONNX Runtime on the CPU.

    ``run(features)`` takes a tokenised batch (torch tensors or arrays; keys beyond the model's inputs are ignored)
    and returns the outputs ``output_names`` as torch tensors on the CPU.
    """

    def __init__(
        self,
        content: bytes,
        input_names: tuple[str, ...],
        output_names: Sequence[str] = (OUTPUT_NAME,),
        threads: int | None = None,
    ):
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or _threads_outside or torch.get_num_threads()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = onnxruntime.InferenceSession(content, options, providers=["CPUExecutionProvider"])
        self.input_names = input_names
        self.output_names = list(output_names)

    def run(self, features: Mapping[str, Any]) -> tuple[torch.Tensor, ...]:
        feeds = {}
        for name in self.input_names:
            value = features.get(name)
            if value is None:  # token_type_ids left out: the transformer's default, all zeros
                value = np.zeros(tuple(features["input_ids"].shape), dtype=np.int64)
            value = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
            feeds[name] = value.astype(np.int64, copy=False)
        return tuple(torch.from_numpy(output) for output in self.session.run(self.output_names, feeds))


class OnnxTransformer(OnnxFunction):
    """A transformer's last hidden states (or the export's other ``output``) computed by ONNX Runtime on the CPU:
    ``token_states(features)`` returns ``[b, L, d]`` float32 on the CPU, as
    ``transformer(**inputs).last_hidden_state`` would (``getattr(transformer(**inputs), output)`` for another
    output)."""

    def __init__(
        self, content: bytes, input_names: tuple[str, ...], threads: int | None = None, output: str = OUTPUT_NAME
    ):
        super().__init__(content, input_names, (output,), threads)

    @property
    def output(self) -> str:
        """The one output the export returns (:data:`EXPORTABLE_OUTPUTS`)."""
        return self.output_names[0]

    def token_states(self, features: dict) -> torch.Tensor:
        return self.run(features)[0]


def onnx_export(
    module: nn.Module,
    export: Callable[[], bytes],
    key: str,
    output_names: Sequence[str],
    cache_dir: Path | str | None = None,
) -> bytes:
    """``export()`` (the ONNX bytes of a function of ``module``), kept with ``cache_dir`` as
    ``onnx/<key>.onnx`` (checksummed; a damaged entry, or one without ``output_names``, is exported again), so each
    checkpoint is exported once per store; without ``cache_dir`` it is made in memory each time."""
    require_onnx_runtime()

    def logged_export() -> bytes:
        logger.info("exporting %s to ONNX (once per checkpoint)", type(module).__name__)
        return export()

    quantisation = _quantisation.get()
    if cache_dir is None:
        content = logged_export()
        return content if quantisation is None else quantised_bytes(content)
    path = Path(cache_dir) / "onnx" / f"{key}{EXPORT_SUFFIX}"
    path.parent.mkdir(parents=True, exist_ok=True)
    # made_from: an export copied over another's name (with its side file) is exported again, never run
    made_from = {"export_key": key, "output_names": list(output_names)}
    content, cached = cached_bytes(
        path,
        logged_export,
        check=partial(_looks_like_onnx, output_names=output_names),
        what="ONNX export",
        made_from=made_from,
    )
    if cached:
        logger.info("ONNX export of %s read from %s", type(module).__name__, path)
    if quantisation is None:
        return content
    # the quantised model, made from the float export once per checkpoint and kept beside it
    quantised_path = path.with_name(f"{key}-{quantisation}{EXPORT_SUFFIX}")
    content, cached = cached_bytes(
        quantised_path,
        partial(quantised_bytes, content),
        check=partial(_looks_like_onnx, output_names=output_names),
        what="quantised ONNX export",
        made_from={**made_from, "quantisation": quantisation, "method": QUANTISATION_METHOD},
    )
    if cached:
        logger.info("quantised ONNX export of %s read from %s", type(module).__name__, quantised_path)
    return content


# What quantised_bytes does (part of the quantised exports' made_from: a change of method makes them again)
QUANTISATION_METHOD = "onnxruntime.quantization.quantize_dynamic(weight_type=QInt8, per_channel=False)"
# Which quantisation onnx_export applies to the exports made inside RuntimeSwitch.session_for (None: float)
_quantisation: contextvars.ContextVar[str | None] = contextvars.ContextVar("harness_onnx_quantisation", default=None)


def quantised_bytes(content: bytes) -> bytes:
    """The ONNX model ``content`` with its weights quantised to int8 by ONNX Runtime's dynamic quantisation
    (``quantize_dynamic``: MatMul and Gather weights stored as int8 with a scale, activations quantised per batch at
    run time); the rest of the graph (LayerNorm, softmax, GELU) stays float32."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root_logger = logging.getLogger()
    # the quantiser's advice to pre-process (a warning on the root logger) says nothing a user can act on
    advice = _DropMessages("pre-processing before quantization")
    root_logger.addFilter(advice)
    with tempfile.TemporaryDirectory(prefix="harness-onnx-int8-") as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        source, target = Path(folder) / "model.onnx", Path(folder) / "model-int8.onnx"
        source.write_bytes(content)
        logger.info("quantising the ONNX export to int8 (once per checkpoint)")
        try:
            quantize_dynamic(source, target, weight_type=QuantType.QInt8, per_channel=False)
        finally:
            root_logger.removeFilter(advice)
        return target.read_bytes()


class _DropMessages(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def onnx_transformer(
    transformer: nn.Module, cache_dir: Path | str | None = None, key: str | None = None, output: str = OUTPUT_NAME
) -> OnnxTransformer:
    """``transformer`` exported to ONNX (its ``output``: the last hidden states by default) and loaded in ONNX
    Runtime, the export cached by :func:`onnx_export`. ``key``: :func:`export_key` of ``transformer`` (with
    :func:`output_determinants`) when the caller has it already (hashing a large model's weights takes a moment)."""
    input_names = model_input_names(transformer)
    axes = EXPORTABLE_OUTPUTS[check_output(output)][1]
    content = _function_bytes(
        transformer,
        partial(_transformer_output, transformer, output),
        input_names,
        {output: axes},
        cache_dir,
        output_determinants(output),
        key,
    )
    return OnnxTransformer(content, input_names, output=output)


def _function_bytes(
    module: nn.Module,
    function: Callable[..., Any],
    input_names: tuple[str, ...],
    outputs: Mapping[str, Mapping[int, str]],
    cache_dir: Path | str | None,
    determinants: Sequence[Any],
    key: str | None = None,
) -> bytes:
    """The export of ``function`` (:func:`export_function_bytes`), cached by :func:`onnx_export` under ``key`` or
    :func:`export_key` of ``module`` with ``determinants`` (hashed only when there is a cache to look in)."""
    require_onnx_runtime()
    if cache_dir is not None:
        key = key or export_key(module, input_names, determinants)
    return onnx_export(
        module,
        partial(export_function_bytes, module, function, input_names, outputs),
        key or "",
        tuple(outputs),
        cache_dir,
    )


def onnx_function(
    module: nn.Module,
    function: Callable[..., Any],
    input_names: Sequence[str],
    outputs: Mapping[str, Mapping[int, str]],
    cache_dir: Path | str | None = None,
    determinants: Sequence[Any] = (),
) -> OnnxFunction:
    """``function(**inputs)`` of ``module`` (tokenised ``input_names`` to the tensors named in ``outputs``, see
    :func:`export_function_bytes`) exported to ONNX and loaded in ONNX Runtime. The export is cached by
    :func:`onnx_export` under :func:`export_key` of ``module`` with ``determinants``: everything besides the
    module's weights and config that changes the graph (options the function reads, a version of its code)."""
    input_names = tuple(input_names)
    content = _function_bytes(module, function, input_names, outputs, cache_dir, determinants)
    return OnnxFunction(content, input_names, tuple(outputs))


class OnnxTransformerModule(nn.Module):
    """A parameter-free stand-in for a Hugging Face transformer at inference: called as the transformer is
    (``module(input_ids=..., attention_mask=..., token_type_ids=...)``), it returns a ``BaseModelOutput`` whose
    ``last_hidden_state`` (also ``[0]`` and ``["last_hidden_state"]``) comes from ONNX Runtime (for a ``logits``
    export a ``SequenceClassifierOutput``). ``config`` is the transformer's. An argument the export does not take
    (``position_ids``, ``output_hidden_states=True``, ...) is refused in one line rather than dropped."""

    # arguments that ask for nothing the export leaves out
    IGNORED_ARGUMENTS = ("return_dict",)

    def __init__(self, runtime: OnnxTransformer, config: object = None):
        super().__init__()
        self.runtime = runtime
        self.config = config

    def forward(self, **inputs: torch.Tensor):
        import transformers.modeling_outputs

        unused = [
            name
            for name, value in inputs.items()
            if name not in MODEL_INPUTS
            and name not in self.IGNORED_ARGUMENTS
            and value is not None
            and value is not False
        ]
        if unused:
            raise IncompatibleError(
                f"the ONNX export takes {', '.join(self.runtime.input_names)} only, not "
                f"{', '.join(unused)}; use --runtime torch"
            )
        output_class = getattr(transformers.modeling_outputs, EXPORTABLE_OUTPUTS[self.runtime.output][0])
        return output_class(**{self.runtime.output: self.runtime.token_states(inputs)})


def _weight_versions(transformer: nn.Module) -> tuple:
    """Identity, storage and version counter of every weight: changes whenever a tensor is replaced or changed in
    place (optimiser steps and load_state_dict included), so an unchanged tuple means unchanged weights."""
    return tuple(
        (name, id(tensor), tensor.data_ptr(), tensor._version)
        for name, tensor in (*transformer.named_parameters(), *transformer.named_buffers())
    )


class RuntimeSwitch:
    """Which runtime a model evaluates through (``harness run --runtime``), and the one mechanism that applies it:
    :meth:`inference` swaps a module's transformer attribute for an :class:`OnnxTransformerModule` for the length of
    a ``with`` block and puts the torch transformer back afterwards, so everything around the transformer (pooling,
    heads, segment masks) stays the model's own torch code, and training and checkpoints only ever see torch.

    The ONNX session is built on first use and rebuilt when the weights changed since (training between
    evaluations); the export is cached under ``cache_dir`` by :func:`export_key`. ONNX Runtime runs here on the CPU
    only: a transformer on another device is refused in one line rather than silently moved."""

    def __init__(self) -> None:
        self.runtime = "torch"
        self.cache_dir: Path | None = None
        self._built: tuple[tuple, Any] | None = None  # ((weight versions, variant), stand-in or session)

    def __getstate__(self) -> dict:
        # copies and pickles (deepcopy of a model, a Ray worker) carry the choice, not the session, which cannot
        # be copied; the copy builds its own on first use
        return {**self.__dict__, "_built": None}

    def use(self, runtime: str, cache_dir: Path | str | None = None) -> None:
        """Choose ``runtime`` (one of :data:`RUNTIMES`); "onnx" and "onnx-int8" are refused in one line without
        onnxruntime. Under "onnx-int8" every export :meth:`session_for` builds is quantised
        (:func:`quantised_bytes`)."""
        self.runtime = check_runtime(runtime)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self._built = None

    def session_for(self, module: nn.Module, build: Callable[[], Built], variant: Any = None) -> Built:
        """What ``build()`` makes of ``module``'s current weights (an ONNX Runtime session, or a stand-in around
        one), built on first use and again whenever a weight of ``module`` changed since, or ``variant`` (e.g. which
        output is exported) differs from the last call's. Hashing the weights for the export's key (~0.25 s for
        MiniLM on 2 cores) is skipped while no weight tensor changed. A module off the CPU is refused in one line."""
        device = next(module.parameters()).device
        if device.type != "cpu":
            raise IncompatibleError(
                f"--runtime {self.runtime} runs on the CPU (ONNX Runtime's CPU provider); this "
                f"model is on {device}: use --device cpu, or --runtime torch."
            )
        versions = (_weight_versions(module), variant)
        if self._built is None or self._built[0] != versions:
            # every export built here is quantised under a quantised runtime (onnx_export reads this)
            token = _quantisation.set(QUANTISED_RUNTIMES.get(self.runtime))
            try:
                self._built = (versions, build())
            finally:
                _quantisation.reset(token)
        return self._built[1]

    def stand_in(self, transformer: nn.Module, output: str = OUTPUT_NAME) -> OnnxTransformerModule:
        """The ONNX Runtime stand-in for ``transformer``'s current weights (exported or read from the cache once),
        returning ``output`` (:data:`EXPORTABLE_OUTPUTS`)."""
        check_output(output)
        return self.session_for(
            transformer,
            lambda: OnnxTransformerModule(
                onnx_transformer(transformer, self.cache_dir, output=output), getattr(transformer, "config", None)
            ),
            variant=output,
        )

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """:func:`quiet_torch` under a runtime other than torch (around a loop of session runs that does not go
        through :meth:`inference`); nothing under torch."""
        if self.runtime == "torch":
            yield
            return
        with quiet_torch():
            yield

    @contextmanager
    def inference(self, owner: nn.Module, attribute: str = "transformer", output: str = OUTPUT_NAME) -> Iterator[None]:
        """Within the block, ``owner.<attribute>`` runs through the chosen runtime (unchanged under torch); its stand-in
        returns ``output`` (the last hidden states, or a model head's ``logits``)."""
        if self.runtime == "torch":
            yield
            return
        transformer = getattr(owner, attribute)
        setattr(owner, attribute, self.stand_in(transformer, output))
        try:
            with quiet_torch():
                yield
        finally:
            setattr(owner, attribute, transformer)
