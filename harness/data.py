"""Training-data kinds, dataset resolution and checksums.

Datasets resolve in this order (docs/writing-plugins.md, "Data"): an explicit ``--data-dir`` /
``HARNESS_DATA_DIR``, then the copy
bundled with the plugin package, then (where a task offers it) ``harness data download``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import DataFileError, MissingDataError, data_error

# Training-data kinds a model can learn from and a task can offer.
SCORED_PAIRS = "scored_pairs"  # sentence pairs with a gold similarity score (ScoredPairs)
UNLABELED_SENTENCES = "unlabeled_sentences"  # sentences without labels (UnlabeledSentences)
LABELED_SENTENCES = "labeled_sentences"  # sentences with a class label (LabeledSentences)
PROPOSITION_PAIRS = "proposition_pairs"  # sentence pairs with aligned proposition spans (PropositionPairs)
TRAINING_KINDS = (SCORED_PAIRS, UNLABELED_SENTENCES, LABELED_SENTENCES, PROPOSITION_PAIRS)  # every kind


@dataclass
class ScoredPairs:
    """Sentence pairs with a gold similarity normalised to [0, 1]."""

    first: list[str]
    second: list[str]
    scores: np.ndarray

    kind = SCORED_PAIRS

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float32)
        if not (len(self.first) == len(self.second) == len(self.scores)):
            raise ValueError("ScoredPairs: first, second and scores must have the same length")

    def __len__(self) -> int:
        return len(self.scores)

    def subset(self, indices: Sequence[int]) -> ScoredPairs:
        return ScoredPairs(
            [self.first[i] for i in indices], [self.second[i] for i in indices], self.scores[list(indices)]
        )

    def sentences(self) -> list[str]:
        """Distinct sentences in order of first appearance."""
        return list(dict.fromkeys([*self.first, *self.second]))


@dataclass
class UnlabeledSentences:
    """Training data of kind ``unlabeled_sentences``: sentences alone (unsupervised objectives)."""

    sentences: list[str]
    kind = UNLABELED_SENTENCES

    def __len__(self) -> int:
        return len(self.sentences)

    def subset(self, indices: Sequence[int]) -> UnlabeledSentences:
        return UnlabeledSentences([self.sentences[i] for i in indices])


@dataclass
class LabeledSentences:
    """Training data of kind ``labeled_sentences``: sentences with one class label each."""

    sentences: list[str]
    labels: list[str]
    kind = LABELED_SENTENCES

    def __len__(self) -> int:
        return len(self.sentences)

    def subset(self, indices: Sequence[int]) -> LabeledSentences:
        return LabeledSentences([self.sentences[i] for i in indices], [self.labels[i] for i in indices])


@dataclass
class TrainingSplits:
    """What a task offers for training: a train split and, where it has one, a dev split for model selection."""

    source: str  # the task that offered it, e.g. the name given to --train-on
    train: object
    dev: object | None = None
    checksum: str = ""
    # Sentences of the pairs the task evaluates (dev and test). A method that builds new pairs from the train
    # sentences (e.g. Augmented SBERT's samplers) must never pair two of them: the pair could be an evaluated one.
    held_out_sentences: frozenset = frozenset()

    @property
    def kind(self) -> str:
        return self.train.kind  # type: ignore[attr-defined]


def data_dir_override() -> Path | None:
    """The folder ``HARNESS_DATA_DIR`` names (datasets are looked up there first), or None when it is not set."""
    value = os.environ.get("HARNESS_DATA_DIR")
    return Path(value).expanduser() if value else None


def default_download_dir() -> Path:
    """Where ``harness data download`` puts datasets when no data dir is given."""
    return data_dir_override() or Path.home() / ".cache" / "harness" / "data"


def resolve_dataset_dir(name: str, bundled: Path | None, how_to_get: str = "", data_dir: Path | None = None) -> Path:
    """The folder holding dataset ``name``: ``<data_dir>/<name>`` if present, else the bundled copy, else the
    download folder's copy."""
    data_dir = data_dir or data_dir_override()
    tried: list[str] = []
    if data_dir is not None:
        candidate = Path(data_dir) / name
        if candidate.is_dir():
            return candidate
        tried.append(str(candidate))
    if bundled is not None:
        if bundled.is_dir():
            return bundled
        tried.append(str(bundled))
    downloaded = Path.home() / ".cache" / "harness" / "data" / name
    if downloaded.is_dir():
        return downloaded
    tried.append(str(downloaded))
    hint = f" {how_to_get}" if how_to_get else " Put it under --data-dir / HARNESS_DATA_DIR."
    raise MissingDataError(f"dataset {name!r} is not available (looked in: {', '.join(tried) or 'nowhere'}).{hint}")


def files_checksum(paths: Iterable[Path]) -> str:
    """sha256 over the names and bytes of the given files, in sorted order."""
    from .store_files import UnsafeFileError, open_store_file

    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        digest.update(path.name.encode())
        try:
            descriptor = open_store_file(path)  # a FIFO in a data folder would block the run forever
        except UnsafeFileError as exc:
            raise data_error(path, None, f"{exc.reason}; a data file must be a regular file.") from None
        with os.fdopen(descriptor, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def read_text_lines(path: Path, allow_empty: bool = False) -> list[str]:
    """Lines of a UTF-8 file without their newline.

    A missing file is a MissingDataError naming it; a file that is not UTF-8 text (e.g. binary) or, unless
    ``allow_empty``, has no non-blank line is a DataFileError naming the file (and the line of the first bad byte).
    """
    path = Path(path)
    if not path.is_file():
        raise MissingDataError(f"{path}: data file not found.")
    raw = path.read_bytes()
    if b"\x00" in raw:
        line = raw.count(b"\n", 0, raw.index(b"\x00")) + 1
        raise data_error(path, line, "not a text file (contains NUL bytes); expected UTF-8 text.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise data_error(
            path,
            line,
            f"not valid UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save the file as UTF-8.",
        ) from None
    lines = text.splitlines()
    if not allow_empty and not any(line.strip() for line in lines):
        raise data_error(path, None, "the data file is empty.")
    return lines


def check_data_dir(path: Path | str | None, source: str = "--data-dir") -> Path | None:
    """``path`` as a Path if it is an existing folder; a DataFileError saying so otherwise (a data dir that does not
    exist must never fall back silently to the bundled copy)."""
    if path is None:
        return None
    path = Path(path).expanduser()
    if not path.exists():
        raise DataFileError(
            f"{source} {path} does not exist; create it with the datasets in it, or leave it out "
            "to use the bundled and downloaded data."
        )
    if not path.is_dir():
        raise DataFileError(f"{source} {path} is a file; it must be a folder holding <dataset>/ folders.")
    return path
