"""BWS Argument Similarity family: ``bws-cross-topic`` and ``bws-in-topic`` (argument-pair similarity, Spearman x100)
and ``bws-topic`` (a frozen-encoder topic probe, macro-F1 x100), each also a source of training data.

Thesis 3.5, 5.2.2, 5.5 and tables 3.7, 5.1; corpus of Thakur et al. 2021 (AugSBERT): 3400 argument pairs, 8 topics
of 425 pairs, a Best-Worst-Scaling similarity score in [0, 1]. Topic numbering (``TOPICS``, task version 2), the
split sizes (``sizes``), the probe protocols (``probe``), topic prompts (``input``) and every deviation:
docs/tasks/bws.md, section "BWS Argument Similarity" and its BWS table rows. Data: bundled under ``tasks/data/bws/``
with its SOURCE.md; ``--data-dir`` overrides.
"""

from __future__ import annotations

import csv
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness import (
    LABELED_SENTENCES,
    SCORED_PAIRS,
    UNLABELED_SENTENCES,
    EvalResult,
    InvalidOptionError,
    LabeledSentences,
    MissingDataError,
    Option,
    ScoredPairs,
    Task,
    TaskMetadata,
    TrainingSplits,
    UnlabeledSentences,
    data_error,
    files_checksum,
    hookimpl,
    pearson,
    resolve_dataset_dir,
    spearman,
)
from harness.blocks import (
    DEFAULT_DELIMITER,
    PROBE_VARIANTS,
    ExampleScores,
    ProbeTask,
    TopicPromptError,
    evaluation_sample,
    macro_f1,  # noqa: F401  (re-exported, the probe's metric)
    prompted_texts,
    score_pairs,
)

logger = logging.getLogger(__name__)

DATA_ROOT = Path(__file__).resolve().parent / "data"
FAMILY = "bws"
DATASET = "bws"
FILE_NAME = "BWS_corpus.csv"
REQUIRED_COLUMNS = ("topic", "sentence_1", "sentence_2", "regression_label")

# T1..T8 as thesis table 3.7 and its code number them (after Thakur et al. 2021), not the file's alphabetical order.
TOPICS = (
    "Cloning",  # T1
    "Abortion",  # T2
    "Minimum wage",  # T3
    "Marijuana legalization",  # T4
    "Nuclear energy",  # T5
    "Death penalty",  # T6
    "Gun control",  # T7
    "School uniforms",  # T8
)
TOPIC_NUMBERS = {topic: f"T{number}" for number, topic in enumerate(TOPICS, start=1)}
CROSS_TOPIC_SPLITS = {"train": TOPICS[:5], "dev": TOPICS[5:6], "test": TOPICS[6:]}
# Per-topic in-topic sizes (train, dev; test gets the rest of the 425 pairs of a topic), per topic.
IN_TOPIC_SIZES: dict[str, dict[str, dict[str, int]]] = {
    # The thesis code (load_bws_in_topic): 266 / 53 / 106 for T1-T5, 265 / 54 / 106 for T6, 265 / 53 / 107 for T7
    # and T8, i.e. 2125 / 425 / 850 pairs.
    "thesis-code": {
        **{topic: {"train": 266, "dev": 53} for topic in TOPICS[:5]},
        "Death penalty": {"train": 265, "dev": 54},
        "Gun control": {"train": 265, "dev": 53},
        "School uniforms": {"train": 265, "dev": 53},
    },
    # Thesis table 5.1 (text): 2471 / 478 / 451 of 3400 pairs, its ratios applied to every topic: 309 / 60 / 56.
    "thesis-text": {topic: {"train": round(425 * 2471 / 3400), "dev": round(425 * 478 / 3400)} for topic in TOPICS},
}
# Topic probe: sentences of every topic split 80 / 10 / 10.
PROBE_FRACTIONS = {"train": 0.8, "dev": 0.1}

LICENSE = "no data license stated; original corpus distributed by TU Darmstadt (tudatalib 2496), see SOURCE.md"
SOURCE = "BWS_corpus.csv from TamaraAtanasoska/AMRArgumentSimilarity (see tasks/data/bws/SOURCE.md)"
REFERENCE = "Thakur et al. 2021 (Augmented SBERT), NAACL; thesis 3.5, table 5.1"
# Version 2: topics numbered as in thesis table 3.7 (version 1 used the alphabetical order); in-topic sizes of the
# thesis code by default; the topic probe's thesis-code variant.
COMMON_METADATA = {
    "family": FAMILY,
    "reference": REFERENCE,
    "dataset": DATASET,
    "dataset_source": SOURCE,
    "license": LICENSE,
    "version": "2",
}
TOPIC_DETAILS = {"topics": {number: topic for topic, number in TOPIC_NUMBERS.items()}}
SPLIT_SEED_OPTION = Option(0, "seed of the per-topic random split", type=int)
SIZES_OPTION = Option(
    "thesis-code",
    "in-topic pairs per topic: 266/53/106 (thesis code; 2125/425/850) or 309/60/56 "
    "(thesis table 5.1 ratios; 2472/480/448)",
    choices=tuple(IN_TOPIC_SIZES),
)
PROBES = PROBE_VARIANTS
# Topic prompts (thesis 4.4.2, table 6.16 "Prompted BWS" / "Prompted UKP"): every sentence as "{topic} ¥ {sentence}".
INPUT_OPTIONS = {
    "input": Option(
        "raw",
        "raw: the sentences; prompted: each with its topic's prompt '{topic} ¥ {sentence}' (thesis 4.4.2, table 6.16)",
        choices=("raw", "prompted"),
    ),
    "delimiter": Option(
        DEFAULT_DELIMITER,
        "topic delimiter of input=prompted (thesis: the yen sign); refused if it occurs in a sentence",
        type=str,
    ),
}


@dataclass
class ArgumentPairs:
    topics: list[str]
    first: list[str]
    second: list[str]
    gold: np.ndarray

    def __len__(self) -> int:
        return len(self.gold)

    def subset(self, indices) -> ArgumentPairs:
        indices = list(indices)
        return ArgumentPairs(
            [self.topics[i] for i in indices],
            [self.first[i] for i in indices],
            [self.second[i] for i in indices],
            self.gold[indices],
        )

    def scored_pairs(self) -> ScoredPairs:
        return ScoredPairs(list(self.first), list(self.second), self.gold.copy())


def read_bws(path: Path) -> ArgumentPairs:
    """The corpus csv (header ``topic,sentence_1,sentence_2,...,regression_label``); malformed rows are a
    DataFileError naming the file and line."""
    if not path.is_file():
        raise MissingDataError(f"{path}: data file not found.")
    topics, first, second, gold = [], [], [], []
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise data_error(path, 1, "the file is empty; expected a header row.") from None
        except csv.Error as exc:
            raise data_error(path, reader.line_num, f"not readable as CSV ({exc}).") from None
        missing = [column for column in REQUIRED_COLUMNS if column not in header]
        if missing:
            raise data_error(
                path, 1, f"header lacks column(s) {', '.join(missing)}; expected {', '.join(REQUIRED_COLUMNS)}."
            )
        column = {name: header.index(name) for name in REQUIRED_COLUMNS}
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                raise data_error(path, reader.line_num, f"not readable as CSV ({exc}).") from None
            line = reader.line_num
            if not fields:
                continue
            if len(fields) != len(header):
                raise data_error(path, line, f"expected {len(header)} comma-separated fields, found {len(fields)}.")
            topic = fields[column["topic"]].strip()
            if topic not in TOPICS:
                raise data_error(path, line, f"unknown topic {topic!r}; the BWS topics are: {', '.join(TOPICS)}.")
            raw_score = fields[column["regression_label"]]
            try:
                score = float(raw_score)
            except ValueError:
                raise data_error(path, line, f"regression_label {raw_score!r} is not a number.") from None
            if not 0.0 <= score <= 1.0:
                raise data_error(path, line, f"regression_label {score} is outside [0, 1].")
            sentence_a = fields[column["sentence_1"]].strip()
            sentence_b = fields[column["sentence_2"]].strip()
            if not sentence_a or not sentence_b:
                raise data_error(path, line, "empty sentence_1 or sentence_2.")
            topics.append(topic)
            first.append(sentence_a)
            second.append(sentence_b)
            gold.append(score)
    absent = [topic for topic in TOPICS if topic not in set(topics)]
    if absent:
        raise data_error(path, None, f"no pairs for topic(s) {', '.join(absent)}; the task needs all 8 topics.")
    return ArgumentPairs(topics, first, second, np.array(gold, dtype=np.float64))


def split_counts(total: int, fractions: dict[str, float]) -> dict[str, int]:
    """Rounded train/dev counts; test gets the rest. Values above 1 are counts, not fractions."""
    train = int(fractions["train"]) if fractions["train"] > 1 else int(round(total * fractions["train"]))
    dev = int(fractions["dev"]) if fractions["dev"] > 1 else int(round(total * fractions["dev"]))
    return {"train": train, "dev": dev, "test": total - train - dev}


def per_topic_split(labels: list[str], fractions: dict, seed: int) -> dict[str, list[int]]:
    """Indices of train/dev/test: each topic's items shuffled (seeded) and cut with the same fractions, or with
    per-topic counts (``{topic: {"train": n, "dev": m}}``). Topics are visited in the file's alphabetical order, so
    the draws of version 1 stay the draws of version 2."""
    rng = np.random.default_rng(seed)
    splits: dict[str, list[int]] = {"train": [], "dev": [], "test": []}
    for topic in sorted(TOPICS):
        members = [index for index, label in enumerate(labels) if label == topic]
        members = [members[i] for i in rng.permutation(len(members))]
        counts = split_counts(len(members), fractions.get(topic, fractions))
        splits["train"] += members[: counts["train"]]
        splits["dev"] += members[counts["train"] : counts["train"] + counts["dev"]]
        splits["test"] += members[counts["train"] + counts["dev"] :]
    return {name: sorted(indices) for name, indices in splits.items()}


class BWSTask(Task):
    def folder(self) -> Path:
        return resolve_dataset_dir(DATASET, DATA_ROOT / DATASET, data_dir=self.data_dir)

    def path(self) -> Path:
        return self.folder() / FILE_NAME

    def load(self) -> ArgumentPairs:
        return read_bws(self.path())

    def check_data(self) -> str:
        pairs = self.load()
        if self.options.get("input") == "prompted":
            self.prompted(pairs.topics + pairs.topics, pairs.first + pairs.second)
        return files_checksum([self.path()])

    def prompted(self, topics: list[str], sentences: list[str]) -> list[str]:
        """``input=prompted``: every sentence with its topic's prompt; a delimiter found in the data is refused."""
        try:
            return prompted_texts(topics, sentences, self.options["delimiter"], "the BWS sentences")
        except TopicPromptError as exc:
            raise InvalidOptionError(f"task {self.metadata.name}:input=prompted: {exc}") from None


class ArgumentSimilarityTask(BWSTask):
    """Spearman of pair scores on the test split; train/dev offered as scored pairs."""

    def splits(self, pairs: ArgumentPairs) -> dict[str, list[int]]:  # pragma: no cover - interface
        raise NotImplementedError

    def split_pairs(self) -> dict[str, ArgumentPairs]:
        pairs = self.load()
        return {name: pairs.subset(indices) for name, indices in self.splits(pairs).items()}

    def evaluate(self, model, ctx) -> EvalResult:
        splits = self.split_pairs()
        test = splits["test"]
        test = test.subset(evaluation_sample(len(test), ctx.profile.max_eval_examples))
        first, second = test.first, test.second
        if self.options.get("input") == "prompted":  # both sentences of a pair share its topic
            first, second = self.prompted(test.topics, first), self.prompted(test.topics, second)
        predicted = score_pairs(model, first, second)
        return EvalResult(
            scores={"spearman": 100 * spearman(predicted, test.gold), "pearson": 100 * pearson(predicted, test.gold)},
            dataset_checksum=files_checksum([self.path()]),
            examples=ExampleScores("spearman", {"predicted": predicted, "gold": test.gold}),
            details={
                "pairs": {name: len(split) for name, split in splits.items()},
                "evaluated_pairs": len(test),
                # T-numbers of thesis table 3.7 with the topic names, per split
                "topics": {name: topic_labels(split.topics) for name, split in splits.items()},
                "test_topics": sorted(set(test.topics)),
                "options": self.options,
            },
        )

    def held_out_sentences(self, splits: dict[str, ArgumentPairs]) -> frozenset[str]:
        """Sentences of the dev and test pairs: never trained on alone, never paired with each other."""
        return frozenset(s.strip() for name in ("dev", "test") for s in (*splits[name].first, *splits[name].second))

    def training_data(self, kind, ctx=None):
        if kind == UNLABELED_SENTENCES:
            # The train split's distinct sentences; a sentence that also occurs in a dev or test pair is left out, so
            # no evaluated text is ever trained on.
            splits = self.split_pairs()
            held_out = self.held_out_sentences(splits)
            train = splits["train"]
            sentences = [
                s for s in dict.fromkeys(t.strip() for t in (*train.first, *train.second)) if s and s not in held_out
            ]
            # The checksum covers the sentences themselves, not just the file: a changed split (e.g. the topic
            # order) must retrain every model trained on the old sentences.
            content = hashlib.sha256("\n".join(sentences).encode("utf-8")).hexdigest()
            return TrainingSplits(
                source=self.metadata.name,
                train=UnlabeledSentences(sentences),
                checksum=f"{files_checksum([self.path()])}:{content[:16]}",
            )
        if kind != SCORED_PAIRS:
            return None
        splits = self.split_pairs()
        return TrainingSplits(
            source=self.metadata.name,
            train=splits["train"].scored_pairs(),
            dev=splits["dev"].scored_pairs(),
            checksum=files_checksum([self.path()]),
            # In-topic train pairs share sentences with dev/test pairs; a method that builds new pairs from the train
            # sentences (Augmented SBERT's samplers) must never pair two of these (the pair could be a test pair).
            held_out_sentences=self.held_out_sentences(splits),
        )


def topic_labels(topics) -> list[str]:
    """``["T1 Cloning", ...]``: the distinct topics, in thesis order, with their thesis number."""
    present = set(topics)
    return [f"{TOPIC_NUMBERS[topic]} {topic}" for topic in TOPICS if topic in present]


class CrossTopicTask(ArgumentSimilarityTask):
    metadata = TaskMetadata(
        name="bws-cross-topic",
        description="BWS argument similarity, unseen topics (thesis table 3.7 numbering): train T1-T5 Cloning, "
        "Abortion, Minimum wage, Marijuana legalization, Nuclear energy (2125); dev T6 Death penalty "
        "(425); test T7-T8 Gun control, School uniforms (850)",
        main_score="spearman",
        metric="Spearman x100 of pair scores vs the BWS score on the test topics",
        training_kinds=(SCORED_PAIRS, UNLABELED_SENTENCES),
        details={
            **TOPIC_DETAILS,
            "splits": {name: topic_labels(topics) for name, topics in CROSS_TOPIC_SPLITS.items()},
        },
        **COMMON_METADATA,
    )

    options = dict(INPUT_OPTIONS)

    def splits(self, pairs):
        return {
            name: [i for i, topic in enumerate(pairs.topics) if topic in topics]
            for name, topics in CROSS_TOPIC_SPLITS.items()
        }


class InTopicTask(ArgumentSimilarityTask):
    metadata = TaskMetadata(
        name="bws-in-topic",
        description="BWS argument similarity, every topic split 266/53/106 pairs (train 2125, dev 425, test 850; "
        "thesis code), or 309/60/56 with sizes=thesis-text",
        main_score="spearman",
        metric="Spearman x100 of pair scores vs the BWS score on the in-topic test split",
        # Unlabeled sentences: the train pairs' sentences that occur in no dev or test pair (inherited).
        training_kinds=(SCORED_PAIRS, UNLABELED_SENTENCES),
        details=TOPIC_DETAILS,
        **COMMON_METADATA,
    )
    options = {"split_seed": SPLIT_SEED_OPTION, "sizes": SIZES_OPTION, **INPUT_OPTIONS}

    def splits(self, pairs):
        return per_topic_split(pairs.topics, IN_TOPIC_SIZES[self.options["sizes"]], self.options["split_seed"])


class TopicProbeTask(BWSTask, ProbeTask):
    """Frozen-encoder topic classification, macro-F1 on the test sentences (the probe protocol: ProbeTask)."""

    metadata = TaskMetadata(
        name="bws-topic",
        description="frozen-encoder linear topic probe on BWS sentences (8 topics, per-topic 80/10/10 split; "
        "probe=thesis-code: Linear-SiLU-Linear on the in-topic pair split's sentences, last epoch)",
        main_score="f1_macro",
        metric="macro-F1 x100 of a linear classifier (10 epochs, lr 1e-3) on frozen embeddings, test sentences",
        requires=("embedder",),
        training_kinds=(LABELED_SENTENCES,),
        details=TOPIC_DETAILS,
        **COMMON_METADATA,
    )
    options = {
        "split_seed": SPLIT_SEED_OPTION,
        "probe": Option(
            "linear",
            "linear: Linear(d, 8), per-topic 80/10/10 sentence split, best dev epoch (thesis "
            "text); thesis-code: Linear-SiLU-Linear, in-topic pair split's sentences, last epoch",
            choices=PROBES,
        ),
        **INPUT_OPTIONS,
    }
    data_files = (FILE_NAME,)
    label_order = TOPICS

    def labelled_sentences(self) -> tuple[list[str], list[str], int]:
        """Distinct sentences with their topic; sentences found under two topics are left out (counted)."""
        pairs = self.load()
        topic_of: dict[str, str] = {}
        conflicting: set[str] = set()
        for topic, sentence_a, sentence_b in zip(pairs.topics, pairs.first, pairs.second):
            for sentence in (sentence_a, sentence_b):
                if topic_of.setdefault(sentence, topic) != topic:
                    conflicting.add(sentence)
        sentences = [sentence for sentence in topic_of if sentence not in conflicting]
        return sentences, [topic_of[sentence] for sentence in sentences], len(conflicting)

    def split_sentences(self) -> tuple[dict[str, LabeledSentences], int]:
        sentences, labels, conflicting = self.labelled_sentences()
        everything = LabeledSentences(sentences, labels)
        if self.options["probe"] == "thesis-code":
            return self.pair_split_sentences(everything), conflicting
        indices = per_topic_split(labels, PROBE_FRACTIONS, self.options["split_seed"])
        return {name: everything.subset(split) for name, split in indices.items()}, conflicting

    def pair_split_sentences(self, everything: LabeledSentences) -> dict[str, LabeledSentences]:
        """The thesis code's probe data: the sentences of the in-topic pair split (266/53/106 pairs per topic). A
        sentence in pairs of several splits belongs to the most held-out one (test, then dev), so no evaluated
        sentence is trained on."""
        pairs = self.load()
        split_of: dict[str, str] = {}
        for name in ("test", "dev", "train"):
            indices = per_topic_split(pairs.topics, IN_TOPIC_SIZES["thesis-code"], self.options["split_seed"])[name]
            for index in indices:
                for sentence in (pairs.first[index], pairs.second[index]):
                    split_of.setdefault(sentence, name)
        return {
            name: everything.subset(
                [i for i, sentence in enumerate(everything.sentences) if split_of.get(sentence) == name]
            )
            for name in ("train", "dev", "test")
        }

    def training_data(self, kind, ctx=None):
        if kind != LABELED_SENTENCES:
            return None
        splits, _ = self.split_sentences()
        return TrainingSplits(self.metadata.name, splits["train"], splits["dev"], files_checksum([self.path()]))

    def read_splits(self, folder: Path) -> dict[str, LabeledSentences]:
        return self.split_sentences()[0]

    def model_texts(self, split: LabeledSentences) -> list[str]:
        if self.options["input"] == "prompted":
            return self.prompted(split.labels, split.sentences)
        return list(split.sentences)

    def probe_descriptions(self) -> tuple[str, str]:
        return f"BWS sentences ({self.options['input']})", "topic probe"

    def evaluation_details(self, splits: dict[str, LabeledSentences], labels: list[str]) -> dict:
        return {
            "sentences": {name: len(split) for name, split in splits.items()},
            "sentences_with_conflicting_topics": self.labelled_sentences()[2],
            "topics": topic_labels(TOPICS),
        }


TASKS: tuple[type[Task], ...] = (CrossTopicTask, InTopicTask, TopicProbeTask)


@hookimpl
def register_tasks(register):
    for task_class in TASKS:
        register(task_class)
