"""C-STS, conditional semantic textual similarity (Deshpande et al. 2023, arXiv 2305.15093), as evaluated by the
Sub-Sentence Encoder paper (Chen et al. 2023, arXiv 2311.04335, section 4.2.2, table 3): the task ``csts``.

A row is (sentence1, sentence2, condition) with a 1-5 similarity label under the condition; the model's similarity
under the condition is compared with the labels by Spearman x100 (validation split: main score ``spearman``; test
split only where the user's ``csts_test.csv`` carries labels). How the condition reaches each kind of model (option
``input``), the data and every deviation: docs/tasks/csts.md, section "C-STS" and its ``csts`` table rows.
"""

from __future__ import annotations

import csv
import io
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness import (
    DataFileError,
    EvalResult,
    IncompatibleError,
    MissingDataError,
    Option,
    Task,
    TaskMetadata,
    as_embedder,
    as_pair_scorer,
    cosine_rows,
    data_dir_override,
    data_error,
    files_checksum,
    hookimpl,
    read_text_lines,
    spearman,
)
from harness.blocks import ExampleScores, evaluation_sample, normalise_spans

logger = logging.getLogger(__name__)

DATASET = "csts"
FILES = {"validation": "csts_validation.csv", "test": "csts_test.csv"}
COLUMNS = ("sentence1", "sentence2", "condition", "label")
INPUT_CHOICES = ("auto", "spans", "no-condition", "condition", "prepend")
SELECTOR_KIND = "span-selector"
HOW_TO_GET = (
    "C-STS is distributed encrypted and may not be redistributed, so harness never bundles or downloads it. Get it "
    "from https://github.com/princeton-nlp/c-sts: request the password with the form linked in its README (it is "
    "emailed at once), then in that repository's data/ folder run `bash extract.sh csts.tar.enc <password>`, which "
    "writes csts_train.csv, csts_validation.csv and csts_test.csv. Copy them to <data-dir>/csts/ and pass "
    "--data-dir <data-dir> (or set HARNESS_DATA_DIR)."
)


@dataclass
class ConditionalPairs:
    """One split: the triples and their labels (None when the file has no labels)."""

    first: list[str]
    second: list[str]
    conditions: list[str]
    labels: np.ndarray | None

    def __len__(self) -> int:
        return len(self.first)

    def subset(self, indices: list[int]) -> ConditionalPairs:
        return ConditionalPairs(
            [self.first[i] for i in indices],
            [self.second[i] for i in indices],
            [self.conditions[i] for i in indices],
            None if self.labels is None else self.labels[indices],
        )


def read_csts(path: Path) -> ConditionalPairs:
    """An official C-STS CSV; labels must be all present (numbers in 1..5) or all absent (a test file)."""
    text = "\n".join(read_text_lines(path))
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    missing = [column for column in COLUMNS[:3] if column not in header]
    if missing:
        raise data_error(
            path,
            1,
            f"the header has no {', '.join(missing)} column; expected the official columns {', '.join(COLUMNS)}.",
        )
    first, second, conditions, labels = [], [], [], []
    for line, row in enumerate(reader, start=2):
        values = [row.get(column) for column in COLUMNS[:3]]
        if any(value is None or not value.strip() for value in values):
            raise data_error(path, line, "sentence1, sentence2 and condition must all be non-empty.")
        first.append(values[0])
        second.append(values[1])
        conditions.append(values[2])
        raw_label = (row.get("label") or "").strip()
        labels.append(raw_label)
    if not first:
        raise data_error(path, None, "no rows after the header.")
    if not any(labels):
        return ConditionalPairs(first, second, conditions, None)
    numbers = []
    for line, raw_label in enumerate(labels, start=2):
        try:
            number = float(raw_label)
        except ValueError:
            raise data_error(
                path, line, f"label {raw_label!r} is not a number; labels are 1-5 (all rows or none)."
            ) from None
        if not 1 <= number <= 5:
            raise data_error(path, line, f"label {number:g} is outside 1..5.")
        numbers.append(number)
    return ConditionalPairs(first, second, conditions, np.asarray(numbers))


class CSTS(Task):
    metadata = TaskMetadata(
        name="csts",
        family="csts",
        description="C-STS: similarity of two sentences under a condition (validation; test where labelled)",
        main_score="spearman",
        metric="Spearman x100 between the model's conditional similarity (cosine of selected-span encodings, of "
        "sentence embeddings without the condition or, input=condition, of sentence+condition embeddings, or "
        "a pair scorer's score with the condition prepended) and the 1-5 labels, on the validation split",
        reference="Deshpande et al. 2023, C-STS (arXiv 2305.15093); Chen et al. 2023, Sub-Sentence Encoder "
        "(arXiv 2311.04335), 4.2.2 and table 3",
        dataset=DATASET,
        dataset_source="https://github.com/princeton-nlp/c-sts (encrypted; user-supplied decrypted CSV files)",
        license="C-STS terms: no public redistribution of the decrypted data (never bundled or downloaded)",
        version="2",  # 2: input=auto gives embedders no-condition (the paper's baseline), not condition
        requires=("pair_scorer",),
    )
    options: ClassVar = {
        "input": Option(
            "auto",
            "how the condition reaches the model: spans (selected words, span encoders), "
            "no-condition (embedders, each sentence alone: the paper's bi-encoder baseline), "
            "condition (embedders, sentence + condition text), prepend (pair scorers), or auto",
            choices=INPUT_CHOICES,
        ),
        "selector": Option(
            "lexical",
            "the span-selector component that picks the words expressing the condition (input=spans)",
            type=str,
        ),
    }

    def folder(self) -> Path:
        data_dir = self.data_dir or data_dir_override()
        candidate = Path(data_dir) / DATASET if data_dir is not None else None
        if candidate is None or not (candidate / FILES["validation"]).is_file():
            looked = str(candidate / FILES["validation"]) if candidate is not None else "no --data-dir given"
            raise MissingDataError(f"C-STS data not found ({looked}). {HOW_TO_GET}")
        return candidate

    def paths(self) -> dict[str, Path]:
        folder = self.folder()
        return {split: folder / name for split, name in FILES.items() if (folder / name).is_file()}

    def check_data(self) -> str:
        paths = self.paths()
        for path in paths.values():
            read_csts(path)
        if read_csts(paths["validation"]).labels is None:
            raise data_error(
                paths["validation"],
                None,
                "the validation file has no labels; it must be the official labelled csts_validation.csv.",
            )
        return files_checksum(paths.values())

    # -- scoring --------------------------------------------------------------------------------------------------
    def input_mode(self, model: Any) -> str:
        mode = self.options["input"]
        has = {name: callable(getattr(model, name, None)) for name in ("encode_spans", "encode", "score")}
        if mode == "auto":
            if has["encode_spans"] and not has["encode"]:
                return "spans"
            return "no-condition" if has["encode"] else "prepend"
        if mode == "spans" and not has["encode_spans"]:
            raise IncompatibleError(
                "csts: input=spans needs a span encoder (encode_spans); this model has none. "
                "Use input=condition for embedders or input=prepend for pair scorers."
            )
        if mode in ("condition", "no-condition") and not (has["encode"] or has["encode_spans"]):
            raise IncompatibleError(f"csts: input={mode} needs an embedder; use input=prepend for a pair scorer.")
        return mode

    def similarities(self, model: Any, pairs: ConditionalPairs, ctx: Any, details: dict) -> np.ndarray:
        mode = self.input_mode(model)
        details["input"] = mode
        if mode == "spans":
            return self._span_similarities(model, pairs, ctx, details)
        if mode in ("condition", "no-condition"):
            # no-condition: the condition is never read (table 3's zero-shot bi-encoders)
            sentences = [*pairs.first, *pairs.second]
            if mode == "condition":
                conditions = [*pairs.conditions, *pairs.conditions]
                sentences = [f"{s} {c}" for s, c in zip(sentences, conditions)]
            vectors = np.asarray(as_embedder(model).encode(sentences))
            return cosine_rows(vectors[: len(pairs)], vectors[len(pairs) :])
        scorer = as_pair_scorer(model)
        return np.asarray(
            scorer.score(
                [f"{c} {s}" for s, c in zip(pairs.first, pairs.conditions)],
                [f"{c} {s}" for s, c in zip(pairs.second, pairs.conditions)],
            ),
            dtype=float,
        )

    def _span_similarities(self, model: Any, pairs: ConditionalPairs, ctx: Any, details: dict) -> np.ndarray:
        name = self.options["selector"]
        if ctx.component is None:
            raise IncompatibleError("csts: input=spans needs the component lookup of the evaluation context.")
        selector = ctx.component(SELECTOR_KIND, name)
        sentences = [*pairs.first, *pairs.second]
        conditions = [*pairs.conditions, *pairs.conditions]
        selections = selector.select(sentences, conditions, ctx)
        if len(selections) != len(sentences):
            raise DataFileError(
                f"csts: span selector {name!r} returned {len(selections)} selections for "
                f"{len(sentences)} sentences; select() must return one list of spans per sentence."
            )
        items, no_selection = [], 0
        for row, (sentence, spans) in enumerate(zip(sentences, selections)):
            if not spans:
                no_selection += 1
                spans = [(0, len(sentence))]  # nothing expresses the condition: the whole sentence stands in
            column = "sentence1" if row < len(pairs) else "sentence2"
            where = f"csts row {row % len(pairs)} ({column}), selector {name!r}"
            items.append((sentence, normalise_spans(sentence, spans, where)))
        details.update(selector=name, no_selection=no_selection, selected_sentences=len(sentences) - no_selection)
        vectors = np.asarray(model.encode_spans(items))
        return cosine_rows(vectors[: len(pairs)], vectors[len(pairs) :])

    def evaluate(self, model, ctx) -> EvalResult:
        checksum = self.check_data()
        paths = self.paths()
        scores: dict[str, float] = {}
        details: dict[str, Any] = {}
        examples = None
        for split in ("validation", "test"):
            if split not in paths:
                details[f"{split}_status"] = f"{FILES[split]} not in {self.folder()}; not scored"
                continue
            pairs = read_csts(paths[split])
            pairs = pairs.subset(evaluation_sample(len(pairs), ctx.profile.max_eval_examples))
            if pairs.labels is None:
                details[f"{split}_status"] = (
                    f"{len(pairs)} rows without labels (the official test labels are hidden; "
                    "score test predictions with the official make_test_submission.py)"
                )
                continue
            split_details: dict[str, Any] = {}
            predicted = self.similarities(model, pairs, ctx, split_details)
            scores[f"spearman_{split}"] = 100.0 * spearman(predicted, pairs.labels)
            if split == "validation":  # the main score's pairs, resampled for its bootstrap interval
                examples = ExampleScores("spearman", {"predicted": predicted, "gold": pairs.labels})
            details[split] = {"rows": len(pairs), **split_details}
        scores["spearman"] = scores["spearman_validation"]
        return EvalResult(scores, checksum, details, examples=examples)


@hookimpl
def register_tasks(register):
    register(CSTS)
