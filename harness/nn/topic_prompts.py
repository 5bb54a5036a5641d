"""Topic prompts (thesis 4.4.2, 4.4.3): a sentence prefixed with its topic label and a delimiter.

Single texts (4.4.2) become ``"{topic} {delimiter} {sentence}"`` (:func:`prompt_text`); pairs (4.4.3, the teacher's
and the MLM pre-training's input) become ``[CLS] t1 [T] s1 [SEP] [CLS] t2 [T] s2 [SEP]`` (:class:`TopicPromptBuilder`).
The formats, the delimiter rules and the deviation from the thesis code's prompt: docs/methods/topic-distillation.md,
section "Topic distillation", subsection "Topic prompts".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from harness.errors import HarnessError

from .backbone import SequenceLimits, has_two_token_types
from .pairs import FIRST_SEGMENT, SECOND_SEGMENT, PairInputBuilder, truncate_longest_first

DEFAULT_DELIMITER = "\u00a5"  # the yen sign, as the thesis


class TopicPromptError(HarnessError, ValueError):
    """A delimiter that occurs in the data, or a topic label that is empty or contains the delimiter."""


def check_delimiter(
    delimiter: str, texts: Sequence[str], source: str = "the texts", names: Sequence[str] | None = None
) -> None:
    """Refuse ``delimiter`` if it is empty, white space, or occurs in any of ``texts`` (the error names ``source`` and
    the first text holding it, by ``names[i]`` or its position)."""
    if not isinstance(delimiter, str) or not delimiter.strip():
        raise TopicPromptError(
            f"the topic delimiter must be a non-blank string, got {delimiter!r}; the thesis uses {DEFAULT_DELIMITER!r}."
        )
    if delimiter != delimiter.strip():
        raise TopicPromptError(
            f"the topic delimiter {delimiter!r} has surrounding white space; give the character "
            "itself (the prompt puts one space on each side)."
        )
    for index, text in enumerate(texts):
        if delimiter in text:
            where = names[index] if names is not None else f"text {index + 1}"
            raise TopicPromptError(
                f"the topic delimiter {delimiter!r} occurs in {source} ({where}: ...{_context(text, delimiter)}...); "
                "it must never occur in the data. Choose another delimiter."
            )


def check_topic(topic: str, delimiter: str = DEFAULT_DELIMITER) -> str:
    """The topic label without surrounding white space; refused if empty or if it contains the delimiter."""
    if not isinstance(topic, str) or not topic.strip():
        raise TopicPromptError(f"a topic label must be a non-empty string, got {topic!r}.")
    if delimiter in topic:
        raise TopicPromptError(
            f"the topic label {topic!r} contains the topic delimiter {delimiter!r}; the delimiter "
            "marks where the topic ends, so a label must not contain it. Rename the topic or "
            "choose another delimiter."
        )
    return topic.strip()


def prompt_prefix(topic: str, delimiter: str = DEFAULT_DELIMITER) -> str:
    """``"{topic} {delimiter}"``: the characters before the sentence's separating space."""
    return f"{check_topic(topic, delimiter)} {delimiter}"


def prompt_text(topic: str, sentence: str, delimiter: str = DEFAULT_DELIMITER) -> str:
    """``"{topic} {delimiter} {sentence}"`` (4.4.2); the sentence must not contain the delimiter."""
    check_delimiter(delimiter, [sentence], "the sentence")
    return f"{prompt_prefix(topic, delimiter)} {sentence}"


def prompted_texts(
    topics: Sequence[str],
    sentences: Sequence[str],
    delimiter: str = DEFAULT_DELIMITER,
    source: str = "the texts",
    names: Sequence[str] | None = None,
) -> list[str]:
    """:func:`prompt_text` of every (topic, sentence); the delimiter is checked against all sentences first."""
    if len(topics) != len(sentences):
        raise ValueError(f"prompted_texts(): {len(topics)} topics for {len(sentences)} sentences")
    check_delimiter(delimiter, sentences, source, names)
    prefixes = {topic: prompt_prefix(topic, delimiter) for topic in dict.fromkeys(topics)}
    return [f"{prefixes[topic]} {sentence}" for topic, sentence in zip(topics, sentences)]


def strip_prompt(text: str, delimiter: str = DEFAULT_DELIMITER) -> str:
    """The sentence of a prompted text (everything after the first delimiter and its space); a text without the
    delimiter is returned unchanged."""
    _topic, found, sentence = text.partition(delimiter)
    if not found:
        return text
    return sentence[1:] if sentence.startswith(" ") else sentence


def _context(text: str, delimiter: str, width: int = 20) -> str:
    at = text.index(delimiter)
    return text[max(0, at - width) : at + len(delimiter) + width].replace("\n", " ")


@dataclass
class TopicPromptBuilder:
    """Token ids of prompted single texts and pairs, with ``topic_mask`` (True on topic and delimiter tokens)."""

    tokenizer: object
    sentence_limit: int  # tokens per prompted sentence including its two special tokens
    pair_limit: int  # tokens per pair sequence
    use_token_types: bool
    delimiter: str = DEFAULT_DELIMITER
    pairs: PairInputBuilder = field(init=False, repr=False)

    @classmethod
    def for_backbone(
        cls, tokenizer, config, limits: SequenceLimits, delimiter: str = DEFAULT_DELIMITER
    ) -> TopicPromptBuilder:
        return cls(tokenizer, limits.sentence, limits.pair, has_two_token_types(config), delimiter)

    def __post_init__(self) -> None:
        check_delimiter(self.delimiter, [])
        self.pairs = PairInputBuilder(self.tokenizer, self.sentence_limit, self.pair_limit, self.use_token_types)

    def prompt_ids(
        self, topics: Sequence[str], sentences: Sequence[str], source: str = "the sentences"
    ) -> list[tuple[list[int], list[bool]]]:
        """Per (topic, sentence): the prompted text's token ids without special tokens (cut from the end to the
        sentence limit) and, per token, whether it belongs to the topic or the delimiter."""
        texts = prompted_texts(topics, sentences, self.delimiter, source)
        prefix_chars = {topic: len(prompt_prefix(topic, self.delimiter)) for topic in dict.fromkeys(topics)}
        distinct = list(dict.fromkeys(zip(topics, texts)))
        encoded = self.tokenizer(
            [text for _topic, text in distinct],
            add_special_tokens=False,
            truncation=True,
            max_length=max(1, self.sentence_limit - 2),
            return_offsets_mapping=True,
        )
        result: dict[tuple[str, str], tuple[list[int], list[bool]]] = {}
        for (topic, text), ids, offsets in zip(distinct, encoded["input_ids"], encoded["offset_mapping"]):
            # A token belongs to the prompt when it starts before the end of "topic [T]" (offsets are characters).
            result[(topic, text)] = (list(ids), [start < prefix_chars[topic] for start, _end in offsets])
        return [result[key] for key in zip(topics, texts)]

    def single_features(self, topics: Sequence[str], sentences: Sequence[str]) -> list[dict[str, list]]:
        """``[CLS] topic [T] sentence [SEP]`` rows: ``input_ids``, ``segments`` (FIRST_SEGMENT) and ``topic_mask``."""
        rows = []
        for ids, topic_flags in self.prompt_ids(topics, sentences):
            rows.append(
                {
                    "input_ids": [self.pairs.start_id, *ids, self.pairs.end_id],
                    "segments": [FIRST_SEGMENT] * (len(ids) + 2),
                    "topic_mask": [False, *topic_flags, False],
                }
            )
        return rows

    def pair_features(
        self, first_topics: Sequence[str], first: Sequence[str], second_topics: Sequence[str], second: Sequence[str]
    ) -> list[dict[str, list]]:
        """``[CLS] t1 [T] s1 [SEP] [CLS] t2 [T] s2 [SEP]`` rows (4.4.3): ``input_ids``, ``segments`` (FIRST_SEGMENT /
        SECOND_SEGMENT) and ``topic_mask``; a pair longer than the pair limit loses tokens from the end of its longer
        segment (the topics come first, so they are the last to go)."""
        if not (len(first_topics) == len(first) == len(second_topics) == len(second)):
            raise ValueError("pair_features(): topics and sentences of both sides must have the same length")
        prompted_a = self.prompt_ids(first_topics, first, "the first sentences")
        prompted_b = self.prompt_ids(second_topics, second, "the second sentences")
        rows = []
        for (ids_a, flags_a), (ids_b, flags_b) in zip(prompted_a, prompted_b):
            ids_a, ids_b = truncate_longest_first(ids_a, ids_b, self.pair_limit - 4)
            flags_a, flags_b = flags_a[: len(ids_a)], flags_b[: len(ids_b)]
            start, end = self.pairs.start_id, self.pairs.end_id
            rows.append(
                {
                    "input_ids": [start, *ids_a, end, start, *ids_b, end],
                    "segments": [FIRST_SEGMENT] * (len(ids_a) + 2) + [SECOND_SEGMENT] * (len(ids_b) + 2),
                    "topic_mask": [False, *flags_a, False, False, *flags_b, False],
                }
            )
        return rows

    def collate(self, rows: list[dict[str, list]]) -> dict[str, torch.Tensor]:
        """The pair builder's padded tensors plus ``topic_mask`` (bool, False on padding)."""
        batch = self.pairs.collate([{"input_ids": row["input_ids"], "segments": row["segments"]} for row in rows])
        width = batch["input_ids"].shape[1]
        topic_mask = torch.zeros((len(rows), width), dtype=torch.bool)
        for index, row in enumerate(rows):
            topic_mask[index, : len(row["topic_mask"])] = torch.tensor(row["topic_mask"], dtype=torch.bool)
        batch["topic_mask"] = topic_mask
        return batch
