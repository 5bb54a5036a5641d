"""sentence-transformers models run as sentence-transformers runs them: ``st`` (a ``SentenceTransformer``, an
embedder) and ``st-ce`` (a ``CrossEncoder``, a pair scorer).

Reference: sentence-transformers' ``SentenceTransformer.encode`` and ``CrossEncoder.predict`` (the installed
package; https://sbert.net). The model folder's own modules run (its ``modules.json``: pooling, Dense, Normalize,
any other module), with its own tokenisation, maximum sequence length and ``default_prompt_name``; where the model
defines ``query`` / ``document`` prompts, tasks that know which side a text is on (``mteb:*``, ``beir:*``) ask for
them through :meth:`SentenceTransformerEmbedder.encode_query` / ``encode_document``.

Which model: the option ``model`` (a local folder or a Hugging Face id), else ``--backbone`` (default: the
profile's backbone, all-MiniLM-L6-v2 from the bundled package, itself a sentence-transformers folder). A local folder
must be a sentence-transformers model (a ``modules.json``, or for ``st-ce`` a sequence-classification config);
sentence-transformers itself would silently wrap any other transformer folder in mean pooling, which is what
``be`` already does, so ``st`` refuses it with one line saying so.

``harness run --runtime onnx``: the Hugging Face model inside the model's one sentence-transformers ``Transformer``
module (its ``model`` attribute) is exported by the core (:class:`harness.blocks.RuntimeSwitch`) and, for the length
of an ``encode`` / ``predict`` call, a stand-in computing it with ONNX Runtime takes its place; everything else is
sentence-transformers' own code as before: tokenisation, prompts, the ``Transformer`` module's forward, pooling,
Dense, Normalize, the cross-encoder's activation. The export returns what that module reads from the model: the last
hidden states (``feature-extraction``) or a sequence classifier's logits (``sequence-classification``; the head is
part of the export). A model the export cannot stand in for is refused in one line (:func:`onnx_target`).

Deviations: ``st-ce`` scores each distinct pair once (sentence-transformers would score repeats again; the numbers
are the same). Under ``--runtime onnx`` scores equal sentence-transformers' torch scores to float rounding only
(ONNX Runtime fuses and reorders float32 operations). Neither model trains in the harness (run them as they are, or
export a harness-trained ``be`` / ``ce`` with ``harness export``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from harness import (
    EMBEDDER,
    PAIR_SCORER,
    HarnessError,
    IncompatibleError,
    ModelPlugin,
    Option,
    check_backbone,
    hookimpl,
)
from harness.blocks import distinct_pairs

logger = logging.getLogger(__name__)

SENTENCE_TRANSFORMER = "SentenceTransformer"
CROSS_ENCODER = "CrossEncoder"


class NotSentenceTransformersModelError(HarnessError):
    """A folder that sentence-transformers would not load as the kind of model asked for."""


def _import_sentence_transformers() -> Any:
    try:
        import sentence_transformers
    except ImportError:
        raise HarnessError(
            "the st models need the sentence-transformers package; install it with "
            "`pip install 'sentence-harness[interop]'`."
        ) from None
    return sentence_transformers


def folder_kind(folder: Path) -> str | None:
    """``SentenceTransformer``, ``CrossEncoder`` or None (not a sentence-transformers model) for a local folder,
    read from the files sentence-transformers itself reads (``config_sentence_transformers.json``'s
    ``model_type``, ``modules.json``, a sequence-classification ``config.json``)."""
    config_path = folder / "config_sentence_transformers.json"
    if config_path.is_file():
        try:
            model_type = json.loads(config_path.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError):
            model_type = None
        if model_type in (SENTENCE_TRANSFORMER, CROSS_ENCODER):
            return model_type
    if (folder / "modules.json").is_file():
        return SENTENCE_TRANSFORMER  # written before sentence-transformers 5 recorded model_type
    hf_config = folder / "config.json"
    if hf_config.is_file():
        try:
            architectures = json.loads(hf_config.read_text(encoding="utf-8")).get("architectures") or []
        except (OSError, ValueError):
            architectures = []
        if any(str(name).endswith("ForSequenceClassification") for name in architectures):
            return CROSS_ENCODER  # a cross-encoder saved by sentence-transformers < 5 (a plain HF classifier)
    return None


def check_folder(location: str, wanted: str, model_name: str) -> None:
    """Raise a one-line error unless the local folder ``location`` is a sentence-transformers model of kind
    ``wanted``; Hugging Face ids (no such folder) are left to sentence-transformers."""
    folder = Path(location).expanduser()
    if not folder.exists():
        if location.startswith((".", "/", "~")) or "\\" in location:
            raise NotSentenceTransformersModelError(
                f"{location}: no such folder; give a sentence-transformers model folder or a Hugging Face id."
            )
        return
    if not folder.is_dir():
        raise NotSentenceTransformersModelError(f"{location} is a file; give a sentence-transformers model folder.")
    kind = folder_kind(folder)
    if kind == wanted:
        return
    if kind is None:
        raise NotSentenceTransformersModelError(
            f"{location} is not a sentence-transformers model (no modules.json or config_sentence_transformers.json"
            f"); save it with SentenceTransformer.save(), or run a plain transformer with the harness' own pooling: "
            f"--models be --backbone {location}."
        )
    other = "st-ce" if kind == CROSS_ENCODER else "st"
    raise IncompatibleError(
        f"{location} is a sentence-transformers {kind}, not a {wanted}; use --models {other} instead of {model_name}."
    )


# Weights are read from safetensors only, as the harness' own backbones are: a pickle-only folder is refused with
# load_error's one line instead of being unpickled.
SAFETENSORS_ONLY = {"use_safetensors": True}


def _load_error(location: str, exc: Exception) -> HarnessError:
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return HarnessError(
        f"sentence-transformers could not load {location!r} ({type(exc).__name__}: {first_line}); "
        "give a local model folder with safetensors weights (pickled weights are never loaded), or "
        "check the Hugging Face id and the network."
    )


# The attribute of sentence-transformers' Transformer module that holds the Hugging Face model (``auto_model`` is a
# read-only property over it), and the model outputs its text path may read that an export can return.
HF_MODEL_ATTRIBUTE = "model"
EXPORTED_OUTPUTS = ("last_hidden_state", "logits")


def onnx_target(model: Any) -> tuple[Any, str]:
    """The sentence-transformers ``Transformer`` module whose Hugging Face model ``--runtime onnx`` computes, and the
    output of that model its text path reads (``last_hidden_state`` or ``logits``). Refused in one line where a
    stand-in returning that one output would not be what sentence-transformers runs: no such module or several, a
    non-torch backend, a text path through another method than ``forward`` or reading another output, hidden states
    of every layer asked for (``output_hidden_states``), or flattened inputs (flash attention)."""
    from sentence_transformers.base.modules import Transformer

    found = [module for module in model.modules() if isinstance(module, Transformer)]
    if len(found) != 1:
        raise IncompatibleError(
            f"--runtime onnx computes the model of one sentence-transformers Transformer module; "
            f"this model has {len(found)}: use --runtime torch."
        )
    (module,) = found
    text = (getattr(module, "modality_config", None) or {}).get("text") or {}
    output = text.get("method_output_name")
    backend = getattr(module, "backend", "torch")
    reasons = {
        f"its backend is {backend}": backend != "torch",
        "it reads text through another method than forward": text.get("method") != "forward",
        f"it reads the output {output!r}": output not in EXPORTED_OUTPUTS,
        "its config asks for every layer's hidden states": bool(getattr(module.config, "output_hidden_states", False)),
        "it flattens inputs for flash attention": bool(getattr(module, "can_flatten_inputs", False)),
    }
    reason = next((reason for reason, applies in reasons.items() if applies), None)
    if reason is not None:
        raise IncompatibleError(
            f"--runtime onnx cannot stand in for this sentence-transformers model's "
            f"{type(module.model).__name__} ({reason}): use --runtime torch."
        )
    return module, output


class SentenceTransformersRuntime:
    """``use_runtime`` for a sentence-transformers model: its one ``Transformer`` module's Hugging Face model runs
    through the chosen runtime (:class:`harness.blocks.RuntimeSwitch`) for the length of :meth:`inference`."""

    model: Any
    runtime: Any = None  # a RuntimeSwitch once use_runtime was called
    runtime_target: tuple[Any, str] | None = None  # (Transformer module, output) under a runtime other than torch

    def use_runtime(self, runtime: str, cache_dir: Path | None = None) -> None:
        """``harness run --runtime``: "onnx" computes the Hugging Face model with ONNX Runtime (CPU); everything
        around it stays sentence-transformers' torch code. A model it cannot stand in for is refused here."""
        from harness.blocks import RuntimeSwitch

        target = onnx_target(self.model) if runtime != "torch" else None
        if self.runtime is None:
            self.runtime = RuntimeSwitch()
        self.runtime.use(runtime, cache_dir)
        self.runtime_target = target

    @contextmanager
    def inference(self) -> Iterator[None]:
        """Within the block sentence-transformers' own code runs with the chosen runtime's model."""
        if self.runtime_target is None:
            yield
            return
        module, output = self.runtime_target
        with self.runtime.inference(module, HF_MODEL_ATTRIBUTE, output):
            yield


class SentenceTransformerEmbedder(SentenceTransformersRuntime):
    """An Embedder over a ``SentenceTransformer``: ``encode`` is ``SentenceTransformer.encode`` (float32 numpy)."""

    def __init__(self, model: Any, batch_size: int, progress: bool, use_prompts: bool):
        self.model = model
        self.batch_size = batch_size
        self.progress = progress
        self.use_prompts = use_prompts

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, None)

    def _encode(self, texts: Sequence[str], prompt_name: str | None) -> np.ndarray:
        if not len(texts):
            dimension_of = (
                getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
            )  # sentence-transformers < 6
            dimension = dimension_of() or 0
            return np.zeros((0, dimension), dtype=np.float32)
        # ``prompt_name=None`` lets sentence-transformers apply the model's default_prompt_name, as it would.
        with self.inference():
            return self.model.encode(
                list(texts),
                prompt_name=prompt_name,
                batch_size=self.batch_size,
                show_progress_bar=self.progress,
                convert_to_numpy=True,
            )

    def prompt_for(self, role: str) -> str | None:
        """The model's prompt name for ``role`` ("query" or "document"; "passage" is accepted for documents), or
        None when it defines none (or prompts are switched off)."""
        prompts = getattr(self.model, "prompts", None) or {}
        if not self.use_prompts:
            return None
        names = ("query",) if role == "query" else ("document", "passage", "corpus")
        return next((name for name in names if prompts.get(name)), None)

    def encode_query(self, texts: Sequence[str]) -> np.ndarray:
        """Texts on the query side of a retrieval task, with the model's query prompt if it has one."""
        return self._encode(texts, self.prompt_for("query"))

    def encode_document(self, texts: Sequence[str]) -> np.ndarray:
        """Texts on the document side, with the model's document prompt if it has one."""
        return self._encode(texts, self.prompt_for("document"))

    def export_sentence_transformers(self, directory: Path) -> None:
        """It already is one: sentence-transformers writes its own folder."""
        self.model.save(str(directory))


class CrossEncoderScorer(SentenceTransformersRuntime):
    """A PairScorer over a ``CrossEncoder``: ``score`` is ``CrossEncoder.predict`` (its own activation)."""

    def __init__(self, model: Any, batch_size: int, progress: bool):
        self.model = model
        self.batch_size = batch_size
        self.progress = progress

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        pairs, rows = distinct_pairs(first, second)
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        with self.inference():
            scores = np.asarray(
                self.model.predict(
                    pairs, batch_size=self.batch_size, show_progress_bar=self.progress, convert_to_numpy=True
                ),
                dtype=np.float32,
            )
        return scores[rows]

    def export_cross_encoder(self, directory: Path) -> None:
        self.model.save(str(directory))


def _location(ctx) -> str:
    return ctx.options["model"] or ctx.backbone


def build_embedder(ctx) -> SentenceTransformerEmbedder:
    location = _location(ctx)
    check_folder(location, SENTENCE_TRANSFORMER, "st")
    sentence_transformers = _import_sentence_transformers()
    try:
        model = sentence_transformers.SentenceTransformer(location, device=ctx.device, model_kwargs=SAFETENSORS_ONLY)
    except (OSError, ValueError, KeyError) as exc:
        raise _load_error(location, exc) from None
    return SentenceTransformerEmbedder(model, ctx.eval_batch_size, ctx.progress, ctx.options["prompts"])


def build_cross_encoder(ctx) -> CrossEncoderScorer:
    location = _location(ctx)
    check_folder(location, CROSS_ENCODER, "st-ce")
    sentence_transformers = _import_sentence_transformers()
    try:
        model = sentence_transformers.CrossEncoder(location, device=ctx.device, model_kwargs=SAFETENSORS_ONLY)
    except (OSError, ValueError, KeyError) as exc:
        raise _load_error(location, exc) from None
    if model.num_labels != 1:
        raise IncompatibleError(
            f"{location} is a cross-encoder with {model.num_labels} labels (a classifier); st-ce "
            "scores pairs with one-label (regression or relevance) cross-encoders only."
        )
    return CrossEncoderScorer(model, ctx.eval_batch_size, ctx.progress)


def plan_check(wanted: str, model_name: str) -> Callable[[Any, Any], None]:
    """``ModelPlugin.validate``: the model folder (option ``model``, else ``--backbone``) is a sentence-transformers
    model of the wanted kind, or a Hub id that is cached or reachable; checked before anything runs."""

    def validate(spec: Any, registry: Any) -> None:
        location = spec.options["model"] or spec.backbone
        if ("backbone", location) in registry.components:  # a registered alias (a model shipped in a package)
            location = str(registry.component("backbone", location)())
        check_folder(location, wanted, model_name)
        if not Path(location).expanduser().exists():
            check_backbone(location)

    return validate


MODEL_OPTION = Option(
    "", "a sentence-transformers model folder or Hugging Face id (default: --backbone)", type=str, path=True
)  # a folder's files, not its path, identify the spec


@hookimpl
def register_models(register):
    register(
        ModelPlugin(
            name="st",
            aliases=("sentence-transformer",),
            description="any sentence-transformers model as SentenceTransformer.encode runs it (its own modules, "
            "prompts)",
            factory=build_embedder,
            capabilities=(EMBEDDER,),
            options={
                "model": MODEL_OPTION,
                "prompts": Option(
                    True, "use the model's query/document prompts where a task tells the side", type=bool
                ),
            },
            reference="Reimers & Gurevych 2019; sentence-transformers SentenceTransformer.encode",
            model_class=SentenceTransformerEmbedder,
            validate=plan_check(SENTENCE_TRANSFORMER, "st"),
        )
    )
    register(
        ModelPlugin(
            name="st-ce",
            aliases=("st-cross-encoder",),
            description="any sentence-transformers CrossEncoder as CrossEncoder.predict runs it (a pair scorer)",
            factory=build_cross_encoder,
            capabilities=(PAIR_SCORER,),
            options={"model": MODEL_OPTION},
            reference="sentence-transformers CrossEncoder.predict",
            model_class=CrossEncoderScorer,
            validate=plan_check(CROSS_ENCODER, "st-ce"),
        )
    )
