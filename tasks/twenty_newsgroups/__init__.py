"""20 Newsgroups topic probes, the ``20ng`` family: ``20ng-topic`` (the 20 newsgroups) and ``20ng-parent`` (the six
parent groups of table 3.9), frozen-encoder probes (``harness.evaluation.probe``) scored by macro-F1 x100 on the
"bydate" test split, on ``raw`` or topic-``prompted`` documents; also a source of labeled and unlabeled training
sentences.

Thesis 3.6, 4.4.2, 5.6.2, tables 3.8, 3.9, 6.14. Corpus, splits (the thesis code's dev split by default), empty
documents, truncation, encoding, probe options and every deviation: docs/tasks/20ng.md, section "20 Newsgroups topic
probes" and its ``20ng`` table rows. Data: bundled under ``tasks/data/20newsgroups/`` with its SOURCE.md;
``--data-dir`` overrides (same file format).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from harness import (
    LABELED_SENTENCES,
    UNLABELED_SENTENCES,
    EvalResult,
    InvalidOptionError,
    LabeledSentences,
    Option,
    Task,
    TaskMetadata,
    TrainingSplits,
    UnlabeledSentences,
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

from .corpus import (
    GROUPS,
    PARENT_OF,
    PARENTS,
    SPLIT_FILES,
    Document,
    cut_words,
    read_split,
    stratified_dev_indices,
    thesis_dev_indices,
)

logger = logging.getLogger(__name__)
_REPORTED_EMPTY: set[str] = set()  # drop counts already logged in this process

FAMILY = "20ng"
DATASET = "20newsgroups"
BUNDLED = Path(__file__).resolve().parent.parent / "data" / DATASET
INPUTS = ("raw", "prompted")
DEV_SPLITS = ("thesis", "stratified")
PROBES = PROBE_VARIANTS
DEFAULT_MAX_WORDS = 512
SPLITS = ("train", "dev", "test")

SOURCE = (
    "20 Newsgroups bydate (Jason Rennie, http://qwone.com/~jason/20Newsgroups/), cleaned with scikit-learn's "
    "remove=('headers','footers','quotes'); see tasks/data/20newsgroups/SOURCE.md"
)
LICENSE = "no formal license (the 20 Newsgroups collection carries none); see tasks/data/20newsgroups/SOURCE.md"
REFERENCE = "Lang 1995 (NewsWeeder); thesis 3.6, 4.4.2, 5.6.2, tables 3.8, 3.9, 6.14"
SPLIT_DESCRIPTION = (
    "test: the official bydate test split (7532); dev: taken from the official train split (11314), by default "
    "exactly the thesis code's split (dev_split=thesis: scikit-learn's document order, then Hugging Face datasets' "
    "train_test_split(test_size=0.1/0.6, seed=42): 1886 dev / 9428 train, table 3.8), or stratified by newsgroup "
    "(dev_split=stratified, seed split_seed, same size); dev and test never overlap; documents empty after "
    "cleaning are dropped and counted"
)
COMMON_DETAILS = {
    "groups": list(GROUPS),
    "parents": {parent: [group for group in GROUPS if PARENT_OF[group] == parent] for parent in PARENTS},
    "splits": SPLIT_DESCRIPTION,
    "preprocessing": "scikit-learn fetch_20newsgroups remove=('headers', 'footers', 'quotes'), applied when bundling",
    "truncation": "cut after the first max_words (default 512) whitespace-separated words, prompt prepended, then "
    "each model's own token limit keeping the first tokens",
}
OPTIONS = {
    "input": Option(
        "raw",
        "raw: the document; prompted: the parent group's topic prompt prepended "
        "('{parent} ¥ {document}', thesis 4.4.2)",
        choices=INPUTS,
    ),
    "delimiter": Option(
        DEFAULT_DELIMITER,
        "topic delimiter of input=prompted (thesis: the yen sign); refused if it occurs in a document",
        type=str,
    ),
    "dev_split": Option(
        "thesis",
        "thesis: the thesis code's dev documents (1886, table 3.8); stratified: the same "
        "number, stratified by newsgroup, seeded by split_seed",
        choices=DEV_SPLITS,
    ),
    "split_seed": Option(42, "seed of dev_split=stratified", type=int),
    "probe": Option(
        "linear",
        "linear: Linear(d, classes), best dev epoch (thesis text); thesis-code: Linear-SiLU-Linear, last epoch",
        choices=PROBES,
    ),
    "max_words": Option(
        DEFAULT_MAX_WORDS,
        "documents are cut after this many whitespace-separated words before each model's own token limit (0: no cut)",
        type=int,
    ),
    "max_documents": Option(
        0,
        "evaluate at most this many documents of each split (a fixed seeded sample, the same "
        "for every model; 0: all); the quick matrices' cut",
        type=int,
    ),
}


@lru_cache(maxsize=2)
def _read_corpus(folder: Path, stamp: tuple) -> dict[str, list[Document]]:
    """Both official splits of the corpus in ``folder`` (``stamp``: the files' sizes and times, so an edited file is
    read again)."""
    return {split: read_split(folder / name) for split, name in SPLIT_FILES.items()}


@dataclass
class CorpusSplits:
    documents: dict[str, list[Document]]  # train / dev / test, empty documents dropped
    empty_dropped: dict[str, int]  # per split

    def counts(self) -> dict[str, int]:
        return {name: len(documents) for name, documents in self.documents.items()}


class NewsgroupsProbe(Task):
    """A frozen-encoder probe on 20 Newsgroups documents; subclasses name the labels."""

    seeded_evaluation = True  # the probe is trained per seed (ctx.seed): the score depends on it

    label_names: ClassVar[tuple[str, ...]] = GROUPS
    options = OPTIONS

    def __init__(self, options=None, data_dir=None):
        super().__init__(options, data_dir)
        for name in ("max_words", "max_documents"):
            if self.options[name] < 0:
                raise InvalidOptionError(
                    f"option {name!r} of task {self.metadata.name!r} must be 0 (no cut) or "
                    f"positive, got {self.options[name]}."
                )

    def label(self, document: Document) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    # -- data --------------------------------------------------------------------------------------------------------
    def folder(self) -> Path:
        return resolve_dataset_dir(
            DATASET,
            BUNDLED,
            "Put 20news-bydate-{train,test}.jsonl.xz (see "
            "scripts/bundle_20newsgroups.py) into <data-dir>/20newsgroups/.",
            data_dir=self.data_dir,
        )

    def paths(self) -> list[Path]:
        folder = self.folder()
        return [folder / name for name in SPLIT_FILES.values()]

    def corpus(self) -> dict[str, list[Document]]:
        folder = self.folder()
        stamp = tuple((p.stat().st_size, p.stat().st_mtime_ns) if p.is_file() else None for p in self.paths())
        return _read_corpus(folder, stamp)

    def check_data(self) -> str:
        corpus = self.corpus()
        if self.options["input"] == "prompted":
            self.check_prompt(corpus["train"] + corpus["test"])
        return files_checksum(self.paths())

    def check_prompt(self, documents: list[Document]) -> None:
        """The delimiter must occur in no document and no parent label: an InvalidOptionError naming both."""
        delimiter = self.options["delimiter"]
        try:
            for parent in PARENTS:
                check_topic(parent, delimiter)
            check_delimiter(
                delimiter, [d.text for d in documents], "the 20 Newsgroups documents", [d.id for d in documents]
            )
        except TopicPromptError as exc:
            raise InvalidOptionError(f"option delimiter={delimiter!r} of task {self.metadata.name!r}: {exc}") from None

    def split_documents(self) -> CorpusSplits:
        corpus = self.corpus()
        train = corpus["train"]
        if self.options["dev_split"] == "thesis":
            dev_indices = set(thesis_dev_indices(train))
        else:
            dev_indices = set(stratified_dev_indices(train, self.options["split_seed"]))
        drawn = {
            "train": [d for i, d in enumerate(train) if i not in dev_indices],
            "dev": [d for i, d in enumerate(train) if i in dev_indices],
            "test": list(corpus["test"]),
        }
        kept = {name: [d for d in documents if d.text.strip()] for name, documents in drawn.items()}
        empty = {name: len(drawn[name]) - len(kept[name]) for name in SPLITS}
        counts = "/".join(str(empty[name]) for name in SPLITS)
        if any(empty.values()) and counts not in _REPORTED_EMPTY:  # once per process, not once per 20NG task
            _REPORTED_EMPTY.add(counts)
            logger.info("20 Newsgroups: %s documents empty after cleaning dropped (train/dev/test)", counts)
        return CorpusSplits(kept, empty)

    def input_texts(self, documents: list[Document]) -> list[str]:
        """What the model reads: the cut document, with the parent group's prompt for input=prompted."""
        texts = [cut_words(d.text, self.options["max_words"]) for d in documents]
        if self.options["input"] == "raw":
            return texts
        self.check_prompt(documents)
        return prompted_texts(
            [d.parent for d in documents],
            texts,
            self.options["delimiter"],
            "the 20 Newsgroups documents",
            [d.id for d in documents],
        )

    # -- training data -----------------------------------------------------------------------------------------------
    def training_data(self, kind, ctx=None):
        if kind not in (LABELED_SENTENCES, UNLABELED_SENTENCES):
            return None
        splits = self.split_documents().documents
        cut = self.options["max_words"]
        texts = {name: [cut_words(d.text, cut) for d in splits[name]] for name in ("train", "dev")}
        parents = {name: [d.parent for d in splits[name]] for name in ("train", "dev")}
        # The checksum covers the offered texts and labels, not just the files: another dev split or cut retrains.
        content = hashlib.sha256()
        for name in ("train", "dev"):
            for text, parent in zip(texts[name], parents[name]):
                content.update(f"{name}\t{parent}\t{text}\x00".encode())
        checksum = f"{files_checksum(self.paths())}:{content.hexdigest()[:16]}"
        if kind == UNLABELED_SENTENCES:
            return TrainingSplits(self.metadata.name, UnlabeledSentences(texts["train"]), checksum=checksum)
        return TrainingSplits(
            self.metadata.name,
            LabeledSentences(texts["train"], parents["train"]),
            LabeledSentences(texts["dev"], parents["dev"]),
            checksum,
        )

    # -- evaluation --------------------------------------------------------------------------------------------------
    def evaluate(self, model: Any, ctx) -> EvalResult:
        splits = self.split_documents()
        limits = [limit for limit in (ctx.profile.max_eval_examples, self.options["max_documents"] or None) if limit]
        evaluated = {
            name: [documents[i] for i in evaluation_sample(len(documents), min(limits, default=None))]
            for name, documents in splits.documents.items()
        }
        probe = probe_on_texts(
            model,
            {name: self.input_texts(evaluated[name]) for name in SPLITS},
            {name: [self.label_names.index(self.label(d)) for d in evaluated[name]] for name in SPLITS},
            len(self.label_names),
            variant=self.options["probe"],
            seed=ctx.seed,
            device=ctx.device,
            progress=ctx.progress,
            texts_description=f"20 Newsgroups documents ({self.options['input']})",
            description=f"{self.metadata.name} probe",
        )
        return EvalResult(
            scores=probe.scores(),
            examples=probe.examples(self.metadata.main_score),
            dataset_checksum=files_checksum(self.paths()),
            details={
                "documents": {name: len(evaluated[name]) for name in SPLITS},
                "documents_in_splits": splits.counts(),
                "empty_documents_dropped": splits.empty_dropped,
                "labels": list(self.label_names),
                "input": self.options["input"],
                "probe": probe.details(),
                "options": self.options,
            },
        )


def probe_metadata(name: str, description: str, labels: str, labels_detail: str) -> TaskMetadata:
    """The metadata the two probes share; they differ in name, description and label set."""
    return TaskMetadata(
        name=name,
        family=FAMILY,
        description=description,
        main_score="f1_macro",
        metric="macro-F1 x100 of a linear classifier (10 epochs, lr 1e-3, best dev epoch) on frozen embeddings of "
        f"the official test split's documents, {labels}",
        reference=REFERENCE,
        dataset=DATASET,
        dataset_source=SOURCE,
        license=LICENSE,
        requires=("embedder",),
        training_kinds=(LABELED_SENTENCES, UNLABELED_SENTENCES),
        details={**COMMON_DETAILS, "labels": labels_detail},
    )


class TopicProbe(NewsgroupsProbe):
    metadata = probe_metadata(
        "20ng-topic",
        "20 Newsgroups: frozen-encoder linear probe on the 20 newsgroups (thesis 5.6.2, table 6.14); "
        "input=raw or prompted (parent-group topic prompt, 4.4.2)",
        "20 newsgroups",
        "the 20 newsgroups",
    )
    label_names = GROUPS

    def label(self, document: Document) -> str:
        return document.group


class ParentProbe(NewsgroupsProbe):
    metadata = probe_metadata(
        "20ng-parent",
        "20 Newsgroups: frozen-encoder linear probe on the six parent groups of thesis table 3.9; "
        "input=raw or prompted (the prompt names the parent group)",
        "6 parent groups",
        "the 6 parent groups of thesis table 3.9",
    )
    label_names = PARENTS

    def label(self, document: Document) -> str:
        return document.parent


TASKS: tuple[type[Task], ...] = (TopicProbe, ParentProbe)


@hookimpl
def register_tasks(register):
    for task_class in TASKS:
        register(task_class)
