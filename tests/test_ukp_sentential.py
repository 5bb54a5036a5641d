"""The UKP Sentential Argument Mining topic probe (tasks/ukp_sentential.py) on small corpora written in the test: the
corpus itself may not be redistributed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from harness import LABELED_SENTENCES, DataFileError, InvalidOptionError, MissingDataError
from harness.options import resolve_options
from harness.plugin_api import EvalContext
from harness.profiles import get_profile

HEADER = ["topic", "retrievedUrl", "archivedUrl", "sentenceHash", "sentence", "annotation", "set"]
WORDS = {"abortion": "pregnancy women choice unborn", "nuclear energy": "reactor power plant radiation"}


def _write(folder: Path, name: str, header: list[str], rows: list[list[str]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join("\t".join(row) for row in [header, *rows]) + "\n", encoding="utf-8")
    return path


def _corpus(data_dir: Path, header=HEADER, topic_of=lambda topic: topic) -> Path:
    folder = data_dir / "ukp_sentential_argument_mining"
    for topic, words in WORDS.items():
        rows = []
        for index in range(120):  # a probe at lr 1e-3 needs some steps to move away from its random start
            split = "train" if index < 100 else "val" if index < 110 else "test"
            sentence = f"{' '.join(words.split()[index % 4 :] + words.split()[: index % 4])} point {index}"
            rows.append([topic_of(topic), "u", "a", "h", sentence, "NoArgument", split])
        _write(folder, f"{topic.replace(' ', '_')}.tsv", header, rows)
    return folder


def _task(registry, data_dir, **options):
    plugin = registry.task("ukp-sentential-topic")
    return plugin.factory(resolve_options("ukp-sentential-topic", plugin.options, options), data_dir)


class HashingEmbedder:
    def encode(self, texts):
        vectors = np.zeros((len(texts), 128), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 128] += 1.0
        return vectors


def _ctx():
    return EvalContext(profile=get_profile("quick"), device="cpu", seed=42, batch_size=32, progress=False)


def test_probe_and_training_data_from_the_corpus_files(registry, tmp_path):
    _corpus(tmp_path)
    task = _task(registry, tmp_path)
    assert len(task.check_data()) == 64
    result = task.evaluate(HashingEmbedder(), _ctx())
    assert result.details["sentences"] == {"train": 200, "dev": 20, "test": 20}
    assert result.details["topics"] == sorted(WORDS) and result.scores["f1_macro"] > 90
    labeled = task.training_data(LABELED_SENTENCES)
    assert len(labeled.train) == 200 and len(labeled.dev) == 20 and set(labeled.train.labels) == set(WORDS)
    prompted = _task(registry, tmp_path, input="prompted").evaluate(HashingEmbedder(), _ctx())
    assert prompted.details["input"] == "prompted"


def test_an_unknown_topic_column_is_one_error_naming_file_columns_and_option(registry, tmp_path):
    _corpus(tmp_path, header=["label" if name == "topic" else name for name in HEADER])
    with pytest.raises(DataFileError) as error:
        _task(registry, tmp_path).check_data()
    message = str(error.value)
    assert "abortion.tsv:1: no column 'topic'" in message
    assert "the file's columns are: label, retrievedUrl" in message
    assert "ukp-sentential-topic:topic_column=NAME" in message
    assert _task(registry, tmp_path, topic_column="label").training_data(LABELED_SENTENCES).train.labels


def test_the_released_files_without_sentences_say_what_to_run(registry, tmp_path):
    folder = tmp_path / "ukp_sentential_argument_mining"
    _write(folder, "cloning.tsv", HEADER, [["cloning", "u", "a", "h", "", "NoArgument", "train"]] * 3)
    with pytest.raises(DataFileError, match="cloning.tsv: every sentence field is empty.*completion pipeline"):
        _task(registry, tmp_path).check_data()


def test_missing_corpus_says_how_to_get_it(registry, tmp_path):
    with pytest.raises(MissingDataError, match="may not be redistributed.*tudatalib/2345.*bws-topic"):
        _task(registry, tmp_path).check_data()


def test_a_topic_label_with_the_delimiter_is_refused_when_prompted(registry, tmp_path):
    _corpus(tmp_path, topic_of=lambda topic: f"{topic} \u00a5 x")
    assert _task(registry, tmp_path).check_data()  # raw input does not need the delimiter
    with pytest.raises(
        InvalidOptionError,
        match="ukp-sentential-topic:input=prompted .*the topic label 'abortion ¥ x' contains the topic delimiter",
    ):
        _task(registry, tmp_path, input="prompted").check_data()
