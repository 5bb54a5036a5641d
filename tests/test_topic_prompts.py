"""Topic prompts (thesis 4.4.2, 4.4.3): where the topic and the delimiter go for BERT- and RoBERTa-style tokenizers
built in code, the MLM mask that never touches them, and the refusals."""

from __future__ import annotations

import pytest
import torch

from harness.nn import (
    DEFAULT_DELIMITER,
    TopicPromptBuilder,
    TopicPromptError,
    check_delimiter,
    mask_tokens,
    maskable_positions,
    prompt_text,
    prompted_texts,
    strip_prompt,
)
from harness.nn.pairs import FIRST_SEGMENT, SECOND_SEGMENT

WORDS = [
    "computers",
    "for",
    "sale",
    "religion",
    "the",
    "cat",
    "sat",
    "on",
    "mat",
    "a",
    "dog",
    "ran",
    "far",
    "away",
    "##s",
    DEFAULT_DELIMITER,
]


@pytest.fixture(scope="module")
def bert_tokenizer(tmp_path_factory):
    from transformers import BertTokenizerFast

    vocab = tmp_path_factory.mktemp("tiny-vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n", encoding="utf-8")
    # transformers 5 ignores vocab_file here; vocab takes the file.
    return BertTokenizerFast(vocab=str(vocab), do_lower_case=True)


@pytest.fixture(scope="module")
def roberta_tokenizer(tiny_roberta):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_roberta)


def _builder(tokenizer, token_types=True, sentence_limit=64, pair_limit=128):
    return TopicPromptBuilder(tokenizer, sentence_limit, pair_limit, token_types)


def test_prompt_text_places_topic_then_delimiter_then_sentence():
    assert prompt_text("For Sale", "a dog ran") == f"For Sale {DEFAULT_DELIMITER} a dog ran"
    assert strip_prompt(prompt_text("For Sale", "a dog ran")) == "a dog ran"
    assert strip_prompt("no prompt here") == "no prompt here"


def test_bert_single_format_and_topic_mask(bert_tokenizer):
    builder = _builder(bert_tokenizer)
    (row,) = builder.single_features(["For Sale"], ["the cat sat on the mat"])
    tokens = bert_tokenizer.convert_ids_to_tokens(row["input_ids"])
    assert tokens == ["[CLS]", "for", "sale", DEFAULT_DELIMITER, "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    assert row["topic_mask"] == [False, True, True, True] + [False] * 7
    # What an embedder reads when given the prompted text: the tokenizer's own [CLS] ... [SEP], the same ids.
    assert bert_tokenizer(prompt_text("For Sale", "the cat sat on the mat"))["input_ids"] == row["input_ids"]


def test_roberta_single_format_and_topic_mask(roberta_tokenizer):
    builder = _builder(roberta_tokenizer, token_types=False)
    (row,) = builder.single_features(["Religion"], ["the cat sat on the mat"])
    ids, mask = row["input_ids"], row["topic_mask"]
    assert ids[0] == roberta_tokenizer.bos_token_id and ids[-1] == roberta_tokenizer.eos_token_id
    topic_ids = [token for token, flag in zip(ids, mask) if flag]
    sentence_ids = [token for token, flag in zip(ids[1:-1], mask[1:-1]) if not flag]
    assert roberta_tokenizer.decode(topic_ids) == f"Religion {DEFAULT_DELIMITER}"
    assert roberta_tokenizer.decode(sentence_ids) == " the cat sat on the mat"
    # The topic tokens come first, right after <s>.
    assert mask[1 : 1 + len(topic_ids)] == [True] * len(topic_ids)
    assert roberta_tokenizer(prompt_text("Religion", "the cat sat on the mat"))["input_ids"] == ids


@pytest.mark.parametrize("name", ["bert_tokenizer", "roberta_tokenizer"])
def test_pair_format_has_a_prompt_at_the_start_of_each_segment(name, request):
    tokenizer = request.getfixturevalue(name)
    builder = _builder(tokenizer, token_types=name == "bert_tokenizer")
    (row,) = builder.pair_features(["Computers"], ["the cat sat"], ["For Sale"], ["a dog ran far away"])
    ids, segments, mask = row["input_ids"], row["segments"], row["topic_mask"]
    start, end = builder.pairs.start_id, builder.pairs.end_id
    first = [i for i, segment in enumerate(segments) if segment == FIRST_SEGMENT]
    second = [i for i, segment in enumerate(segments) if segment == SECOND_SEGMENT]
    assert first == list(range(len(first))) and second == list(range(len(first), len(ids)))
    for positions, topic, sentence in ((first, "Computers", "the cat sat"), (second, "For Sale", "a dog ran far away")):
        assert ids[positions[0]] == start and ids[positions[-1]] == end
        inner = positions[1:-1]
        topic_part = [ids[i] for i in inner if mask[i]]
        sentence_part = [ids[i] for i in inner if not mask[i]]
        assert [mask[i] for i in inner] == [True] * len(topic_part) + [False] * len(sentence_part)
        assert tokenizer.decode(topic_part).strip().lower() == f"{topic} {DEFAULT_DELIMITER}".lower()
        assert tokenizer.decode(sentence_part).strip() == sentence
    batch = builder.collate([row, *builder.pair_features(["Computers"], ["a"], ["Religion"], ["dog"])])
    assert batch["topic_mask"].dtype == torch.bool and batch["topic_mask"].shape == batch["input_ids"].shape
    assert not batch["topic_mask"][batch["attention_mask"] == 0].any()
    if name == "bert_tokenizer":  # the second segment gets token type 1
        assert batch["token_type_ids"][0].tolist() == [0] * len(first) + [1] * len(second)


def test_truncation_keeps_the_topic(bert_tokenizer):
    builder = _builder(bert_tokenizer, sentence_limit=8, pair_limit=14)
    long_sentence = " ".join(["the cat sat on the mat"] * 10)
    (single,) = builder.single_features(["For Sale"], [long_sentence])
    assert len(single["input_ids"]) == 8 and single["topic_mask"][:4] == [False, True, True, True]
    (pair,) = builder.pair_features(["For Sale"], [long_sentence], ["Computers"], [long_sentence])
    assert len(pair["input_ids"]) == 14
    assert sum(pair["topic_mask"]) == 3 + 2  # "for sale ¥" and "computers ¥" both survive


@pytest.mark.parametrize("name", ["bert_tokenizer", "roberta_tokenizer"])
def test_mlm_never_masks_topic_or_delimiter_tokens(name, request):
    tokenizer = request.getfixturevalue(name)
    builder = _builder(tokenizer, token_types=name == "bert_tokenizer")
    rows = builder.pair_features(
        ["For Sale", "Computers"] * 4,
        ["the cat sat on the mat", "a dog"] * 4,
        ["Religion", "For Sale"] * 4,
        ["a dog ran far away", "the mat"] * 4,
    )
    batch = builder.collate(rows)
    segments, topic_mask = batch.pop("segments"), batch.pop("topic_mask")
    mask_id = tokenizer.mask_token_id
    generator = torch.Generator().manual_seed(0)
    unprotected_hits = 0
    for _ in range(50):
        _masked, labels = mask_tokens(
            batch["input_ids"],
            maskable_positions(segments, protected=topic_mask),
            mask_id,
            len(tokenizer),
            generator,
            probability=0.5,
        )
        chosen = labels != -100
        assert not (chosen & topic_mask).any()
        assert chosen.any(dim=1).all()  # every row still has something to predict
        _masked, labels = mask_tokens(
            batch["input_ids"], maskable_positions(segments), mask_id, len(tokenizer), generator, probability=0.5
        )
        unprotected_hits += int(((labels != -100) & topic_mask).sum())
    assert unprotected_hits > 0  # without the protection the same masking does hit topic tokens


def test_a_topic_containing_the_delimiter_is_refused(bert_tokenizer):
    with pytest.raises(TopicPromptError, match=r"topic label 'Cars ¥ Bikes' contains the topic delimiter '¥'"):
        prompt_text("Cars ¥ Bikes", "the cat sat")
    with pytest.raises(TopicPromptError, match="contains the topic delimiter"):
        _builder(bert_tokenizer).pair_features(["ok"], ["a"], [f"bad{DEFAULT_DELIMITER}"], ["b"])
    with pytest.raises(TopicPromptError, match="non-empty"):
        prompt_text("  ", "the cat sat")


def test_a_delimiter_found_in_the_data_is_refused():
    with pytest.raises(TopicPromptError, match=r"occurs in the documents \(doc-2: \.\.\.costs 500¥ only"):
        prompted_texts(["A", "B"], ["fine", "costs 500¥ only"], source="the documents", names=["doc-1", "doc-2"])
    with pytest.raises(TopicPromptError, match="non-blank"):
        check_delimiter(" ", ["x"])
    check_delimiter("\u00a7", ["no section sign here"])  # a delimiter absent from the data is accepted


@pytest.mark.parametrize("name", ["bert_tokenizer", "roberta_tokenizer"])
def test_the_teacher_reads_prompted_texts_in_the_pair_format_of_4_4_3(name, request):
    """The recipe hands the Cross-Bi-Encoder "t ¥ x" texts; its pair builder then produces exactly the 4.4.3 rows
    ``[CLS] t1 [T] x1 [SEP] [CLS] t2 [T] x2 [SEP]`` that the topic MLM trains on."""
    from harness.nn.pairs import PairInputBuilder

    tokenizer = request.getfixturevalue(name)
    builder = _builder(tokenizer, token_types=name == "bert_tokenizer")
    teacher = PairInputBuilder(tokenizer, 64, 128, name == "bert_tokenizer")
    (expected,) = builder.pair_features(["For Sale"], ["the cat sat"], ["Religion"], ["a dog ran far away"])
    (row,) = teacher.features([prompt_text("For Sale", "the cat sat")], [prompt_text("Religion", "a dog ran far away")])
    assert row["input_ids"] == expected["input_ids"] and row["segments"] == expected["segments"]
