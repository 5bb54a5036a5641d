"""SentEval STS loaders and aggregation conventions."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from harness.plugin_api import EvalContext
from harness.profiles import get_profile

EXPECTED_PAIRS = {
    "sts12": 3108,
    "sts13": 1500,
    "sts14": 3750,
    "sts15": 3000,
    "sts16": 1186,
    "stsb": 1379,
    "sickr": 4927,
}


class LengthScorer:
    """A deterministic pair scorer (no embeddings): minus the absolute difference in word counts."""

    calls = 0

    def score(self, first, second):
        LengthScorer.calls += 1
        return np.array([-abs(len(a.split()) - len(b.split())) for a, b in zip(first, second)], dtype=float)


def _task(registry, name, **options):
    plugin = registry.task(name)
    from harness.options import resolve_options

    return plugin.factory(resolve_options(name, plugin.options, options), None)


def _ctx(profile="quick"):
    return EvalContext(profile=get_profile(profile), device="cpu", seed=0, batch_size=8, progress=False)


@pytest.mark.parametrize("name, pairs", EXPECTED_PAIRS.items())
@pytest.mark.parametrize("text", ["senteval", "raw"])
def test_pair_counts(registry, name, pairs, text):
    options = {"text": text} if name != "sickr" else {}
    pairsets, _ = _task(registry, name, **options).load()
    assert sum(len(p.gold) for p in pairsets) == pairs


def test_sick_full_variant(registry):
    pairsets, _ = _task(registry, "sickr", split="all").load()
    assert sum(len(p.gold) for p in pairsets) == 9927


def test_aggregations_follow_their_conventions(registry):
    task = _task(registry, "sts14")
    pairsets, _ = task.load()
    result = task.evaluate(LengthScorer(), _ctx())
    scorer = LengthScorer()
    per_subset = [100 * spearmanr(scorer.score(p.first, p.second), p.gold)[0] for p in pairsets]
    pooled_pred = np.concatenate([scorer.score(p.first, p.second) for p in pairsets])
    pooled_gold = np.concatenate([p.gold for p in pairsets])
    assert result.scores["spearman_mean"] == pytest.approx(np.mean(per_subset), abs=1e-9)
    assert result.scores["spearman_all"] == pytest.approx(100 * spearmanr(pooled_pred, pooled_gold)[0], abs=1e-9)
    sizes = [len(p.gold) for p in pairsets]
    assert result.scores["spearman_wmean"] == pytest.approx(np.average(per_subset, weights=sizes), abs=1e-9)
    assert result.scores["spearman"] == result.scores["spearman_all"]
    assert _task(registry, "sts14", aggregation="mean").evaluate(LengthScorer(), _ctx()).scores["spearman"] == (
        pytest.approx(np.mean(per_subset))
    )
    assert result.details["pairs"]["deft-forum"] == 450


def test_pair_scorer_is_called_once_per_task(registry):
    LengthScorer.calls = 0
    _task(registry, "sts12").evaluate(LengthScorer(), _ctx())
    assert LengthScorer.calls == 1


def test_senteval_text_is_whitespace_normalised(registry):
    pairsets, _ = _task(registry, "sts15").load()
    assert all("  " not in s and s == s.strip() for p in pairsets for s in p.first[:50])


def test_stsb_training_data(registry):
    splits = _task(registry, "stsb").training_data("scored_pairs")
    assert len(splits.train) == 5749 and len(splits.dev) == 1500
    assert splits.train.scores.min() >= 0.0 and splits.train.scores.max() <= 1.0
    assert _task(registry, "sts12").training_data("scored_pairs") is None


def test_smoke_profile_cuts_evaluation(registry):
    result = _task(registry, "sts12").evaluate(LengthScorer(), _ctx("smoke"))
    assert all(n == 200 for n in result.details["pairs"].values())
