"""The silver-pair artifact: every candidate pair a distillation recipe proposed, with its teacher score and whether
it was kept as a silver pair, plus the gold scores; the input of thesis figure 6.4 (the density of teacher scores on
each sampler's silver pairs, Thakur et al. 2021 section 4; thesis 6.2).

The recipe that writes it (``augsbert``) and the plot that reads it (``silver-density``) are separate plugins and
import nothing from each other; the file format lives here. A file is ``<artifact_dir>/silver_pairs.json``, under
the store's per-spec artifact folders ``<results>/artifacts/<model-key>/seed-<seed>/``, recognised by its
``artifact`` field. Version 1: top-level fields chosen by the writer, then ``columns`` ``["first", "second",
"teacher_score", "kept"]`` and one ``pairs`` row per candidate (sentence indices, score rounded to 6 digits, 0/1).

Deviations: none (a file format).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.files import atomic_write_text
from harness.store_files import read_store_text

logger = logging.getLogger(__name__)

ARTIFACT = "silver_pairs.json"
ARTIFACT_KIND = "augmented-sbert-silver-pairs"
ARTIFACT_VERSION = 1
COLUMNS = ["first", "second", "teacher_score", "kept"]
ARTIFACT_FOLDERS = "artifacts/*/seed-*"  # <results>/artifacts/<model-key>/seed-<seed>/ (the store's layout)


def write_silver_pairs(
    directory: Path,
    fields: dict[str, Any],
    candidates: Iterable[tuple[int, int]],
    candidate_scores: Iterable[float],
    kept: Iterable[int],
) -> Path:
    """Write ``<directory>/silver_pairs.json`` atomically: ``fields`` (JSON values) and one row per candidate
    (indices into ``fields["sentences"]``, its teacher score, 1 if its position is in ``kept``); returns the path."""
    kept_set = {int(row) for row in kept}
    payload = {
        "artifact": ARTIFACT_KIND,
        "version": ARTIFACT_VERSION,
        **fields,
        "columns": COLUMNS,
        "pairs": [
            [i, j, round(float(score), 6), int(row in kept_set)]
            for row, ((i, j), score) in enumerate(zip(candidates, candidate_scores))
        ],
    }
    path = Path(directory) / ARTIFACT
    atomic_write_text(path, json.dumps(payload, separators=(",", ":")) + "\n")
    return path


def read_silver_pairs(results_dir: Path) -> list[dict]:
    """Every readable silver-pair artifact under the store ``results_dir`` (each with its ``_path``); a damaged one
    is logged and skipped rather than breaking every plot."""
    artifacts = []
    for path in sorted(Path(results_dir).glob(f"{ARTIFACT_FOLDERS}/{ARTIFACT}")):
        try:
            payload = json.loads(read_store_text(path, results_dir))  # never a FIFO or a link out of the store
        except (OSError, ValueError, HarnessError):
            logger.warning("skipping unreadable silver-pair artifact %s", path)
            continue
        if payload.get("artifact") == ARTIFACT_KIND:
            payload["_path"] = str(path)
            artifacts.append(payload)
    return artifacts
