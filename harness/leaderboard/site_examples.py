"""What the site's examples view reads: a cell's per-example model scores per seed (and a ranking task's top
hits), the gold, ids and groups its examples share, and the task's texts unless its licence forbids passing
them on."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluation.bootstrap import RankedHits
from .site_compare import _CellData, _read_record

# Licence texts that forbid passing a task's sentences on: the site then shows example positions only.
NOT_REDISTRIBUTABLE = re.compile(
    r"not\s+(be\s+)?redistribut|no\s+(public\s+)?redistribution|may not be redistribut", re.I
)

# Per-example data of one score per scored pair against a gold value: the examples view shows the pairs' texts.
PAIR_STATISTICS = ("spearman", "pearson", "average_precision")

# Main scores of ranking tasks (retrieval, reranking): their per-query records may keep each query's top hits.
RANKING_SCORE = re.compile(r"^(map|mrr|ndcg|recall|precision|[rp]@)", re.I)


def _rounded(values: np.ndarray, digits: int = 4) -> list:
    return [round(float(v), digits) for v in values]


def _json_number(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _cell_key(cell: Any) -> str:
    """A name for a cell's per-example file from the records it is made of (the same records, the same file)."""
    import hashlib

    named = "\n".join(f"{seed}:{cell.records.get(seed)}" for seed in sorted(cell.values))
    return hashlib.sha256(named.encode()).hexdigest()[:20]


def _cell_payload(cell: Any, cells: _CellData) -> tuple[dict, dict] | None:
    """A cell's per-example model arrays per seed (what the examples view reads) and, apart, what names its
    examples (gold, ids, groups: the same for every row over these examples, so written once and shared), or None
    without per-example data."""
    seeds, shared = {}, {}
    for seed in sorted(cell.values):
        path = cell.records.get(seed)
        data = cells.run(path)[0] if path else None
        if data is None:
            return None
        seeds[str(seed)] = {name: _rounded(values) for name, values in data.arrays.items() if name != "gold"}
        if data.hits is not None:
            seeds[str(seed)]["hits"] = hits_payload(data.hits)
        if not shared:
            shared = {"identity": data.identity()}
            if "gold" in data.arrays:
                shared["gold"] = _rounded(data.arrays["gold"])
            if data.ids is not None:
                shared["ids"] = [str(i) for i in data.ids.tolist()]
            if data.groups is not None:
                shared["groups"] = data.groups.tolist()
    first = cells.run(cell.records[min(cell.values)])[0]
    record = _read_record(cell.records[min(cell.values)]) or {}
    main_score = str((record.get("task") or {}).get("main_score") or "")
    payload = {
        "statistic": first.statistic,
        "aggregate": first.aggregate,
        "examples": shared["identity"][:24],
        "ranking": bool(RANKING_SCORE.match(main_score)),  # the view says when such a record keeps no hits
    }
    return {**payload, "seeds": seeds}, shared


def hits_payload(hits: RankedHits) -> dict:
    """A ranking task's stored top hits as the examples view reads them: per query its top document ids and gold
    document ids (padding dropped, ids as text), the rank of its best-ranked gold document (0: not within
    ``depth``)."""

    def rows(array: np.ndarray) -> list[list[str]]:
        padding = -1 if array.dtype.kind in "iu" else ""
        return [[str(value) for value in row.tolist() if value != padding] for row in array]

    return {"top": rows(hits.top), "gold": rows(hits.gold), "gold_rank": hits.gold_rank.tolist(), "depth": hits.depth}


def _texts_payload(record_path: str, count: int, registry: Any) -> dict:
    """The task's scored pairs in the order of its per-example data, or why they are not shown."""
    record = json.loads(Path(record_path).read_text())
    task_record = record["task"]
    if registry is None:
        return {"withheld": "the task's texts need its plugin (build the site where the task is installed)"}
    try:
        plugin = registry.task(task_record["name"])
    except Exception as exc:  # a task no longer installed: positions only
        return {"withheld": f"task {task_record['name']!r} is not installed here ({exc})"}
    licence = getattr(plugin.metadata, "license", "")
    if NOT_REDISTRIBUTABLE.search(licence or ""):
        return {"withheld": f"its licence forbids redistributing the texts: {licence}", "license": licence}
    try:
        from ..plugin_api import EvalContext
        from ..profiles import get_profile

        task = plugin.factory(task_record.get("options") or {}, None)
        profile = get_profile(record["model"]["profile"])
        evaluated = task.evaluated_texts(EvalContext(profile, "cpu", int(record["seed"]), 32, progress=False))
    except Exception as exc:  # the data is not here: positions only, and why
        return {"withheld": f"the task's texts could not be read here ({exc})"}
    pairs = list(getattr(evaluated, "pairs", ()) or ())
    if not pairs:
        return {"withheld": "the task does not say which texts each example scores (Task.evaluated_texts)"}
    if len(pairs) != count:
        return {"withheld": f"the task names {len(pairs)} scored pairs for {count} examples; positions only"}
    return {"pairs": [[first, second] for first, second in pairs], "license": licence}
