"""The plugin contract of harness, the first front door (re-exported by ``harness``).

Plugins import ``harness`` (this module's names: plugin classes, contexts, capabilities, data types, profiles,
errors, ``hookimpl``), the building blocks from the second front door ``harness.blocks`` (losses, pooling, encoder,
decoder, objectives, MLM, noise, retrieval, MaxSim, probe, the training loop) and, in their tests,
``harness.testing``. ``harness.nn``, ``harness.evaluation`` and ``harness.training`` (what ``harness.blocks``
gathers) stay importable for plugins written against 0.2. Every other module of the package is private: it may
change without notice. Changes to these names are listed in CHANGELOG.md, with deprecations first.
docs/writing-plugins.md explains each name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .capabilities import (
    CAPABILITIES,
    EMBEDDER,
    MULTI_VECTOR_EMBEDDER,
    PAIR_SCORER,
    SPAN_ENCODER,
    TRAINABLE,
    Embedder,
    ModelOutputError,
    MultiVectorEmbedder,
    PairScorer,
    ScoredPairLearner,
    SpanEncoder,
    Trainable,
    VectorSets,
    checked_vectors,
    reachable_capabilities,
)
from .checkpoints import CheckpointedModule
from .contamination import UNSEEN_OPTION, EvaluatedTexts, unseen_indices
from .data import (
    LABELED_SENTENCES,
    PROPOSITION_PAIRS,
    SCORED_PAIRS,
    TRAINING_KINDS,
    UNLABELED_SENTENCES,
    LabeledSentences,
    ScoredPairs,
    TrainingSplits,
    UnlabeledSentences,
    data_dir_override,
    default_download_dir,
    files_checksum,
    read_text_lines,
    resolve_dataset_dir,
)
from .deprecation import deprecated_names
from .download import Archive, ArchiveDataset
from .errors import (
    DataFileError,
    HarnessError,
    IncompatibleError,
    InvalidOptionError,
    MissingDataError,
    close_matches_hint,
    data_error,
    invalid_choice,
)
from .evaluation.adapters import as_embedder, as_pair_scorer, cosine_rows, maxsim
from .files import atomic_write_bytes, atomic_write_file, atomic_write_json, atomic_write_text, cached_bytes
from .hookspecs import hookimpl
from .hub import BackboneNotFoundError, check_backbone, hub_reachable, offline_reason
from .metrics import pearson, spearman
from .options import Option
from .plugin_api import (
    Component,
    ComponentKind,
    EvalContext,
    EvalResult,
    ExecutorFactory,
    ExecutorOption,
    ModelContext,
    ModelPlugin,
    PluginContractError,
    RecipeContext,
    RecipePlugin,
    Task,
    TaskMetadata,
    TaskPlugin,
)
from .profiles import Profile, get_profile
from .propositions import PropositionPair, PropositionPairs
from .ranked_texts import RankedTexts, texts_by_id
from .results import LoadProblem, ResultsError, ResultsFrame, load_results
from .status import CellStatus
from .store_files import (
    StoreError,
    UnsafeFileError,
    open_store_file,
    path_inside,
    read_store_bytes,
    read_store_text,
    sha256_file,
)


def resolve_model_spec(registry, text: str, profile, backbone: str | None = None, train_on: str | None = None):
    """A model (or recipe) spec text such as ``"ce:activation=tanh"`` resolved and validated against ``registry``
    (the ``registry`` a plugin's ``validate(spec, registry)`` receives); returns a ``ModelSpec``."""
    from .spec import resolve_model_spec as resolve

    return resolve(registry, text, profile, backbone, train_on)


def resolve_task_specs(registry, text: str):
    """A task or task-family spec text resolved against ``registry``: a list of ``TaskSpec`` (one per member)."""
    from .spec import resolve_task_specs as resolve

    return resolve(registry, text)


def seed_everything(seed: int) -> None:
    """Seed Python's, numpy's and torch's generators (torch is imported only when this is called, so
    ``import harness`` stays light for plugins that never use it)."""
    from .device import seed_everything as seed_all

    seed_all(seed)


__all__ = [
    # hooks and what they register
    "hookimpl",
    "ModelPlugin",
    "RecipePlugin",
    "TaskPlugin",
    "Task",
    "TaskMetadata",
    "Component",
    "ComponentKind",
    "ExecutorFactory",
    "ExecutorOption",
    "Option",
    "PluginContractError",
    "ModelOutputError",
    "checked_vectors",
    # contexts and results
    "ModelContext",
    "RecipeContext",
    "EvalContext",
    "EvalResult",
    "Profile",
    # capabilities
    "CAPABILITIES",
    "EMBEDDER",
    "PAIR_SCORER",
    "MULTI_VECTOR_EMBEDDER",
    "SPAN_ENCODER",
    "TRAINABLE",
    "Embedder",
    "PairScorer",
    "MultiVectorEmbedder",
    "SpanEncoder",
    "Trainable",
    "ScoredPairLearner",
    "VectorSets",
    "as_embedder",
    "as_pair_scorer",
    "cosine_rows",
    "maxsim",
    "reachable_capabilities",
    # specs (for plan-time validation of options that name other models or tasks)
    "resolve_model_spec",
    "resolve_task_specs",
    "get_profile",
    # training data and datasets
    "SCORED_PAIRS",
    "UNLABELED_SENTENCES",
    "LABELED_SENTENCES",
    "PROPOSITION_PAIRS",
    "TRAINING_KINDS",
    "ScoredPairs",
    "UnlabeledSentences",
    "LabeledSentences",
    "PropositionPair",
    "PropositionPairs",
    "TrainingSplits",
    "resolve_dataset_dir",
    "data_dir_override",
    "default_download_dir",
    "files_checksum",
    "read_text_lines",
    "Archive",
    "ArchiveDataset",
    # measured train/test overlap (harness.contamination)
    "EvaluatedTexts",
    "UNSEEN_OPTION",
    "unseen_indices",
    # the texts behind a ranking task's stored hits (harness.ranked_texts)
    "RankedTexts",
    "texts_by_id",
    # utilities
    "seed_everything",
    # files written safely (harness.files) and checkpoints (harness.checkpoints)
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "cached_bytes",
    "sha256_file",
    "StoreError",
    "CellStatus",
    "atomic_write_file",
    "path_inside",
    "open_store_file",
    "read_store_bytes",
    "read_store_text",
    "UnsafeFileError",
    "CheckpointedModule",
    "check_backbone",
    "BackboneNotFoundError",
    "hub_reachable",
    "offline_reason",
    # errors
    "HarnessError",
    "DataFileError",
    "MissingDataError",
    "InvalidOptionError",
    "IncompatibleError",
    "data_error",
    "invalid_choice",
    "close_matches_hint",
    # metrics
    "spearman",
    "pearson",
    # stored results as data (harness.results; pandas is imported when they are loaded)
    "load_results",
    "ResultsFrame",
    "LoadProblem",
    "ResultsError",
]

# The store's own machinery, public in 0.2: a plugin needs none of it (``CheckpointedModule`` saves and loads a
# model; the store writes checkpoints and sweeps temporaries). Still importable from ``harness.files`` and
# ``harness.checkpoints``.
_STORE_INTERNALS = {
    "temporary_prefix": "harness.files",
    "stale_temporary": "harness.files",
    "remove_stale_temporaries": "harness.files",
    "build_checkpoint": "harness.checkpoints",
    "checkpoint_complete": "harness.checkpoints",
    "checkpoint_problem": "harness.checkpoints",
}
if not TYPE_CHECKING:  # hidden from type checkers, so a deprecated name is an error there
    __getattr__ = deprecated_names(__name__, {name: (module, name) for name, module in _STORE_INTERNALS.items()})
