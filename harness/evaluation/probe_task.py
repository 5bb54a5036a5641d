"""The frozen-encoder probe task: a public base so a new probe task is metadata, file names and one reader.

Protocol (the thesis' topic probes, SentEval's classification tasks): the model's embeddings of each split's texts,
computed once (:func:`cached_embeddings`), a linear probe trained on the train split with the best dev epoch kept
(task option ``probe=thesis-code``: Linear-SiLU-Linear, the last epoch; :func:`probe_on_texts`), macro-F1 x100 on the
test split as the main score ``f1_macro`` (accuracy beside it). The smoke profile's ``max_eval_examples`` cuts each
split with the seeded evaluation sample; the train and dev splits are offered for training (``--train-on``) as
labelled or unlabelled sentences.

A subclass names its files and reads them into labelled texts per split::

    class ToyTopics(ProbeTask):
        metadata = harness.TaskMetadata(name="toy-topic", main_score="f1_macro", dataset="toy-topic", ...)
        bundled_data = Path(__file__).parent / "data"
        data_files = ("topics.tsv",)

        def read_splits(self, folder):
            ...  # {"train": LabeledSentences(texts, labels), "dev": ..., "test": ...}

Without a dev split, a seeded tenth of the train split is drawn as dev. ``label_order`` fixes the classes' order
(default: the train split's labels, sorted); :meth:`ProbeTask.normalise` prepares each text as read,
:meth:`ProbeTask.model_texts` a split's texts as the model reads them (e.g. prompted with their labels), and
:meth:`ProbeTask.evaluation_details` says what the record's details hold beside the probe's.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness import (
    LABELED_SENTENCES,
    UNLABELED_SENTENCES,
    EvalResult,
    LabeledSentences,
    Option,
    Task,
    TrainingSplits,
    UnlabeledSentences,
    data_error,
    files_checksum,
    resolve_dataset_dir,
)
from harness.evaluation.probe import PROBE_SPLITS, PROBE_VARIANTS, probe_on_texts
from harness.evaluation.sampling import evaluation_sample

DEV_FRACTION = 0.1  # the share of train drawn as dev when a task has no dev split
DEV_SEED = 0  # fixed, so every seed of a run probes on the same splits (as the built-ins' split seeds do)


class ProbeTask(Task):
    """Macro-F1 x100 of a probe trained on frozen embeddings of the task's labelled texts.

    A subclass sets ``metadata`` (``main_score="f1_macro"``; ``dataset`` names the folder looked up in
    ``--data-dir``), ``bundled_data`` (the copy shipped with the plugin, or None), ``data_files`` (the files read,
    relative to the dataset's folder: the checksum covers them) and implements :meth:`read_splits`. Optional:
    ``label_order``, :meth:`normalise`, :meth:`model_texts`, :meth:`evaluation_details`,
    :meth:`probe_descriptions`.
    """

    seeded_evaluation = True  # the probe is trained per seed (ctx.seed): the score depends on it
    bundled_data: ClassVar[Path | None] = None
    data_files: ClassVar[tuple[str, ...]] = ()
    label_order: ClassVar[tuple[str, ...]] = ()
    options = {
        "probe": Option(
            "linear",
            "linear: Linear(d, classes), best dev epoch; thesis-code: Linear-SiLU-Linear, last epoch",
            choices=PROBE_VARIANTS,
        )
    }

    def read_splits(self, folder: Path) -> dict[str, LabeledSentences]:
        """The labelled texts of each split, read from the dataset's ``folder``: keys ``train``, ``dev`` and
        ``test`` (or ``train`` and ``test``). A malformed line is a :func:`harness.data_error`."""
        raise NotImplementedError(f"{type(self).__name__} must implement read_splits(folder)")

    def normalise(self, text: str) -> str:
        """A text as the model reads it (as read, unless a subclass says otherwise)."""
        return text

    def how_to_get(self) -> str:
        """What the error says when the data is nowhere to be found."""
        return (
            f"put {', '.join(self.data_files)} into DATA_DIR/{self.metadata.dataset}/ (--data-dir or HARNESS_DATA_DIR)."
        )

    def folder(self) -> Path:
        return resolve_dataset_dir(
            self.metadata.dataset, self.bundled_data, how_to_get=self.how_to_get(), data_dir=self.data_dir
        )

    def paths(self) -> list[Path]:
        if not self.data_files:
            raise NotImplementedError(f"{type(self).__name__} names no data_files; the checksum needs them")
        folder = self.folder()
        return [folder / name for name in self.data_files]

    def probe_splits(self) -> tuple[dict[str, LabeledSentences], list[str]]:
        """The checked, normalised splits (train, dev, test) and the label order (not ``load``: a task may have
        its own loader beside the probe)."""
        folder = self.folder()
        splits = self.read_splits(folder)
        names = set(splits)
        if names not in ({"train", "dev", "test"}, {"train", "test"}):
            raise data_error(
                folder,
                None,
                f"read_splits() returned splits {sorted(names)}; expected train, dev, test or train, test.",
            )
        for name, split in splits.items():
            if len(split.sentences) != len(split.labels):
                raise data_error(
                    folder, None, f"the {name} split has {len(split.sentences)} texts but {len(split.labels)} labels."
                )
            if not len(split.sentences):
                raise data_error(folder, None, f"the {name} split has no texts.")
        if "dev" not in splits:
            splits = self.draw_dev(splits)
        labels = list(self.label_order) or sorted(set(splits["train"].labels))
        known = set(labels)
        for name in PROBE_SPLITS:
            unknown = sorted(set(splits[name].labels) - known)
            if unknown:
                source = "label_order" if self.label_order else "the train split's labels"
                raise data_error(folder, None, f"the {name} split has labels {unknown} not in {source}: {labels}.")
        splits = {
            name: LabeledSentences([self.normalise(text) for text in splits[name].sentences], list(splits[name].labels))
            for name in PROBE_SPLITS
        }
        return splits, labels

    def draw_dev(self, splits: dict[str, LabeledSentences]) -> dict[str, LabeledSentences]:
        """Train and test as read, and a seeded :data:`DEV_FRACTION` of train (at least one text) as dev."""
        train = splits["train"]
        order = np.random.default_rng(DEV_SEED).permutation(len(train))
        dev_count = max(1, round(DEV_FRACTION * len(train)))
        dev, kept = sorted(order[:dev_count].tolist()), sorted(order[dev_count:].tolist())
        return {"train": train.subset(kept), "dev": train.subset(dev), "test": splits["test"]}

    def check_data(self) -> str:
        self.probe_splits()
        return files_checksum(self.paths())

    def training_data(self, kind: str, ctx: Any = None) -> TrainingSplits | None:
        if kind not in (LABELED_SENTENCES, UNLABELED_SENTENCES) or kind not in self.metadata.training_kinds:
            return None
        splits, _ = self.probe_splits()
        # The checksum covers the offered texts and labels, not just the files: another normaliser retrains.
        content = hashlib.sha256()
        for name in ("train", "dev"):
            for text, label in zip(splits[name].sentences, splits[name].labels):
                content.update(f"{name}\t{label}\t{text}\x00".encode())
        checksum = f"{files_checksum(self.paths())}:{content.hexdigest()[:16]}"
        if kind == UNLABELED_SENTENCES:
            return TrainingSplits(
                self.metadata.name, UnlabeledSentences(list(splits["train"].sentences)), checksum=checksum
            )
        return TrainingSplits(self.metadata.name, splits["train"], splits["dev"], checksum)

    def model_texts(self, split: LabeledSentences) -> list[str]:
        """What the model reads of a split: its texts, unless a subclass prepares them (e.g. prompts them with
        their labels)."""
        return list(split.sentences)

    def probe_descriptions(self) -> tuple[str, str]:
        """What the log calls the encoded texts and the probe."""
        return f"{self.metadata.name} texts", f"{self.metadata.name} probe"

    def evaluation_details(self, splits: dict[str, LabeledSentences], labels: list[str]) -> dict[str, Any]:
        """The record's details before the probe's and the options: the evaluated texts per split, the labels."""
        return {"texts": {name: len(split) for name, split in splits.items()}, "labels": labels}

    def evaluate(self, model: Any, ctx: Any) -> EvalResult:
        loaded, labels = self.probe_splits()
        splits = {
            name: split.subset(evaluation_sample(len(split), ctx.profile.max_eval_examples))
            for name, split in loaded.items()
        }
        texts_description, description = self.probe_descriptions()
        probe = probe_on_texts(
            model,
            {name: self.model_texts(split) for name, split in splits.items()},
            {name: [labels.index(label) for label in split.labels] for name, split in splits.items()},
            len(labels),
            variant=self.options["probe"],
            seed=ctx.seed,
            device=ctx.device,
            progress=ctx.progress,
            texts_description=texts_description,
            description=description,
        )
        return EvalResult(
            scores=probe.scores(),
            examples=probe.examples(self.metadata.main_score),
            dataset_checksum=files_checksum(self.paths()),
            details={**self.evaluation_details(splits, labels), "probe": probe.details(), "options": self.options},
        )
