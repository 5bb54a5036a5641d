"""An example third-party harness plugin, written against the public API only (``harness``, ``harness.blocks``).

- model ``hashed-bow``: a lexical baseline embedder; lower-cased word tokens are hashed (stable blake2b) into
  ``dim`` signed buckets with sublinear term frequency, so cosine similarity approximates TF cosine.
- task ``sts17-en`` (family ``example``): SemEval-2017 Task 1 track 5 (English-English, 250 pairs), Spearman x100
  of the model's pair scores against the gold scores; written on harness' STS base (``harness.blocks.STSTask``),
  so it is its metadata, its two file names and one option.

The task's data resolves like every harness dataset: ``<--data-dir>/sts17/`` (or ``$HARNESS_DATA_DIR/sts17/``) when
that folder exists, else the copy bundled in this package. The smoke profile's ``max_eval_examples`` cuts the pairs
with the harness' seeded sample, so smoke numbers are comparable with every other task's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import harness
from harness.blocks import STSTask

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


class STS17English(STSTask):
    """Metadata, file names and one option: reading, the smoke cut and scoring come from harness' STS base."""

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
    bundled_data = BUNDLED_DATA
    pair_files = ((INPUT_FILE, GOLD_FILE),)
    options = {
        **STSTask.options,
        "whitespace": harness.Option(
            "keep",
            "'collapse' joins each sentence's words with single spaces before scoring",
            choices=("keep", "collapse"),
        ),
    }

    def how_to_get(self) -> str:
        return f"Reinstall harness-example-plugin, or put {INPUT_FILE} and {GOLD_FILE} into DATA_DIR/sts17/."

    def normalise(self, text: str) -> str:
        return " ".join(text.split()) if self.options["whitespace"] == "collapse" else text


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
