"""PropSegmEnt atomic-fact retrieval, the ``propsegment`` family: ``propsegment-facts`` (Sub-Sentence Encoder, Chen et
al. 2023, arXiv 2311.04335, section 4.2.1, table 1; P@1 main score, R@5/10/20) and its sentence- and document-level
variants ``propsegment-sentences`` / ``propsegment-documents`` (section 5.2, table 4; main score R@5).

How judgements become queries, corpus and gold: ``collection.py``; reading the files: ``files.py``; metrics:
``harness.evaluation.retrieval``. Splits (``split``), training pairs (``pairs``), rater variants (``variants``),
distractors, NewSHead and every deviation: docs/tasks/propsegment.md, section "PropSegmEnt tasks" and its
``propsegment`` table rows. Data: the Wikipedia-cluster files needed by default are bundled under
``tasks/data/propsegment/v1/`` (SOURCE.md: origin, license CC BY-SA 3.0); ``--data-dir`` overrides.
"""

from __future__ import annotations

import logging
import weakref
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from harness import (
    PROPOSITION_PAIRS,
    SPAN_ENCODER,
    DataFileError,
    EvalResult,
    IncompatibleError,
    Option,
    PropositionPairs,
    RankedTexts,
    Task,
    TaskMetadata,
    TrainingSplits,
    files_checksum,
    hookimpl,
    resolve_dataset_dir,
    texts_by_id,
)
from harness.blocks import (
    DEFAULT_KS,
    mean_examples,
    ranked_hits,
    ranked_items,
    retrieval_metrics,
    unit_retrieval_metrics,
)

from .collection import (
    AGREEMENT_CHOICES,
    POSITIVES_CHOICES,
    VARIANTS_CHOICES,
    RetrievalCollection,
    build_collection,
    options_checksum,
    segmentation_pairs,
    training_pairs,
)
from .files import OFFICIAL_SOURCE, PropSegmentSplit, read_split

logger = logging.getLogger(__name__)

DATASET = "propsegment"
BUNDLED = Path(__file__).resolve().parent.parent / "data" / DATASET
SPLIT_CHOICES = ("heldout", "all", "official")
PAIRS_CHOICES = ("judged", "segmentations", "both")
LEVELS = ("proposition", "sentence", "document")
RANKED_DEPTH = 100  # items a proposition query's gold rank is looked for in (the site shows it; the metrics need 20)


def folder(data_dir: Path | None) -> Path:
    return (
        resolve_dataset_dir(
            DATASET, BUNDLED, f"Download {OFFICIAL_SOURCE} into <data-dir>/{DATASET}/.", data_dir=data_dir
        )
        / "v1"
    )


@lru_cache(maxsize=8)
def _read(root: Path, split: str, need_relationships: bool) -> PropSegmentSplit:
    return read_split(root, split, need_relationships)


def heldout_clusters(judged: PropSegmentSplit) -> tuple[set[str], set[str]]:
    """(training clusters, evaluated clusters): the judged clusters sorted by id, alternating."""
    judged_clusters = sorted({r.cluster for r in judged.relationships or []} & set(judged.clusters()))
    return set(judged_clusters[0::2]), set(judged_clusters[1::2])


# The three members rank the same corpus: a model's vectors are kept for the next member (same model object, same
# corpus), so a family run encodes the corpus once per model. Weak keys: nothing outlives the model; the runner never
# changes a model between the cells it evaluates.
_ENCODED: weakref.WeakKeyDictionary[Any, dict[tuple, np.ndarray]] = weakref.WeakKeyDictionary()


def encoded_corpus(model: Any, collection: RetrievalCollection, corpus_key: tuple) -> np.ndarray:
    """``model.encode_spans`` of every corpus item (one call), reused for the same model and corpus."""
    try:
        cached = _ENCODED.setdefault(model, {})
    except TypeError:  # not weak-referenceable: no reuse
        cached = {}
    if corpus_key not in cached:
        vectors = np.asarray(model.encode_spans(collection.span_items), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(collection.items):
            raise DataFileError(
                f"the model returned an array of shape {vectors.shape} for {len(collection.items)} "
                "propositions; encode_spans must return one row per item."
            )
        cached.clear()  # one corpus per model is enough
        cached[corpus_key] = vectors
    return cached[corpus_key]


class PropSegmentRetrieval(Task):
    """Atomic-fact retrieval; ``level`` says which units are ranked."""

    level: ClassVar[str] = "proposition"
    metadata = TaskMetadata(
        name="propsegment-facts",
        family="propsegment",
        description="PropSegmEnt atomic-fact retrieval: each annotated proposition retrieves the propositions "
        "entailing it (held-out Wikipedia clusters by default)",
        main_score="p@1",
        metric="P@1 (top-ranked proposition is gold) and R@5/10/20 (share of gold in the top k), x100; the query "
        "is removed from its own ranking; cosine of encode_spans vectors",
        reference="Chen et al. 2023, Sub-Sentence Encoder (arXiv 2311.04335), 4.2.1 and table 1; PropSegmEnt "
        "(Chen et al. 2023, Findings of ACL)",
        dataset=DATASET,
        dataset_source=OFFICIAL_SOURCE,
        license="Wikipedia clusters: CC BY-SA 3.0 (NewSHead documents left out: upstream publishes only their URLs)",
        version="2",  # 2: rater variants merged by default (variants=merge)
        requires=(SPAN_ENCODER,),
        training_kinds=(PROPOSITION_PAIRS,),
        details={
            "split": "heldout: dev Wikipedia clusters sorted by id; even positions train, odd positions "
            "evaluate (disjoint); the public test split has no judgements and only adds distractors",
            # the paper's all-MiniLM-L6-v2 row (table 1) uses full-mask pooling, its best input for compact
            # models (appendix C.1): the untrained row a trained span encoder has to beat
            "leaderboard_baseline": {
                "model": "be:span_input=full-mask",
                "column": "propsegment-facts",
                "why": "the input strategy of the paper's all-MiniLM-L6-v2 row, table 1 and appendix C.1",
            },
        },
    )
    options: ClassVar = {
        "split": Option(
            "heldout",
            "heldout: disjoint dev clusters for training and evaluation; all: every judged "
            "dev cluster (untrained models only); official: the official train/test files "
            "from --data-dir",
            choices=SPLIT_CHOICES,
        ),
        "agreement": Option(
            "majority", "how many raters must say ENTAILS for a judgement to make gold", choices=AGREEMENT_CHOICES
        ),
        "distractors": Option(
            "test", "add the public test split's propositions (no judgements) to the corpus", choices=("test", "none")
        ),
        "variants": Option(
            "merge",
            "a query or gold proposition that is a rater variant (token Jaccard >= 0.8) of "
            "a proposition already in its sentence: merge (that proposition stands for it) "
            "or keep (its own corpus item; version 1)",
            choices=VARIANTS_CHOICES,
        ),
        "pairs": Option(
            "judged",
            "training data: judged (human ENTAILS links between sentences), segmentations "
            "(each proposition in its sentence vs its own text, siblings as negatives; every "
            "rater's segmentation) or both",
            choices=PAIRS_CHOICES,
        ),
        "positives": Option(
            "mutual",
            "training data (pairs=judged/both): links that entail each other (mutual) or every ENTAILS link",
            choices=POSITIVES_CHOICES,
        ),
        "candidates": Option(100, "sentence/document level: propositions retrieved before aggregating", type=int),
    }

    # -- data -----------------------------------------------------------------------------------------------------
    def _root(self) -> Path:
        return folder(self.data_dir)

    def _evaluated_split(self) -> PropSegmentSplit:
        return _read(self._root(), "test" if self.options["split"] == "official" else "dev", True)

    def _distractors(self) -> PropSegmentSplit | None:
        if self.options["split"] == "official" or self.options["distractors"] == "none":
            return None
        return _read(self._root(), "test", False)

    def _clusters(self, evaluated: PropSegmentSplit) -> tuple[set[str], set[str]]:
        """(training clusters, evaluated clusters) of the evaluated split."""
        if self.options["split"] == "heldout":
            return heldout_clusters(evaluated)
        return set(), set(evaluated.clusters())

    def _paths(self) -> list[Path]:
        paths = list(self._evaluated_split().paths)
        distractors = self._distractors()
        if distractors is not None:
            paths += distractors.paths
        return paths

    def check_data(self) -> str:
        if self.options["candidates"] < max(DEFAULT_KS):
            raise DataFileError(
                f"task {self.metadata.name}: candidates={self.options['candidates']} is below "
                f"{max(DEFAULT_KS)}, the largest k; give candidates=100 or more."
            )
        evaluated = self._evaluated_split()
        _, clusters = self._clusters(evaluated)
        if not clusters:
            raise DataFileError(
                f"{evaluated.paths[0].parent}: the {evaluated.name} split has no judged cluster with "
                "text; nothing to evaluate."
            )
        return options_checksum(
            files_checksum(self._paths()),
            agreement=self.options["agreement"],
            split=self.options["split"],
            distractors=self.options["distractors"],
            variants=self.options["variants"],
        )

    # -- evaluation -----------------------------------------------------------------------------------------------
    def _collection(self, ctx) -> RetrievalCollection:
        evaluated = self._evaluated_split()
        _, clusters = self._clusters(evaluated)
        return build_collection(
            evaluated,
            clusters,
            self.options["agreement"],
            self._distractors(),
            ctx.profile.max_eval_examples,
            self.options["variants"],
        )

    def ranked_texts(self, ctx, queries, documents) -> RankedTexts:
        """Queries by corpus row (a proposition: its tokens' text), documents by what the level ranks: corpus rows
        (propositions), sentence units (the sentence) or document units (its sentences in the corpus, in order);
        the collection is built as ``evaluate`` builds it for ``ctx``'s profile, so the ids name the same units."""
        collection = self._collection(ctx)

        def proposition(row: int) -> str:
            text, spans = collection.span_items[row]
            return " ".join(text[start:end] for start, end in spans)

        propositions = {str(row): proposition(row) for row in range(len(collection.items))}
        if self.level == "proposition":
            units = propositions
        else:
            of_item = collection.sentence_of_item if self.level == "sentence" else collection.document_of_item
            sentences: dict[int, dict[tuple, str]] = {}
            for row, unit in enumerate(of_item.tolist()):
                document, index = collection.items[row][:2]
                sentences.setdefault(unit, {})[(document, index)] = collection.span_items[row][0]
            units = {
                str(unit): " ".join(text for _, text in sorted(texts.items())) for unit, texts in sentences.items()
            }
        name = self.metadata.name
        return RankedTexts(
            texts_by_id(name, "query", queries, propositions), texts_by_id(name, "document", documents, units)
        )

    def evaluate(self, model, ctx) -> EvalResult:
        checksum = self.check_data()
        collection = self._collection(ctx)
        vectors = encoded_corpus(model, collection, (checksum, ctx.profile.max_eval_examples))
        if self.level == "proposition":
            per_query = retrieval_metrics(vectors, collection.queries, per_query=True)
        else:
            units = collection.sentence_of_item if self.level == "sentence" else collection.document_of_item
            per_query = unit_retrieval_metrics(
                vectors, collection.queries, units, self.options["candidates"], per_query=True
            )
        fractions = {name: float(values.mean()) for name, values in per_query.items()}
        details = {"level": self.level, **collection.stats}
        if self.level != "proposition":
            details["candidates"] = self.options["candidates"]
        return EvalResult(
            {name: 100.0 * value for name, value in fractions.items()},
            checksum,
            details,
            examples=mean_examples(
                per_query[self.metadata.main_score],
                ids=collection.queries.rows,
                hits=self._ranked_hits(vectors, collection),
            ),
        )

    def _ranked_hits(self, vectors: np.ndarray, collection: RetrievalCollection) -> Any:
        """Each query's top hits for reading its result (corpus rows at the proposition level, sentence or document
        unit ids above it), the gold rank looked for among the first RANKED_DEPTH items or the unit level's
        candidates; ranked as the metrics rank (ties to the lower row)."""
        if self.level == "proposition":
            items = ranked_items(vectors, collection.queries, RANKED_DEPTH)
            return ranked_hits([row.tolist() for row in items], [gold.tolist() for gold in collection.queries.gold])
        units = collection.sentence_of_item if self.level == "sentence" else collection.document_of_item
        items = ranked_items(vectors, collection.queries, self.options["candidates"])
        rankings = [list(dict.fromkeys(units[row].tolist())) for row in items]  # each unit at its best item's rank
        return ranked_hits(rankings, [np.unique(units[gold]).tolist() for gold in collection.queries.gold])

    # -- training data --------------------------------------------------------------------------------------------
    def training_data(self, kind: str, ctx=None) -> TrainingSplits | None:
        if kind != PROPOSITION_PAIRS or kind not in self.metadata.training_kinds:
            return None
        split = self.options["split"]
        if split == "all":
            raise IncompatibleError(
                "propsegment with split=all evaluates every judged cluster and offers no "
                "training data; train with --train-on propsegment-facts (split=heldout)."
            )
        if split == "official":
            judged = _read(self._root(), "train", True)
            clusters = set(judged.clusters())
        else:
            judged = self._evaluated_split()
            clusters, _ = heldout_clusters(judged)
        pairs, counts = self._training_pairs(judged, clusters)
        logger.info("propsegment training pairs: %s", {k: v for k, v in counts.items() if k != "clusters"})
        checksum = options_checksum(
            files_checksum(judged.paths),
            agreement=self.options["agreement"],
            positives=self.options["positives"],
            split=split,
            variants=self.options["variants"],
            pairs=self.options["pairs"],
        )
        return TrainingSplits(source=self.metadata.name, train=pairs, dev=None, checksum=checksum)

    def _training_pairs(self, judged: PropSegmentSplit, clusters: set[str]) -> tuple[PropositionPairs, dict]:
        """The ``pairs`` option's training data from ``clusters``; one error line when it is empty."""
        kind, counts = self.options["pairs"], {}
        pairs: list = []
        if kind in ("judged", "both"):
            judged_pairs, judged_counts = training_pairs(
                judged, clusters, self.options["agreement"], self.options["positives"], self.options["variants"]
            )
            counts = {
                f"judged_{k}" if k in judged_pairs.counts() else k: v
                for k, v in judged_counts.items()
                if k != "clusters"
            }
            if not len(judged_pairs) and kind == "judged":
                raise DataFileError(
                    f"{judged.paths[0].parent}: no {self.options['positives']} positive links in "
                    "the training clusters; try --train-on propsegment-facts:positives=entails."
                )
            pairs += judged_pairs.pairs
        if kind in ("segmentations", "both"):
            segmented, segmented_counts = segmentation_pairs(judged, clusters)
            if not len(segmented):
                raise DataFileError(
                    f"{judged.paths[0].parent}: the training clusters have no segmented sentence; "
                    "train with pairs=judged."
                )
            counts = {**counts, **{f"segmentations_{k}": v for k, v in segmented_counts.items() if k != "clusters"}}
            pairs += segmented.pairs
        data = PropositionPairs(pairs)
        return data, {**counts, **data.counts(), "pairs_from": kind, "clusters": sorted(clusters)}


SENTENCES = PropSegmentRetrieval.variant(
    TaskMetadata(
        **{
            **PropSegmentRetrieval.metadata.as_record(),
            "name": "propsegment-sentences",
            "main_score": "r@5",
            "description": "PropSegmEnt sentence retrieval: each sentence scored by its best proposition among the "
            "candidates retrieved for a query proposition (paper 5.2)",
            "metric": "P@1 and R@5/10/20 over distinct sentences, x100; a sentence is gold if it holds a gold "
            "proposition; only the query proposition itself is removed from the ranking",
            "training_kinds": (),
            "requires": (SPAN_ENCODER,),
        }
    ),
    level="sentence",
)
DOCUMENTS = PropSegmentRetrieval.variant(
    TaskMetadata(
        **{
            **PropSegmentRetrieval.metadata.as_record(),
            "name": "propsegment-documents",
            "main_score": "r@5",
            "description": "PropSegmEnt document retrieval: each document scored by its best proposition among the "
            "candidates retrieved for a query proposition (paper 5.2)",
            "metric": "P@1 and R@5/10/20 over distinct documents, x100; a document is gold if it holds a gold "
            "proposition; only the query proposition itself is removed from the ranking",
            "training_kinds": (),
            "requires": (SPAN_ENCODER,),
        }
    ),
    level="document",
)
TASKS = (PropSegmentRetrieval, SENTENCES, DOCUMENTS)


@hookimpl
def register_tasks(register):
    for task_class in TASKS:
        register(task_class)
