"""Bootstrap intervals of a task's main score over its test examples (issue #25).

A task hands over what resampling its main score needs as an :class:`ExampleScores`: per-example arrays and the
statistic that turns them into the score. The statistics cover the main scores of the bundled tasks:

- ``spearman`` / ``pearson`` (arrays ``predicted``, ``gold``): correlation x100 of pair scores with gold. With
  ``groups`` (sub-datasets of an STS year) either all pairs pooled (``aggregate="pooled"``: SimCSE's "all") or the
  unweighted mean of the per-group correlations (``"group-mean"``: SentEval's "mean").
- ``mean`` (array ``values``): a mean of per-example values, e.g. per-query AP or P@1, or 1/0 correctness; with
  ``groups`` and ``"group-mean"`` the mean of the group means (e.g. SciDocs' four sub-tasks).
- ``f1_macro`` (arrays ``predicted``, ``gold``: integer labels): scikit-learn's macro-F1 (labels present in gold or
  predictions, 0 for an undefined F1).
- ``average_precision`` (arrays ``predicted``: scores, ``gold``: 1 for a positive, 0 else): scikit-learn's
  ``average_precision_score`` (thresholds at the distinct scores; 0 for a resample without a positive), e.g.
  TwitterPara's AP per dataset, averaged over datasets with ``groups``.

Resampling draws test examples with replacement, within each group when there are groups (a test set made of fixed
sub-datasets keeps their sizes). Every resample of every model over the same examples uses the same index matrix
(:func:`bootstrap_indices`, seeded by ``seed`` and the example count), so intervals are reproducible and two models'
resampled scores are paired: :mod:`harness.evaluation.significance` tests their difference from those arrays.
Seeds of one model are pooled by resampling the same examples in every seed and averaging their scores: the interval
is then that of the seed mean, the quantity a leaderboard cell shows.

The interval is the percentile interval of ``resamples`` (default 1000) bootstrap replicates (Efron & Tibshirani
1993, ch. 13). All statistics are computed on ``[resamples, n]`` arrays at once (ranks by ``scipy.stats.rankdata``
along rows for Spearman, confusion counts by one ``bincount`` for macro-F1), no loop over replicates.

Deviation from lm-evaluation-harness (which reports a bootstrap standard error): we report the 95% percentile interval.
"""
from __future__ import annotations

import hashlib
import io
import logging
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.stats import rankdata

logger = logging.getLogger(__name__)

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 2025  # fixed, so an interval is a function of the stored examples alone
CONFIDENCE = 0.95
STATISTICS = {"spearman": ("predicted", "gold"), "pearson": ("predicted", "gold"), "mean": ("values",),
              "f1_macro": ("predicted", "gold"), "average_precision": ("predicted", "gold")}
AGGREGATES = ("pooled", "group-mean")
_IDENTITY_ARRAYS = ("gold", "ids")  # arrays that say which examples these are (not how a model did on them)


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
        return {"statistic": self.statistic, "aggregate": self.aggregate, "scale": float(self.scale),
                "count": len(self), "identity": self.identity()}

    def to_npz(self) -> bytes:
        """The arrays as compressed npz bytes (no pickled objects: ids are stored as unicode strings)."""
        payload = {f"array.{name}": values for name, values in self.arrays.items()}
        if self.groups is not None:
            payload["groups"] = self.groups
        if self.ids is not None:
            payload["ids"] = self.ids.astype(str) if self.ids.dtype.kind in "OSU" else self.ids
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **payload)
        return buffer.getvalue()

    @classmethod
    def from_npz(cls, content: bytes, description: dict) -> "ExampleScores":
        """Read what :meth:`to_npz` wrote (``allow_pickle=False``) with the record's :meth:`describe` fields."""
        with np.load(io.BytesIO(content), allow_pickle=False) as stored:
            arrays = {key.split(".", 1)[1]: stored[key] for key in stored.files if key.startswith("array.")}
            groups = stored["groups"] if "groups" in stored.files else None
            ids = stored["ids"] if "ids" in stored.files else None
        data = cls(description["statistic"], arrays, groups, description["aggregate"], description["scale"], ids)
        if len(data) != description.get("count", len(data)):
            raise ExampleDataError(f"the side file holds {len(data)} examples, the record says {description['count']}")
        return data

    # -- the statistic -----------------------------------------------------------------------------------------
    def value(self) -> float:
        """The statistic on the examples as stored (equals the task's main score)."""
        return float(self.resampled(np.concatenate(self.layout())[None, :])[0])

    def layout(self) -> list[np.ndarray]:
        """Example positions of each group (one group of all examples without groups), in group order."""
        if self.groups is None:
            return [np.arange(len(self))]
        return [np.flatnonzero(self.groups == group) for group in np.unique(self.groups)]

    def resampled(self, indices: np.ndarray) -> np.ndarray:
        """The statistic of each row of ``indices`` ``[resamples, n]`` (positions laid out group by group, as
        :func:`bootstrap_indices` draws them)."""
        indices = np.atleast_2d(indices)
        arrays = self.arrays
        if self.statistic == "f1_macro":  # labels as 0..k-1 once, so resamples are counted with one bincount
            labels, encoded = np.unique(np.concatenate([arrays["predicted"], arrays["gold"]]), return_inverse=True)
            arrays = {"predicted": encoded[: len(self)], "gold": encoded[len(self) :], "classes": len(labels)}
        if self.aggregate == "pooled":
            return self.scale * _statistic(self.statistic, _take(arrays, indices))
        per_group, start = [], 0
        for positions in self.layout():
            block = indices[:, start : start + len(positions)]
            per_group.append(_statistic(self.statistic, _take(arrays, block)))
            start += len(positions)
        return self.scale * np.mean(per_group, axis=0)


def _array_bytes(values: np.ndarray) -> bytes:
    if values.dtype.kind in "biuf":
        return np.ascontiguousarray(values).tobytes()
    return "\x1f".join(map(str, values.tolist())).encode("utf-8", "surrogatepass")


def _row_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row pair; a row with no variance on either side counts as 0 (as a broken
    resample would be scored by ``harness.metrics``' NaN-as-0 aggregation)."""
    x = x - x.mean(axis=1, keepdims=True)
    y = y - y.mean(axis=1, keepdims=True)
    denominator = np.sqrt((x * x).sum(axis=1) * (y * y).sum(axis=1))
    numerator = (x * y).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), 0.0)


def _take(arrays: dict, indices: np.ndarray) -> dict:
    return {name: values[indices] if isinstance(values, np.ndarray) else values for name, values in arrays.items()}


def _macro_f1(predicted_index: np.ndarray, gold_index: np.ndarray, classes: int) -> np.ndarray:
    """scikit-learn's macro-F1 of each row of label indices 0..classes-1 (labels present in the row's gold or
    predictions; 0 where undefined)."""
    rows = predicted_index.shape[0]
    offsets = (np.arange(rows) * classes)[:, None]
    true_positive = np.bincount((offsets + gold_index)[predicted_index == gold_index], minlength=rows * classes)
    predicted_count = np.bincount((offsets + predicted_index).ravel(), minlength=rows * classes)
    gold_count = np.bincount((offsets + gold_index).ravel(), minlength=rows * classes)
    true_positive, predicted_count, gold_count = (a.reshape(rows, classes).astype(np.float64)
                                                  for a in (true_positive, predicted_count, gold_count))
    present = (predicted_count + gold_count) > 0
    f1 = np.divide(2 * true_positive, predicted_count + gold_count, out=np.zeros_like(true_positive),
                   where=present)
    return (f1 * present).sum(axis=1) / present.sum(axis=1)


def _average_precision(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """scikit-learn's average precision of each row: sum over distinct score thresholds (descending) of the recall
    gained there times the precision there."""
    order = np.argsort(-scores, axis=1, kind="stable")
    sorted_scores = np.take_along_axis(scores, order, axis=1)
    true_positives = np.cumsum(np.take_along_axis(positive, order, axis=1), axis=1)
    block_end = np.ones_like(sorted_scores, dtype=bool)  # the last position of each run of equal scores
    block_end[:, :-1] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
    at_ends = np.where(block_end, true_positives, 0)
    before = np.zeros_like(at_ends)
    before[:, 1:] = np.maximum.accumulate(at_ends, axis=1)[:, :-1]  # true positives at the previous threshold
    precision = true_positives / np.arange(1, scores.shape[1] + 1)
    total = true_positives[:, -1]
    gained = np.where(block_end, (true_positives - before) * precision, 0.0).sum(axis=1)
    return np.divide(gained, total, out=np.zeros(len(total)), where=total > 0)


def _statistic(name: str, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The statistic (a fraction, not x100) of each row of the ``[resamples, n]`` arrays."""
    if name == "mean":
        return arrays["values"].mean(axis=1)
    if name == "pearson":
        return _row_correlation(arrays["predicted"], arrays["gold"])
    if name == "spearman":
        return _row_correlation(rankdata(arrays["predicted"], axis=1), rankdata(arrays["gold"], axis=1))
    if name == "average_precision":
        return _average_precision(arrays["predicted"], arrays["gold"])
    return _macro_f1(arrays["predicted"], arrays["gold"], arrays["classes"])


def mean_examples(values: Sequence[float], ids: Sequence | None = None, groups: Sequence[int] | None = None,
                  scale: float = 100.0) -> ExampleScores:
    """Per-example values whose mean (x ``scale``) is the main score, e.g. per-query AP; with ``groups`` the mean of
    the group means (e.g. a benchmark's sub-collections averaged with equal weight)."""
    return ExampleScores("mean", {"values": values}, groups=groups, scale=scale, ids=ids,
                         aggregate="group-mean" if groups is not None else "pooled")


def bootstrap_indices(data: ExampleScores, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """``[resamples, n]`` example positions drawn with replacement within each group, laid out group by group. The
    same (seed, examples' layout) always gives the same matrix, so every model over these examples is resampled
    alike."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    rng = np.random.default_rng([seed, len(data)])
    blocks = [positions[rng.integers(0, len(positions), size=(resamples, len(positions)))]
              for positions in data.layout()]
    return np.concatenate(blocks, axis=1)


def check_same_examples(results: Sequence[ExampleScores]) -> None:
    """Raise ExampleDataError unless every result is over the same examples with the same statistic."""
    identities = {data.identity() for data in results}
    if len(identities) > 1:
        raise ExampleDataError("the results are not over the same test examples (different gold, ids, groups or "
                               "sizes); they cannot be resampled together")


def pooled_replicates(results: Sequence[ExampleScores], resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED) -> np.ndarray:
    """``[resamples]`` bootstrap replicates of the mean over ``results`` (one model's seeds) of the statistic, all
    seeds resampled with the same examples."""
    if not results:
        raise ExampleDataError("no results to resample")
    check_same_examples(results)
    indices = bootstrap_indices(results[0], resamples, seed)
    return np.mean([data.resampled(indices) for data in results], axis=0)


def percentile_interval(replicates: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates."""
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_interval(results: Sequence[ExampleScores] | ExampleScores, resamples: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The 95% bootstrap interval of the (seed-mean) main score over the test examples."""
    if isinstance(results, ExampleScores):
        results = [results]
    return percentile_interval(pooled_replicates(results, resamples, seed), confidence)


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
    if not abs(recomputed - main_score) <= 1e-6 * max(1.0, abs(main_score)):
        logger.warning("%s: the per-example data give %.6f, not the main score %.6f; no interval is stored",
                       what, recomputed, main_score)
        return None, None
    content = data.to_npz()
    return {**data.describe(), "sha256": hashlib.sha256(content).hexdigest()}, content
