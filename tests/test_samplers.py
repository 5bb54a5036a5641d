"""Silver-pair samplers (plugins/samplers.py) on small deterministic inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from harness.blocks import SamplingInput
from harness.plugins.samplers import BUILT_IN, GaussianKde, iterative_kde_selection, kde_sampling_probabilities

# Four topics of three sentences each; sentences of a topic share their content words.
CLUSTERS = [
    ["the red car drives fast on the highway", "a red car drives very fast", "fast red car on a highway"],
    ["my cat sleeps on the warm sofa", "the cat sleeps all day on a sofa", "a sleepy cat on the sofa"],
    ["stock markets fell sharply after the report", "the report made stock markets fall", "markets fell on the report"],
    ["she plays the violin in an orchestra", "an orchestra violin player", "playing violin with the orchestra"],
]
SENTENCES = [s for cluster in CLUSTERS for s in cluster]
CLUSTER_OF = {row: row // 3 for row in range(len(SENTENCES))}


def _one_hot_embed(texts):
    """Embeddings that put each topic on its own axis (plus a little per-sentence noise)."""
    rng = np.random.default_rng(0)
    rows = []
    for text in texts:
        vector = np.zeros(4, dtype=np.float32)
        vector[CLUSTER_OF[SENTENCES.index(text)]] = 1.0
        rows.append(vector + 0.01 * rng.random(4).astype(np.float32))
    return np.stack(rows)


def _inputs(gold_pairs=((0, 3),), top_k=2, seed=42, candidates=None) -> SamplingInput:
    return SamplingInput(
        sentences=list(SENTENCES),
        gold_pairs=list(gold_pairs),
        top_k=top_k,
        seed=seed,
        embed=_one_hot_embed,
        sampler=BUILT_IN.__getitem__,
        candidates=candidates,
    )


def _assert_clean(pairs, inputs, top_k=None):
    keys = [frozenset(pair) for pair in pairs]
    assert all(a != b for a, b in pairs), "self-pair"
    assert len(keys) == len(set(keys)), "duplicate pair"
    assert not any(inputs.is_gold(pair) for pair in pairs), "gold pair proposed as silver"
    if top_k is not None:
        anchors = [a for a, _ in pairs]
        assert max(anchors.count(a) for a in set(anchors)) <= top_k


@pytest.mark.parametrize("name", ["random", "bm25", "semantic-search", "bm25+semantic-search", "kde", "kde-iterative"])
def test_proposals_have_no_self_pairs_duplicates_or_gold_pairs(name):
    inputs = _inputs(gold_pairs=[(0, 1), (4, 3)])
    pairs = BUILT_IN[name].propose(inputs)
    assert pairs
    _assert_clean(pairs, inputs, top_k=None if "+" in name or "kde" in name else inputs.top_k)
    assert all(0 <= i < len(SENTENCES) and 0 <= j < len(SENTENCES) for i, j in pairs)


def test_proposals_are_deterministic_per_seed():
    for name in ("random", "kde-iterative"):
        assert BUILT_IN[name].propose(_inputs(seed=1)) == BUILT_IN[name].propose(_inputs(seed=1))
    assert BUILT_IN["random"].propose(_inputs(seed=1)) != BUILT_IN["random"].propose(_inputs(seed=2))


def test_none_reannotates_the_gold_pairs():
    gold = [(0, 1), (5, 2), (0, 1)]
    assert BUILT_IN["none"].propose(_inputs(gold_pairs=gold)) == gold


def test_random_gives_top_k_partners_per_sentence():
    pairs = BUILT_IN["random"].propose(_inputs(gold_pairs=[], top_k=2))
    anchors = [a for a, _ in pairs]
    # Unordered duplicates are dropped, so a sentence gets at most k partners as anchor and most get exactly k.
    assert max(anchors.count(a) for a in set(anchors)) == 2
    assert len(pairs) >= len(SENTENCES)


def test_bm25_returns_lexical_neighbours():
    pairs = BUILT_IN["bm25"].propose(_inputs(gold_pairs=[], top_k=1))
    assert len(pairs) >= len(SENTENCES) // 2
    for anchor, neighbour in pairs:
        assert CLUSTER_OF[anchor] == CLUSTER_OF[neighbour], (SENTENCES[anchor], SENTENCES[neighbour])


def test_semantic_search_returns_nearest_embeddings():
    pairs = BUILT_IN["semantic-search"].propose(_inputs(gold_pairs=[], top_k=2))
    assert pairs
    assert all(CLUSTER_OF[a] == CLUSTER_OF[b] for a, b in pairs)


def test_union_contains_both_members():
    inputs = _inputs(gold_pairs=[], top_k=1)
    union = {frozenset(p) for p in BUILT_IN["bm25+semantic-search"].propose(inputs)}
    for member in ("bm25", "semantic-search"):
        assert {frozenset(p) for p in BUILT_IN[member].propose(inputs)} <= union


def test_kde_candidates_follow_the_candidates_option():
    inputs = _inputs(candidates=("bm25",), top_k=1)
    assert BUILT_IN["kde-iterative"].propose(inputs) == BUILT_IN["bm25"].propose(inputs)
    default = BUILT_IN["kde-iterative"].propose(_inputs(top_k=1))
    members = ("semantic-search", "random")
    expected = {frozenset(p) for name in members for p in BUILT_IN[name].propose(_inputs(top_k=1))}
    assert {frozenset(p) for p in default} == expected


def test_gaussian_kde_equals_scipy():
    rng = np.random.default_rng(3)
    points = rng.beta(2, 5, size=57)
    grid = np.linspace(-0.5, 1.5, 41)
    np.testing.assert_allclose(GaussianKde(points)(grid), stats.gaussian_kde(points)(grid), rtol=1e-10, atol=1e-12)


def test_gaussian_kde_of_equal_points_is_finite():
    density = GaussianKde([0.5, 0.5])([0.5, 0.9])
    assert np.isfinite(density).all() and density[0] > density[1]


def test_kde_sampling_probability_is_q_of_thesis_eq_2_9():
    rng = np.random.default_rng(0)
    gold = rng.beta(5, 2, size=300)
    candidates = rng.beta(2, 5, size=400)
    probabilities = kde_sampling_probabilities(candidates, gold)
    gold_density = stats.gaussian_kde(gold)(candidates)
    silver_density = stats.gaussian_kde(candidates)(candidates)
    expected = np.where(gold_density >= silver_density, 1.0, gold_density / silver_density)
    np.testing.assert_allclose(probabilities, expected, rtol=1e-8)


def _synthetic_scores(seed=0):
    """Gold mostly similar pairs; candidates mostly dissimilar (as random pairs are) plus some similar ones."""
    rng = np.random.default_rng(seed)
    gold = rng.beta(5, 2, size=400)
    candidates = np.concatenate([rng.beta(1.5, 8, size=1600), rng.beta(6, 2, size=400), rng.uniform(size=200)])
    return gold, candidates


def test_iterative_kde_makes_the_silver_distribution_approach_the_gold_one():
    gold, candidates = _synthetic_scores()
    selected = iterative_kde_selection(candidates, gold, np.random.default_rng(1))
    assert len(selected) == len(set(selected)) and len(selected) > 50
    before = stats.ks_2samp(candidates, gold).statistic
    after = stats.ks_2samp(candidates[selected], gold).statistic
    assert after < before / 2, (before, after)
    assert abs(np.mean(candidates[selected]) - np.mean(gold)) < 0.1


def test_iterative_kde_follows_algorithm_1():
    gold, candidates = _synthetic_scores()
    selected = iterative_kde_selection(candidates, gold, np.random.default_rng(5))
    permutation = np.random.default_rng(5).permutation(len(candidates))
    assert selected[:2] == permutation[:2].tolist()  # starts from the first two shuffled candidates
    # Converged: no remaining candidate has a gold density above the final silver density.
    remaining = np.setdiff1d(np.arange(len(candidates)), selected)
    assert (GaussianKde(gold)(candidates[remaining]) <= GaussianKde(candidates[selected])(candidates[remaining])).all()
    assert selected == iterative_kde_selection(candidates, gold, np.random.default_rng(5))


def test_kde_select_moves_towards_gold_and_keeps_only_candidates():
    gold, candidates = _synthetic_scores(2)
    kept = BUILT_IN["kde"].select(candidates, gold, np.random.default_rng(0))
    assert len(set(kept.tolist())) == len(kept) and kept.max() < len(candidates)
    assert stats.ks_2samp(candidates[kept], gold).statistic < stats.ks_2samp(candidates, gold).statistic


def test_samplers_are_registered_components(registry):
    names = registry.component_names("sampler")
    assert set(BUILT_IN) <= set(names)
    for name in BUILT_IN:
        assert registry.components[("sampler", name)].description


@pytest.mark.parametrize(
    "name",
    ["random", "bm25", "semantic-search", "bm25+semantic-search", "semantic-search+random", "kde", "kde-iterative"],
)
def test_no_sampler_pairs_two_held_out_sentences(name):
    """Sentences that also occur in the target's dev/test pairs (in-topic BWS) are never paired with each other: such
    a pair could be an evaluated pair. Pairing a held-out sentence with another sentence stays allowed."""
    held_out = {0, 1, 2, 3, 4, 5}  # the first two clusters: their nearest neighbours are each other
    inputs = SamplingInput(
        sentences=list(SENTENCES),
        gold_pairs=[(0, 9)],
        top_k=3,
        seed=42,
        embed=_one_hot_embed,
        sampler=BUILT_IN.__getitem__,
        held_out=frozenset(held_out),
    )
    pairs = BUILT_IN[name].propose(inputs)
    assert pairs
    assert not [pair for pair in pairs if set(pair) <= held_out]
    if name in ("bm25", "semantic-search"):  # their top neighbours were held-out pairs: dropped and counted
        assert inputs.dropped_held_out_pairs
    free = BUILT_IN[name].propose(_inputs(gold_pairs=[(0, 9)], top_k=3))
    assert [pair for pair in free if set(pair) <= held_out]  # without the exclusion they would be proposed


def test_none_still_reannotates_gold_pairs_of_held_out_sentences():
    inputs = SamplingInput(sentences=list(SENTENCES), gold_pairs=[(0, 1)], held_out=frozenset({0, 1}))
    assert BUILT_IN["none"].propose(inputs) == [(0, 1)]  # a gold train pair is training data, not a new pair


def test_default_top_k_is_the_thesis_codes_five():
    assert SamplingInput(sentences=list(SENTENCES), gold_pairs=[]).top_k == 5
