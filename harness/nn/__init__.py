"""Shared model building blocks (the sentence-transformers split of ``models/``, ``losses/`` and ``util/``).

Model plugins build from these and import nothing from other plugins:

- :mod:`harness.nn.backbone`: loading tokenizers and transformers; :func:`sequence_limits`, the one place that
  decides how many tokens a sentence or a pair may have.
- :mod:`harness.nn.pooling`: MEAN and CLS pooling.
- :mod:`harness.nn.encoder`: :class:`SentenceEncoder` (transformer + pooling) and the length-sorted, de-duplicated
  encoding loop.
- :mod:`harness.nn.pairs`: two-segment pair inputs (``[CLS] s1 [SEP] [CLS] s2 [SEP]``) and length-sorted pair
  scoring.
- :mod:`harness.nn.losses`: CosineRegression, ScoreRegression, InfoNCE, SupCon.
- :mod:`harness.nn.classification`: a classification head (linear or Linear-SiLU-Linear) and the cross-entropy
  objective of a sentence encoder fine-tuned with it.
- :mod:`harness.nn.mlm`: BERT masking, MLM heads, a frozen embedding layer, domain-adaptive MLM.
- :mod:`harness.nn.topic_prompts`: topic prompts ``[CLS] topic [T] sentence [SEP]`` and their pair format, the
  delimiter check, and the topic-token mask MLM never masks (thesis 4.4).
- :mod:`harness.nn.decoder`: a transformer decoder built from an encoder (TSDAE, Nugget, PaSeR).
- :mod:`harness.nn.sampling`: the contract between silver-pair samplers and the recipes that use them.
- :mod:`harness.nn.silver_pairs`: the silver-pair artifact format (written by distillation recipes, read by plots).
"""

from harness.deprecation import deprecated_names

from .backbone import (
    BackboneError,
    SequenceLimits,
    has_two_token_types,
    load_tokenizer,
    load_transformer,
    position_limit,
    quiet_transformers,
    sequence_limits,
)
from .classification import SentenceClassification, classification_head
from .decoder import DecoderOutput, TransformerDecoder
from .encoder import SentenceEncoder, encode_distinct, length_sorted_batches, progress_bar
from .losses import CosineRegression, InfoNCE, ScoreRegression, SupCon
from .mlm import freeze_embedding_layer, mask_tokens, maskable_positions
from .pairs import (
    FIRST_SEGMENT,
    PADDING_SEGMENT,
    SECOND_SEGMENT,
    PairInputBuilder,
    distinct_pairs,
    score_in_length_sorted_batches,
    truncate_longest_first,
)
from .pooling import POOLING_CHOICES, cls_pool, mean_pool, pool
from .sampling import PairSampler, SamplingInput
from .topic_prompts import (
    DEFAULT_DELIMITER,
    TopicPromptBuilder,
    TopicPromptError,
    check_delimiter,
    check_topic,
    prompt_text,
    prompted_texts,
    strip_prompt,
)

__all__ = [
    "BackboneError",
    "CosineRegression",
    "DecoderOutput",
    "FIRST_SEGMENT",
    "InfoNCE",
    "PADDING_SEGMENT",
    "POOLING_CHOICES",
    "PairInputBuilder",
    "PairSampler",
    "SECOND_SEGMENT",
    "SamplingInput",
    "ScoreRegression",
    "SentenceEncoder",
    "SequenceLimits",
    "SupCon",
    "TransformerDecoder",
    "cls_pool",
    "distinct_pairs",
    "encode_distinct",
    "freeze_embedding_layer",
    "has_two_token_types",
    "length_sorted_batches",
    "load_tokenizer",
    "load_transformer",
    "mask_tokens",
    "maskable_positions",
    "mean_pool",
    "pool",
    "position_limit",
    "progress_bar",
    "quiet_transformers",
    "score_in_length_sorted_batches",
    "sequence_limits",
    "truncate_longest_first",
    # topic prompts (thesis 4.4)
    "DEFAULT_DELIMITER",
    "TopicPromptBuilder",
    "TopicPromptError",
    "check_delimiter",
    "check_topic",
    "prompt_text",
    "prompted_texts",
    "strip_prompt",
    # classification (frozen-encoder probes, the supervised topic classifier)
    "SentenceClassification",
    "classification_head",
]

# The segment ids' names before they said what they hold.
__getattr__ = deprecated_names(
    __name__,
    {
        "PADDING": (f"{__name__}.pairs", "PADDING_SEGMENT"),
        "FIRST": (f"{__name__}.pairs", "FIRST_SEGMENT"),
        "SECOND": (f"{__name__}.pairs", "SECOND_SEGMENT"),
    },
)
