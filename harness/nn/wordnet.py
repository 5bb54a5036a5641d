"""Synonyms from WordNet 3.0, for EDA's synonym replacement (PaSeR).

The data ships with harness: ``harness/nn/data/wordnet-3.0-synsets.txt.xz`` holds every synset's words and the
morphological exception lists of Princeton WordNet 3.0, derived from the WordNet "dict" files by
``scripts/build_wordnet_synsets.py`` (which checks that the lemma index rebuilt from the synsets equals WordNet's
index files); its header carries WordNet's licence and ``harness/nn/data/SOURCE.md`` says where it comes from. So
the default needs no system package and no download. :data:`ENVIRONMENT_VARIABLE` may name another WordNet 3.0
"dict" folder (e.g. NLTK's ``corpora/wordnet``), read the same way.

A word's base forms are found as NLTK's ``wordnet.morphy`` finds them (the exception list, else the word itself and
its detachment rules, kept when the form is a lemma), so ``synonyms(word)`` equals ``{lemma.name() for synset in
nltk.corpus.wordnet.synsets(word) for lemma in synset.lemmas()}`` (underscores and hyphens as spaces, lower-cased,
the word itself left out) without NLTK.
"""

from __future__ import annotations

import lzma
import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from harness.errors import HarnessError

ENVIRONMENT_VARIABLE = "HARNESS_WORDNET_DIR"
BUNDLED = Path(__file__).resolve().parent / "data" / "wordnet-3.0-synsets.txt.xz"
INSTALL_HINT = (
    f"reinstall harness (its WordNet data {BUNDLED.name} ships in harness/nn/data), or point "
    f"{ENVIRONMENT_VARIABLE} at a WordNet 3.0 'dict' folder (e.g. NLTK's corpora/wordnet)"
)
PARTS_OF_SPEECH = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
# NLTK's WordNetCorpusReader.MORPHOLOGICAL_SUBSTITUTIONS (from WordNet's morphy(7)).
DETACHMENT_RULES = {
    "noun": (
        ("s", ""),
        ("ses", "s"),
        ("ves", "f"),
        ("xes", "x"),
        ("zes", "z"),
        ("ches", "ch"),
        ("shes", "sh"),
        ("men", "man"),
        ("ies", "y"),
    ),
    "verb": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "adj": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "adv": (),
}


class WordNetMissingError(HarnessError):
    """No WordNet data was found."""


def wordnet_source() -> Path:
    """The WordNet data used: the folder in :data:`ENVIRONMENT_VARIABLE` when set, else the bundled file."""
    given = os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if given:
        folder = Path(given)
        if all((folder / f"{name}.{part}").is_file() for part in PARTS_OF_SPEECH for name in ("index", "data")):
            return folder
        raise WordNetMissingError(
            f"WordNet data needed ({ENVIRONMENT_VARIABLE}={given} has no index.noun/data.noun "
            f"files); unset it to use the bundled data, or point it at a WordNet 'dict' folder."
        )
    if not BUNDLED.is_file():
        raise WordNetMissingError(f"WordNet data needed ({BUNDLED} is missing); {INSTALL_HINT}.")
    return BUNDLED


def wordnet_folder() -> Path:
    """Deprecated name of :func:`wordnet_source` (it may now return the bundled file)."""
    return wordnet_source()


def _folder_synsets(folder: Path, part: str) -> list[list[str]]:
    """Every synset's words of ``data.<part>`` (lex ids dropped; adjectives' markers such as ``big(a)`` cut)."""
    synsets = []
    with open(folder / f"data.{part}", encoding="utf-8") as stream:
        for line in stream:
            if line.startswith(" "):
                continue  # the licence header
            fields = line.split()
            count = int(fields[3], 16)
            synsets.append([word.split("(")[0] for word in fields[4 : 4 + 2 * count : 2]])
    return synsets


class WordNet:
    """Lemma lookup and synonyms over WordNet's synsets (per part of speech: synsets as word lists, exceptions)."""

    def __init__(self, synsets: dict[str, list[list[str]]], exceptions: dict[str, dict[str, list[str]]]):
        self.synsets = synsets
        self.exceptions = exceptions
        self.lemmas: dict[str, dict[str, list[int]]] = {}
        for part in PARTS_OF_SPEECH:
            lemmas: dict[str, list[int]] = {}
            for number, words in enumerate(synsets.get(part, [])):
                for word in words:
                    found = lemmas.setdefault(word.lower(), [])
                    if not found or found[-1] != number:
                        found.append(number)
            self.lemmas[part] = lemmas

    @classmethod
    def from_folder(cls, folder: Path) -> WordNet:
        """A WordNet 3.0 "dict" folder (``data.*`` and ``*.exc``)."""
        synsets = {part: _folder_synsets(folder, part) for part in PARTS_OF_SPEECH}
        exceptions: dict[str, dict[str, list[str]]] = {}
        for part in PARTS_OF_SPEECH:
            path = folder / f"{part}.exc"
            lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
            exceptions[part] = {fields[0]: fields[1:] for fields in map(str.split, lines) if len(fields) >= 2}
        return cls(synsets, exceptions)

    @classmethod
    def from_bundle(cls, path: Path) -> WordNet:
        """The bundled file: lines ``S <part> <word> ...`` (a synset) and ``X <part> <inflected> <base> ...``."""
        synsets: dict[str, list[list[str]]] = {part: [] for part in PARTS_OF_SPEECH}
        exceptions: dict[str, dict[str, list[str]]] = {part: {} for part in PARTS_OF_SPEECH}
        for line in lzma.decompress(Path(path).read_bytes()).decode("utf-8").splitlines():
            fields = line.split()
            if len(fields) < 3 or fields[0] not in ("S", "X"):
                continue  # the header (licence, format)
            if fields[0] == "S":
                synsets[fields[1]].append(fields[2:])
            elif len(fields) >= 4:
                exceptions[fields[1]][fields[2]] = fields[3:]
        return cls(synsets, exceptions)

    def base_forms(self, word: str, part: str) -> list[str]:
        """NLTK's ``_morphy``: the exception list's forms, else the word and its detached forms; lemmas only."""
        lemmas = self.lemmas[part]
        if word in self.exceptions[part]:
            forms = [word, *self.exceptions[part][word]]
        else:
            forms = [word, *(word[: -len(old)] + new for old, new in DETACHMENT_RULES[part] if word.endswith(old))]
        return list(dict.fromkeys(form for form in forms if form in lemmas))

    def synonyms(self, word: str) -> list[str]:
        form = word.lower().replace(" ", "_")
        names: set[str] = set()
        for part in PARTS_OF_SPEECH:
            for base in self.base_forms(form, part):
                for number in self.lemmas[part][base]:
                    names.update(
                        name.replace("_", " ").replace("-", " ").lower() for name in self.synsets[part][number]
                    )
        return sorted(name for name in names if name != word.lower())


@lru_cache(maxsize=4)
def _wordnet(source: Path) -> WordNet:
    return WordNet.from_bundle(source) if source.is_file() else WordNet.from_folder(source)


def wordnet_synonyms() -> tuple[Callable[[str], list[str]], Path]:
    """``(word -> synonyms, the data read)``; raises WordNetMissingError saying what to do."""
    source = wordnet_source()
    return _wordnet(source).synonyms, source
