"""SentEval STS family: STS12, STS13 (no SMT), STS14, STS15, STS16, STS-B and SICK-R.

Protocol (SentEval's ``STSEval``; SimCSE's evaluation): the model's pair score (cosine of two embeddings, or a
cross-encoder's score) against the gold score, Spearman x100. Aggregations (``aggregation``), text versions
(``text``), SICK-R's split, unlabeled training sentences, data and deviations: docs/tasks/senteval.md, section "SentEval
STS" and its ``senteval`` / ``sickr`` table rows. Reading SemEval-layout files, the smoke cut, scoring and the
aggregations are the core's STS task base (``harness.blocks.STSTask``); this module adds the SentEval data layout.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from harness import (
    SCORED_PAIRS,
    UNLABELED_SENTENCES,
    UNSEEN_OPTION,
    Option,
    ScoredPairs,
    Task,
    TaskMetadata,
    TrainingSplits,
    UnlabeledSentences,
    data_error,
    files_checksum,
    hookimpl,
    read_text_lines,
    resolve_dataset_dir,
)
from harness.blocks import PairSet, STSTask, read_sts_pairs

logger = logging.getLogger(__name__)

DATA_ROOT = Path(__file__).resolve().parent / "data"
FAMILY = "senteval"


def _normalise(text: str, tokenized: bool) -> str:
    return " ".join(text.split()) if tokenized else text


def read_sts_year(folder: Path, prefix: str, subset: str, tokenized: bool) -> tuple[PairSet, list[Path]]:
    """``STS.input.<subset>.txt`` (tab-separated sentence pairs) with ``STS.gs.<subset>.txt`` (a score per line)."""
    base = folder / "senteval_tokenized" if tokenized else folder
    if tokenized:
        prefix = "STS"
    input_path = base / f"{prefix}.input.{subset}.txt"
    gold_path = base / f"{prefix}.gs.{subset}.txt"
    pair_set = read_sts_pairs(input_path, gold_path, subset, lambda text: _normalise(text, tokenized))
    return pair_set, [input_path, gold_path]


def read_stsb(folder: Path, split: str, tokenized: bool) -> tuple[PairSet, list[Path]]:
    """STS-B csv: genre, file, year, id, score, sentence1, sentence2[, extra fields]."""
    path = (folder / "senteval_tokenized" if tokenized else folder) / f"sts-{split}.csv"
    first, second, gold = [], [], []
    for number, line in enumerate(read_text_lines(path), start=1):
        fields = line.split("\t")  # QUOTE_NONE: quotes are part of the text
        if len(fields) < 7:
            raise data_error(path, number, f"expected at least 7 tab-separated fields, found {len(fields)}.")
        try:
            score = float(fields[4])
        except ValueError:
            raise data_error(path, number, f"score {fields[4]!r} is not a number.") from None
        first.append(_normalise(fields[5], tokenized))
        second.append(_normalise(fields[6], tokenized))
        gold.append(score)
    return PairSet(f"stsb-{split}", first, second, np.array(gold)), [path]


SICK_FILES = {"train": "SICK_train.txt", "trial": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def read_sick(folder: Path, split: str) -> tuple[PairSet, list[Path]]:
    path = folder / SICK_FILES[split]
    lines = read_text_lines(path)
    first, second, gold = [], [], []
    for number, line in enumerate(lines[1:], start=2):  # line 1 is the header
        fields = line.split("\t")
        if len(fields) < 4:
            raise data_error(path, number, "expected pair_ID, sentence_A, sentence_B, relatedness_score, ...")
        try:
            score = float(fields[3])
        except ValueError:
            raise data_error(path, number, f"relatedness score {fields[3]!r} is not a number.") from None
        first.append(_normalise(fields[1], True))
        second.append(_normalise(fields[2], True))
        gold.append(score)
    return PairSet(f"sick-{split}", first, second, np.array(gold)), [path]


TEXT_OPTION = Option("senteval", "SentEval's tokenised copy or the original release", choices=("senteval", "raw"))
AGGREGATION_OPTION = Option(
    "all",
    "main score: 'all' pools every pair (SimCSE/mteb), 'mean' averages sub-datasets (SentEval/thesis)",
    choices=("all", "mean"),
)


SEVEN_STS = "seven-sts-transductive"
UNLABELED_OPTION = Option(
    "train",
    "unlabeled training sentences: train (STS-B train only) or seven-sts-transductive (every split of "
    "STS12-16, STS-B and SICK-R, test included: ConSERT's / PaSeR's setting)",
    choices=("train", SEVEN_STS),
)


def unlabeled_split(source: str, train: PairSet, paths: list[Path]) -> TrainingSplits:
    """The distinct sentences of a train split as unlabeled training sentences (TSDAE, SimCSE, ...)."""
    sentences = list(dict.fromkeys(s.strip() for s in (*train.first, *train.second) if s.strip()))
    return TrainingSplits(source=source, train=UnlabeledSentences(sentences), checksum=files_checksum(paths))


class SentEvalTask(STSTask):
    """A SentEval STS task: its data in ``tasks/data/<dataset>/`` unless ``--data-dir`` has it."""

    def bundled_dir(self) -> Path:
        return DATA_ROOT / self.metadata.dataset

    def folder(self) -> Path:
        return resolve_dataset_dir(self.metadata.dataset, self.bundled_dir(), data_dir=self.data_dir)

    def tokenized(self) -> bool:
        return self.options["text"] == "senteval"


class SemEvalSTS(SentEvalTask):
    """One SemEval STS year: its sub-datasets (SentEval's list), both aggregations, main score by option."""

    subsets: ClassVar[tuple[str, ...]] = ()
    file_prefix: ClassVar[str] = "STS"  # raw release file names: STS.input.* (STS2016.input.* for 2016)
    options = {"text": TEXT_OPTION, "aggregation": AGGREGATION_OPTION, "unseen": UNSEEN_OPTION}

    def load(self) -> tuple[list[PairSet], list[Path]]:
        pair_sets, paths = [], []
        folder = self.folder()
        for subset in self.subsets:
            pair_set, read = read_sts_year(folder, self.file_prefix, subset, self.tokenized())
            pair_sets.append(pair_set)
            paths.extend(read)
        return pair_sets, paths


class STSBenchmark(SentEvalTask):
    metadata = TaskMetadata(
        name="stsb",
        family=FAMILY,
        description="STS Benchmark test split (1379 pairs); train/dev offered as scored pairs",
        main_score="spearman",
        metric="Spearman x100 of pair scores vs gold on the test split",
        reference="Cer et al. 2017, SemEval-2017 Task 1",
        dataset="stsb",
        dataset_source="STS Benchmark release (see tasks/data/stsb/SOURCE.md)",
        license="scores CC BY-SA 4.0; sentences under their sources' licenses (LICENSE.txt)",
        training_kinds=(SCORED_PAIRS, UNLABELED_SENTENCES),
    )
    options = {"text": TEXT_OPTION, "unlabeled": UNLABELED_OPTION, "unseen": UNSEEN_OPTION}
    aliases = ("sts-b",)
    # Where the cross-encoders (thesis 4.1.2, 5.2.1) and any other scored-pair learner train unless told otherwise.
    default_source_for = (SCORED_PAIRS,)

    def load(self) -> tuple[list[PairSet], list[Path]]:
        pair_set, paths = read_stsb(self.folder(), "test", self.tokenized())
        return [pair_set], paths

    def seven_sts_sentences(self) -> TrainingSplits:
        """ConSERT / PaSeR 4.2: the distinct sentences of STS12-16, STS-B and SICK-R, all splits (transductive)."""
        pair_sets, paths = [], []
        for year in YEARS.values():
            folder = resolve_dataset_dir(year.dataset, DATA_ROOT / year.dataset, data_dir=self.data_dir)
            for subset in year.subsets:
                pair_set, read = read_sts_year(folder, year.file_prefix, subset, self.tokenized())
                pair_sets.append(pair_set)
                paths.extend(read)
        for split in ("train", "dev", "test"):
            pair_set, read = read_stsb(self.folder(), split, self.tokenized())
            pair_sets.append(pair_set)
            paths.extend(read)
        sick = resolve_dataset_dir("sick", DATA_ROOT / "sick", data_dir=self.data_dir)
        for split in SICK_FILES:
            pair_set, read = read_sick(sick, split)
            pair_sets.append(pair_set)
            paths.extend(read)
        merged = PairSet(
            SEVEN_STS,
            [s for p in pair_sets for s in p.first],
            [s for p in pair_sets for s in p.second],
            np.concatenate([p.gold for p in pair_sets]),
        )
        return unlabeled_split(f"{self.metadata.name}:unlabeled={SEVEN_STS}", merged, paths)

    def training_data(self, kind, ctx=None):
        if kind == UNLABELED_SENTENCES and self.options["unlabeled"] == SEVEN_STS:
            return self.seven_sts_sentences()
        if kind == UNLABELED_SENTENCES:  # the train split's distinct sentences, never dev or test text
            train, train_paths = read_stsb(self.folder(), "train", self.tokenized())
            return unlabeled_split(self.metadata.name, train, train_paths)
        if kind != SCORED_PAIRS:
            return None
        folder = self.folder()
        train, train_paths = read_stsb(folder, "train", self.tokenized())
        dev, dev_paths = read_stsb(folder, "dev", self.tokenized())
        return TrainingSplits(
            source=self.metadata.name,
            train=ScoredPairs(train.first, train.second, train.gold / 5.0),
            dev=ScoredPairs(dev.first, dev.second, dev.gold / 5.0),
            checksum=files_checksum(train_paths + dev_paths),
        )


class SICKRelatedness(SentEvalTask):
    metadata = TaskMetadata(
        name="sickr",
        family=FAMILY,
        description="SICK relatedness, test split (4927 pairs) or split=all (9927); train/trial as scored pairs",
        main_score="spearman",
        metric="Spearman x100 of pair scores vs relatedness",
        reference="Marelli et al. 2014, SemEval-2014 Task 1",
        dataset="sick",
        dataset_source="SICK SemEval-2014 split files (see tasks/data/sick/SOURCE.md)",
        license="CC BY-NC-SA 3.0 (SICK authors); not stated by the hosting repository",
        training_kinds=(SCORED_PAIRS, UNLABELED_SENTENCES),
    )
    options = {
        "split": Option("test", "test (SentEval, 4927) or all (mteb, 9927)", choices=("test", "all")),
        "unseen": UNSEEN_OPTION,
    }
    aliases = ("sick-r",)

    def load(self) -> tuple[list[PairSet], list[Path]]:
        folder = self.folder()
        splits = ("train", "trial", "test") if self.options["split"] == "all" else ("test",)
        pair_sets, paths = [], []
        for split in splits:
            pair_set, read = read_sick(folder, split)
            pair_sets.append(pair_set)
            paths.extend(read)
        merged = PairSet(
            "sickr",
            [s for p in pair_sets for s in p.first],
            [s for p in pair_sets for s in p.second],
            np.concatenate([p.gold for p in pair_sets]),
        )
        return [merged], paths

    def training_data(self, kind, ctx=None):
        if kind == UNLABELED_SENTENCES:  # the train split's distinct sentences, never trial or test text
            train, train_paths = read_sick(self.folder(), "train")
            return unlabeled_split(self.metadata.name, train, train_paths)
        if kind != SCORED_PAIRS:
            return None
        folder = self.folder()
        train, train_paths = read_sick(folder, "train")
        dev, dev_paths = read_sick(folder, "trial")
        return TrainingSplits(
            source=self.metadata.name,
            train=ScoredPairs(train.first, train.second, (train.gold - 1.0) / 4.0),
            dev=ScoredPairs(dev.first, dev.second, (dev.gold - 1.0) / 4.0),
            checksum=files_checksum(train_paths + dev_paths),
        )


@dataclass(frozen=True)
class STSYear:
    """One SemEval STS year as SentEval ships it: its dataset folder, the prefix of its raw files, its sub-datasets,
    the reference and the licence terms."""

    dataset: str
    file_prefix: str
    subsets: tuple[str, ...]
    reference: str
    license: str


YEARS = {
    "sts12": STSYear(
        dataset="sts12",
        file_prefix="STS",
        subsets=("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"),
        reference="Agirre et al. 2012, SemEval-2012 Task 6",
        license="Microsoft Research license terms for MSRpar/MSRvid",
    ),
    "sts13": STSYear(
        dataset="sts13",
        file_prefix="STS",
        subsets=("FNWN", "headlines", "OnWN"),
        reference="Agirre et al. 2013, *SEM 2013 shared task (SMT subset not redistributable)",
        license="not stated",
    ),
    "sts14": STSYear(
        dataset="sts14",
        file_prefix="STS",
        subsets=("deft-forum", "deft-news", "headlines", "images", "OnWN", "tweet-news"),
        reference="Agirre et al. 2014, SemEval-2014 Task 10",
        license="per source; images CC BY-SA",
    ),
    "sts15": STSYear(
        dataset="sts15",
        file_prefix="STS",
        subsets=("answers-forums", "answers-students", "belief", "headlines", "images"),
        reference="Agirre et al. 2015, SemEval-2015 Task 2",
        license="answers-forums CC BY-SA 3.0; others not stated",
    ),
    "sts16": STSYear(
        dataset="sts16",
        file_prefix="STS2016",
        subsets=("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
        reference="Agirre et al. 2016, SemEval-2016 Task 1",
        license="per source (CC BY-SA 3.0, CC BY 4.0, ...)",
    ),
}


def sts_year(name: str) -> type[SemEvalSTS]:
    """The task class of one SemEval STS year (they differ only in metadata, sub-datasets and file prefix)."""
    year = YEARS[name]
    metadata = TaskMetadata(
        name=name,
        family=FAMILY,
        description=f"SemEval STS {name[-2:]} English test sets ({', '.join(year.subsets)})",
        main_score="spearman",
        metric="Spearman x100 of pair scores vs gold; 'all' (pooled) and 'mean' (over sub-datasets) both stored",
        reference=year.reference,
        dataset=year.dataset,
        dataset_source=f"SentEval STS data (see tasks/data/{year.dataset}/SOURCE.md)",
        license=year.license,
        version="1",
    )
    return SemEvalSTS.variant(metadata, subsets=year.subsets, file_prefix=year.file_prefix)


TASKS: tuple[type[Task], ...] = (*(sts_year(name) for name in YEARS), STSBenchmark, SICKRelatedness)


@hookimpl
def register_tasks(register):
    for task_class in TASKS:
        register(task_class)
