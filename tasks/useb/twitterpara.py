"""USEB TwitterPara: paraphrase identification on PIT-2015 test and the Twitter URL Corpus test (Xu et al. 2015,
Lan et al. 2017; useb's ``TwitterParaEvaluator``).

PIT-2015 test (expert label 0-5) and Twitter URL Corpus test (n of 6 annotators): label 3 dropped, above 3 a
paraphrase; ``ap`` = mean of the two average precisions of the pair scores (main); ``spearman`` = mean of the two
Spearman correlations of the scores with the labels over all pairs, label 3 included (as useb).

Deviation: ``Twitter_URL_Corpus_test.txt`` of the original release (bundled) has 250 blank lines, on which useb's
parser would fail (so its own copy has none); they are skipped.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import average_precision_score

from harness import EvalResult, data_error, files_checksum, spearman
from harness.blocks import ExampleScores, PairSet, evaluation_sample, score_pair_sets

from .base import SOURCE, UsebTask, useb_metadata
from .data import BUNDLED_TWITTERPARA, file_lines

logger = logging.getLogger(__name__)

UNDECIDED_LABEL = 3  # left out of AP, kept for Spearman (as useb)
_URL_LABEL = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def read_twitter_url(path: Path) -> PairSet:
    """``sentence1<TAB>sentence2<TAB>(n,6)<TAB>url``; blank lines (250 in the original release) are skipped.
    The gold is n, how many of the 6 annotators said paraphrase."""
    first, second, labels = [], [], []
    for number, line in enumerate(file_lines(path), start=1):
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        match = _URL_LABEL.match(fields[2].strip()) if len(fields) >= 3 else None
        if match is None:
            raise data_error(path, number, "expected 'sentence1<TAB>sentence2<TAB>(n,6)<TAB>url'.")
        first.append(fields[0].strip())
        second.append(fields[1].strip())
        labels.append(int(match.group(1)))
    return PairSet("twitterurl", first, second, np.array(labels))


def read_pit(path: Path) -> PairSet:
    """PIT-2015 ``test.data``: topic id, topic, sentence 1, sentence 2, expert label 0-5, tags."""
    first, second, labels = [], [], []
    for number, line in enumerate(file_lines(path), start=1):
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        if len(fields) < 5 or not fields[4].strip().isdigit():
            raise data_error(
                path,
                number,
                "expected topic id, topic, sentence 1, sentence 2, label 0-5, ... (the test file with expert labels).",
            )
        first.append(fields[2].strip())
        second.append(fields[3].strip())
        labels.append(int(fields[4]))
    return PairSet("pit", first, second, np.array(labels))


class TwitterPara(UsebTask):
    member = "twitterpara"
    bundled = BUNDLED_TWITTERPARA
    metadata = useb_metadata(
        "twitterpara",
        description="TwitterPara: paraphrase identification on PIT-2015 test and Twitter URL Corpus test (bundled)",
        main_score="ap",
        metric="AP x100 of pair scores vs paraphrase labels (label 3 dropped, >3 positive), mean of the two; "
        "Spearman too",
        dataset_reference="Xu et al. 2015 (PIT-2015), Lan et al. 2017 (Twitter URL Corpus); USEB data-eval/twitterpara",
        license="Twitter URL Corpus CC BY-NC-SA 3.0; PIT-2015 none stated (see tasks/data/twitterpara/SOURCE.md)",
        dataset_source="bundled original releases (tasks/data/twitterpara/SOURCE.md); or " + SOURCE,
    )

    def load(self) -> list[PairSet]:
        folder = self.eval_dir()
        # useb's order: the URL corpus first, then PIT.
        return [read_twitter_url(folder / "Twitter_URL_Corpus_test.txt"), read_pit(folder / "test.data")]

    def evaluate(self, model, ctx) -> EvalResult:
        datasets = [d.subset(evaluation_sample(len(d), ctx.profile.max_eval_examples)) for d in self.load()]
        predictions = score_pair_sets(model, datasets)
        scores: dict[str, float] = {}
        details: dict[str, Any] = {"folder": str(self.eval_dir()), "pairs": {}}
        judged_pairs: dict[str, list] = {"score": [], "paraphrase": [], "dataset": []}  # resampling the main AP
        for index, (dataset, pair_scores) in enumerate(zip(datasets, predictions)):
            judged = dataset.gold != UNDECIDED_LABEL
            paraphrase = (dataset.gold[judged] > UNDECIDED_LABEL).astype(int)
            judged_pairs["score"].append(pair_scores[judged])
            judged_pairs["paraphrase"].append(paraphrase)
            judged_pairs["dataset"].append(np.full(len(paraphrase), index))
            scores[f"ap.{dataset.name}"] = 100 * float(average_precision_score(paraphrase, pair_scores[judged]))
            scores[f"spearman.{dataset.name}"] = 100 * spearman(pair_scores, dataset.gold * 20)
            details["pairs"][dataset.name] = {
                "all": len(dataset),
                "judged": int(judged.sum()),
                "paraphrases": int(paraphrase.sum()),
            }
        scores["ap"] = float(np.mean([scores[f"ap.{d.name}"] for d in datasets]))
        scores["spearman"] = float(np.mean([scores[f"spearman.{d.name}"] for d in datasets]))
        examples = ExampleScores(
            "average_precision",
            {"predicted": np.concatenate(judged_pairs["score"]), "gold": np.concatenate(judged_pairs["paraphrase"])},
            groups=np.concatenate(judged_pairs["dataset"]),
            aggregate="group-mean",
        )
        return EvalResult(scores, files_checksum(self.data_files()), details, examples=examples)
