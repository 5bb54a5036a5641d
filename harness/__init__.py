"""harness: a plugin-based benchmark harness for sentence-embedding methods.

Plugins implement the hooks in :mod:`harness.hookspecs` and register the types exported here.
"""
from .capabilities import as_embedder, as_pair_scorer, cosine_rows, maxsim
from .data import (
    LABELED_SENTENCES,
    PROPOSITION_PAIRS,
    SCORED_PAIRS,
    UNLABELED_SENTENCES,
    LabeledSentences,
    ScoredPairs,
    TrainingSplits,
    UnlabeledSentences,
)
from .errors import DataFileError, HarnessError, IncompatibleError, InvalidOptionError, MissingDataError
from .hookspecs import hookimpl
from .options import Option
from .plugin_api import Component, EvalContext, EvalResult, ModelContext, ModelPlugin, Task, TaskMetadata, TaskPlugin

__version__ = "0.1.0"

__all__ = [
    "Component", "DataFileError", "EvalContext", "EvalResult", "HarnessError", "IncompatibleError",
    "InvalidOptionError", "LABELED_SENTENCES", "LabeledSentences", "MissingDataError", "ModelContext", "ModelPlugin",
    "Option", "PROPOSITION_PAIRS", "SCORED_PAIRS", "ScoredPairs", "Task", "TaskMetadata", "TaskPlugin",
    "TrainingSplits", "UNLABELED_SENTENCES", "UnlabeledSentences", "as_embedder", "as_pair_scorer", "cosine_rows",
    "hookimpl", "maxsim",
]
