"""Synonyms from a WordNet database folder (Princeton WordNet 3.0 "dict" files), for EDA's synonym replacement.

Reads ``index.{noun,verb,adj,adv}`` (lemma -> synset offsets), ``data.*`` (a synset's words, at its byte offset) and
the ``*.exc`` exception lists, and finds a word's base forms as NLTK's ``wordnet.morphy`` does (the exception list,
else the word itself and its detachment rules, kept when the form is a lemma), so ``synonyms(word)`` equals
``{lemma.name() for synset in nltk.corpus.wordnet.synsets(word) for lemma in synset.lemmas()}`` (underscores and
hyphens as spaces, lower-cased, the word itself left out) without NLTK.

Where the data comes from: no PyPI package ships the WordNet database (NLTK and ``wn`` download it at run time, which
this project never does), so it is read from a system package or an existing NLTK data folder:
:data:`SEARCH_PATHS` (Debian/Ubuntu ``wordnet-base``: ``/usr/share/wordnet``; NLTK's ``corpora/wordnet`` under the
usual nltk_data roots), or the folder in the environment variable :data:`ENVIRONMENT_VARIABLE`.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Callable

from harness.errors import HarnessError

ENVIRONMENT_VARIABLE = "HARNESS_WORDNET_DIR"
INSTALL_HINT = ("install the WordNet 3.0 database: `apt-get install wordnet-base` (Debian/Ubuntu; no PyPI package "
                f"ships it), or point {ENVIRONMENT_VARIABLE} at a WordNet 'dict' folder (e.g. NLTK's "
                "corpora/wordnet)")
SEARCH_PATHS = (
    Path("/usr/share/wordnet"),  # Debian/Ubuntu wordnet-base
    *(Path(root) / "corpora" / "wordnet" for root in (
        Path.home() / "nltk_data", "/usr/share/nltk_data", "/usr/local/share/nltk_data", "/usr/lib/nltk_data",
        "/usr/local/lib/nltk_data")),
)
PARTS_OF_SPEECH = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
# NLTK's WordNetCorpusReader.MORPHOLOGICAL_SUBSTITUTIONS (from WordNet's morphy(7)).
DETACHMENT_RULES = {
    "noun": (("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
             ("men", "man"), ("ies", "y")),
    "verb": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "adj": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "adv": (),
}


class WordNetMissingError(HarnessError):
    """No WordNet database folder was found."""


def wordnet_folder() -> Path:
    """The WordNet folder used: :data:`ENVIRONMENT_VARIABLE`, else the first of :data:`SEARCH_PATHS` with the files."""
    given = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    candidates = [Path(given)] if given else list(SEARCH_PATHS)
    for folder in candidates:
        if all((folder / f"{name}.{part}").is_file() for part in PARTS_OF_SPEECH for name in ("index", "data")):
            return folder
    where = f"{ENVIRONMENT_VARIABLE}={given} has no index.noun/data.noun files" if given else "none was found"
    raise WordNetMissingError(f"WordNet database needed ({where}); {INSTALL_HINT}.")


class WordNet:
    """Lemma lookup and synonyms over one WordNet folder (index files read once; data lines read by offset)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.offsets: dict[str, dict[str, list[int]]] = {}
        self.exceptions: dict[str, dict[str, list[str]]] = {}
        for part in PARTS_OF_SPEECH:
            lemmas: dict[str, list[int]] = {}
            with open(self.folder / f"index.{part}", encoding="utf-8") as stream:
                for line in stream:
                    if line.startswith(" "):
                        continue  # the license header
                    fields = line.split()
                    synsets, pointers = int(fields[2]), int(fields[3])
                    lemmas[fields[0]] = [int(offset) for offset in fields[6 + pointers:6 + pointers + synsets]]
            self.offsets[part] = lemmas
            exceptions: dict[str, list[str]] = {}
            path = self.folder / f"{part}.exc"
            if path.is_file():
                for line in path.read_text(encoding="utf-8").splitlines():
                    fields = line.split()
                    if len(fields) >= 2:
                        exceptions[fields[0]] = fields[1:]
            self.exceptions[part] = exceptions

    def base_forms(self, word: str, part: str) -> list[str]:
        """NLTK's ``_morphy``: the exception list's forms, else the word and its detached forms; lemmas only."""
        lemmas = self.offsets[part]
        if word in self.exceptions[part]:
            forms = [word, *self.exceptions[part][word]]
        else:
            forms = [word, *(word[:-len(old)] + new for old, new in DETACHMENT_RULES[part] if word.endswith(old))]
        return list(dict.fromkeys(form for form in forms if form in lemmas))

    def synset_words(self, part: str, offset: int) -> list[str]:
        with open(self.folder / f"data.{part}", "rb") as stream:
            stream.seek(offset)
            fields = stream.readline().decode("utf-8").split()
        count = int(fields[3], 16)
        words = fields[4:4 + 2 * count:2]
        return [word.split("(")[0] for word in words]  # adjectives may carry a marker: "big(a)"

    def synonyms(self, word: str) -> list[str]:
        form = word.lower().replace(" ", "_")
        names: set[str] = set()
        for part in PARTS_OF_SPEECH:
            for base in self.base_forms(form, part):
                for offset in self.offsets[part][base]:
                    names.update(name.replace("_", " ").replace("-", " ").lower()
                                 for name in self.synset_words(part, offset))
        return sorted(name for name in names if name != word.lower())


@lru_cache(maxsize=4)
def _wordnet(folder: Path) -> WordNet:
    return WordNet(folder)


def wordnet_synonyms() -> tuple[Callable[[str], list[str]], Path]:
    """``(word -> synonyms, the folder read)``; raises WordNetMissingError naming what to install."""
    folder = wordnet_folder()
    return _wordnet(folder).synonyms, folder
