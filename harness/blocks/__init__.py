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

import importlib
import warnings
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

# group (a submodule of harness.blocks) -> the names it offers; tests/test_layout.py checks each equals the
# submodule's own __all__
_GROUPS: dict[str, tuple[str, ...]] = {
    "backbone": (
        "MODEL_INPUTS",
        "BackboneError",
        "SequenceLimits",
        "has_two_token_types",
        "load_tokenizer",
        "load_transformer",
        "position_limit",
        "quiet_transformers",
        "sequence_limits",
    ),
    "encoder": (
        "POOLING_CHOICES",
        "cls_pool",
        "mean_pool",
        "pool",
        "SentenceEncoder",
        "encode_distinct",
        "length_sorted_batches",
        "progress_bar",
    ),
    "pairs": (
        "FIRST_SEGMENT",
        "PADDING_SEGMENT",
        "PAIR_ORDERS",
        "SECOND_SEGMENT",
        "NetworkModel",
        "PairInputBuilder",
        "TrainablePairScorer",
        "distinct_pairs",
        "score_in_length_sorted_batches",
        "truncate_longest_first",
    ),
    "losses": ("REGRESSION_LOSSES", "CosineRegression", "InfoNCE", "ScoreRegression", "SupCon", "cosine_matrix"),
    "objectives": (
        "CLEAN",
        "DELETED",
        "IGNORED_LABEL",
        "OBJECTIVE_KIND",
        "CONTRASTIVE_SETUP",
        "Objective",
        "ObjectiveSetup",
        "TrainingSetup",
        "TrainingStep",
        "UnlabeledCollator",
        "curve_summary",
        "in_batch_contrastive",
        "language_model_head",
        "objective_hooks",
        "objective_model",
        "scored_token_loss",
        "setup_budget",
        "share_parameters",
        "transformer_inputs",
        "usable_sentences",
        "require_unlabeled_source",
        "DecoderOutput",
        "TransformerDecoder",
        "BERT_MASKING",
        "THESIS_CODE_MASKING",
        "Masking",
        "PairTopics",
        "domain_adapted_backbone",
        "freeze_embedding_layer",
        "load_masked_lm",
        "mask_tokens",
        "maskable_positions",
        "DELETION_RATIO",
        "WordDeletion",
        "check_deletion_ratio",
        "delete_words",
        "split_words",
        "SentenceClassification",
        "classification_head",
    ),
    "spans": (
        "SpanBatch",
        "SpanError",
        "encode_span_items",
        "group_by_sentence",
        "normalise_spans",
        "pool_spans",
        "span_batch",
        "subset_text",
        "tokenise_sentences",
        "whole_sentence_items",
    ),
    "text": (
        "DEFAULT_DELIMITER",
        "TopicPromptBuilder",
        "TopicPromptError",
        "check_delimiter",
        "check_topic",
        "prompt_text",
        "prompted_texts",
        "strip_prompt",
    ),
    "silver_pairs": (
        "IndexPair",
        "PairSampler",
        "PairSamplerProtocol",
        "SamplingInput",
        "distinct_new_pairs",
        "read_silver_pairs",
        "write_silver_pairs",
    ),
    "runtime": (
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
    ),
    "export": ("ExportError", "write_cross_encoder", "write_sentence_transformer"),
    "training": (
        "SCORED_PAIR_BUDGET_KEYS",
        "NonFiniteLossError",
        "TrainConfig",
        "TrainReport",
        "config_from_profile",
        "fit",
        "fit_scored_pairs",
        "make_adamw",
        "with_both_orders",
    ),
    "evaluation": (
        "evaluation_sample",
        "sample_items",
        "ExampleScores",
        "mean_examples",
        "HITS_K",
        "RankedHits",
        "ranked_hits",
        "PairSet",
        "correlation_scores",
        "pair_examples",
        "score_pair_sets",
        "score_pairs",
        "STSTask",
        "read_sts_pairs",
    ),
    "retrieval": (
        "BM25Index",
        "bm25_tokens",
        "chunked_top_k",
        "cosine_top_k",
        "top_k",
        "rerank_metrics",
        "trec_ranking",
        "stable_rank",
        "top_list_metrics",
        "trec_map_ndcg",
        "DEFAULT_KS",
        "RetrievalQueries",
        "retrieval_metrics",
        "ranked_items",
        "unit_retrieval_metrics",
        "BM25_FIRST_STAGE",
        "EmbedderFirstStage",
        "FirstStage",
        "encode_multi_once",
        "encode_once",
        "first_stage_from_context",
        "full_pool_embedder",
        "full_pool_multi_vector",
    ),
    "maxsim": ("MaxSimIndex", "maxsim_pairs", "maxsim_top_k"),
    "probe": ("PROBE_VARIANTS", "ProbeTask", "cached_embeddings", "macro_f1", "probe_on_texts", "train_probe"),
}
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
