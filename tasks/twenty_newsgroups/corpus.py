"""The 20 Newsgroups corpus as the tasks read it: the bundled cleaned documents, the newsgroups and their parent
groups (thesis tables 3.8, 3.9), the dev split, and the model-independent word cut.

Files: ``<folder>/20news-bydate-train.jsonl.xz`` and ``20news-bydate-test.jsonl.xz``, one JSON object per line,
``{"id": "<newsgroup>/<message file>", "text": "<cleaned text>"}`` (``preprocess.clean_document`` already applied);
the newsgroup is the id's first part.
"""

from __future__ import annotations

import json
import lzma
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from harness import MissingDataError, data_error

SPLIT_FILES = {"train": "20news-bydate-train.jsonl.xz", "test": "20news-bydate-test.jsonl.xz"}

# The 20 newsgroups in scikit-learn's label order (alphabetical, as load_files numbers the folders).
GROUPS = (
    "alt.atheism",
    "comp.graphics",
    "comp.os.ms-windows.misc",
    "comp.sys.ibm.pc.hardware",
    "comp.sys.mac.hardware",
    "comp.windows.x",
    "misc.forsale",
    "rec.autos",
    "rec.motorcycles",
    "rec.sport.baseball",
    "rec.sport.hockey",
    "sci.crypt",
    "sci.electronics",
    "sci.med",
    "sci.space",
    "soc.religion.christian",
    "talk.politics.guns",
    "talk.politics.mideast",
    "talk.politics.misc",
    "talk.religion.misc",
)
# Thesis table 3.9 (after http://qwone.com/~jason/20Newsgroups/); the label texts are the thesis code's
# (``load_prompted_20newsgroups``: "Computers", where the table prints "Computer"), since they are the prompt text.
PARENT_OF = {
    "comp.graphics": "Computers",
    "comp.os.ms-windows.misc": "Computers",
    "comp.sys.ibm.pc.hardware": "Computers",
    "comp.sys.mac.hardware": "Computers",
    "comp.windows.x": "Computers",
    "rec.autos": "Recreational",
    "rec.motorcycles": "Recreational",
    "rec.sport.baseball": "Recreational",
    "rec.sport.hockey": "Recreational",
    "sci.crypt": "Science",
    "sci.electronics": "Science",
    "sci.med": "Science",
    "sci.space": "Science",
    "misc.forsale": "For Sale",
    "talk.politics.misc": "Politics",
    "talk.politics.guns": "Politics",
    "talk.politics.mideast": "Politics",
    "talk.religion.misc": "Religion",
    "alt.atheism": "Religion",
    "soc.religion.christian": "Religion",
}
PARENTS = ("Computers", "Recreational", "Science", "For Sale", "Politics", "Religion")

# The thesis' dev split (thesis code, load_prompted_20newsgroups(validation_size=0.1)): 0.1 / 0.6 of the train
# split, i.e. about 10% of the whole corpus (1886 documents; table 3.8).
THESIS_DEV_FRACTION = 0.1 / 0.6
THESIS_SPLIT_SEED = 42


@dataclass(frozen=True)
class Document:
    id: str  # "<newsgroup>/<message file>", e.g. "alt.atheism/49960"
    text: str  # cleaned: headers, signature block and quotes removed

    @property
    def group(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def parent(self) -> str:
        return PARENT_OF[self.group]


def read_split(path: Path) -> list[Document]:
    """The documents of one split file; a malformed line is a DataFileError naming the file and line."""
    if not path.is_file():
        raise MissingDataError(f"{path}: data file not found.")
    documents: list[Document] = []
    seen: dict[str, int] = {}
    try:
        with lzma.open(path, "rt", encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                documents.append(_document(path, line_number, line, seen))
    except (lzma.LZMAError, EOFError) as exc:
        raise data_error(path, None, f"not a readable .xz file ({exc}).") from None
    except UnicodeDecodeError as exc:
        raise data_error(path, None, f"not UTF-8 text ({exc}).") from None
    if not documents:
        raise data_error(path, None, "the file holds no documents.")
    return documents


def _document(path: Path, line_number: int, line: str, seen: dict[str, int]) -> Document:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise data_error(path, line_number, f"not a JSON object ({exc.msg}).") from None
    if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("text"), str):
        raise data_error(path, line_number, 'expected {"id": "<newsgroup>/<file>", "text": "..."} with string values.')
    group, _slash, name = row["id"].partition("/")
    if group not in PARENT_OF:
        raise data_error(
            path,
            line_number,
            f"unknown newsgroup {group!r} in id {row['id']!r}; the 20 newsgroups are: {', '.join(GROUPS)}.",
        )
    if not name:
        raise data_error(path, line_number, f"id {row['id']!r} names no message file (expected <newsgroup>/<file>).")
    if row["id"] in seen:
        raise data_error(path, line_number, f"duplicate id {row['id']!r} (first on line {seen[row['id']]}).")
    seen[row["id"]] = line_number
    return Document(row["id"], row["text"])


def thesis_dev_indices(documents: list[Document]) -> list[int]:
    """The thesis' dev documents among the train split (indices into ``documents``), recomputed exactly.

    The thesis code reads SetFit/20_newsgroups, which is ``fetch_20newsgroups(subset="train")`` with its defaults:
    scikit-learn's ``load_files`` lists each newsgroup's files in sorted (string) order, newsgroups alphabetically,
    and shuffles them with ``RandomState(0)``; ``fetch_20newsgroups`` shuffles again with ``RandomState(42)``. The
    thesis code then calls Hugging Face datasets' ``train_test_split(test_size=0.1 / 0.6, seed=42)``, whose test
    part (its dev split) is the first ``ceil(0.1 / 0.6 * n)`` rows of ``numpy.random.default_rng(42).permutation(n)``.
    On the bydate train split this gives 1886 documents with exactly the per-group counts of thesis table 3.8."""
    order = sorted(range(len(documents)), key=lambda i: (documents[i].group, documents[i].id.split("/", 1)[1]))
    positions = np.array(order)
    for seed in (0, 42):  # load_files, then fetch_20newsgroups
        shuffled = np.arange(len(positions))
        np.random.RandomState(seed).shuffle(shuffled)
        positions = positions[shuffled]
    dev_count = math.ceil(THESIS_DEV_FRACTION * len(documents))
    permutation = np.random.default_rng(THESIS_SPLIT_SEED).permutation(len(documents))
    return sorted(positions[permutation[:dev_count]].tolist())


def stratified_dev_indices(documents: list[Document], seed: int) -> list[int]:
    """A seeded dev split of the thesis' size (``ceil(n / 6)``: 1886 of 11314), stratified by newsgroup
    (scikit-learn's ``train_test_split(stratify=...)``)."""
    from sklearn.model_selection import train_test_split

    dev_count = math.ceil(THESIS_DEV_FRACTION * len(documents))
    _train, dev = train_test_split(
        np.arange(len(documents)),
        test_size=dev_count,
        random_state=seed,
        stratify=[document.group for document in documents],
    )
    return sorted(dev.tolist())


def cut_words(text: str, max_words: int) -> str:
    """``text`` up to the end of its ``max_words``-th whitespace-separated word (unchanged if it has no more;
    ``max_words`` 0: no cut). The text itself is kept as it is, white space included."""
    if max_words <= 0:
        return text
    match = _first_words(max_words).match(text)
    return text[: match.end()] if match else text


@lru_cache(maxsize=8)
def _first_words(count: int) -> re.Pattern:
    """Leading white space and ``count`` words (a word cannot be split: ``\\S+`` must be followed by white space or
    end the match)."""
    return re.compile(rf"\s*(?:\S+\s+){{{count - 1}}}\S+")
