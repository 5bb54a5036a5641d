"""Where USEB's files are, and reading them as useb does.

Folders are looked for in ``--data-dir`` / ``HARNESS_DATA_DIR`` (as ``DIR/useb/data-eval/...`` or, useb's own
layout, ``DIR/data-eval/...``), then, for twitterpara only, the bundled copy ``tasks/data/twitterpara`` (the
original releases, see its SOURCE.md), then the download folder (``harness.data.default_download_dir()``) where
``harness data download useb`` puts the official archives. A missing member raises ``MissingDataError`` saying what
is missing and how to get it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from harness import MissingDataError, data_dir_override, data_error, default_download_dir

logger = logging.getLogger(__name__)

DATASET_NAME = "useb"  # the folder `harness data download useb` creates under the data dir
DOWNLOAD_HINT = "harness data download useb"
BUNDLED_TWITTERPARA = Path(__file__).resolve().parent.parent / "data" / "twitterpara"

# Files each member reads from data-eval/<member>/ (useb asserts the same ones, plus PIT's test.label, unused).
REQUIRED_FILES = {
    "askubuntu": ("text_tokenized.txt", "test.txt", "dev.txt"),
    "cqadupstack": ("corpus.json", "retrieval_split.json"),
    "twitterpara": ("Twitter_URL_Corpus_test.txt", "test.data"),
    "scidocs": ("data.json",),
}
# data-train/<domain>/unsupervised/train.txt of each member (useb calls twitterpara's domain "twitter").
TRAIN_DOMAIN = {"askubuntu": "askubuntu", "cqadupstack": "cqadupstack", "twitterpara": "twitter", "scidocs": "scidocs"}


def candidate_roots(data_dir: Path | None) -> list[Path]:
    """Folders that may hold useb's ``data-eval`` / ``data-train``, in the order they are tried."""
    roots: list[Path] = []
    explicit = data_dir or data_dir_override()
    if explicit is not None:
        roots += [Path(explicit) / DATASET_NAME, Path(explicit)]
    roots.append(default_download_dir() / DATASET_NAME)
    return list(dict.fromkeys(roots))


def find_eval_dir(member: str, data_dir: Path | None, bundled: Path | None = None) -> Path:
    """``data-eval/<member>`` with all the files it needs, or a MissingDataError saying how to get it."""
    explicit = data_dir or data_dir_override()
    folders = [root / "data-eval" / member for root in candidate_roots(data_dir)]
    if bundled is not None:
        # Data resolution order: the explicit data dir (its two layouts), then the bundled copy, then the download
        # folder.
        folders.insert(2 if explicit is not None else 0, bundled)
    needed = REQUIRED_FILES[member]
    for folder in folders:
        if all((folder / name).is_file() for name in needed):
            return folder
    # The first sentence says why and what to do: a leaderboard prints it under its table (paths left out).
    raise MissingDataError(
        f"USEB {member}: not bundled with harness (only TwitterPara is; the other members come from UKP's official "
        f"USEB archive); download it with `{DOWNLOAD_HINT}` (it goes to {default_download_dir() / DATASET_NAME}; add "
        f"--data-dir DIR to put it elsewhere). The evaluation files {', '.join(needed)} were not found (looked in: "
        f"{', '.join(str(f) for f in folders)}); or pass --data-dir DIR (or set HARNESS_DATA_DIR) where "
        f"DIR/useb/data-eval/{member}/ holds these files."
    )


def find_train_file(member: str, data_dir: Path | None) -> Path:
    """``data-train/<domain>/unsupervised/train.txt`` of ``member``, or a MissingDataError saying how to get it."""
    relative = Path("data-train") / TRAIN_DOMAIN[member] / "unsupervised" / "train.txt"
    roots = candidate_roots(data_dir)
    for root in roots:
        if (root / relative).is_file():
            return root / relative
    raise MissingDataError(
        f"USEB {member}: the unlabelled training sentences {relative} were not found (looked in: "
        f"{', '.join(str(r) for r in roots)}). Download them with `{DOWNLOAD_HINT}`, or pass --data-dir DIR (or set "
        f"HARNESS_DATA_DIR) where DIR/useb/{relative} exists."
    )


def file_lines(path: Path) -> list[str]:
    """Lines as useb reads them (iterating the file: ``\\n``, ``\\r\\n`` or ``\\r`` end a line, nothing else),
    without the line end."""
    if not Path(path).is_file():
        raise MissingDataError(f"{path}: data file not found.")
    try:
        with open(path, encoding="utf-8") as handle:
            return [line.rstrip("\n") for line in handle]
    except UnicodeDecodeError as error:
        raise data_error(path, None, f"is not UTF-8 ({error}).") from None


def read_json(path: Path) -> Any:
    """The JSON document in ``path``; malformed JSON is a DataFileError naming the file and line."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as error:
        raise data_error(path, error.lineno, f"invalid JSON ({error.msg}).") from None
