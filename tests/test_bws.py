"""BWS argument similarity tasks and the topic probe, on the bundled real corpus."""

from __future__ import annotations

import csv
import hashlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from harness import LABELED_SENTENCES, SCORED_PAIRS, UNLABELED_SENTENCES, DataFileError
from harness.options import resolve_options
from harness.plugin_api import EvalContext
from harness.profiles import get_profile
from harness.tasks.bws import DATA_ROOT, TOPICS, macro_f1

CORPUS = DATA_ROOT / "bws" / "BWS_corpus.csv"


def _task(registry, name, data_dir=None, **options):
    plugin = registry.task(name)
    return plugin.factory(resolve_options(name, plugin.options, options), data_dir)


def _ctx(profile="quick", seed=42):
    return EvalContext(profile=get_profile(profile), device="cpu", seed=seed, batch_size=32, progress=False)


def _rows() -> list[dict]:
    with open(CORPUS, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


class WordOverlapScorer:
    """A deterministic pair scorer: Jaccard overlap of lower-cased words."""

    def score(self, first, second):
        def words(text):
            return set(text.lower().split())

        return np.array([len(words(a) & words(b)) / len(words(a) | words(b)) for a, b in zip(first, second)])


class HashingEmbedder:
    """Bag of hashed words (256 dims): carries topic words, so a linear probe can find the topic."""

    def encode(self, texts):
        vectors = np.zeros((len(texts), 256), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 256] += 1.0
        return vectors


class ConstantEmbedder:
    def encode(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32)


def test_bundled_corpus_has_3400_pairs_in_8_topics():
    rows = _rows()
    assert len(rows) == 3400
    assert Counter(row["topic"] for row in rows) == dict.fromkeys(TOPICS, 425)
    assert (DATA_ROOT / "bws" / "SOURCE.md").is_file()


def test_topics_are_numbered_as_in_thesis_table_3_7():
    # Thesis table 3.7 and its code (after Thakur et al.), not the file's alphabetical order.
    assert TOPICS == (
        "Cloning",
        "Abortion",
        "Minimum wage",
        "Marijuana legalization",
        "Nuclear energy",
        "Death penalty",
        "Gun control",
        "School uniforms",
    )


def test_cross_topic_split_matches_thesis_table_5_1(registry):
    task = _task(registry, "bws-cross-topic")
    splits = task.split_pairs()
    assert {name: len(split) for name, split in splits.items()} == {"train": 2125, "dev": 425, "test": 850}
    assert set(splits["train"].topics) == {
        "Cloning",
        "Abortion",
        "Minimum wage",
        "Marijuana legalization",
        "Nuclear energy",
    }
    assert set(splits["dev"].topics) == {"Death penalty"}
    assert set(splits["test"].topics) == {"Gun control", "School uniforms"}


def test_bws_topics_are_named_in_metadata_and_records(registry):
    metadata = registry.task("bws-cross-topic").metadata
    assert metadata.version == "2"  # version 1 used the alphabetical topic order
    assert metadata.details["splits"] == {
        "train": ["T1 Cloning", "T2 Abortion", "T3 Minimum wage", "T4 Marijuana legalization", "T5 Nuclear energy"],
        "dev": ["T6 Death penalty"],
        "test": ["T7 Gun control", "T8 School uniforms"],
    }
    assert metadata.details["topics"]["T6"] == "Death penalty"
    result = _task(registry, "bws-cross-topic").evaluate(WordOverlapScorer(), _ctx("smoke"))
    assert result.details["topics"]["test"] == ["T7 Gun control", "T8 School uniforms"]
    assert result.details["topics"]["dev"] == ["T6 Death penalty"]


def test_in_topic_split_has_equal_shares_per_topic_and_is_seeded(registry):
    task = _task(registry, "bws-in-topic")
    splits = task.split_pairs()
    assert {name: len(split) for name, split in splits.items()} == {"train": 2125, "dev": 425, "test": 850}
    # Default: the thesis code's load_bws_in_topic counts per topic.
    assert Counter(splits["train"].topics) == {**dict.fromkeys(TOPICS[:5], 266), **dict.fromkeys(TOPICS[5:], 265)}
    assert Counter(splits["dev"].topics) == {**dict.fromkeys(TOPICS, 53), "Death penalty": 54}
    assert Counter(splits["test"].topics) == {
        **dict.fromkeys(TOPICS[:6], 106),
        "Gun control": 107,
        "School uniforms": 107,
    }
    text = _task(registry, "bws-in-topic", sizes="thesis-text").split_pairs()
    assert {name: len(split) for name, split in text.items()} == {"train": 2472, "dev": 480, "test": 448}
    for name, per_topic in (("train", 309), ("dev", 60), ("test", 56)):
        assert Counter(text[name].topics) == dict.fromkeys(TOPICS, per_topic)
    keys = {name: set(zip(split.first, split.second)) for name, split in splits.items()}
    assert not (keys["train"] & keys["test"]) and not (keys["train"] & keys["dev"]) and not (keys["dev"] & keys["test"])
    assert sum(len(k) for k in keys.values()) == 3400
    again = _task(registry, "bws-in-topic").split_pairs()
    assert again["test"].first == splits["test"].first
    other = _task(registry, "bws-in-topic", split_seed=1).split_pairs()
    assert other["test"].first != splits["test"].first


def test_cross_topic_spearman_equals_scipy_on_the_test_topics(registry):
    task = _task(registry, "bws-cross-topic")
    result = task.evaluate(WordOverlapScorer(), _ctx())
    test_rows = [row for row in _rows() if row["topic"] in ("Gun control", "School uniforms")]
    predicted = WordOverlapScorer().score(
        [row["sentence_1"].strip() for row in test_rows], [row["sentence_2"].strip() for row in test_rows]
    )
    expected = 100 * spearmanr(predicted, [float(row["regression_label"]) for row in test_rows])[0]
    assert result.scores["spearman"] == pytest.approx(expected, abs=1e-9)
    assert result.details["evaluated_pairs"] == 850
    assert len(result.dataset_checksum) == 64


def test_smoke_profile_cuts_the_evaluation(registry):
    result = _task(registry, "bws-in-topic").evaluate(WordOverlapScorer(), _ctx("smoke"))
    assert result.details["evaluated_pairs"] == 200


@pytest.mark.parametrize("name, sizes", [("bws-cross-topic", (2125, 425)), ("bws-in-topic", (2125, 425))])
def test_pair_tasks_offer_scored_pairs(registry, name, sizes):
    task = _task(registry, name)
    assert task.training_data(LABELED_SENTENCES) is None
    splits = task.training_data(SCORED_PAIRS)
    assert (len(splits.train), len(splits.dev)) == sizes
    assert splits.train.scores.min() >= 0 and splits.train.scores.max() <= 1
    assert splits.source == name and splits.checksum


@pytest.mark.parametrize("name", ["bws-cross-topic", "bws-in-topic"])
def test_pair_tasks_offer_unlabeled_sentences_as_their_metadata_says(registry, name):
    task = _task(registry, name)
    assert UNLABELED_SENTENCES in task.metadata.training_kinds
    sentences = task.training_data(UNLABELED_SENTENCES).train.sentences
    held_out = task.training_data(SCORED_PAIRS).held_out_sentences
    assert sentences and not set(sentences) & held_out


def test_in_topic_training_data_names_the_sentences_of_evaluated_pairs(registry):
    task = _task(registry, "bws-in-topic")
    splits = task.split_pairs()
    held_out = task.training_data(SCORED_PAIRS).held_out_sentences
    assert held_out == {s for name in ("dev", "test") for s in (*splits[name].first, *splits[name].second)}
    train_sentences = set(splits["train"].first) | set(splits["train"].second)
    test_pairs_in_pool = [
        pair for pair in zip(splits["test"].first, splits["test"].second) if set(pair) <= train_sentences
    ]
    assert test_pairs_in_pool  # the leakage the samplers must avoid: test pairs whose sentences are both in train


def test_thesis_code_topic_probe_uses_the_in_topic_pair_split_and_a_hidden_layer(registry):
    task = _task(registry, "bws-topic", probe="thesis-code")
    splits, _ = task.split_sentences()
    sentences = {name: set(split.sentences) for name, split in splits.items()}
    assert not (sentences["train"] & sentences["test"]) and not (sentences["dev"] & sentences["test"])
    pairs = _task(registry, "bws-in-topic").split_pairs()
    assert sentences["test"] == set(pairs["test"].first) | set(pairs["test"].second)
    result = task.evaluate(HashingEmbedder(), _ctx())
    assert result.details["probe"]["best_epoch"] == 9  # the last of 10 epochs
    assert result.scores["f1_macro"] > 50


def test_macro_f1_by_hand():
    # class 0: P=1, R=1/2 -> 2/3; class 1: P=2/3, R=1 -> 4/5; class 2: 1.
    assert macro_f1([0, 1, 1, 1, 2], [0, 0, 1, 1, 2]) == pytest.approx((2 / 3 + 4 / 5 + 1) / 3)


def test_topic_probe_split_covers_every_distinct_sentence(registry):
    task = _task(registry, "bws-topic")
    splits, conflicting = task.split_sentences()
    assert conflicting == 0
    assert sum(len(split) for split in splits.values()) == 4290
    assert not set(splits["train"].sentences) & set(splits["test"].sentences)
    assert set(splits["test"].labels) == set(TOPICS)
    assert 0.79 < len(splits["train"]) / 4290 < 0.81
    offered = task.training_data(LABELED_SENTENCES)
    assert offered.train.sentences == splits["train"].sentences and offered.dev.labels == splits["dev"].labels


def test_topic_probe_separates_informative_from_constant_embeddings(registry):
    task = _task(registry, "bws-topic")
    informative = task.evaluate(HashingEmbedder(), _ctx())
    assert informative.scores["f1_macro"] > 60
    assert informative.details["sentences"]["test"] == len(task.split_sentences()[0]["test"]) == 427
    assert len(informative.details["probe"]["dev_f1_macro_history"]) == 10  # 10 epochs, best one kept
    constant = task.evaluate(ConstantEmbedder(), _ctx("smoke"))
    assert constant.scores["f1_macro"] < 10  # one class predicted for all: F1 about 2/9 for 1 of 8 classes
    assert constant.details["sentences"] == {"train": 200, "dev": 200, "test": 200}


def test_topic_probe_is_seeded(registry):
    task = _task(registry, "bws-topic")
    first = task.evaluate(HashingEmbedder(), _ctx("smoke", seed=1))
    assert task.evaluate(HashingEmbedder(), _ctx("smoke", seed=1)).scores == first.scores


def _write_corpus(folder: Path, rows: list[list[str]]) -> Path:
    (folder / "bws").mkdir(parents=True, exist_ok=True)
    path = folder / "bws" / "BWS_corpus.csv"
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["topic", "sentence_1", "sentence_2", "regression_label_binary", "regression_label"])
        writer.writerows(rows)
    return path


def _valid_rows() -> list[list[str]]:
    return [[topic, f"{topic} is good", f"{topic} is bad", "0", "0.25"] for topic in TOPICS]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda rows: rows[2].__setitem__(4, "high"), r"BWS_corpus.csv:4: regression_label 'high' is not a number"),
        (lambda rows: rows[0].__setitem__(4, "1.5"), r"BWS_corpus.csv:2: regression_label 1.5 is outside"),
        (lambda rows: rows[1].__setitem__(0, "Cloningg"), r"BWS_corpus.csv:3: unknown topic 'Cloningg'"),
        (lambda rows: rows[3].pop(), r"BWS_corpus.csv:5: expected 5 comma-separated fields, found 4"),
        (lambda rows: rows.pop(), r"no pairs for topic\(s\) School uniforms"),
    ],
)
def test_malformed_corpus_names_file_and_line(registry, tmp_path, edit, message):
    rows = _valid_rows()
    edit(rows)
    _write_corpus(tmp_path, rows)
    with pytest.raises(DataFileError, match=message):
        _task(registry, "bws-cross-topic", data_dir=tmp_path).check_data()


def test_missing_column_is_reported(registry, tmp_path):
    (tmp_path / "bws").mkdir()
    (tmp_path / "bws" / "BWS_corpus.csv").write_text("topic,sentence_1,sentence_2\nAbortion,a,b\n")
    with pytest.raises(DataFileError, match=r"BWS_corpus.csv:1: header lacks column\(s\) regression_label"):
        _task(registry, "bws-in-topic", data_dir=tmp_path).check_data()


def test_valid_override_corpus_is_used(registry, tmp_path):
    _write_corpus(tmp_path, _valid_rows())
    splits = _task(registry, "bws-cross-topic", data_dir=tmp_path).split_pairs()
    assert len(splits["train"]) == 5 and splits["test"].first == ["Gun control is good", "School uniforms is good"]


def test_topic_probe_needs_an_embedder(run_cli):
    code, _, err = run_cli("validate", "--models", "ce", "--tasks", "bws-topic")
    assert code != 0 and "bws-topic" in err and "embedder" in err


def test_be_runs_the_bws_family_through_the_cli(run_cli, tiny_bert, tmp_path):
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "bws",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--device",
        "cpu",
        "--results",
        tmp_path,
        "--no-progress",
    )
    assert code == 0, err
    for name in ("bws-cross-topic", "bws-in-topic", "bws-topic"):
        assert name in out


class RecordingScorer(WordOverlapScorer):
    def __init__(self):
        self.seen: list[str] = []

    def score(self, first, second):
        self.seen += [*first, *second]
        return super().score(first, second)


def test_prompted_input_prefixes_every_sentence_with_its_pairs_topic(registry):
    """Thesis table 6.16 "Prompted BWS": both sentences of a test pair carry the pair's topic prompt."""
    scorer = RecordingScorer()
    _task(registry, "bws-cross-topic", input="prompted").evaluate(scorer, _ctx("smoke"))
    assert scorer.seen and all(text.split(" \u00a5 ")[0] in ("Gun control", "School uniforms") for text in scorer.seen)
    raw = _task(registry, "bws-topic").evaluate(HashingEmbedder(), _ctx("smoke"))
    probe = _task(registry, "bws-topic", input="prompted").evaluate(HashingEmbedder(), _ctx("smoke"))
    assert probe.scores["f1_macro"] > raw.scores["f1_macro"] + 5  # the prompt names the answer


def test_a_delimiter_found_in_the_sentences_is_refused(registry):
    from harness import InvalidOptionError

    with pytest.raises(InvalidOptionError, match="task bws-in-topic:input=prompted: the topic delimiter 'the' occurs"):
        _task(registry, "bws-in-topic", input="prompted", delimiter="the").check_data()
