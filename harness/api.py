"""The public plugin API of harness: everything a plugin may import, in one place (re-exported by ``harness``).

Plugins import ``harness`` (this module's names), the building blocks ``harness.nn`` and ``harness.evaluation``,
the training loop ``harness.training`` and, in their tests, ``harness.testing``. Every other module of the package is
private: it may change without notice. Changes to these names are listed in CHANGELOG.md, with deprecations first.
docs/writing-plugins.md explains each name.
"""
from __future__ import annotations

from .capabilities import (
    CAPABILITIES,
    EMBEDDER,
    MULTI_VECTOR_EMBEDDER,
    PAIR_SCORER,
    SPAN_ENCODER,
    TRAINABLE,
    Embedder,
    MultiVectorEmbedder,
    PairScorer,
    ScoredPairLearner,
    SpanEncoder,
    Trainable,
    as_embedder,
    as_pair_scorer,
    cosine_rows,
    maxsim,
)
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
from .device import seed_everything
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
from .hookspecs import hookimpl
from .metrics import pearson, spearman
from .options import Option
from .plugin_api import (
    Component,
    ComponentKind,
    EvalContext,
    EvalResult,
    ModelContext,
    ModelPlugin,
    PluginContractError,
    RecipeContext,
    RecipePlugin,
    Task,
    TaskMetadata,
    TaskPlugin,
)
from .profiles import Profile
from .propositions import PropositionPair, PropositionPairs
from .store import atomic_write_json, atomic_write_text

__all__ = [
    # hooks and what they register
    "hookimpl", "ModelPlugin", "RecipePlugin", "TaskPlugin", "Task", "TaskMetadata", "Component", "ComponentKind",
    "Option", "PluginContractError",
    # contexts and results
    "ModelContext", "RecipeContext", "EvalContext", "EvalResult", "Profile",
    # capabilities
    "CAPABILITIES", "EMBEDDER", "PAIR_SCORER", "MULTI_VECTOR_EMBEDDER", "SPAN_ENCODER", "TRAINABLE",
    "Embedder", "PairScorer", "MultiVectorEmbedder", "SpanEncoder", "Trainable", "ScoredPairLearner",
    "as_embedder", "as_pair_scorer", "cosine_rows", "maxsim",
    # training data and datasets
    "SCORED_PAIRS", "UNLABELED_SENTENCES", "LABELED_SENTENCES", "PROPOSITION_PAIRS", "TRAINING_KINDS",
    "ScoredPairs", "UnlabeledSentences", "LabeledSentences", "PropositionPair", "PropositionPairs", "TrainingSplits",
    "resolve_dataset_dir", "data_dir_override", "default_download_dir", "files_checksum", "read_text_lines",
    "Archive", "ArchiveDataset",
    # utilities
    "seed_everything", "atomic_write_json", "atomic_write_text",
    # errors
    "HarnessError", "DataFileError", "MissingDataError", "InvalidOptionError", "IncompatibleError",
    "data_error", "invalid_choice", "close_matches_hint",
    # metrics
    "spearman", "pearson",
]
