"""An example third-party harness plugin, written against the public API only (``import harness``).

- model ``hashed-bow``: a lexical baseline embedder; lower-cased word tokens are hashed (stable blake2b) into
  ``dim`` signed buckets with sublinear term frequency, so cosine similarity approximates TF cosine.
- task ``sts17-en`` (family ``example``): SemEval-2017 Task 1 track 5 (English-English, 250 pairs), Spearman x100
  of the model's pair scores against the gold scores.

The task's data resolves like every harness dataset: ``<--data-dir>/sts17/`` (or ``$HARNESS_DATA_DIR/sts17/``) when
that folder exists, else the copy bundled in this package. The smoke profile's ``max_eval_examples`` cuts the pairs
with the harness' seeded sample, so smoke numbers are comparable with every other task's.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Sequence

import numpy as np

import harness
from harness.evaluation.sampling import evaluation_sample

BUNDLED_DATA = Path(__file__).resolve().parent / "data"
INPUT_FILE = "STS.input.track5.en-en.txt"
GOLD_FILE = "STS.gs.track5.en-en.txt"
TOKEN = re.compile(r"\w+", re.UNICODE)


class HashedBagOfWords:
    """An embedder (capability ``embedder``); the core scores pairs with the cosine of two embeddings."""

    def __init__(self, dim: int):
        self.dim = dim

    def _bucket(self, token: str) -> tuple[int, float]:
        # blake2b, not hash(): Python salts str hashes per process, and embeddings must not change between runs.
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            counts: dict[str, int] = {}
            for token in TOKEN.findall(text.lower()):
                counts[token] = counts.get(token, 0) + 1
            for token, count in counts.items():
                bucket, sign = self._bucket(token)
                matrix[row, bucket] += sign * (1.0 + np.log(count))
        return matrix


def build_hashed_bow(ctx: harness.ModelContext) -> HashedBagOfWords:
    # No backbone, no batches, no sequence limit: a hashing model has none of the profile's budgets to honour.
    return HashedBagOfWords(ctx.options["dim"])


class STS17English(harness.Task):
    metadata = harness.TaskMetadata(
        name="sts17-en",
        family="example",
        description="SemEval-2017 STS track 5, English-English (250 pairs)",
        main_score="spearman",
        metric="Spearman x100 of pair scores vs gold",
        reference="Cer et al. 2017, SemEval-2017 Task 1",
        dataset="sts17",
        dataset_source="SemEval-2017 STS evaluation release (data/SOURCE.md)",
        license="CC BY-SA 4.0",
        version="1",
    )
    options = {
        "whitespace": harness.Option(
            "keep", "'collapse' joins each sentence's words with single spaces before scoring",
            choices=("keep", "collapse"),
        ),
    }

    def folder(self) -> Path:
        return harness.resolve_dataset_dir(
            self.metadata.dataset, BUNDLED_DATA, data_dir=self.data_dir,
            how_to_get=f"Reinstall harness-example-plugin, or put {INPUT_FILE} and {GOLD_FILE} into DATA_DIR/sts17/.",
        )

    def load(self) -> tuple[list[str], list[str], np.ndarray, list[Path]]:
        """The pairs, their gold scores (0-5) and the files they were read from."""
        folder = self.folder()
        input_path, gold_path = folder / INPUT_FILE, folder / GOLD_FILE
        input_lines, gold_lines = harness.read_text_lines(input_path), harness.read_text_lines(gold_path)
        if len(input_lines) != len(gold_lines):
            raise harness.data_error(gold_path, None, f"has {len(gold_lines)} lines but {input_path.name} has "
                                                      f"{len(input_lines)}; both need one line per pair.")
        collapse = self.options["whitespace"] == "collapse"
        first, second, gold = [], [], []
        for number, (line, gold_line) in enumerate(zip(input_lines, gold_lines), start=1):
            fields = line.split("\t")
            if len(fields) < 2:
                raise harness.data_error(input_path, number, "expected 'sentence1<TAB>sentence2'.")
            try:
                gold.append(float(gold_line))
            except ValueError:
                raise harness.data_error(gold_path, number, f"gold score {gold_line!r} is not a number.") from None
            first.append(" ".join(fields[0].split()) if collapse else fields[0])
            second.append(" ".join(fields[1].split()) if collapse else fields[1])
        return first, second, np.array(gold), [input_path, gold_path]

    def check_data(self) -> str:
        return harness.files_checksum(self.load()[3])

    def evaluate(self, model, ctx: harness.EvalContext) -> harness.EvalResult:
        first, second, gold, paths = self.load()
        kept = evaluation_sample(len(gold), ctx.profile.max_eval_examples)  # the smoke profile's seeded cut
        first, second, gold = [first[i] for i in kept], [second[i] for i in kept], gold[kept]
        ctx.logger.debug("sts17-en: scoring %d pairs", len(gold))
        # One call for every pair: an embedder encodes each distinct sentence once.
        predicted = harness.as_pair_scorer(model).score(first, second)
        return harness.EvalResult(
            scores={"spearman": 100 * harness.spearman(predicted, gold),
                    "pearson": 100 * harness.pearson(predicted, gold)},
            dataset_checksum=harness.files_checksum(paths),
            details={"pairs": len(gold)},
        )


@harness.hookimpl
def register_models(register):
    register(
        harness.ModelPlugin(
            name="hashed-bow",
            description="hashed bag-of-words embedder (lexical baseline, example plugin)",
            factory=build_hashed_bow,
            capabilities=(harness.EMBEDDER,),
            options={"dim": harness.Option(4096, "number of hash buckets", type=int)},
        )
    )


@harness.hookimpl
def register_tasks(register):
    register(STS17English)
