"""``harness contamination``: the measured train/test overlap of stored records (harness.contamination).

A record computed since the run stages record training provenance carries its ``contamination`` as measured in the
run ("how": "recorded"). An older record (all of ``published/`` before harness 0.3) is measured here from what the
record itself says: its model's training source and the extra sources its plugin declares
(``ModelPlugin.training_sources``, e.g. Augmented SBERT's teacher data), each cut as that training cut it (the
record's applied ``max_train_examples``, the teacher's own budget, the record's seed), read again from the data, and
its task's evaluated texts; "how": "derived from the record". The checksum of the training source read now is compared
with the record's ``training_data_checksum`` ("source_checksum_matches"). Data a recipe made during training (silver
pairs) exists only in that run and cannot be derived; the record says so ("made": "not derivable").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import HarnessError
from ..files import read_store_bytes
from ..profiles import get_profile
from ..registry import Registry
from ..spec import ModelSpec
from ..store import Store, examples_path
from .config import RunConfig
from .models import Models
from .record import split_record_stem

logger = logging.getLogger(__name__)
DERIVED = "derived from the record"


@dataclass
class Derived:
    path: Path
    record: dict
    contamination: dict | None  # None: not measurable (untrained, or a task without evaluated texts)
    reason: str = ""


def record_spec(record: dict) -> ModelSpec:
    """The record's model spec as stored (its options and budget as they were, whatever the plugin declares now)."""
    model = record["model"]
    return ModelSpec(
        model["name"],
        dict(model["options"]),
        model["backbone"],
        model["profile"],
        model.get("train_on"),
        model["label"],
        bool(model.get("recipe")),
        dict(model.get("budget") or {}),
    )


def record_limit(record: dict) -> Any:
    """The cut of the training source the record's training applied, else asked for (None: no cut), else the
    profile's."""
    limit: Any = get_profile(record["model"]["profile"]).max_train_examples
    budget = record.get("budget") or {}
    for stated in (record["model"].get("budget") or {}, budget.get("requested") or {}, budget.get("applied") or {}):
        if "max_train_examples" in stated:
            limit = stated["max_train_examples"]
    return limit


class OverlapDeriver:
    """Measures stored records' overlap from their own fields (one task object and one read per source)."""

    def __init__(self, registry: Registry, store: Store, data_dir: Path | None = None):
        self.registry = registry
        self.store = store
        config = RunConfig(models=[], tasks=[], results_dir=store.root, data_dir=data_dir, progress=False)
        self.models = Models(registry, config, store)

    def derive(self, record: dict) -> dict | None:
        """The record's ``contamination`` derived from its spec and the data now; None when not measurable."""
        spec = record_spec(record)
        if spec.train_on is None or record.get("status") != "ok":
            return None
        provenance = self.models.derived_provenance(
            spec, get_profile(spec.profile), int(record["seed"]), record_limit(record), DERIVED
        )
        data_dir = self.models.config.data_dir
        task = self.registry.task(record["task"]["name"]).factory(record["task"]["options"], data_dir)
        profile = get_profile(spec.profile)
        if (record.get("profile") or {}).get("max_eval_examples") != profile.max_eval_examples:
            raise HarnessError(
                f"{record.get('_path')}: computed on another evaluation cut than profile "
                f"{profile.name!r} gives now; its overlap cannot be derived"
            )
        evaluated = task.evaluated_texts(self.models.builder.eval_context(profile, "cpu", int(record["seed"])))
        measured = self.models.contamination(spec, int(record["seed"]), evaluated, provenance)
        if measured is None:
            return None
        main = provenance["sources"][0]
        splits = self.models.builder.source_splits(main["source"], tuple(main["kinds"]), profile, int(record["seed"]))
        recipe = spec.recipe
        return {
            **measured,
            "source_checksum_matches": splits.checksum == record.get("training_data_checksum"),
            **(
                {
                    "made": "not derivable (data a recipe made during training, e.g. silver pairs, exists only in "
                    "that run; their sentences come from the sources listed)"
                }
                if recipe
                else {}
            ),
        }

    def records(self, missing_only: bool = True) -> list[Derived]:
        """Every ok record of a trained spec with its derived measurement (``missing_only``: those without one)."""
        found = []
        for record in self.store.records():
            if record.get("status") != "ok" or not (record.get("model") or {}).get("train_on"):
                continue
            if missing_only and isinstance(record.get("contamination"), dict):
                found.append(Derived(Path(record["_path"]), record, record["contamination"]))
                continue
            try:
                found.append(Derived(Path(record["_path"]), record, self.derive(record)))
            except HarnessError as exc:
                found.append(Derived(Path(record["_path"]), record, None, str(exc)))
        return found

    def write(self, item: Derived) -> None:
        """Store the record again with its derived ``contamination`` (sealed again; its side file kept)."""
        record = {key: value for key, value in item.record.items() if key != "_path"}
        record["contamination"] = item.contamination
        # the file name gives the task key and runtime (`<task>@onnx.json`); Store.write names the file again
        task_key, _ = split_record_stem(item.path.stem)
        model_key, seed = item.path.parts[-3], int(item.path.parts[-2].split("-", 1)[1])
        side_file = examples_path(item.path)
        examples = read_store_bytes(side_file, self.store.root) if side_file.is_file() else None
        self.store.write(model_key, seed, task_key, record, examples)


def overlap_row(item: Derived) -> list[Any]:
    record, measured = item.record, item.contamination
    label = record["model"]["label"] + f" [train: {record['model']['train_on']}]"
    if measured is None:
        return [label, record["seed"], record["task"]["label"], "", "", "", item.reason or "not measured"]
    return [
        label,
        record["seed"],
        record["task"]["label"],
        f"{measured['test_pairs_seen']}/{measured['test_pairs']}",
        f"{measured['test_sentences_seen']}/{measured['test_sentences']}",
        ", ".join(
            f"{s['source']} ({s.get('train_examples', s.get('max_train_examples') or 'all')})"
            for s in measured["training_data"]
        ),
        measured.get("how", "recorded"),
    ]
