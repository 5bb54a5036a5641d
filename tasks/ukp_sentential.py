"""UKP Sentential Argument Mining topic probe (thesis 5.6.1, 5.6.2, table 6.16 "UKP (F1)"): the ``ukp-sentential``
family, read from a user's copy of the corpus (Stab et al. 2018, EMNLP; not redistributable, so it comes from
``<data-dir>/ukp_sentential_argument_mining/``; without it the task is ``missing`` and the rest of a run goes on).

The corpus, where to get and complete it, the members, splits, probe and every deviation: docs/tasks/ukp-sentential.md,
section "UKP Sentential Argument Mining".
"""

from __future__ import annotations

import csv
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from harness import (
    LABELED_SENTENCES,
    UNLABELED_SENTENCES,
    EvalResult,
    InvalidOptionError,
    LabeledSentences,
    MissingDataError,
    Option,
    Task,
    TaskMetadata,
    TrainingSplits,
    UnlabeledSentences,
    data_error,
    files_checksum,
    hookimpl,
    resolve_dataset_dir,
)
from harness.blocks import (
    DEFAULT_DELIMITER,
    PROBE_VARIANTS,
    TopicPromptError,
    check_delimiter,
    check_topic,
    evaluation_sample,
    probe_on_texts,
    prompted_texts,
)

logger = logging.getLogger(__name__)

FAMILY = "ukp-sentential"
DATASET = "ukp_sentential_argument_mining"
SENTENCE_COLUMN = "sentence"
SET_COLUMN = "set"
SPLIT_OF_SET = {"train": "train", "val": "dev", "dev": "dev", "validation": "dev", "test": "test"}
SPLITS = ("train", "dev", "test")
HOW_TO_GET = (
    "The UKP Sentential Argument Mining Corpus may not be redistributed: request it from "
    "https://tudatalib.ulb.tu-darmstadt.de/handle/tudatalib/2345, complete its sentences with the corpus' completion "
    "pipeline, and put the completed per-topic .tsv files into <data-dir>/ukp_sentential_argument_mining/. Without "
    "it, the BWS sentences (bws-topic) are the same corpus and the same eight topics."
)


@dataclass
class TopicSentences:
    """The labeled sentences of each split, and how many rows with an empty sentence were dropped."""

    splits: dict[str, LabeledSentences]
    empty_dropped: int


def read_corpus(paths: list[Path], topic_column: str) -> TopicSentences:
    """Every ``*.tsv`` file of the corpus folder; see docs/tasks/ukp-sentential.md, "UKP Sentential Argument Mining",
    for what is refused."""
    rows: dict[str, tuple[list[str], list[str]]] = {name: ([], []) for name in SPLITS}
    empty = 0
    for path in paths:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, None)
            if header is None:
                raise data_error(path, 1, "the file is empty; expected a header row.")
            header = [name.strip() for name in header]
            missing = [name for name in (topic_column, SENTENCE_COLUMN, SET_COLUMN) if name not in header]
            if missing:
                hint = (
                    " If another column holds the topic labels, name it: ukp-sentential-topic:topic_column=NAME."
                    if topic_column in missing
                    else ""
                )
                raise data_error(
                    path,
                    1,
                    f"no column {', '.join(repr(m) for m in missing)} (the topic labels are "
                    f"read from topic_column={topic_column!r}); the file's columns are: "
                    f"{', '.join(header)}.{hint}",
                )
            column = {name: header.index(name) for name in (topic_column, SENTENCE_COLUMN, SET_COLUMN)}
            file_sentences = file_empty = 0
            for fields in reader:
                line = reader.line_num
                if not any(field.strip() for field in fields):
                    continue
                if len(fields) < len(header):
                    raise data_error(path, line, f"expected {len(header)} tab-separated fields, found {len(fields)}.")
                set_name = fields[column[SET_COLUMN]].strip().lower()
                if set_name not in SPLIT_OF_SET:
                    raise data_error(path, line, f"set {set_name!r} is not one of train, val, test.")
                sentence = fields[column[SENTENCE_COLUMN]].strip()
                topic = fields[column[topic_column]].strip()
                if not topic:
                    raise data_error(path, line, f"empty topic label in column {topic_column!r}.")
                if not sentence:
                    file_empty += 1
                    continue
                file_sentences += 1
                sentences, labels = rows[SPLIT_OF_SET[set_name]]
                sentences.append(sentence)
                labels.append(topic)
            if file_empty and not file_sentences:
                raise data_error(
                    path,
                    None,
                    "every sentence field is empty: this is the corpus as released, without "
                    "its sentences; run the corpus' completion pipeline and use the completed files.",
                )
            empty += file_empty
    splits = {name: LabeledSentences(*rows[name]) for name in SPLITS}
    for name, split in splits.items():
        if not len(split):
            raise data_error(
                paths[0].parent,
                None,
                f"no {name} sentences (column {SET_COLUMN!r}); the task needs train, val and test sentences.",
            )
    return TopicSentences(splits, empty)


class UKPSententialTopics(Task):
    seeded_evaluation = True  # the probe is trained per seed (ctx.seed): the score depends on it
    metadata = TaskMetadata(
        name="ukp-sentential-topic",
        family=FAMILY,
        description="UKP Sentential Argument Mining: frozen-encoder linear probe on the 8 topics (thesis 5.6.2, "
        "table 6.16 'UKP (F1)'); input=raw or prompted; needs the corpus under --data-dir",
        main_score="f1_macro",
        metric="macro-F1 x100 of a linear classifier (10 epochs, lr 1e-3, best val epoch) on frozen embeddings of "
        "the corpus' test sentences, 8 topics",
        reference="Stab et al. 2018 (EMNLP), cross-topic argument mining; thesis 5.6, table 6.16",
        dataset=DATASET,
        dataset_source="a user's copy: https://tudatalib.ulb.tu-darmstadt.de/handle/tudatalib/2345, sentences "
        "completed with the corpus' pipeline",
        license="not redistributable (the corpus' own terms; sentences are copyrighted web text)",
        requires=("embedder",),
        training_kinds=(LABELED_SENTENCES, UNLABELED_SENTENCES),
        details={"splits": "the corpus' own set column: train / val (dev) / test"},
    )
    options = {
        "input": Option(
            "raw", "raw: the sentence; prompted: '{topic} ¥ {sentence}' (thesis 4.4.2)", choices=("raw", "prompted")
        ),
        "topic_column": Option("topic", "the column holding the topic label", type=str),
        "delimiter": Option(DEFAULT_DELIMITER, "topic delimiter of input=prompted (thesis: the yen sign)", type=str),
        "probe": Option(
            "linear",
            "linear: Linear(d, topics), best val epoch (thesis text); thesis-code: Linear-SiLU-Linear, last epoch",
            choices=PROBE_VARIANTS,
        ),
    }

    def __init__(self, options=None, data_dir=None):
        super().__init__(options, data_dir)
        if not self.options["topic_column"].strip():
            raise InvalidOptionError("option 'topic_column' of task 'ukp-sentential-topic' must name a column.")

    def paths(self) -> list[Path]:
        folder = resolve_dataset_dir(DATASET, None, HOW_TO_GET, data_dir=self.data_dir)
        paths = sorted(folder.glob("*.tsv"))
        if not paths:
            raise MissingDataError(f"{folder}: no .tsv files. {HOW_TO_GET}")
        return paths

    def load(self) -> TopicSentences:
        corpus = read_corpus(self.paths(), self.options["topic_column"].strip())
        if self.options["input"] == "prompted":
            self.check_prompt(corpus)
        return corpus

    def check_prompt(self, corpus: TopicSentences) -> None:
        delimiter = self.options["delimiter"]
        try:
            for split in corpus.splits.values():
                for label in dict.fromkeys(split.labels):
                    check_topic(label, delimiter)
                check_delimiter(delimiter, split.sentences, "the UKP sentences")
        except TopicPromptError as exc:
            raise InvalidOptionError(
                f"task ukp-sentential-topic:input=prompted ({self.paths()[0].parent}): {exc} "
                "(task option delimiter=CHARACTER)"
            ) from None

    def check_data(self) -> str:
        self.load()
        return files_checksum(self.paths())

    def training_data(self, kind, ctx=None):
        if kind not in (LABELED_SENTENCES, UNLABELED_SENTENCES):
            return None
        corpus = read_corpus(self.paths(), self.options["topic_column"].strip())
        train, dev = corpus.splits["train"], corpus.splits["dev"]
        content = hashlib.sha256()
        for name, split in (("train", train), ("dev", dev)):
            for sentence, label in zip(split.sentences, split.labels):
                content.update(f"{name}\t{label}\t{sentence}\x00".encode())
        checksum = f"{files_checksum(self.paths())}:{content.hexdigest()[:16]}"
        if kind == UNLABELED_SENTENCES:
            return TrainingSplits(self.metadata.name, UnlabeledSentences(list(train.sentences)), checksum=checksum)
        return TrainingSplits(self.metadata.name, train, dev, checksum)

    def evaluate(self, model, ctx) -> EvalResult:
        corpus = self.load()
        splits = {
            name: split.subset(evaluation_sample(len(split), ctx.profile.max_eval_examples))
            for name, split in corpus.splits.items()
        }
        topics = sorted(set(corpus.splits["train"].labels))
        # A topic without train sentences cannot be learnt; its sentences are left out of dev and test.
        splits = {
            name: split.subset([i for i, label in enumerate(split.labels) if label in topics])
            for name, split in splits.items()
        }
        texts = {name: split.sentences for name, split in splits.items()}
        if self.options["input"] == "prompted":
            texts = {
                name: prompted_texts(split.labels, split.sentences, self.options["delimiter"], "the UKP sentences")
                for name, split in splits.items()
            }
        probe = probe_on_texts(
            model,
            texts,
            {name: [topics.index(label) for label in split.labels] for name, split in splits.items()},
            len(topics),
            variant=self.options["probe"],
            seed=ctx.seed,
            device=ctx.device,
            progress=ctx.progress,
            texts_description=f"UKP sentences ({self.options['input']})",
            description="ukp-sentential-topic probe",
        )
        return EvalResult(
            scores=probe.scores(),
            examples=probe.examples(self.metadata.main_score),
            dataset_checksum=files_checksum(self.paths()),
            details={
                "sentences": {name: len(split) for name, split in splits.items()},
                "empty_sentences_dropped": corpus.empty_dropped,
                "topics": topics,
                "input": self.options["input"],
                "probe": probe.details(),
                "options": self.options,
            },
        )


@hookimpl
def register_tasks(register):
    register(UKPSententialTopics)
