"""``harness contamination``: the measured train/test overlap of stored records (harness.contamination).

A record computed since the run stages record training provenance carries its ``contamination`` as measured in the
run ("how": "recorded"). An older record (all of ``published/`` before harness 0.3) is measured here from what the
record itself says: its model's training source and the extra sources its plugin declares
(``ModelPlugin.training_sources``, e.g. Augmented SBERT's teacher data), each cut as that training cut it (the
record's applied ``max_train_examples``, the teacher's own budget, the record's seed), read again from the data, and
its task's evaluated texts; "how": "derived from the record". The checksum of the training source read now is compared
with the record's ``training_data_checksum`` ("source_checksum_matches"). Data a recipe made during training (silver
pairs) exists only in that run and cannot be derived; the record says so ("made": "not derivable").

Rewriting a record is a write like any other: it is measured against the data the record names (its
``data_dir``, or ``--data-dir`` where that data now lives) and refused in one line where that data is not there or its
task's dataset checksum differs from the record's ``dataset_checksum``; it is rewritten under the cell lock a run takes
(``Store.cells_lock``), read again under that lock (a record a run replaced meanwhile is measured again), and sealed
with ``HARNESS_STORE_KEY``: a signed record is refused when no key is set, since writing it would strip its signature.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..contamination import current_rule, unseen_indices
from ..errors import HarnessError, MissingDataError
from ..profiles import get_profile
from ..record import SIGNATURE, STORE_KEY_VARIABLE, InvalidRecordError, split_record_stem, store_key
from ..registry import Registry
from ..spec import ModelSpec
from ..status import CellStatus
from ..store import Store, examples_path, read_record
from ..store_files import read_store_bytes
from .build import ModelBuilder
from .config import RunConfig
from .models import run_models
from .provenance import TrainingOverlap, derived_provenance

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

    def __init__(
        self, registry: Registry, store: Store, data_dir: Path | None = None, lock_timeout: float | None = None
    ):
        """``data_dir``: where the data the records name lives now (None: where each record says); ``lock_timeout``:
        how long :meth:`write` waits for a cell lock a run holds (None: as long as the run takes)."""
        self.registry = registry
        self.store = store
        self.data_dir = data_dir
        self.lock_timeout = lock_timeout
        self._readers: dict[Path | None, tuple[ModelBuilder, TrainingOverlap]] = {}

    def readers_for(self, data_dir: Path | None) -> tuple[ModelBuilder, TrainingOverlap]:
        """The data readers of one data dir (the builder and the overlap measure of a run's models), made once."""
        if data_dir not in self._readers:
            config = RunConfig(models=[], tasks=[], results_dir=self.store.root, data_dir=data_dir, progress=False)
            models = run_models(self.registry, config, self.store)
            self._readers[data_dir] = (models.builder, models.overlap)
        return self._readers[data_dir]

    def record_data_dir(self, record: dict) -> Path | None:
        """The data the record was computed on: ``--data-dir`` when given, else the record's ``data_dir`` (None: the
        bundled and downloaded data); a folder that is not there is one HarnessError line."""
        named = record.get("data_dir")
        if self.data_dir is not None:
            return self.data_dir
        if named is None:
            return None
        path = Path(str(named)).expanduser()
        if not path.is_dir():
            raise HarnessError(
                f"computed on the data in {named}, which is not there; pass --data-dir with that data "
                "(its dataset checksum is checked)"
            )
        return path

    def _measured(self, record: dict) -> tuple[ModelSpec, ModelBuilder, TrainingOverlap, dict, Any] | None:
        """What the record's overlap is measured from: its spec, the data readers, its derived provenance and its
        task's evaluated texts (None for an untrained or not-ok record)."""
        spec = record_spec(record)
        if spec.train_on is None or record.get("status") != CellStatus.OK:
            return None
        data_dir = self.record_data_dir(record)
        builder, overlap = self.readers_for(data_dir)
        task = self.registry.task(record["task"]["name"]).factory(record["task"]["options"], data_dir)
        _check_dataset(task, record, data_dir)
        provenance = derived_provenance(
            self.registry, spec, get_profile(spec.profile), int(record["seed"]), record_limit(record), DERIVED
        )
        profile = get_profile(spec.profile)
        if (record.get("profile") or {}).get("max_eval_examples") != profile.max_eval_examples:
            raise HarnessError(
                f"{record.get('_path')}: computed on another evaluation cut than profile "
                f"{profile.name!r} gives now; its overlap cannot be derived"
            )
        evaluated = task.evaluated_texts(builder.eval_context(profile, "cpu", int(record["seed"])))
        return spec, builder, overlap, provenance, evaluated

    def seen_positions(self, record: dict) -> list[int] | None:
        """The positions of the record's scored pairs (its task's evaluated pairs: the order of its per-example
        data) that are in its model's training data, read again as :meth:`derive` reads it; None when not
        measurable (untrained, a task without pairs, sources that cannot be read again). Pairs in data a recipe made
        during training (silver pairs) are not among them: that data exists only in its run."""
        measured = self._measured(record)
        if measured is None:
            return None
        spec, _, overlap, provenance, evaluated = measured
        seen = overlap.seen_texts(spec, int(record["seed"]), provenance)
        pairs = list(getattr(evaluated, "pairs", ()) or ())
        if seen is None or not pairs:
            return None
        unseen = set(unseen_indices(pairs, seen))
        return [position for position in range(len(pairs)) if position not in unseen]

    def derive(self, record: dict) -> dict | None:
        """The record's ``contamination`` derived from its spec and the data it names; None when not measurable."""
        measured_from = self._measured(record)
        if measured_from is None:
            return None
        spec, builder, overlap, provenance, evaluated = measured_from
        profile = get_profile(spec.profile)
        measured = overlap.contamination(spec, int(record["seed"]), evaluated, provenance)
        if measured is None:
            return None
        main = provenance["sources"][0]
        splits = builder.source_splits(main["source"], tuple(main["kinds"]), profile, int(record["seed"]))
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
        """Every ok record of a trained spec with its derived measurement (``missing_only``: those without one under
        the current matching rule, harness.contamination.NORMALISATION_VERSION)."""
        found = []
        for record in self.store.records():
            if record.get("status") != CellStatus.OK or not (record.get("model") or {}).get("train_on"):
                continue
            if missing_only and current_rule(record.get("contamination")):
                found.append(Derived(Path(record["_path"]), record, record["contamination"]))
                continue
            try:
                found.append(Derived(Path(record["_path"]), record, self.derive(record)))
            except HarnessError as exc:
                found.append(Derived(Path(record["_path"]), record, None, str(exc)))
        return found

    def check_sealable(self, items: list[Derived]) -> None:
        """Refuse, before anything is written, to rewrite a signed record without the store's key: stored again
        unsigned, it would be refused by every reader that has the key."""
        if store_key() is not None:
            return
        signed = [item.path for item in items if item.record.get(SIGNATURE)]
        if signed:
            raise HarnessError(
                f"{signed[0]} is signed{f' (and {len(signed) - 1} more)' if len(signed) > 1 else ''}; set "
                f"{STORE_KEY_VARIABLE} to the store's key to rewrite it (nothing was written)"
            )

    def write(self, item: Derived) -> Derived:
        """Store the record again with its derived ``contamination`` (sealed again; its side file kept), under the
        cell lock a run takes. The record is read again under the lock: one a run replaced since it was measured is
        measured again (the written item is returned)."""
        # the file name gives the task key and runtime (`<task>@onnx.json`); Store.write names the file again
        task_key, _ = split_record_stem(item.path.stem)
        model_key, seed = item.path.parts[-3], int(item.path.parts[-2].split("-", 1)[1])
        lock = self.store.cells_lock(model_key, seed, "harness contamination --write")
        lock.acquire(timeout=self.lock_timeout, on_wait=logger.warning)
        try:
            item = self._current(item)
            self.check_sealable([item])
            record = {key: value for key, value in item.record.items() if key != "_path"}
            record["contamination"] = item.contamination
            side_file = examples_path(item.path)
            examples = read_store_bytes(side_file, self.store.root) if side_file.is_file() else None
            self.store.write(model_key, seed, task_key, record, examples)
        finally:
            lock.release()
        return item

    def _current(self, item: Derived) -> Derived:
        """The item for the record as stored now (under the cell lock): measured again when it changed."""
        try:
            record = read_record(item.path, self.store.root)
        except InvalidRecordError as exc:
            raise HarnessError(f"{item.path} changed while it was measured and is now invalid: {exc.reason}") from None
        if record.get("checksum") == item.record.get("checksum"):
            return item
        record["_path"] = str(item.path)
        measured = self.derive(record)
        if measured is None:
            raise HarnessError(f"{item.path} was replaced while it was measured and is no longer measurable")
        return Derived(item.path, record, measured)


def _check_dataset(task: Any, record: dict, data_dir: Path | None) -> None:
    """The task's data here is the data the record was computed on (its ``dataset_checksum``); one line otherwise."""
    where = f"the data in {data_dir}" if data_dir is not None else "the bundled and downloaded data"
    try:
        checksum = task.check_data()
    except MissingDataError as exc:
        raise HarnessError(f"{record['task']['label']} is not in {where} ({exc}); pass --data-dir with it") from None
    except NotImplementedError:
        return  # the task can say its checksum only while it evaluates; the evaluated texts are its data's
    if checksum != record.get("dataset_checksum"):
        raise HarnessError(
            f"its dataset checksum ({str(record.get('dataset_checksum'))[:12]}...) differs from {where} "
            f"({str(checksum)[:12]}...); pass --data-dir with the data it was computed on"
        )


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
