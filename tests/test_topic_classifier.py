"""The topic classifier ``classifier`` (plugins/topic_classifier.py) on the tiny BERT: its refusals, the texts it
reads under input=prompted, the labels its checkpoint keeps, and its thesis-code head (tests/test_topic_distillation.py
checks that it learns)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import harness.testing as ht
from harness import DataFileError, LabeledSentences, TrainingSplits

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _classifier(registry, backbone, **options):
    plugin = registry.model("classifier")
    ctx = ht.model_context(backbone, options, plugin=plugin, registry=registry)
    return plugin.factory(ctx), ctx


def _splits(labels):
    sentences = list(dict.fromkeys(ht.TINY_SENTENCES))[: len(labels)]
    return TrainingSplits("toy-topics", LabeledSentences(sentences, labels), None, checksum="c")


def test_one_topic_label_is_refused_naming_the_source(registry, tiny_bert):
    model, ctx = _classifier(registry, tiny_bert)
    with pytest.raises(DataFileError, match="'toy-topics' has 1 topic label.*at least two"):
        model.fit(_splits(["sport"] * 4), ctx)


def test_prompted_input_reads_topic_delimiter_sentence(registry, tiny_bert):
    raw, _ = _classifier(registry, tiny_bert)
    assert raw.training_texts(["a cat ."], ["pets"], "toy") == ["a cat ."]
    prompted, _ = _classifier(registry, tiny_bert, input="prompted", delimiter="|")
    (text,) = prompted.training_texts(["a cat ."], ["pets"], "toy")
    assert text.startswith("pets") and text.endswith("a cat .") and "|" in text
    with pytest.raises(DataFileError, match="delimiter"):
        prompted.training_texts(["a | cat ."], ["pets"], "toy")


def test_the_checkpoint_keeps_the_sorted_labels_and_the_head(registry, tiny_bert, tmp_path):
    model, ctx = _classifier(registry, tiny_bert, head="thesis-code")
    report = model.fit(_splits(["world", "people", "world", "people", "sport", "sport"]), ctx)
    assert report.as_record()["steps"] >= 1
    model.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["labels"] == ["people", "sport", "world"] and config["head"] == "thesis-code"
    fresh, _ = _classifier(registry, tiny_bert, head="thesis-code")
    fresh.load(tmp_path)
    assert fresh.labels == ["people", "sport", "world"]
    np.testing.assert_allclose(fresh.encode(["a cat ."]), model.encode(["a cat ."]), atol=1e-5)


def test_it_needs_training_and_trains_on_20ng_topic_by_default(registry):
    plugin = registry.model("classifier")
    assert plugin.requires_training and plugin.default_train_on == "20ng-topic"
    assert plugin.default_train_on in registry.tasks
    assert "labeled_sentences" in registry.task(plugin.default_train_on).metadata.training_kinds
