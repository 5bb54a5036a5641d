"""Bootstrap intervals of a task's main score over its test examples.

A task hands over what resampling its main score needs as an :class:`ExampleScores`: per-example arrays and the
statistic (``spearman``, ``pearson``, ``mean``, ``f1_macro``, ``average_precision``) that turns them into the score.
The interval is the 95% percentile interval of ``resamples`` (default 1000) bootstrap replicates (Efron &
Tibshirani 1993, ch. 13); resamples are shared by every model over the same examples (:func:`bootstrap_indices`),
so :mod:`harness.evaluation.significance` can pair them. The statistics, resampling, seed pooling, how it is
computed and the deviation from lm-evaluation-harness: docs/core/statistics.md, section "Bootstrap intervals".
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

logger = logging.getLogger(__name__)

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 2025  # fixed, so an interval is a function of the stored examples alone
CONFIDENCE = 0.95
STATISTICS = {
    "spearman": ("predicted", "gold"),
    "pearson": ("predicted", "gold"),
    "mean": ("values",),
    "f1_macro": ("predicted", "gold"),
    "average_precision": ("predicted", "gold"),
}
AGGREGATES = ("pooled", "group-mean")
CHUNK_ELEMENTS = 4_000_000  # example positions resampled at once (a few [rows, n] float arrays of this size)
_IDENTITY_ARRAYS = ("gold", "ids")  # arrays that say which examples these are (not how a model did on them)
HITS_K = 10  # the top hits a retrieval or reranking task keeps per query (what the results site shows)


@dataclass
class RankedHits:
    """What a ranking task's model retrieved per query, for reading the examples behind a score (the results site):
    its ``k`` best documents, the query's gold documents, and the rank of its best-ranked gold document. Ids are
    integers (padding -1) or fixed-width strings (padding ""), never objects. Not resampled and not part of the
    examples' identity: two models over the same queries retrieve different documents."""

    top: np.ndarray  # [n, k] document ids, best first
    gold: np.ndarray  # [n, g] the query's gold document ids
    gold_rank: np.ndarray  # [n] 1-based rank of the best-ranked gold document; 0: not within the first `depth`
    depth: int  # how many documents of each query's ranking the gold rank was looked for in

    def __post_init__(self) -> None:
        self.top, self.gold = np.asarray(self.top), np.asarray(self.gold)
        self.gold_rank = np.asarray(self.gold_rank, dtype=np.int64).ravel()
        if self.top.ndim != 2 or self.gold.ndim != 2 or not len(self.top) == len(self.gold) == len(self.gold_rank):
            raise ExampleDataError(
                f"ranked hits need [n, k] top ids, [n, g] gold ids and [n] gold ranks; got shapes {self.top.shape}, "
                f"{self.gold.shape}, {self.gold_rank.shape}"
            )
        for name, values in (("top", self.top), ("gold", self.gold)):
            if values.dtype.kind not in "iuU":
                raise ExampleDataError(f"ranked hits' {name} ids must be integers or strings, got {values.dtype}")

    def __len__(self) -> int:
        return len(self.gold_rank)


def _padded(rows: Sequence[Sequence], width: int) -> np.ndarray:
    """Rows of ids as one [n, width] array: integers padded with -1, anything else as strings padded with ""."""
    values = [list(row)[:width] for row in rows]
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for row in values for v in row):
        array = np.full((len(values), width), -1, dtype=np.int64)
    else:
        size = max([len(str(v)) for row in values for v in row] or [1])
        array = np.full((len(values), width), "", dtype=f"<U{size}")
    for position, row in enumerate(values):
        array[position, : len(row)] = [v if array.dtype.kind == "i" else str(v) for v in row]
    return array


def ranked_hits(rankings: Sequence[Sequence], golds: Sequence[Collection], k: int = HITS_K) -> RankedHits:
    """Each query's first ``k`` documents of its ranking (best first), its gold documents (sorted) and the rank of
    its best-ranked gold document within the ranking as given (0 when none is in it)."""
    if len(rankings) != len(golds):
        raise ExampleDataError(f"{len(rankings)} rankings for {len(golds)} queries' gold documents")
    gold_lists = [sorted(gold, key=str) for gold in golds]
    ranks = []
    for ranking, gold in zip(rankings, golds):
        wanted = set(gold)
        ranks.append(next((rank for rank, doc in enumerate(ranking, start=1) if doc in wanted), 0))
    return RankedHits(
        _padded(rankings, k),
        _padded(gold_lists, max([len(g) for g in gold_lists] or [1]) or 1),
        np.asarray(ranks, dtype=np.int64),
        max([len(ranking) for ranking in rankings] or [0]),
    )


class ExampleDataError(ValueError):
    """Per-example data that cannot be resampled (wrong arrays, lengths or statistic)."""


@dataclass
class ExampleScores:
    """What resampling one main score needs: per-example arrays, optional groups, and the statistic.

    ``ids`` (optional) names the examples (e.g. query ids) so that two results can be checked to be over the same
    examples; correlation and F1 data are identified by their gold values too."""

    statistic: str
    arrays: dict[str, np.ndarray]
    groups: np.ndarray | None = None
    aggregate: str = "pooled"
    scale: float = 100.0
    ids: np.ndarray | None = field(default=None)
    hits: RankedHits | None = field(default=None)  # ranking tasks: each query's top hits (not resampled)

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:
            raise ExampleDataError(f"unknown statistic {self.statistic!r}; one of {', '.join(STATISTICS)}")
        if self.aggregate not in AGGREGATES:
            raise ExampleDataError(f"unknown aggregate {self.aggregate!r}; one of {', '.join(AGGREGATES)}")
        needed = STATISTICS[self.statistic]
        if set(self.arrays) != set(needed):
            raise ExampleDataError(f"statistic {self.statistic!r} needs arrays {needed}, got {tuple(self.arrays)}")
        dtype = np.int64 if self.statistic == "f1_macro" else np.float64
        self.arrays = {name: np.asarray(values, dtype=dtype).ravel() for name, values in self.arrays.items()}
        lengths = {len(values) for values in self.arrays.values()}
        if len(lengths) != 1 or 0 in lengths:
            sizes = {name: len(values) for name, values in self.arrays.items()}
            raise ExampleDataError(f"arrays of different or zero lengths: {sizes}")
        if self.groups is not None:
            self.groups = np.asarray(self.groups, dtype=np.int64).ravel()
            if len(self.groups) != len(self):
                raise ExampleDataError(f"{len(self.groups)} group labels for {len(self)} examples")
        elif self.aggregate == "group-mean":
            raise ExampleDataError("aggregate 'group-mean' needs groups")
        if self.ids is not None:
            self.ids = np.asarray(self.ids).ravel()
            if len(self.ids) != len(self):
                raise ExampleDataError(f"{len(self.ids)} ids for {len(self)} examples")
        if self.hits is not None and len(self.hits) != len(self):
            raise ExampleDataError(f"ranked hits of {len(self.hits)} queries for {len(self)} examples")
        for name, values in self.arrays.items():
            if values.dtype.kind == "f" and not np.all(np.isfinite(values)):
                raise ExampleDataError(f"array {name!r} has NaN or infinite values")

    def __len__(self) -> int:
        return len(next(iter(self.arrays.values())))

    # -- identity and storage ----------------------------------------------------------------------------------
    def identity(self) -> str:
        """sha256 of what says which examples these are (count, groups, gold, ids): equal for two models' results
        on the same test examples, different otherwise."""
        digest = hashlib.sha256(f"{self.statistic}|{self.aggregate}|{len(self)}".encode())
        for name in _IDENTITY_ARRAYS:
            values = self.ids if name == "ids" else self.arrays.get(name)
            if values is not None:
                digest.update(name.encode() + _array_bytes(values))
        if self.groups is not None:
            digest.update(b"groups" + np.ascontiguousarray(self.groups).tobytes())
        return digest.hexdigest()

    def describe(self) -> dict:
        """The record's description of the side file's content (the file's name and sha256 are added by the store)."""
        return {
            "statistic": self.statistic,
            "aggregate": self.aggregate,
            "scale": float(self.scale),
            "count": len(self),
            "identity": self.identity(),
        }

    def to_npz(self) -> bytes:
        """The arrays as compressed npz bytes (no pickled objects: ids are stored as unicode strings)."""
        payload = {f"array.{name}": values for name, values in self.arrays.items()}
        if self.groups is not None:
            payload["groups"] = self.groups
        if self.ids is not None:
            payload["ids"] = self.ids.astype(str) if self.ids.dtype.kind in "OSU" else self.ids
        if self.hits is not None:
            payload.update(
                {
                    "hits.top": self.hits.top,
                    "hits.gold": self.hits.gold,
                    "hits.gold_rank": self.hits.gold_rank,
                    "hits.depth": np.asarray(self.hits.depth, dtype=np.int64),
                }
            )
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **payload)
        return buffer.getvalue()

    @classmethod
    def from_npz(cls, content: bytes, description: dict) -> ExampleScores:
        """Read what :meth:`to_npz` wrote (``allow_pickle=False``) with the record's :meth:`describe` fields."""
        with np.load(io.BytesIO(content), allow_pickle=False) as stored:
            arrays = {key.split(".", 1)[1]: stored[key] for key in stored.files if key.startswith("array.")}
            groups = stored["groups"] if "groups" in stored.files else None
            ids = stored["ids"] if "ids" in stored.files else None
            hits = None
            if "hits.top" in stored.files:
                hits = RankedHits(
                    stored["hits.top"], stored["hits.gold"], stored["hits.gold_rank"], int(stored["hits.depth"])
                )
        data = cls(description["statistic"], arrays, groups, description["aggregate"], description["scale"], ids, hits)
        if len(data) != description.get("count", len(data)):
            raise ExampleDataError(f"the side file holds {len(data)} examples, the record says {description['count']}")
        return data

    # -- the statistic -----------------------------------------------------------------------------------------
    def value(self) -> float:
        """The statistic on the examples as stored (equals the task's main score)."""
        return float(self.weighted(np.ones((1, len(self))))[0])

    def layout(self) -> list[np.ndarray]:
        """Example positions of each group (one group of all examples without groups), in group order."""
        if self.groups is None:
            return [np.arange(len(self))]
        return [np.flatnonzero(self.groups == group) for group in np.unique(self.groups)]

    def resampled(self, indices: np.ndarray) -> np.ndarray:
        """The statistic of each row of ``indices`` ``[resamples, n]`` (example positions drawn with replacement)."""
        return self.weighted(_counts(np.atleast_2d(indices), len(self)))

    def weighted(self, counts: np.ndarray) -> np.ndarray:
        """The statistic of each resample given as ``counts`` ``[resamples, n]``: how often each example was drawn
        (a bootstrap resample is a multiset of the examples, so every statistic is computed once on the examples
        with weights: no per-resample sorting)."""
        if self.aggregate == "pooled":
            return self.scale * _statistic(self.statistic, self.arrays, counts)
        per_group = [
            _statistic(self.statistic, {k: v[positions] for k, v in self.arrays.items()}, counts[:, positions])
            for positions in self.layout()
        ]
        return self.scale * np.mean(per_group, axis=0)


def _array_bytes(values: np.ndarray) -> bytes:
    if values.dtype.kind in "biuf":
        return np.ascontiguousarray(values).tobytes()
    return "\x1f".join(map(str, values.tolist())).encode("utf-8", "surrogatepass")


def _counts(indices: np.ndarray, n: int) -> np.ndarray:
    """``[resamples, n]`` float counts of each example in each row of ``indices``."""
    rows = indices.shape[0]
    flat = (np.arange(rows, dtype=np.int64)[:, None] * n + indices).ravel()
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


def _tie_blocks(values: np.ndarray, descending: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order that sorts ``values``, the start of each run of equal values in it, and each sorted position's
    run."""
    order = np.argsort(-values if descending else values, kind="stable")
    sorted_values = values[order]
    new_run = np.r_[True, sorted_values[1:] != sorted_values[:-1]]
    return order, np.flatnonzero(new_run), np.cumsum(new_run) - 1


def _weighted_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The average rank (ties averaged, as scipy's ``rankdata``) each example has in each resample."""
    order, starts, run_of_sorted = _tie_blocks(values)
    run_totals = np.add.reduceat(counts[:, order], starts, axis=1)
    run_ranks = np.cumsum(run_totals, axis=1) - run_totals + (run_totals + 1) / 2
    ranks = np.empty_like(counts)
    ranks[:, order] = run_ranks[:, run_of_sorted]
    return ranks


def _weighted_correlation(x: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Pearson correlation of x and y in each resample; a resample with no variance on either side counts as 0 (as
    ``harness.metrics``' NaN-as-0 aggregation would score it)."""
    total = counts.sum(axis=1, keepdims=True)
    x_centred = x - (counts * x).sum(axis=1, keepdims=True) / total
    y_centred = y - (counts * y).sum(axis=1, keepdims=True) / total
    covariance = (counts * x_centred * y_centred).sum(axis=1)
    variance = (counts * x_centred**2).sum(axis=1) * (counts * y_centred**2).sum(axis=1)
    positive = variance > 1e-300
    return np.divide(covariance, np.sqrt(np.where(positive, variance, 1.0)), out=np.zeros(len(counts)), where=positive)


def _macro_f1(predicted: np.ndarray, gold: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """scikit-learn's macro-F1 of each resample (labels present in its gold or predictions; 0 where undefined)."""
    labels, encoded = np.unique(np.concatenate([predicted, gold]), return_inverse=True)
    predicted_index, gold_index = encoded[: len(predicted)], encoded[len(predicted) :]
    one_hot = np.eye(len(labels))
    predicted_count = counts @ one_hot[predicted_index]
    gold_count = counts @ one_hot[gold_index]
    true_positive = counts @ (one_hot[gold_index] * (predicted_index == gold_index)[:, None])
    present = (predicted_count + gold_count) > 0
    f1 = np.divide(2 * true_positive, predicted_count + gold_count, out=np.zeros_like(true_positive), where=present)
    return f1.sum(axis=1) / present.sum(axis=1)


def _average_precision(scores: np.ndarray, positive: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """scikit-learn's average precision of each resample: over the distinct scores (descending), the recall gained
    at each times the precision there; 0 for a resample without a positive."""
    order, starts, _ = _tie_blocks(scores, descending=True)
    drawn = np.add.reduceat(counts[:, order], starts, axis=1)
    hits = np.add.reduceat((counts * positive)[:, order], starts, axis=1)
    cumulative_hits, cumulative_drawn = np.cumsum(hits, axis=1), np.cumsum(drawn, axis=1)
    precision = np.divide(cumulative_hits, cumulative_drawn, out=np.zeros_like(hits), where=cumulative_drawn > 0)
    total = cumulative_hits[:, -1]
    return np.divide((hits * precision).sum(axis=1), total, out=np.zeros(len(total)), where=total > 0)


def _statistic(name: str, arrays: dict[str, np.ndarray], counts: np.ndarray) -> np.ndarray:
    """The statistic (a fraction, not x100) of each resample given by ``counts``."""
    if name == "mean":
        return counts @ arrays["values"] / counts.sum(axis=1)
    if name == "pearson":
        return _weighted_correlation(arrays["predicted"], arrays["gold"], counts)
    if name == "spearman":
        return _weighted_correlation(
            _weighted_ranks(arrays["predicted"], counts), _weighted_ranks(arrays["gold"], counts), counts
        )
    if name == "average_precision":
        return _average_precision(arrays["predicted"], arrays["gold"], counts)
    return _macro_f1(arrays["predicted"], arrays["gold"], counts)


def mean_examples(
    values: Sequence[float],
    ids: Sequence | None = None,
    groups: Sequence[int] | None = None,
    scale: float = 100.0,
    hits: RankedHits | None = None,
) -> ExampleScores:
    """Per-example values whose mean (x ``scale``) is the main score, e.g. per-query AP; with ``groups`` the mean of
    the group means (e.g. a benchmark's sub-collections averaged with equal weight); ``hits``: a ranking task's top
    hits per query (:func:`ranked_hits`), kept beside the values for reading, never resampled."""
    return ExampleScores(
        "mean",
        {"values": values},
        groups=groups,
        scale=scale,
        ids=ids,
        aggregate="group-mean" if groups is not None else "pooled",
        hits=hits,
    )


def resample_chunks(
    data: ExampleScores, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> Iterator[np.ndarray]:
    """The resamples as ``[rows, n]`` blocks of example positions (drawn with replacement within each group), at
    most :data:`CHUNK_ELEMENTS` positions per block so memory stays bounded on large test sets. The same (seed,
    examples' layout) always gives the same blocks, so every model over these examples is resampled alike."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    rows = max(1, CHUNK_ELEMENTS // len(data))
    layout = data.layout()
    for number, start in enumerate(range(0, resamples, rows)):
        rng = np.random.default_rng([seed, len(data), number])
        count = min(rows, resamples - start)
        yield np.concatenate(
            [positions[rng.integers(0, len(positions), size=(count, len(positions)))] for positions in layout], axis=1
        )


def bootstrap_indices(data: ExampleScores, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """All ``[resamples, n]`` example positions of :func:`resample_chunks` at once."""
    return np.concatenate(list(resample_chunks(data, resamples, seed)))


def check_same_examples(results: Sequence[ExampleScores]) -> None:
    """Raise ExampleDataError unless every result is over the same examples with the same statistic."""
    identities = {data.identity() for data in results}
    if len(identities) > 1:
        raise ExampleDataError(
            "the results are not over the same test examples (different gold, ids, groups or "
            "sizes); they cannot be resampled together"
        )


def pooled_replicates(
    results: Sequence[ExampleScores], resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """``[resamples]`` bootstrap replicates of the mean over ``results`` (one model's seeds) of the statistic, all
    seeds resampled with the same examples."""
    if not results:
        raise ExampleDataError("no results to resample")
    check_same_examples(results)
    return np.concatenate(
        [
            np.mean([data.resampled(block) for data in results], axis=0)
            for block in resample_chunks(results[0], resamples, seed)
        ]
    )


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates."""
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_interval(
    results: Sequence[ExampleScores] | ExampleScores,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = CONFIDENCE,
) -> tuple[float, float]:
    """The 95% bootstrap interval of the (seed-mean) main score over the test examples."""
    if isinstance(results, ExampleScores):
        results = [results]
    return percentile_interval(pooled_replicates(results, resamples, seed), confidence)


SCORE_TOLERANCE = 1e-3  # points x100: below any reported digit, above BEIR's rounding of its means to 5 decimals


def reproduces(recomputed: float, main_score: float) -> bool:
    """Whether per-example data give the main score (to :data:`SCORE_TOLERANCE`)."""
    return abs(recomputed - main_score) <= SCORE_TOLERANCE


def example_side_file(data: ExampleScores | None, main_score: float, what: str) -> tuple[dict | None, bytes | None]:
    """The record's ``examples`` description and the side file's npz bytes for a task's per-example data, or
    ``(None, None)`` when there is none or it does not reproduce the main score (logged: a task wiring bug must
    not give a wrong interval)."""
    if data is None:
        return None, None
    if not isinstance(data, ExampleScores):
        logger.warning("%s: per-example data of type %s ignored (expected ExampleScores)", what, type(data).__name__)
        return None, None
    recomputed = data.value()
    if not reproduces(recomputed, main_score):
        logger.warning(
            "%s: the per-example data give %.6f, not the main score %.6f; no interval is stored",
            what,
            recomputed,
            main_score,
        )
        return None, None
    content = data.to_npz()
    return {**data.describe(), "sha256": hashlib.sha256(content).hexdigest()}, content
