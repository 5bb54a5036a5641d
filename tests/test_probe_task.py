"""The public probe task base: a toy probe task written as metadata, a file name and one reader."""

from __future__ import annotations

import json
import sys

import pytest

import harness
import harness.testing as ht

TOPICS = {
    "animals": ["a cat sat", "a dog ran", "birds can fly", "fish swim fast", "the horse ate hay", "a cow said moo"],
    "weather": ["the sun is hot", "rain falls down", "snow is cold", "wind blows hard", "fog hides hills", "hail hits"],
}

# A third-party plugin's probe task: metadata, the file it reads, and the reader (split<TAB>label<TAB>text lines).
TOY_PROBE_PLUGIN = """
from pathlib import Path

import harness
from harness.blocks import ProbeTask


class ToyTopics(ProbeTask):
    metadata = harness.TaskMetadata(
        name="toy-topic",
        family="toy",
        description="toy topic probe",
        main_score="f1_macro",
        metric="macro-F1 x100",
        reference="-",
        dataset="toy-topic",
        dataset_source="-",
        license="-",
        requires=("embedder",),
        training_kinds=(harness.LABELED_SENTENCES, harness.UNLABELED_SENTENCES),
    )
    bundled_data = Path(__file__).parent / "toy-topic"
    data_files = ("topics.tsv",)

    def read_splits(self, folder):
        splits = {}
        for number, line in enumerate((folder / "topics.tsv").read_text(encoding="utf-8").splitlines(), start=1):
            fields = line.split("\\t")
            if len(fields) != 3:
                raise harness.data_error(folder / "topics.tsv", number, "expected split<TAB>label<TAB>text.")
            split, label, text = fields
            splits.setdefault(split, harness.LabeledSentences([], [])).labels.append(label)
            splits[split].sentences.append(text)
        return splits


@harness.hookimpl
def register_tasks(register):
    register(ToyTopics)
"""


def _write_data(folder, splits=("train", "dev", "test")):
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for topic, texts in TOPICS.items():
        for index, text in enumerate(texts):
            split = splits[index % len(splits)] if index >= 2 else "train"  # every topic has train texts
            lines.append(f"{split}\t{topic}\t{text}")
    (folder / "topics.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def toy_plugin(tmp_path, monkeypatch):
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "toy_probe_plugin.py").write_text(TOY_PROBE_PLUGIN, encoding="utf-8")
    _write_data(folder / "toy-topic")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "toy_probe_plugin", raising=False)
    import toy_probe_plugin

    yield toy_probe_plugin
    sys.modules.pop("toy_probe_plugin", None)


def test_a_probe_task_is_metadata_file_names_and_one_reader(toy_plugin):
    task_class = toy_plugin.ToyTopics
    report = ht.check_task(task_class, small_cut=None)
    assert 0 <= report.scores["f1_macro"] <= 100 and "accuracy" in report.scores
    task = task_class({"probe": "linear"})
    splits, labels = task.probe_splits()
    assert labels == ["animals", "weather"] and {name: len(s) for name, s in splits.items()} == {
        "train": 6,
        "dev": 2,
        "test": 4,
    }
    assert task.check_data() == harness.files_checksum([toy_plugin.ToyTopics.bundled_data / "topics.tsv"])
    labelled = task.training_data(harness.LABELED_SENTENCES, None)
    assert labelled.train.sentences == splits["train"].sentences and labelled.dev.labels == splits["dev"].labels


def test_a_probe_task_without_dev_draws_it_from_train_and_normalises(toy_plugin, tmp_path):
    _write_data(tmp_path / "data" / "toy-topic", splits=("train", "test"))
    task_class = type(
        "Upper",
        (toy_plugin.ToyTopics,),
        {"bundled_data": None, "label_order": ("weather", "animals"), "normalise": lambda self, text: text.upper()},
    )
    splits, labels = task_class({"probe": "linear"}, tmp_path / "data").probe_splits()
    assert labels == ["weather", "animals"]
    assert {name: len(s) for name, s in splits.items()} == {"train": 7, "dev": 1, "test": 4}
    assert all(text.isupper() for split in splits.values() for text in split.sentences)
    assert not set(splits["dev"].sentences) & set(splits["train"].sentences)
    ht.check_task(task_class, data_dir=tmp_path / "data", small_cut=None)


def test_a_bad_reader_gives_one_clear_error(toy_plugin):
    def mismatched(self, folder):
        return {"train": harness.LabeledSentences(["a", "b"], ["x"]), "test": harness.LabeledSentences(["c"], ["x"])}

    def unknown_label(self, folder):
        return {
            "train": harness.LabeledSentences(["a", "b"], ["x", "y"]),
            "dev": harness.LabeledSentences(["c"], ["x"]),
            "test": harness.LabeledSentences(["d"], ["z"]),
        }

    bad = type("Bad", (toy_plugin.ToyTopics,), {"read_splits": mismatched})
    with pytest.raises(harness.DataFileError, match="the train split has 2 texts but 1 labels"):
        bad({"probe": "linear"}).check_data()
    bad = type("Bad", (toy_plugin.ToyTopics,), {"read_splits": unknown_label})
    with pytest.raises(harness.DataFileError, match=r"the test split has labels \['z'\] not in the train split's"):
        bad({"probe": "linear"}).check_data()
    fixed_order = type("Bad", (toy_plugin.ToyTopics,), {"read_splits": unknown_label, "label_order": ("x", "y")})
    with pytest.raises(harness.DataFileError, match=r"labels \['z'\] not in label_order"):
        fixed_order({"probe": "linear"}).check_data()


def test_a_probe_task_runs_through_harness_run(toy_plugin, tmp_path):
    results = tmp_path / "results"
    run = ht.run_harness(
        "run",
        "--models",
        "testing-embedder",
        "--tasks",
        "toy-topic",
        "--profile",
        "smoke",
        "--no-progress",
        "--results",
        results,
        plugins=["toy_probe_plugin", "harness.testing"],
    )
    assert run.exit_code == 0, run.stderr
    (path,) = results.glob("*/seed-*/toy-topic.json")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["status"] == "ok" and record["main_score"] == record["scores"]["f1_macro"]
    assert record["dataset_checksum"] == toy_plugin.ToyTopics({"probe": "linear"}).check_data()
    assert record["details"]["labels"] == ["animals", "weather"]


def test_a_probe_task_prepares_what_the_model_reads_and_its_details(toy_plugin):
    read, details = [], []

    class Prompted(toy_plugin.ToyTopics):
        def model_texts(self, split):
            texts = [f"{label}: {text}" for label, text in zip(split.labels, split.sentences)]
            read.extend(texts)
            return texts

        def evaluation_details(self, splits, labels):
            details.append({"sentences": {name: len(split) for name, split in splits.items()}, "topics": labels})
            return details[-1]

        def evaluate(self, model, ctx):
            result = super().evaluate(model, ctx)
            details.append(result.details)
            return result

    ht.check_task(Prompted, small_cut=None)
    assert read and all(text.split(": ")[0] in TOPICS for text in read)
    assert list(details[-1]) == ["sentences", "topics", "probe", "options"]
    assert details[-1]["sentences"] == {"train": 6, "dev": 2, "test": 4}
