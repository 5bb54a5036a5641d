"""The building blocks of harness: the second front door for plugin authors (the first is ``harness``, the contract).

``harness`` holds what a plugin *is* (plugin classes, contexts, capabilities, errors, ``hookimpl``, data types,
profiles); this package holds what a plugin is *built from*, in named groups:

- :mod:`harness.blocks.backbone`: backbone loading and sequence limits;
- :mod:`harness.blocks.encoder`: pooling, :class:`SentenceEncoder` and the encoding loop;
- :mod:`harness.blocks.pairs`: two-segment pair inputs and their segment ids;
- :mod:`harness.blocks.losses`: cosine and score regression, InfoNCE, SupCon;
- :mod:`harness.blocks.objectives`: composable unsupervised objectives (:func:`objective_model`), the decoder, MLM,
  word-deletion noise, the classification head;
- :mod:`harness.blocks.spans`: spans inside sentences;
- :mod:`harness.blocks.text`: topic prompts;
- :mod:`harness.blocks.silver_pairs`: pair samplers' contract and the silver-pair artifact;
- :mod:`harness.blocks.runtime`: the ONNX Runtime path (:class:`RuntimeSwitch`);
- :mod:`harness.blocks.export`: Sentence-Transformers folders;
- :mod:`harness.blocks.training`: the shared training loop (:func:`fit`);
- :mod:`harness.blocks.evaluation`: the evaluation sample, per-example scores, pair-set scoring, the STS task base
  (torch-free);
- :mod:`harness.blocks.retrieval`: BM25, top-k search, ranking and retrieval metrics, first stages (torch-free);
- :mod:`harness.blocks.maxsim`: batched MaxSim for multi-vector models;
- :mod:`harness.blocks.probe`: the frozen-encoder probe and the probe task base;
- ``wordnet`` and ``distributed``: whole modules (WordNet synonyms; torchrun helpers).

Every name is also offered here, as before the groups existed: ``from harness.blocks import InfoNCE`` and
``from harness.blocks.losses import InfoNCE`` give the same object. Built-in plugins and tasks import only
``harness`` and ``harness.blocks`` (tests/test_layout.py), as a third-party plugin should.

A group is imported on the first use of one of its names (PEP 562), so ``from harness.blocks import
evaluation_sample`` does not import torch; a name of a torch group (``SentenceEncoder``, the losses, ``fit``)
imports it then. Type checkers and IDEs read the groups' real types from the ``TYPE_CHECKING`` imports below.
"""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.deprecation import REMOVAL_VERSION

if TYPE_CHECKING:
    from .backbone import *  # noqa: F403
    from .encoder import *  # noqa: F403
    from .evaluation import *  # noqa: F403
    from .export import *  # noqa: F403
    from .losses import *  # noqa: F403
    from .maxsim import *  # noqa: F403
    from .objectives import *  # noqa: F403
    from .pairs import *  # noqa: F403
    from .probe import *  # noqa: F403
    from .retrieval import *  # noqa: F403
    from .runtime import *  # noqa: F403
    from .silver_pairs import *  # noqa: F403
    from .spans import *  # noqa: F403
    from .text import *  # noqa: F403
    from .training import *  # noqa: F403

# The groups (submodules of harness.blocks), in the order the reference page shows them. What each offers is its
# module's own ``__all__``, read from its source: importing a group to look would load torch.
_GROUP_MODULES = (
    "backbone",
    "encoder",
    "pairs",
    "losses",
    "objectives",
    "spans",
    "text",
    "silver_pairs",
    "runtime",
    "export",
    "training",
    "evaluation",
    "retrieval",
    "maxsim",
    "probe",
)


def _names_offered(group: str) -> tuple[str, ...]:
    """The ``__all__`` of the group module ``group``, read without importing it."""
    tree = ast.parse(Path(__file__).with_name(f"{group}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise ImportError(f"harness.blocks.{group} declares no __all__")


_GROUPS: dict[str, tuple[str, ...]] = {group: _names_offered(group) for group in _GROUP_MODULES}
# whole modules offered as one name (a namespace of related helpers)
_MODULES: dict[str, str] = {"wordnet": "harness.nn.wordnet", "distributed": "harness.distributed"}
# old name -> (module, name) it now is; each warns until harness REMOVAL_VERSION (CHANGELOG.md, 0.3.0 "Deprecated")
_DEPRECATED: dict[str, tuple[str, str]] = {
    # renamed to say what they hold
    "FIRST": ("harness.blocks.pairs", "FIRST_SEGMENT"),
    "SECOND": ("harness.blocks.pairs", "SECOND_SEGMENT"),
    "PADDING": ("harness.blocks.pairs", "PADDING_SEGMENT"),
    "Pair": ("harness.blocks.silver_pairs", "IndexPair"),
    "BM25": ("harness.blocks.retrieval", "BM25_FIRST_STAGE"),
    # one method's helpers, back in its plugin
    "REPLICATION_SETUP": ("harness.plugins.tsdae", "SETUP"),
    **{
        name: ("harness.plugins.paser", name)
        for name in ("english_stopwords", "masked_copy", "pad_ids", "rake_phrases", "words_with_spans")
    },
}

_GROUP_OF: dict[str, str] = {name: group for group, names in _GROUPS.items() for name in names}

__all__ = [*_GROUP_OF, *_MODULES]

if not TYPE_CHECKING:  # hidden from type checkers, so an unknown name is an error there, not an Any

    def __getattr__(name: str) -> Any:
        if name in _GROUP_OF:
            value = getattr(importlib.import_module(f"{__name__}.{_GROUP_OF[name]}"), name)
        elif name in _GROUPS:
            value = importlib.import_module(f"{__name__}.{name}")
        elif name in _MODULES:
            value = importlib.import_module(_MODULES[name])
        elif name in _DEPRECATED:
            module, new_name = _DEPRECATED[name]
            warnings.warn(
                f"harness.blocks.{name} is deprecated and will be removed in harness {REMOVAL_VERSION}; "
                f"use {module}.{new_name}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(module), new_name)  # not cached: every use warns
        else:
            raise AttributeError(f"module 'harness.blocks' has no attribute {name!r}")
        globals()[name] = value  # later lookups skip __getattr__
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
