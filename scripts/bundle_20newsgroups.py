"""Build the bundled 20 Newsgroups data of the `20ng` tasks from the raw bydate messages.

Input: a folder with ``20news-bydate-train.jsonl.gz`` and ``20news-bydate-test.jsonl.gz``, one raw message per line
(``{"id": "<newsgroup>/<file>", "label": ..., "label_name": "<newsgroup>", "text": "<raw message, latin-1
decoded>"}``; the conversion described in tasks/data/20newsgroups/SOURCE.md). Output:

- ``tasks/data/20newsgroups/20news-bydate-{train,test}.jsonl.xz``: ``{"id", "text"}`` per line, in the input's
  order, the text cleaned by ``harness.tasks.twenty_newsgroups.preprocess.clean_document`` (scikit-learn's
  ``remove=('headers', 'footers', 'quotes')``); xz-compressed (preset 9e; the xz format stores no time stamp, so the
  bytes are reproducible);
- ``tests/fixtures/20newsgroups-raw-sample.jsonl.gz``: a seeded sample of raw messages (``--sample-per-group`` per
  newsgroup and split, plus every message of the sample's groups that is empty after cleaning, up to 3), so the
  tests can re-derive bundled documents from raw text.

Usage::

    python scripts/bundle_20newsgroups.py --raw-dir ../shared/data/20newsgroups
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import lzma
from pathlib import Path

import numpy as np

from harness.tasks.twenty_newsgroups.corpus import SPLIT_FILES
from harness.tasks.twenty_newsgroups.preprocess import clean_document

logger = logging.getLogger("bundle_20newsgroups")
REPO = Path(__file__).resolve().parent.parent
RAW_FILES = {"train": "20news-bydate-train.jsonl.gz", "test": "20news-bydate-test.jsonl.gz"}
SAMPLE_SEED = 0
EMPTY_EXAMPLES = 3


def read_raw(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def write_xz(path: Path, rows: list[dict]) -> None:
    data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")
    path.write_bytes(lzma.compress(data, format=lzma.FORMAT_XZ, preset=9 | lzma.PRESET_EXTREME))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raw-dir", type=Path, required=True, help="folder with the raw bydate .jsonl.gz files")
    parser.add_argument("--out", type=Path, default=REPO / "tasks" / "data" / "20newsgroups")
    parser.add_argument(
        "--sample-out", type=Path, default=REPO / "tests" / "fixtures" / "20newsgroups-raw-sample.jsonl.gz"
    )
    parser.add_argument("--sample-per-group", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(SAMPLE_SEED)
    sample: list[dict] = []
    for split, raw_name in RAW_FILES.items():
        raw_rows = read_raw(args.raw_dir / raw_name)
        cleaned = [{"id": row["id"], "text": clean_document(row["text"])} for row in raw_rows]
        for row in raw_rows:
            if row["id"].split("/", 1)[0] != row["label_name"]:
                raise SystemExit(f"{raw_name}: id {row['id']!r} does not start with its label {row['label_name']!r}")
        path = args.out / SPLIT_FILES[split]
        write_xz(path, cleaned)
        empty = sum(1 for row in cleaned if not row["text"].strip())
        logger.info(
            "%s: %d documents (%d empty after cleaning) -> %s (%d bytes)",
            split,
            len(cleaned),
            empty,
            path,
            path.stat().st_size,
        )
        by_group: dict[str, list[int]] = {}
        for index, row in enumerate(raw_rows):
            by_group.setdefault(row["label_name"], []).append(index)
        chosen = []
        for group in sorted(by_group):
            members = by_group[group]
            chosen += [members[i] for i in rng.choice(len(members), size=args.sample_per_group, replace=False)]
        chosen += [index for index, row in enumerate(cleaned) if not row["text"].strip()][:EMPTY_EXAMPLES]
        sample += [{"split": split, "id": raw_rows[i]["id"], "text": raw_rows[i]["text"]} for i in sorted(set(chosen))]
    args.sample_out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(args.sample_out, "wb", mtime=0) as handle:
        handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in sample).encode("utf-8"))
    logger.info(
        "raw sample: %d messages -> %s (%d bytes)", len(sample), args.sample_out, args.sample_out.stat().st_size
    )


if __name__ == "__main__":
    main()
