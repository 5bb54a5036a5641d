"""The building blocks of harness: the second front door for plugin authors (the first is ``harness``, the contract).

``harness`` holds what a plugin *is* (plugin classes, contexts, capabilities, errors, ``hookimpl``, data types,
profiles); this module holds what a plugin is *built from*: backbone loading and pooling (:mod:`harness.nn`), losses,
pair inputs, the transformer decoder, composable unsupervised objectives and :func:`objective_model`, MLM and word
deletion noise, spans and phrases, silver-pair sampling, the evaluation layer tasks use (pair-set scoring, BM25,
search, MaxSim, ranking and retrieval metrics, first stages, the seeded evaluation sample, per-example scores for the
bootstrap, the frozen-encoder probe) and the shared training loop (:mod:`harness.training`).

Built-in plugins and tasks import only ``harness`` and ``harness.blocks`` (tests/test_layout.py), as a third-party
plugin should. The modules the names come from (``harness.nn``, ``harness.evaluation``, ``harness.training``) stay
importable for plugins written against 0.2.

Names are loaded on first use (PEP 562), so ``from harness.blocks import evaluation_sample`` does not import torch;
a name from a torch module (``SentenceEncoder``, the losses, ``fit``) imports it then.
"""
from __future__ import annotations

import importlib
from typing import Any

# module -> the names it contributes (one owner per name; tests/test_layout.py checks every name resolves)
_SOURCES: dict[str, tuple[str, ...]] = {
    # -- model building blocks (harness.nn) --------------------------------------------------------------------------
    "harness.nn.backbone": ("BackboneError", "SequenceLimits", "has_two_token_types", "load_tokenizer",
                            "load_transformer", "position_limit", "quiet_transformers", "sequence_limits"),
    "harness.nn.pooling": ("POOLING_CHOICES", "cls_pool", "mean_pool", "pool"),
    "harness.nn.encoder": ("MODEL_INPUTS", "SentenceEncoder", "encode_distinct", "length_sorted_batches",
                           "progress_bar"),
    "harness.nn.onnx_runtime": ("RUNTIMES", "OnnxRuntimeUnavailable", "OnnxTransformer", "OnnxTransformerModule",
                                "RuntimeSwitch", "export_key", "onnx_transformer", "require_onnx_runtime",
                                "OnnxFunction", "model_input_names", "onnx_function", "quiet_torch"),
    "harness.nn.pairs": ("FIRST", "PADDING", "SECOND", "PairInputBuilder", "distinct_pairs",
                         "score_in_length_sorted_batches", "truncate_longest_first"),
    "harness.nn.losses": ("REGRESSION_LOSSES", "CosineRegression", "InfoNCE", "ScoreRegression", "SupCon",
                          "cosine_matrix"),
    "harness.nn.classification": ("SentenceClassification", "classification_head"),
    "harness.nn.decoder": ("DecoderOutput", "TransformerDecoder"),
    "harness.nn.objectives": ("CLEAN", "DELETED", "IGNORED_LABEL", "OBJECTIVE_KIND", "CONTRASTIVE_SETUP",
                              "REPLICATION_SETUP", "Objective", "ObjectiveSetup", "TrainingSetup", "TrainingStep",
                              "UnlabeledCollator", "curve_summary", "in_batch_contrastive", "language_model_head",
                              "objective_hooks", "objective_model", "scored_token_loss", "setup_budget",
                              "share_parameters", "transformer_inputs", "usable_sentences"),
    "harness.nn.mlm": ("BERT_MASKING", "THESIS_CODE_MASKING", "Masking", "PairTopics", "domain_adapted_backbone",
                       "freeze_embedding_layer", "load_masked_lm", "mask_tokens", "maskable_positions"),
    "harness.nn.noise": ("DELETION_RATIO", "WordDeletion", "check_deletion_ratio", "delete_words", "split_words"),
    "harness.nn.spans": ("SpanBatch", "SpanError", "encode_span_items", "group_by_sentence", "normalise_spans",
                         "pool_spans", "span_batch", "subset_text", "tokenise_sentences", "whole_sentence_items"),
    "harness.nn.phrases": ("english_stopwords", "masked_copy", "pad_ids", "rake_phrases", "words_with_spans"),
    "harness.nn.topic_prompts": ("DEFAULT_DELIMITER", "TopicPromptBuilder", "TopicPromptError", "check_delimiter",
                                 "check_topic", "prompt_text", "prompted_texts", "strip_prompt"),
    "harness.nn.sampling": ("Pair", "PairSampler", "PairSamplerProtocol", "SamplingInput", "distinct_new_pairs"),
    "harness.nn.silver_pairs": ("read_silver_pairs", "write_silver_pairs"),
    "harness.nn.st_export": ("ExportError", "write_cross_encoder", "write_sentence_transformer"),
    # -- the training loop (harness.training) ------------------------------------------------------------------------
    "harness.training": ("SCORED_PAIR_BUDGET_KEYS", "NonFiniteLossError", "TrainConfig", "TrainReport",
                         "config_from_profile", "fit", "fit_scored_pairs", "make_adamw", "with_both_orders"),
    # -- the evaluation layer (harness.evaluation) -------------------------------------------------------------------
    "harness.evaluation.sampling": ("evaluation_sample", "sample_items"),
    "harness.evaluation.sts": ("STSTask", "read_sts_pairs"),
    "harness.evaluation.bootstrap": ("ExampleScores", "mean_examples"),
    "harness.evaluation.pairs": ("PairSet", "correlation_scores", "pair_examples", "score_pair_sets", "score_pairs"),
    "harness.evaluation.bm25": ("BM25Index", "bm25_tokens"),
    "harness.evaluation.search": ("chunked_top_k", "cosine_top_k", "top_k"),
    "harness.evaluation.maxsim": ("MaxSimIndex", "maxsim_pairs", "maxsim_top_k"),
    "harness.evaluation.ranking": ("rerank_metrics", "stable_rank", "top_list_metrics", "trec_map_ndcg"),
    "harness.evaluation.retrieval": ("DEFAULT_KS", "RetrievalQueries", "retrieval_metrics",
                                     "unit_retrieval_metrics"),
    "harness.evaluation.first_stage": ("BM25", "EmbedderFirstStage", "FirstStage", "encode_multi_once",
                                       "encode_once", "first_stage_from_context", "full_pool_embedder",
                                       "full_pool_multi_vector"),
    "harness.evaluation.probe": ("PROBE_VARIANTS", "cached_embeddings", "macro_f1", "probe_on_texts",
                                 "train_probe"),
}
# whole modules offered as one name (a namespace of related helpers)
_MODULES: dict[str, str] = {"wordnet": "harness.nn.wordnet", "distributed": "harness.distributed"}

_OWNER: dict[str, str] = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = [*_OWNER, *_MODULES]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _OWNER:
        value = getattr(importlib.import_module(_OWNER[name]), name)
    else:
        raise AttributeError(f"module 'harness.blocks' has no attribute {name!r}")
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
