"""Text before it is tokenised: topic prompts (``[CLS] topic [T] sentence [SEP]``) and their delimiter check."""

from __future__ import annotations

from harness.nn.topic_prompts import (
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
    "DEFAULT_DELIMITER",
    "TopicPromptBuilder",
    "TopicPromptError",
    "check_delimiter",
    "check_topic",
    "prompt_text",
    "prompted_texts",
    "strip_prompt",
]
