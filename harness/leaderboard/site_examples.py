"""What the site's examples view reads: a cell's per-example model scores per seed (and a ranking task's top
hits), the gold, ids and groups its examples share, and the task's texts unless its licence forbids passing
them on: an STS-style task's scored pairs (``Task.evaluated_texts``), a ranking task's texts of just the queries and
documents the view shows for some pair of rows (``Task.ranked_texts``, :func:`shown_hits`), never its whole
corpus."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..evaluation.bootstrap import RankedHits
from .site_compare import CellData, collected_record

# Licence texts that forbid passing a task's sentences on: the site then shows example positions only.
NOT_REDISTRIBUTABLE = re.compile(
    r"not\s+(be\s+)?redistribut|no\s+(public\s+)?redistribution|may not be redistribut", re.I
)

# Per-example data of one score per scored pair against a gold value: the examples view shows the pairs' texts.
PAIR_STATISTICS = ("spearman", "pearson", "average_precision")

# Main scores of ranking tasks (retrieval, reranking): their per-query records may keep each query's top hits.
RANKING_SCORE = re.compile(r"^(map|mrr|ndcg|recall|precision|[rp]@)", re.I)

# Queries the examples view lists for a pair of ranking cells: app.js's rankDifferences(hitsA, hitsB, 25).
QUERIES_SHOWN = 25
# A query's or document's text is kept to this many characters (then "…"): the view shows the start, the kept text
# in a title; long BEIR documents stay out of the site.
TEXT_CHARACTERS = 1000


def _rounded(values: np.ndarray, digits: int = 4) -> list:
    return [round(float(v), digits) for v in values]


def cell_key(cell: Any) -> str:
    """A name for a cell's per-example file from the records it is made of (the same records, the same file)."""
    import hashlib

    named = "\n".join(f"{seed}:{cell.records.get(seed)}" for seed in sorted(cell.values))
    return hashlib.sha256(named.encode()).hexdigest()[:20]


def cell_payload(cell: Any, cells: CellData) -> tuple[dict, dict] | None:
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
    record = collected_record(cell.records[min(cell.values)]) or {}
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


def record_data_dir(record: dict, data_dir: Path | None) -> tuple[Path | None, str | None]:
    """The data folder a record's texts are read from: ``data_dir`` (``harness site --data-dir``) when given, else
    the one the record names (``data_dir``, as its run was given it), else None (the task's own lookup: bundled data,
    ``HARNESS_DATA_DIR``); with why none can be used (the record names a folder that is not here)."""
    if data_dir is not None:
        return Path(data_dir), None
    named = record.get("data_dir")
    if not named:
        return None, None
    if not Path(named).is_dir():
        return None, (
            f"the record was computed with --data-dir {named}, which is not here; pass `harness site --data-dir` "
            "with that data"
        )
    return Path(named), None


def _task_of_record(
    record: dict, registry: Any, data_dir: Path | None = None, checksums: dict | None = None
) -> tuple[Any, Any, str] | dict:
    """The task a record was evaluated with (its options) reading the data the record names
    (:func:`record_data_dir`), the context it read its data under and its licence; or, as a texts payload, why its
    texts are not shown (no registry, not installed, a licence that forbids them, other data here than the record's
    ``dataset_checksum`` names: texts are shown only from the data the scores were computed on). ``checksums``
    keeps each task's data checksum for one site build (a corpus is hashed once, however many views read it)."""
    if not isinstance(record.get("task"), dict):
        return {"withheld": "its record cannot be read"}
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
    from ..plugin_api import EvalContext
    from ..profiles import get_profile

    folder, problem = record_data_dir(record, data_dir)
    if problem is not None:
        return {"withheld": problem}
    try:
        task = plugin.factory(task_record.get("options") or {}, folder)
        context = EvalContext(
            get_profile(record["model"]["profile"]), "cpu", int(record["seed"]), 32, progress=False, data_dir=folder
        )
    except Exception as exc:
        return {"withheld": f"the task's texts could not be read here ({exc})"}
    problem = _data_problem(task, record, folder, {} if checksums is None else checksums)
    if problem is not None:
        return {"withheld": problem}
    return task, context, licence


def _data_problem(task: Any, record: dict, folder: Path | None, checksums: dict) -> str | None:
    """Why the data ``task`` reads here is not the data ``record`` was computed on (its ``dataset_checksum``), or
    None when it is."""
    where = f"--data-dir {folder}" if folder is not None else "the task's default data"
    task_record = record["task"]
    key = (task_record.get("name"), json.dumps(task_record.get("options") or {}, sort_keys=True, default=str), folder)
    if key not in checksums:
        try:
            checksums[key] = (task.check_data(), None)
        except NotImplementedError:
            checksums[key] = (
                None,
                "the task cannot check its data (no check_data), so its texts cannot be matched to the record's",
            )
        except Exception as exc:  # the data is not here, or damaged: positions only, and why
            checksums[key] = (None, f"the task's data could not be checked in {where} ({exc})")
    here, problem = checksums[key]
    if problem is not None:
        return problem
    recorded = record.get("dataset_checksum")
    if here != recorded:
        return (
            f"the data in {where} is not the data the record was computed on (dataset checksum "
            f"{str(recorded)[:12]}... recorded, {str(here)[:12]}... here); pass `harness site --data-dir` with "
            "that data"
        )
    return None


def texts_payload(
    record_path: str, count: int, registry: Any, data_dir: Path | None = None, checksums: dict | None = None
) -> dict:
    """The task's scored pairs in the order of its per-example data, or why they are not shown."""
    opened = _task_of_record(collected_record(record_path) or {}, registry, data_dir, checksums)
    if isinstance(opened, dict):
        return opened
    task, context, licence = opened
    try:
        evaluated = task.evaluated_texts(context)
    except Exception as exc:  # the data is not here: positions only, and why
        return {"withheld": f"the task's texts could not be read here ({exc})"}
    pairs = list(getattr(evaluated, "pairs", ()) or ())
    if not pairs:
        return {"withheld": "the task does not say which texts each example scores (Task.evaluated_texts)"}
    if len(pairs) != count:
        return {"withheld": f"the task names {len(pairs)} scored pairs for {count} examples; positions only"}
    return {"pairs": [[first, second] for first, second in pairs], "license": licence}


def shown_hits(cell_a: dict, cell_b: dict, ids: list[str] | None) -> tuple[set[str], set[str]]:
    """The query ids and document ids the examples view shows for two cells (their payloads, A and B; ``ids`` the
    examples' shared ids), chosen as app.js chooses them: the first seed both keep hits of (seeds sorted as text),
    its QUERIES_SHOWN queries whose gold rank differs most (not within the depth: depth + 1; ties by position),
    each with A's gold documents and both models' top hits. Nothing for cells over other examples or of another
    statistic (the view shows those otherwise)."""
    if cell_a["examples"] != cell_b["examples"] or cell_a["statistic"] in (*PAIR_STATISTICS, "f1_macro"):
        return set(), set()
    common = sorted(s for s in cell_a["seeds"] if "hits" in cell_a["seeds"][s] and "hits" in cell_b["seeds"].get(s, {}))
    if not common:
        return set(), set()
    hits_a, hits_b = cell_a["seeds"][common[0]]["hits"], cell_b["seeds"][common[0]]["hits"]

    def rank(hits: dict, position: int) -> int:
        return hits["gold_rank"][position] or hits["depth"] + 1

    order = sorted(range(len(hits_a["gold_rank"])), key=lambda i: (-abs(rank(hits_a, i) - rank(hits_b, i)), i))[
        :QUERIES_SHOWN
    ]
    queries = {ids[i] for i in order} if ids else set()
    documents = {doc for i in order for doc in (*hits_a["gold"][i], *hits_a["top"][i], *hits_b["top"][i])}
    return queries, documents


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARACTERS else text[: TEXT_CHARACTERS - 1].rstrip() + "…"


def ranked_texts_payload(
    record_path: str,
    queries: set[str],
    documents: set[str],
    registry: Any,
    data_dir: Path | None = None,
    checksums: dict | None = None,
) -> dict:
    """The texts of the query and document ids a ranking task's examples view shows (``Task.ranked_texts``, each
    cut to TEXT_CHARACTERS), or why they are not shown (then the view names them by id)."""
    opened = _task_of_record(collected_record(record_path) or {}, registry, data_dir, checksums)
    if isinstance(opened, dict):
        return opened
    task, context, licence = opened
    hook = getattr(task, "ranked_texts", None)
    try:
        texts = hook(context, sorted(queries), sorted(documents)) if callable(hook) else None
    except Exception as exc:  # the data is not here or names other ids: ids only, and why
        return {"withheld": f"the task's texts could not be read here ({exc})"}
    if texts is None:
        return {"withheld": "the task does not provide its queries' and documents' texts (Task.ranked_texts)"}
    given_queries, given_documents = dict(texts.queries), dict(texts.documents)
    return {
        "queries": {i: _cut(str(given_queries[i])) for i in sorted(queries) if i in given_queries},
        "documents": {i: _cut(str(given_documents[i])) for i in sorted(documents) if i in given_documents},
        "license": licence,
    }
