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
- Device checks: :func:`check_model_device` (built for the ``meta`` device, trained and evaluated, no tensor stays
  on the CPU: what fails on a GPU with "Expected all tensors to be on the same device") and
  :func:`check_model_precision` (training under CPU bfloat16 or float16 autocast, float16 with a real GradScaler);
  :func:`check_recipe_device` the same device check for a recipe spec (its teacher, sampling, student).
- Fixtures (with ``pytest_plugins = ["harness.testing"]`` in a conftest.py): ``tiny_bert``, ``tiny_roberta``,
  ``smoke_profile``, ``harness_cli``.

Modules: :mod:`~harness.testing.backbones`, :mod:`~harness.testing.fakes` (models, training data, the
``testing-*`` registration), :mod:`~harness.testing.contexts` (profile, contexts, registries, the CLI in-process),
:mod:`~harness.testing.model_check` (with :mod:`~harness.testing.behaviour`, what each capability must do),
:mod:`~harness.testing.task_check`, :mod:`~harness.testing.fixtures`. Import from ``harness.testing`` itself: the
submodules' layout is not part of the API.
"""

from __future__ import annotations

from .backbones import TINY_SENTENCES, default_tiny_backbone, tiny_bert, tiny_roberta
from .contexts import HarnessRun, eval_context, model_context, plugin_registry, run_harness, smoke_profile
from .contract import ContractCheckError
from .device_check import (
    DeviceCheckReport,
    DeviceTracer,
    DeviceViolation,
    check_model_device,
    check_model_precision,
    check_recipe_device,
)
from .fakes import (
    TESTING_MODELS,
    HashingEmbedder,
    HashingMultiVectorEmbedder,
    HashingSpanEncoder,
    OverlapPairScorer,
    TrainableHashingEmbedder,
    tiny_model_for,
    tiny_training_splits,
)

# The hook that makes this package a plugin (HARNESS_EXTRA_PLUGINS=harness.testing registers the testing-* models).
from .fakes import register_models as register_models
from .model_check import PICKLE_SUFFIXES as PICKLE_SUFFIXES
from .model_check import PROBE_TEXTS as PROBE_TEXTS
from .model_check import ModelCheckReport, check_model
from .task_check import TaskCheckReport, check_task

try:  # pytest finds the fixtures as attributes of this package (pytest_plugins = ["harness.testing"])
    from .fixtures import harness_cli_fixture as harness_cli_fixture
    from .fixtures import smoke_profile_fixture as smoke_profile_fixture
    from .fixtures import tiny_bert_fixture as tiny_bert_fixture
    from .fixtures import tiny_roberta_fixture as tiny_roberta_fixture
except ModuleNotFoundError as missing:  # the functions above work without pytest; only the fixtures need it
    if missing.name != "pytest":
        raise

__all__ = [
    "TINY_SENTENCES",
    "tiny_bert",
    "tiny_roberta",
    "default_tiny_backbone",
    "HashingEmbedder",
    "TrainableHashingEmbedder",
    "HashingMultiVectorEmbedder",
    "HashingSpanEncoder",
    "OverlapPairScorer",
    "tiny_model_for",
    "TESTING_MODELS",
    "tiny_training_splits",
    "smoke_profile",
    "model_context",
    "eval_context",
    "plugin_registry",
    "run_harness",
    "HarnessRun",
    "ContractCheckError",
    "ModelCheckReport",
    "TaskCheckReport",
    "check_model",
    "check_task",
    "check_model_device",
    "check_model_precision",
    "check_recipe_device",
    "DeviceTracer",
    "DeviceViolation",
    "DeviceCheckReport",
]
