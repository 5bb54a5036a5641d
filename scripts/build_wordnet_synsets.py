"""Derive harness/nn/data/wordnet-3.0-synsets.txt.xz from a WordNet 3.0 "dict" folder (Debian's wordnet-base:
/usr/share/wordnet). Run once by a maintainer; the derived file is committed, so users need no system package.

The file keeps what EDA's synonym replacement reads (harness.nn.wordnet): per part of speech, every synset's words
(lex ids, pointers and glosses dropped) and the morphological exception lists. The script checks that the lemma
index rebuilt from the synsets equals the folder's index files (same lemmas, same synsets per lemma), so the bundled
synonyms equal the folder's.

    python scripts/build_wordnet_synsets.py /usr/share/wordnet harness/nn/data/wordnet-3.0-synsets.txt.xz
"""

from __future__ import annotations

import lzma
import sys
from pathlib import Path

PARTS = ("noun", "verb", "adj", "adv")


def licence(folder: Path) -> list[str]:
    lines = []
    with open(folder / "data.noun", encoding="utf-8") as stream:
        for line in stream:
            if not line.startswith("  "):
                break
            lines.append(line.strip().split(" ", 1)[1].rstrip() if " " in line.strip() else "")
    return lines


def synsets(folder: Path, part: str) -> dict[int, list[str]]:
    found = {}
    with open(folder / f"data.{part}", "rb") as stream:
        while True:
            offset = stream.tell()
            raw = stream.readline()
            if not raw:
                break
            line = raw.decode("utf-8")
            if line.startswith(" "):
                continue
            fields = line.split()
            count = int(fields[3], 16)
            found[offset] = [word.split("(")[0] for word in fields[4 : 4 + 2 * count : 2]]
    return found


def index(folder: Path, part: str) -> dict[str, set[int]]:
    lemmas = {}
    for line in (folder / f"index.{part}").read_text(encoding="utf-8").splitlines():
        if line.startswith(" "):
            continue
        fields = line.split()
        count, pointers = int(fields[2]), int(fields[3])
        lemmas[fields[0]] = {int(offset) for offset in fields[6 + pointers : 6 + pointers + count]}
    return lemmas


def main(folder: Path, target: Path) -> None:
    out = [
        "# WordNet 3.0 synsets (words only) and exception lists, derived by scripts/build_wordnet_synsets.py",
        "# from Princeton WordNet 3.0 (Debian package wordnet-base 1:3.0-37). Licence of the database:",
    ]
    out += [f"# {line}" for line in licence(folder)]
    out.append("# Format: 'S <part> <word> <word> ...' one synset; 'X <part> <inflected> <base> ...' one exception.")
    for part in PARTS:
        found = synsets(folder, part)
        rebuilt: dict[str, set[int]] = {}
        for offset, words in found.items():
            for word in words:
                rebuilt.setdefault(word.lower(), set()).add(offset)
        if rebuilt != index(folder, part):
            raise SystemExit(f"{part}: the lemma index rebuilt from data.{part} differs from index.{part}")
        out += [f"S {part} {' '.join(words)}" for _, words in sorted(found.items())]
        exceptions = folder / f"{part}.exc"
        out += [
            f"X {part} {line.strip()}"
            for line in exceptions.read_text(encoding="utf-8").splitlines()
            if len(line.split()) >= 2
        ]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(lzma.compress(("\n".join(out) + "\n").encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))
    print(f"{target}: {target.stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
