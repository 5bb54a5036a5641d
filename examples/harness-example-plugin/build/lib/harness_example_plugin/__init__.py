"""An example third-party harness plugin.

- model ``hashed-bow``: a lexical baseline embedder; lower-cased word tokens are hashed (stable blake2b) into
  ``dim`` signed buckets with sublinear term frequency, so cosine similarity approximates TF cosine.
- task ``sts17-en``: SemEval-2017 Task 1 track 5 (English-English, 250 pairs), Spearman x100 of pair scores.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

import harness
from harness.data import files_checksum, read_text_lines
from harness.errors import data_error
from harness.metrics import spearman

DATA = Path(__file__).resolve().parent / "data"
TOKEN = re.compile(r"\w+", re.UNICODE)


class HashedBagOfWords:
    def __init__(self, dim: int):
        self.dim = dim

    def _bucket(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self.dim, 1.0 if (value >> 63) & 1 else -1.0

    def encode(self, texts):
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            counts: dict[str, int] = {}
            for token in TOKEN.findall(text.lower()):
                counts[token] = counts.get(token, 0) + 1
            for token, count in counts.items():
                bucket, sign = self._bucket(token)
                matrix[row, bucket] += sign * (1.0 + np.log(count))
        return matrix


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
    )

    def load(self):
        input_path = DATA / "STS.input.track5.en-en.txt"
        gold_path = DATA / "STS.gs.track5.en-en.txt"
        first, second, gold = [], [], []
        for number, (line, score) in enumerate(zip(read_text_lines(input_path), read_text_lines(gold_path)), 1):
            fields = line.split("\t")
            if len(fields) < 2:
                raise data_error(input_path, number, "expected 'sentence1<TAB>sentence2'.")
            first.append(fields[0])
            second.append(fields[1])
            gold.append(float(score))
        return first, second, np.array(gold), [input_path, gold_path]

    def check_data(self) -> str:
        return files_checksum(self.load()[3])

    def evaluate(self, model, ctx):
        first, second, gold, paths = self.load()
        predicted = harness.as_pair_scorer(model).score(first, second)
        return harness.EvalResult({"spearman": 100 * spearman(predicted, gold)}, files_checksum(paths),
                                  {"pairs": len(gold)})


@harness.hookimpl
def register_models(register):
    register(
        harness.ModelPlugin(
            name="hashed-bow",
            description="hashed bag-of-words embedder (lexical baseline, example plugin)",
            factory=lambda ctx: HashedBagOfWords(ctx.options["dim"]),
            capabilities=("embedder",),
            options={"dim": harness.Option(4096, "number of hash buckets", type=int)},
        )
    )


@harness.hookimpl
def register_tasks(register):
    register(harness.TaskPlugin(STS17English.metadata, lambda options, data_dir: STS17English(options, data_dir)))
