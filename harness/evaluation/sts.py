"""The semantic textual similarity task: a public base so a new STS task is metadata plus file names.

Protocol (SentEval's ``STSEval``, SimCSE's and mteb's evaluation): the model's score of each sentence pair (its own
``score``, else the cosine of two embeddings) against the gold score, Spearman x100; Pearson and, for tasks with
several pair files, the per-file and mean correlations are stored beside it (:func:`correlation_scores`). The smoke
profile's ``max_eval_examples`` cuts each pair file with the seeded evaluation sample; the core option ``unseen``
scores only the pairs the model did not train on.

A task reads pair files in the SemEval layout (:func:`read_sts_pairs`): ``STS.input.*.txt`` with the two sentences
of a pair tab-separated on one line, ``STS.gs.*.txt`` with its gold score on the same line number (an empty line
marks an unscored pair, left out as SentEval does)::

    class STS17English(STSTask):
        metadata = harness.TaskMetadata(name="sts17-en", family="example", dataset="sts17", ...)
        bundled_data = Path(__file__).parent / "data"
        pair_files = (("STS.input.track5.en-en.txt", "STS.gs.track5.en-en.txt"),)

A task whose files have another layout overrides :meth:`STSTask.load`; one whose texts need preparing overrides
:meth:`STSTask.normalise` (e.g. after an option of its own).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness import (
    UNSEEN_OPTION,
    EvalResult,
    EvaluatedTexts,
    Task,
    data_error,
    files_checksum,
    read_text_lines,
    resolve_dataset_dir,
    unseen_indices,
)
from harness.evaluation.pairs import PairSet, correlation_scores, pair_examples, score_pair_sets
from harness.evaluation.sampling import evaluation_sample


def read_sts_pairs(input_path: Path, gold_path: Path, name: str, normalise: Any = None) -> PairSet:
    """The scored pairs of one SemEval-layout file pair, named ``name``; ``normalise`` (text -> text) is applied to
    each sentence. A malformed line is a :class:`harness.DataFileError` naming its file and line."""
    input_lines, gold_lines = read_text_lines(input_path), read_text_lines(gold_path)
    if len(input_lines) != len(gold_lines):
        raise data_error(
            gold_path,
            None,
            f"has {len(gold_lines)} lines but {input_path.name} has {len(input_lines)}; both need one line per pair.",
        )
    first, second, gold = [], [], []
    for number, (line, gold_line) in enumerate(zip(input_lines, gold_lines), start=1):
        if not gold_line.strip():
            continue  # an unscored pair, dropped as in SentEval
        fields = line.split("\t")
        if len(fields) < 2:
            raise data_error(input_path, number, "expected 'sentence1<TAB>sentence2'.")
        try:
            score = float(gold_line)
        except ValueError:
            raise data_error(gold_path, number, f"gold score {gold_line!r} is not a number.") from None
        first.append(normalise(fields[0]) if normalise else fields[0])
        second.append(normalise(fields[1]) if normalise else fields[1])
        gold.append(score)
    return PairSet(name, first, second, np.array(gold))


class STSTask(Task):
    """Spearman x100 of the model's pair scores against gold on the task's pair sets.

    A subclass sets ``metadata`` (``main_score="spearman"``; ``dataset`` names the folder looked up in
    ``--data-dir``), ``bundled_data`` (the copy shipped with the plugin, or None: then only ``--data-dir`` and the
    download folder are looked in) and ``pair_files`` ((input file, gold file) per sub-dataset, relative to the
    dataset's folder). With several pair files every pair is pooled for ``spearman`` unless the task's option
    ``aggregation`` is ``"mean"`` (the mean over files, SentEval's).
    """

    bundled_data: ClassVar[Path | None] = None
    pair_files: ClassVar[tuple[tuple[str, str], ...]] = ()
    options = {"unseen": UNSEEN_OPTION}

    def bundled_dir(self) -> Path | None:
        return self.bundled_data

    def how_to_get(self) -> str:
        """What the error says when the data is nowhere to be found."""
        files = ", ".join(name for pair in self.pair_files for name in pair)
        return f"put {files} into DATA_DIR/{self.metadata.dataset}/ (--data-dir or HARNESS_DATA_DIR)."

    def folder(self) -> Path:
        return resolve_dataset_dir(
            self.metadata.dataset, self.bundled_dir(), how_to_get=self.how_to_get(), data_dir=self.data_dir
        )

    def normalise(self, text: str) -> str:
        """A sentence as the model sees it (as read, unless a subclass says otherwise)."""
        return text

    def load(self) -> tuple[list[PairSet], list[Path]]:
        """The pair sets (one per pair file) and the files they were read from."""
        if not self.pair_files:
            raise NotImplementedError(f"{type(self).__name__} names no pair_files; set them or override load()")
        folder = self.folder()
        pair_sets, paths = [], []
        for input_name, gold_name in self.pair_files:
            input_path, gold_path = folder / input_name, folder / gold_name
            pair_sets.append(read_sts_pairs(input_path, gold_path, Path(input_name).stem, self.normalise))
            paths += [input_path, gold_path]
        return pair_sets, paths

    def check_data(self) -> str:
        _, paths = self.load()
        return files_checksum(paths)

    def evaluated_pair_sets(self, ctx: Any) -> tuple[list[PairSet], list[Path]]:
        pair_sets, paths = self.load()
        limit = ctx.profile.max_eval_examples
        return [p.subset(evaluation_sample(len(p), limit)) for p in pair_sets], paths  # the cut is per pair set

    def evaluated_texts(self, ctx: Any) -> EvaluatedTexts:
        pair_sets, _ = self.evaluated_pair_sets(ctx)
        return EvaluatedTexts(pairs=tuple(pair for p in pair_sets for pair in zip(p.first, p.second)))

    def evaluate(self, model: Any, ctx: Any) -> EvalResult:
        pair_sets, paths = self.evaluated_pair_sets(ctx)
        details = {}
        if self.options.get("unseen"):  # only the pairs the model did not train on (the option names the cell)
            kept = [p.subset(unseen_indices(list(zip(p.first, p.second)), ctx.training_texts)) for p in pair_sets]
            details["unseen"] = {
                "pairs_dropped_as_seen": sum(len(p) for p in pair_sets) - sum(len(p) for p in kept),
                "pairs_scored": sum(len(p) for p in kept),
            }
            pair_sets = kept
        predictions = score_pair_sets(model, pair_sets)
        return EvalResult(
            scores=self.aggregate(pair_sets, predictions),
            dataset_checksum=files_checksum(paths),
            details={"pairs": {p.name: len(p) for p in pair_sets}, "options": self.options, **details},
            examples=pair_examples(pair_sets, predictions, self.options.get("aggregation", "all")),
        )

    def aggregate(self, pair_sets: list[PairSet], predictions: list[np.ndarray]) -> dict[str, float]:
        """:func:`correlation_scores` with the main score ``spearman``: pooled, or the mean over pair sets when
        there are several and the option ``aggregation`` is ``"mean"``."""
        scores = correlation_scores(pair_sets, predictions)
        mean = len(pair_sets) > 1 and self.options.get("aggregation") == "mean"
        scores["spearman"] = scores["spearman_mean" if mean else "spearman_all"]
        return scores
