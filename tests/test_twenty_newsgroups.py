"""20 Newsgroups topic probes (the `20ng` family) on the bundled real corpus: counts, the preprocessing against
scikit-learn's on raw messages, the thesis' dev split (table 3.8), prompts, training data, bad input, and a probe on a
tiny random model."""

from __future__ import annotations

import gzip
import json
import lzma
import zlib
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets._twenty_newsgroups import (
    strip_newsgroup_footer,
    strip_newsgroup_header,
    strip_newsgroup_quoting,
)

from conftest import REPO
from harness import LABELED_SENTENCES, UNLABELED_SENTENCES, DataFileError, InvalidOptionError
from harness.evaluation.probe import clear_encoding_cache
from harness.options import resolve_options
from harness.plugin_api import EvalContext
from harness.profiles import get_profile
from harness.tasks.twenty_newsgroups.corpus import GROUPS, PARENT_OF, PARENTS, SPLIT_FILES, thesis_dev_indices
from harness.tasks.twenty_newsgroups.preprocess import clean_document

RAW_SAMPLE = REPO / "tests" / "fixtures" / "20newsgroups-raw-sample.jsonl.gz"

# Thesis table 3.8: #Train and #Dev per newsgroup (alphabetical, as GROUPS).
TABLE_3_8_TRAIN = (382, 488, 494, 486, 472, 496, 494, 499, 503, 491, 493, 511, 506, 496, 503, 509, 436, 468, 389, 312)
TABLE_3_8_DEV = (98, 96, 97, 104, 106, 97, 91, 95, 95, 106, 107, 84, 85, 98, 90, 90, 110, 96, 76, 65)
TABLE_3_8_TEST = (319, 389, 394, 392, 385, 395, 390, 396, 398, 397, 399, 396, 393, 396, 394, 398, 364, 376, 310, 251)


def _task(registry, name="20ng-topic", data_dir=None, **options):
    plugin = registry.task(name)
    return plugin.factory(resolve_options(name, plugin.options, options), data_dir)


def _ctx(profile="smoke", seed=42):
    return EvalContext(profile=get_profile(profile), device="cpu", seed=seed, batch_size=32, progress=False)


def test_bundled_corpus_has_the_bydate_counts(registry):
    corpus = _task(registry).corpus()
    assert {name: len(documents) for name, documents in corpus.items()} == {"train": 11314, "test": 7532}
    test_counts = Counter(document.group for document in corpus["test"])
    assert tuple(test_counts[group] for group in GROUPS) == TABLE_3_8_TEST
    train_counts = Counter(document.group for document in corpus["train"])
    assert train_counts["alt.atheism"] == 480 and train_counts["talk.religion.misc"] == 377
    assert sum(1 for d in corpus["train"] if not d.text.strip()) == 300
    assert sum(1 for d in corpus["test"] if not d.text.strip()) == 215
    assert not {d.id for d in corpus["train"]} & {d.id for d in corpus["test"]}
    assert set(PARENT_OF) == set(GROUPS) and set(PARENT_OF.values()) == set(PARENTS)


def test_bundled_text_is_scikit_learns_cleaning_of_the_raw_messages(registry):
    """Raw messages of both splits re-derived with scikit-learn's own functions, in fetch_20newsgroups' order, give
    the bundled text exactly."""
    corpus = _task(registry).corpus()
    bundled = {d.id: d.text for documents in corpus.values() for d in documents}
    with gzip.open(RAW_SAMPLE, "rt", encoding="utf-8") as handle:
        raw = [json.loads(line) for line in handle]
    assert len(raw) >= 160 and {row["split"] for row in raw} == {"train", "test"}
    changed = Counter()
    for row in raw:
        header_free = strip_newsgroup_header(row["text"])
        footer_free = strip_newsgroup_footer(header_free)
        expected = strip_newsgroup_quoting(footer_free)
        assert bundled[row["id"]] == expected == clean_document(row["text"]), row["id"]
        changed["headers"] += header_free != row["text"]
        changed["footers"] += footer_free != header_free
        changed["quotes"] += expected != footer_free
        changed["empty"] += not expected.strip()
    # The sample exercises every rule (so the comparison means something).
    assert changed["headers"] == len(raw) and changed["footers"] > 50 and changed["quotes"] > 30
    assert changed["empty"] >= 6


def test_thesis_dev_split_reproduces_table_3_8(registry):
    task = _task(registry)
    corpus = task.corpus()
    dev_indices = thesis_dev_indices(corpus["train"])
    dev = [corpus["train"][i] for i in dev_indices]
    train = [d for i, d in enumerate(corpus["train"]) if i not in set(dev_indices)]
    assert len(dev) == 1886 and len(train) == 9428
    dev_counts, train_counts = Counter(d.group for d in dev), Counter(d.group for d in train)
    assert tuple(dev_counts[group] for group in GROUPS) == TABLE_3_8_DEV
    assert tuple(train_counts[group] for group in GROUPS) == TABLE_3_8_TRAIN
    # The task's splits: the same documents minus the empty ones, counted; dev never overlaps test or train.
    splits = task.split_documents()
    ids = {name: {d.id for d in documents} for name, documents in splits.documents.items()}
    assert ids["dev"] == {d.id for d in dev if d.text.strip()}
    assert not ids["dev"] & ids["test"] and not ids["dev"] & ids["train"] and not ids["train"] & ids["test"]
    assert splits.empty_dropped["test"] == 215 and splits.empty_dropped["train"] + splits.empty_dropped["dev"] == 300
    assert all(d.text.strip() for documents in splits.documents.values() for d in documents)
    assert sum(splits.counts().values()) == 18846 - 515


def test_stratified_dev_split_is_seeded_and_disjoint_from_test(registry):
    splits = _task(registry, dev_split="stratified").split_documents()
    drawn_dev = len(splits.documents["dev"]) + splits.empty_dropped["dev"]
    assert drawn_dev == 1886
    dev_counts = Counter(d.group for d in splits.documents["dev"])
    train_total = Counter(d.group for d in _task(registry).corpus()["train"])
    for group in GROUPS:  # stratified: each newsgroup gives about a sixth of its train documents
        assert abs(dev_counts[group] - train_total[group] / 6) <= 8, group
    ids = {name: {d.id for d in documents} for name, documents in splits.documents.items()}
    assert not ids["dev"] & ids["test"] and not ids["dev"] & ids["train"]
    again = _task(registry, dev_split="stratified").split_documents()
    assert {d.id for d in again.documents["dev"]} == ids["dev"]
    other = _task(registry, dev_split="stratified", split_seed=1).split_documents()
    assert {d.id for d in other.documents["dev"]} != ids["dev"]


def test_prompted_input_prepends_the_parent_group_and_keeps_the_first_words(registry):
    task = _task(registry, input="prompted", max_words=5)
    documents = task.split_documents().documents["test"][:3]
    texts = task.input_texts(documents)
    for document, text in zip(documents, texts):
        prefix = f"{document.parent} \u00a5 "
        assert text.startswith(prefix)
        body = text[len(prefix) :]
        assert document.text.startswith(body) and len(body.split()) == min(5, len(document.text.split()))
    assert _task(registry, max_words=0).input_texts(documents) == [d.text for d in documents]


def test_a_delimiter_that_occurs_in_the_documents_is_refused(registry):
    with pytest.raises(
        InvalidOptionError,
        match=r"option delimiter='the' of task '20ng-topic': the topic delimiter "
        r"'the' occurs in the 20 Newsgroups documents \(alt\.atheism/",
    ):
        _task(registry, input="prompted", delimiter="the").check_data()
    _task(registry, input="raw", delimiter="the").check_data()  # raw input has no prompt: nothing to refuse
    with pytest.raises(InvalidOptionError, match="max_words"):
        _task(registry, max_words=-1)


def test_training_data_is_the_train_split_with_parent_labels(registry):
    task = _task(registry, "20ng-parent")
    splits = task.split_documents().documents
    labeled = task.training_data(LABELED_SENTENCES)
    assert len(labeled.train) == len(splits["train"]) and len(labeled.dev) == len(splits["dev"])
    assert set(labeled.train.labels) == set(PARENTS)
    assert labeled.train.labels[:3] == [d.parent for d in splits["train"][:3]]
    assert not set(labeled.train.sentences) & {d.text for d in splits["test"]} - {d.text for d in splits["train"]}
    unlabeled = task.training_data(UNLABELED_SENTENCES)
    assert unlabeled.train.sentences == labeled.train.sentences and unlabeled.dev is None
    assert _task(registry, "20ng-topic").training_data(LABELED_SENTENCES).checksum == labeled.checksum
    assert (
        _task(registry, "20ng-topic", dev_split="stratified").training_data(LABELED_SENTENCES).checksum
        != labeled.checksum
    )


def _write(folder, split, lines):
    (folder / "20newsgroups").mkdir(parents=True, exist_ok=True)
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    (folder / "20newsgroups" / SPLIT_FILES[split]).write_bytes(lzma.compress(data))


@pytest.mark.parametrize(
    "bad_line, message",
    [
        ('{"id": "rec.autoz/1", "text": "x"}', r"20news-bydate-test.jsonl.xz:2: unknown newsgroup 'rec.autoz'"),
        ('{"id": "rec.autos/1", "text": 5}', r"20news-bydate-test.jsonl.xz:2: expected \{\"id\""),
        ('{"id": "rec.autos/1", ', r"20news-bydate-test.jsonl.xz:2: not a JSON object"),
        (
            '{"id": "sci.med/7", "text": "again"}',
            r"20news-bydate-test.jsonl.xz:2: duplicate id 'sci.med/7' \(first on "
            r"line 1\)",
        ),
    ],
)
def test_malformed_data_file_names_file_and_line(registry, tmp_path, bad_line, message):
    _write(tmp_path, "train", ['{"id": "sci.med/1", "text": "fine"}'])
    _write(tmp_path, "test", ['{"id": "sci.med/7", "text": "fine"}', bad_line])
    with pytest.raises(DataFileError, match=message):
        _task(registry, data_dir=tmp_path).check_data()


class HashingEmbedder:
    """Bag of hashed words (1024 dims): carries topic words, so a linear probe can find the newsgroup."""

    def __init__(self):
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        vectors = np.zeros((len(texts), 1024), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                vectors[row, zlib.crc32(word.encode()) % 1024] += 1.0
        return vectors


class ConstantEmbedder:
    def encode(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32)


def test_probe_separates_informative_embeddings_and_encodes_each_input_once(registry):
    clear_encoding_cache()
    # The smoke profile's cut, at 800 documents per split (200 are too few to learn 20 newsgroups at lr 1e-3).
    ctx = EvalContext(
        profile=replace(get_profile("smoke"), max_eval_examples=800),
        device="cpu",
        seed=42,
        batch_size=32,
        progress=False,
    )
    model = HashingEmbedder()
    topic = _task(registry, "20ng-topic", max_words=128).evaluate(model, ctx)
    assert topic.details["documents"] == {"train": 800, "dev": 800, "test": 800}
    assert topic.details["empty_documents_dropped"]["test"] == 215
    assert len(topic.details["probe"]["dev_f1_macro_history"]) == 10
    constant = _task(registry, "20ng-topic", max_words=128).evaluate(ConstantEmbedder(), ctx)
    assert constant.scores["f1_macro"] < 2 < 15 < topic.scores["f1_macro"]  # chance is about 5
    cut = _task(registry, "20ng-topic", max_words=128, max_documents=300).evaluate(ConstantEmbedder(), ctx)
    assert cut.details["documents"] == {"train": 300, "dev": 300, "test": 300}  # the smaller of both cuts
    parent = _task(registry, "20ng-parent", max_words=128).evaluate(model, ctx)
    assert model.calls == 1  # the parent probe reuses the topic probe's embeddings of the same documents
    assert parent.details["labels"] == list(PARENTS) and parent.scores["f1_macro"] > 15
    prompted = _task(registry, "20ng-parent", max_words=128, input="prompted").evaluate(model, ctx)
    assert model.calls == 2  # raw and prompted: two encodings
    assert prompted.scores["f1_macro"] > parent.scores["f1_macro"] + 20  # the prompt names the parent group
    again = _task(registry, "20ng-topic", max_words=128).evaluate(model, ctx)
    assert model.calls == 2 and again.scores == topic.scores  # cached embeddings, seeded probe


def test_probe_on_a_tiny_random_transformer(registry, tiny_bert):
    from harness.nn import SentenceEncoder

    clear_encoding_cache()
    encoder = SentenceEncoder.from_backbone(tiny_bert, profile_limit=32)
    ctx = EvalContext(
        profile=replace(get_profile("smoke"), max_eval_examples=100),
        device="cpu",
        seed=42,
        batch_size=32,
        progress=False,
    )
    result = _task(registry, "20ng-topic", input="prompted", probe="thesis-code").evaluate(encoder, ctx)
    assert 0 <= result.scores["f1_macro"] <= 100 and 0 <= result.scores["accuracy"] <= 100
    assert result.details["probe"]["best_epoch"] == 9  # thesis-code keeps the last epoch
    assert result.details["input"] == "prompted"


def test_the_task_contract_check_passes():
    from harness.testing import check_task

    report = check_task("20ng-parent", options={"input": "prompted"})
    assert 0 <= report.main_score <= 100
    assert set(report.training_kinds) == {LABELED_SENTENCES, UNLABELED_SENTENCES}
