"""What a trained model saw (harness.contamination): the provenance of each training, the sources handed to it and
the data its recipe made, and the overlap of a cell's test texts with them.

:class:`ProvenanceLog` is written while models train or load (the builder notes each source read and each piece of
data a recipe made; the trainer and the checkpoints note what a model trained on); :class:`TrainingOverlap` reads it
back for a cell's record. :func:`derived_provenance` answers for a model whose training recorded none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..contamination import EvaluatedTexts, TextSet, measure
from ..data import TrainingSplits
from ..errors import HarnessError
from ..profiles import Profile, get_profile
from ..registry import Registry
from ..spec import ModelSpec, resolve_model_spec

logger = logging.getLogger(__name__)
# (source, kinds, profile, seed) -> the source's training data cut to the profile (ModelBuilder.source_splits)
SourceReader = Callable[[str, tuple[str, ...], Profile, int], TrainingSplits]


class ProvenanceLog:
    """Training provenance per (spec hash, seed), and the provenance of every training in progress: trainings nest (a
    teacher trains or loads inside its recipe's training), and what one reads joins every enclosing one."""

    def __init__(self) -> None:
        self._by_model: dict[tuple[str, int], dict] = {}
        self._in_progress: list[dict] = []

    @contextmanager
    def training(self, spec: ModelSpec, seed: int) -> Iterator[dict]:
        """The provenance of one training while it runs (kept for the model when it ends without an error)."""
        provenance: dict = {"sources": [], "made": [], "how": "recorded"}
        self._in_progress.append(provenance)
        try:
            yield provenance
        finally:  # this training is the last on the stack, whatever an inner one left
            self._in_progress[:] = [item for item in self._in_progress if item is not provenance]
        self._by_model[(spec.hash, seed)] = provenance

    def loaded(self, spec: ModelSpec, seed: int, provenance: dict) -> None:
        """A model loaded from its checkpoint: its recorded provenance, which joins every training in progress (a
        teacher loaded inside a recipe's training)."""
        self._by_model[(spec.hash, seed)] = provenance
        for outer in self._in_progress:
            outer["sources"].extend(provenance["sources"])
            outer["made"].extend(provenance["made"])

    def source_read(
        self, source: str, splits: TrainingSplits, max_train_examples: int | None, train_examples: int, seed: int
    ) -> None:
        """Training data read from ``source`` (cut to ``max_train_examples``: ``train_examples`` examples) joins every
        training in progress."""
        for provenance in self._in_progress:
            provenance["sources"].append(
                {
                    "source": source,
                    "kind": splits.kind,
                    "seed": seed,
                    "max_train_examples": max_train_examples,
                    "train_examples": train_examples,
                    "checksum": splits.checksum,
                }
            )

    def data_made(self, what: str, texts: dict) -> None:
        """Data a training made itself (a recipe's silver pairs), texts inline, joins every training in progress."""
        for provenance in self._in_progress:
            provenance["made"].append({"what": what, **texts})

    def of(self, spec: ModelSpec, seed: int) -> dict | None:
        """What the (spec, seed) model trained on (None: untrained, or not trained or loaded here)."""
        return self._by_model.get((spec.hash, seed))


def derived_provenance(
    registry: Registry,
    spec: ModelSpec,
    profile: Profile,
    seed: int,
    limit: Any = "budget",
    how: str = "derived from the spec",
) -> dict:
    """The provenance of a model whose training did not record one (a checkpoint or record older than it): its
    training source cut to ``limit`` (default: its budget's max_train_examples), plus the extra sources its plugin
    declares (``training_sources``), each cut by the budget of the model that trains on it; data a recipe made
    (silver pairs) cannot be derived."""
    plugin = registry.recipe(spec.name) if spec.recipe else registry.model(spec.name)
    if limit == "budget":
        limit = profile.with_budget(spec.requested_budget).max_train_examples
    sources = [
        {
            "source": spec.train_on,
            "kinds": list(plugin.training_kinds),
            "seed": seed,
            "max_train_examples": limit,
        }
    ]
    extra = getattr(plugin, "training_sources", None)
    for source, kinds, trainee in extra(spec.options, spec.train_on) if callable(extra) else []:
        # the model that trains on it (e.g. the teacher) gets its own budget, as when the recipe trained it
        trained = resolve_model_spec(
            registry, trainee, profile, spec.backbone, source, spec.budget_overrides or spec.budget
        )
        sources.append(
            {
                "source": source,
                "kinds": list(kinds),
                "seed": seed,
                "max_train_examples": profile.with_budget(trained.requested_budget).max_train_examples,
            }
        )
    return {"sources": sources, "made": [], "how": how}


class TrainingOverlap:
    """The overlap of a cell's test texts with what its model trained on: the texts of a provenance read again
    (cut as in training, once per model) and measured against the texts a task evaluated."""

    def __init__(self, read_source: SourceReader, provenance: ProvenanceLog):
        self.read_source = read_source
        self.provenance = provenance
        self._seen: dict[tuple[str, int], TextSet | None] = {}

    def seen_texts(self, spec: ModelSpec, seed: int, provenance: dict | None = None) -> TextSet | None:
        """The texts the (spec, seed) model trained on, read again from its provenance's sources (cut as in
        training) plus the data it made; None for an untrained model or one whose sources cannot be read now."""
        key = (spec.hash, seed)
        provenance = provenance or self.provenance.of(spec, seed)
        if spec.train_on is None or provenance is None:
            return None
        if key in self._seen:
            return self._seen[key]
        seen: TextSet | None = None
        texts = TextSet()
        base = get_profile(spec.profile)
        for source in provenance["sources"]:
            kinds = (source["kind"],) if source.get("kind") else tuple(source.get("kinds") or ())
            limited = base.with_budget({"max_train_examples": source.get("max_train_examples")})
            try:
                splits = self.read_source(source["source"], kinds, limited, int(source["seed"]))
            except (HarnessError, KeyError, ValueError) as exc:
                logger.warning(
                    "%s seed %s: training source %s cannot be read again (%s); its overlap with test "
                    "sets is not measured",
                    spec.label,
                    seed,
                    source.get("source"),
                    exc,
                )
                break
            if not texts.add(splits.train):
                break
        else:  # every source read again
            seen = texts
            for made in provenance["made"]:
                seen.add_pairs(tuple(pair) for pair in made.get("pairs", ()))
                seen.add_sentences(made.get("sentences", ()))
        self._seen[key] = seen
        return seen

    def contamination(
        self, spec: ModelSpec, seed: int, evaluated: EvaluatedTexts | None, provenance: dict | None = None
    ) -> dict | None:
        """The record's ``contamination``: the overlap of a cell's test texts with what its model trained on, and
        the training data it was measured against; None for an untrained model or a task that exposes no texts."""
        provenance = provenance or self.provenance.of(spec, seed)
        seen = self.seen_texts(spec, seed, provenance)
        if seen is None or evaluated is None or provenance is None:
            return None
        sources = [
            {
                key: source[key]
                for key in ("source", "kind", "kinds", "max_train_examples", "train_examples")
                if key in source
            }
            for source in provenance["sources"]
        ]
        made = [
            {"what": item["what"], "pairs": len(item.get("pairs", ())), "sentences": len(item.get("sentences", ()))}
            for item in provenance["made"]
        ]
        return {
            **measure(seen, evaluated),
            "training_data": sources,
            "made": made,
            "how": provenance.get("how", "recorded"),
        }
