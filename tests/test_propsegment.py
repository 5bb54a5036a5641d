"""PropSegmEnt retrieval: metrics against a naive computation, self-exclusion, unit aggregation, the collection
(gold from judgements, reference segmentation, splits) and the tasks on the bundled data and on user files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import harness
from harness import PROPOSITION_PAIRS, IncompatibleError, MissingDataError
from harness.evaluation.retrieval import (
    RetrievalQueries,
    first_occurrences,
    ranked_items,
    retrieval_metrics,
    unit_retrieval_metrics,
)
from harness.tasks import propsegment
from harness.tasks.propsegment import DOCUMENTS, SENTENCES, PropSegmentRetrieval, heldout_clusters
from harness.tasks.propsegment.collection import (
    build_collection,
    counts_as_entailment,
    fact_groups,
    merge_variants,
    segmentation_pairs,
    training_pairs,
)
from harness.tasks.propsegment.files import Relationship, read_split
from harness.testing import HashingSpanEncoder, check_task, eval_context


# -- metrics against a naive computation ------------------------------------------------------------------------------
def naive_rankings(vectors, query_rows):
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    rankings = []
    for row in query_rows:
        scores = (unit @ unit[row]).astype(np.float32)
        order = sorted((i for i in range(len(unit)) if i != row), key=lambda i: (-scores[i], i))
        rankings.append(order)
    return rankings


def naive_metrics(rankings, gold, ks=(1, 5, 10, 20)):
    metrics = {}
    for k in ks:
        if k == 1:
            metrics["p@1"] = float(np.mean([ranking[0] in set(g) for ranking, g in zip(rankings, gold)]))
        else:
            metrics[f"r@{k}"] = float(
                np.mean([len(set(ranking[:k]) & set(g)) / len(g) for ranking, g in zip(rankings, gold)])
            )
    return metrics


def random_problem(seed, n_items=60, n_queries=25, dim=8):
    generator = np.random.default_rng(seed)
    vectors = generator.normal(size=(n_items, dim))
    vectors[5] = vectors[4]  # exact ties
    query_rows = generator.choice(n_items, size=n_queries, replace=False)
    gold = []
    for row in query_rows:
        others = [i for i in range(n_items) if i != row]
        gold.append(np.array(generator.choice(others, size=int(generator.integers(1, 4)), replace=False)))
    return vectors, RetrievalQueries(np.asarray(query_rows), gold)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("chunk", [1, 7, 256])
def test_retrieval_metrics_equal_a_naive_computation(seed, chunk):
    vectors, queries = random_problem(seed)
    expected = naive_metrics(naive_rankings(vectors, queries.rows), queries.gold)
    actual = retrieval_metrics(vectors, queries, chunk=chunk)
    assert actual == pytest.approx(expected, abs=1e-12)


def test_the_query_never_retrieves_itself_even_when_everything_ties():
    vectors = np.ones((10, 4))
    queries = RetrievalQueries(np.arange(10), [np.array([(row + 1) % 10]) for row in range(10)])
    ranked = ranked_items(vectors, queries, 9)
    assert ranked.shape == (10, 9)
    for row, ranking in enumerate(ranked):
        assert row not in ranking and sorted(ranking) == [i for i in range(10) if i != row]


def test_the_query_is_not_retrieved_when_it_duplicates_another_item():
    vectors = np.eye(6)
    vectors[3] = vectors[2]  # the query's twin is a different item: it may (and should) be retrieved first
    queries = RetrievalQueries(np.array([2]), [np.array([3])])
    assert ranked_items(vectors, queries, 5)[0, 0] == 3
    assert retrieval_metrics(vectors, queries)["p@1"] == 1.0


def test_a_query_cannot_be_its_own_gold():
    with pytest.raises(ValueError, match="its own gold"):
        RetrievalQueries(np.array([1]), [np.array([1, 2])])


def naive_unit_metrics(vectors, queries, unit_of, candidates, ks=(1, 5, 10, 20)):
    rankings = []
    for ranking in naive_rankings(vectors, queries.rows):
        units = []
        for item in ranking[:candidates]:
            if unit_of[item] not in units:
                units.append(unit_of[item])
        rankings.append(units)
    gold_units = [sorted({unit_of[i] for i in g}) for g in queries.gold]
    return naive_metrics(rankings, gold_units, ks)


@pytest.mark.parametrize("seed", [0, 3])
@pytest.mark.parametrize("candidates", [20, 35, 100])
def test_unit_metrics_equal_a_naive_best_of_aggregation(seed, candidates):
    vectors, queries = random_problem(seed)
    unit_of = np.random.default_rng(seed + 10).integers(0, 25, size=len(vectors))
    expected = naive_unit_metrics(vectors, queries, unit_of, candidates)
    assert unit_retrieval_metrics(vectors, queries, unit_of, candidates, chunk=4) == pytest.approx(expected)


def test_first_occurrences_mark_each_units_best_rank():
    units = np.array([[3, 1, 3, 2, 1], [0, 0, 0, 0, 0]])
    assert first_occurrences(units).tolist() == [[True, True, False, True, False], [True, False, False, False, False]]


# -- a tiny PropSegmEnt in the official format -----------------------------------------------------------------------
def sentence(text):
    tokens, position = [], 0
    for word in text.split(" "):
        tokens.append({"text": word, "character_offset_of_token_in_sentence": position})
        position += len(word) + 1
    return {"sentence_text": text, "tokens": tokens}


CLUSTERS = {
    "c1": {"d1": ["Alice lives in Paris .", "She is a painter ."], "d2": ["Alice , a painter , lives in Paris ."]},
    "c2": {"d3": ["Bob plays chess well ."], "d4": ["Bob is good at chess ."]},
    "c3": {"d5": ["Carol sings opera ."], "d6": ["Carol is an opera singer ."]},
}


def proposition(indices):
    return {"token_indices": list(indices)}


def judgement(cluster, premise, document, index, tokens, responses):
    return {
        "cluster_id": cluster,
        "premise_document_id": premise,
        "hypothesis_proposition": {
            "document_id": document,
            "sentence_index": index,
            "proposition": proposition(tokens),
        },
        "relationship_responses": [
            {
                "rater_did_not_understand_premise": False,
                "rater_did_not_understand_hypothesis": False,
                "relationship": verdict,
                **(
                    {
                        "supporting_premise_proposition": {
                            "sentence_index": support[0],
                            "proposition": proposition(support[1]),
                        }
                    }
                    if support
                    else {}
                ),
            }
            for verdict, support in responses
        ],
    }


ENTAILS, NEITHER = "RELATIONSHIP_ENTAILS", "RELATIONSHIP_NEITHER_ENTAILS_NOR_CONTRADICTS"


def write_split(folder: Path, split: str, with_relationships: bool = True, gz: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    clusters = [
        {
            "cluster_id": c,
            "source_dataset": "SOURCE_WIKI_CLUSTERS",
            "documents": [
                {"document_id": d, "sentences": [sentence(text) for text in texts]} for d, texts in docs.items()
            ],
        }
        for c, docs in CLUSTERS.items()
    ]
    segmentation = {  # reference propositions per (document, sentence)
        ("d1", 0): [[0, 1, 2, 3]],
        ("d1", 1): [[0, 1, 2, 3]],
        ("d2", 0): [[0, 5, 6, 7], [0, 2, 3, 4]],
        ("d3", 0): [[0, 1, 2], [0, 1, 3]],
        ("d4", 0): [[0, 1, 2, 3, 4]],
        ("d5", 0): [[0, 1, 2]],
    }  # d6 has no reference response
    second_rater = {("d2", 0): [[0, 5, 6, 7, 8], [0, 3]]}  # a variant of [0, 5, 6, 7] (Jaccard 0.8) and a new fact
    propositions = [
        {
            "sentence_id": {"cluster_id": c, "document_id": d, "sentence_index": i},
            "segmentation_responses": [
                {
                    "non_informational": False,
                    "rater_did_not_understand_sentence": False,
                    "is_reference_response": reference,
                    "propositions": [proposition(p) for p in response],
                }
                for reference, response in ((False, second_rater.get((d, i))), (True, segmentation[(d, i)]))
                if response
            ],
        }
        for c, docs in CLUSTERS.items()
        for d, texts in docs.items()
        for i in range(len(texts))
        if (d, i) in segmentation
    ]
    propositions.append(
        {"sentence_id": {"cluster_id": "news", "document_id": "n1", "sentence_index": 0}, "segmentation_responses": []}
    )  # a NewSHead sentence: no text here
    relationships = [
        # d1 "Alice lives in Paris" <- d2 (3 of 3): gold is the d2 proposition [0, 5, 6, 7]
        judgement("c1", "d2", "d1", 0, [0, 1, 2, 3], [(ENTAILS, (0, [0, 5, 6, 7]))] * 3),
        # the reverse: mutual
        judgement("c1", "d1", "d2", 0, [0, 5, 6, 7], [(ENTAILS, (0, [0, 1, 2, 3]))] * 2 + [(NEITHER, None)]),
        # d1 "She is a painter" <- d2 by 1 of 3 only: no gold under majority
        judgement("c1", "d2", "d1", 1, [0, 1, 2, 3], [(ENTAILS, (0, [0, 2, 3, 4]))] + [(NEITHER, None)] * 2),
        # c2: two raters name different supports (one outside the reference segmentation)
        judgement(
            "c2",
            "d4",
            "d3",
            0,
            [0, 1, 2],
            [(ENTAILS, (0, [0, 1, 2, 3, 4])), (ENTAILS, (0, [0, 3, 4, 5])), (NEITHER, None)],
        ),
        # c3
        judgement("c3", "d6", "d5", 0, [0, 1, 2], [(ENTAILS, (0, [0, 3, 4]))] * 3),
        # NewSHead: left out
        judgement("news", "n2", "n1", 0, [0, 1], [(ENTAILS, (0, [0, 1]))] * 3),
    ]
    files = {"document_clusters": clusters, "propositions": propositions}
    if with_relationships:
        files["relationships"] = relationships
    for stem, content in files.items():
        data = json.dumps(content).encode()
        if gz:
            (folder / f"{stem}.{split}.json.gz").write_bytes(gzip.compress(data))
        else:
            (folder / f"{stem}.{split}.json").write_bytes(data)


@pytest.fixture()
def tiny_dev(tmp_path):
    write_split(tmp_path / "propsegment" / "v1", "dev", gz=True)
    write_split(tmp_path / "propsegment" / "v1", "test", with_relationships=False)
    return tmp_path


def test_reading_counts_what_has_no_text_and_maps_tokens_to_spans(tiny_dev):
    split = read_split(tiny_dev / "propsegment" / "v1", "dev", True)
    assert split.left_out == {"segmented_sentences_without_text": 1, "relationships_without_text": 1}
    alice = split.sentences[("d2", 0)]
    assert [alice.text[a:b] for a, b in alice.spans_of(frozenset({0, 5, 6, 7}))] == ["Alice", "lives in Paris"]
    assert ("d6", 0) not in split.reference  # no reference response: no propositions


@pytest.mark.parametrize(
    "votes,majority,any_,unanimous",
    [(3, True, True, True), (2, True, True, False), (1, False, True, False), (0, False, False, False)],
)
def test_rater_agreement_rules(votes, majority, any_, unanimous):
    relationship = Relationship(
        "c",
        "p",
        ("d", 0, frozenset({0})),
        tuple([ENTAILS] * votes + [NEITHER] * (3 - votes)),
        tuple([("p", 0, frozenset({1}))] * votes + [None] * (3 - votes)),
    )
    assert counts_as_entailment(relationship, "majority") is majority
    assert counts_as_entailment(relationship, "any") is any_
    assert counts_as_entailment(relationship, "unanimous") is unanimous


def test_collection_gold_queries_and_reference_segmentation(tiny_dev):
    split = read_split(tiny_dev / "propsegment" / "v1", "dev", True)
    collection = build_collection(split, {"c1", "c2", "c3"}, "majority")
    keys = {key: row for row, key in enumerate(collection.items)}
    query_keys = [collection.items[row] for row in collection.queries.rows]
    # "She is a painter" has only 1 of 3 ENTAILS votes: not a query under majority
    assert ("d1", 1, frozenset({0, 1, 2, 3})) not in query_keys
    assert len(query_keys) == 4
    bob = query_keys.index(("d3", 0, frozenset({0, 1, 2})))
    # both raters' supports are gold; the one outside the reference segmentation was added to the corpus
    assert sorted(collection.queries.gold[bob].tolist()) == sorted(
        [keys[("d4", 0, frozenset({0, 1, 2, 3, 4}))], keys[("d4", 0, frozenset({0, 3, 4, 5}))]]
    )
    assert collection.stats["added_outside_reference_segmentation"] == 2  # d4 [0,3,4,5] and d6 [0,3,4]
    assert collection.stats["sentences_without_reference_segmentation"] == 1
    assert collection.span_items[keys[("d1", 0, frozenset({0, 1, 2, 3}))]] == ("Alice lives in Paris .", [(0, 20)])
    any_rule = build_collection(split, {"c1", "c2", "c3"}, "any")
    assert any_rule.stats["queries"] == 5


def test_training_pairs_mutual_and_entails(tiny_dev):
    split = read_split(tiny_dev / "propsegment" / "v1", "dev", True)
    mutual, counts = training_pairs(split, {"c1", "c2", "c3"}, "majority", "mutual")
    assert counts["pairs"] == 1 and counts["positive_links"] == 1  # only Alice/Paris entails both ways
    pair = mutual.pairs[0]
    ((i, j),) = pair.positives
    assert {pair.first, pair.second} == {"Alice lives in Paris .", "Alice , a painter , lives in Paris ."}
    assert pair.first_propositions[i] and pair.second_propositions[j]
    entails, counts = training_pairs(split, {"c1", "c2", "c3"}, "majority", "entails")
    assert counts["pairs"] == 3 and counts["positive_links"] == 4
    only_c2, _ = training_pairs(split, {"c2"}, "majority", "entails")
    assert {p.first for p in only_c2.pairs} | {p.second for p in only_c2.pairs} <= {
        "Bob plays chess well .",
        "Bob is good at chess .",
    }


def test_rater_variants_merge_into_the_proposition_already_in_their_sentence():
    reference = {("d", 0): [frozenset({0, 1, 2, 3, 4}), frozenset({6, 7})]}
    variant_query = ("d", 0, frozenset({0, 1, 2, 3}))  # Jaccard 0.8 with the first reference proposition
    other_query = ("e", 0, frozenset({1, 2}))
    gold = {
        variant_query: {("f", 0, frozenset({5}))},
        other_query: {("d", 0, frozenset({0, 1, 2, 3, 4, 5})), ("d", 0, frozenset({6, 7, 8, 9}))},
    }
    merged, count = merge_variants(gold, reference)
    assert merged == {
        ("d", 0, frozenset({0, 1, 2, 3, 4})): {("f", 0, frozenset({5}))},
        other_query: {("d", 0, frozenset({0, 1, 2, 3, 4})), ("d", 0, frozenset({6, 7, 8, 9}))},
    }
    assert count == 2  # {6, 7, 8, 9} has Jaccard 0.5 with {6, 7}: a proposition of its own


def test_variants_merge_removes_the_near_duplicates_that_keep_leaves_in_the_bundled_corpus():
    root = propsegment.folder(None)
    dev, test = propsegment._read(root, "dev", True), propsegment._read(root, "test", False)
    _, evaluated = heldout_clusters(dev)
    kept = build_collection(dev, evaluated, "majority", test, variants="keep")
    merged = build_collection(dev, evaluated, "majority", test)
    assert kept.stats["queries_with_own_sentence_near_duplicate"] == 74 and kept.stats["queries"] == 220
    assert merged.stats["variants_merged"] > 0
    assert merged.stats["corpus_propositions"] == kept.stats["corpus_propositions"] - merged.stats["variants_merged"]
    # what is left are distinct facts of the reference segmentation itself (e.g. two objects of one verb)
    for row, gold in zip(merged.queries.rows, merged.queries.gold):
        key = merged.items[row]
        twins = [
            other
            for other in merged.items
            if other[:2] == key[:2]
            and other != key
            and len(other[2] & key[2]) / len(other[2] | key[2]) >= 0.8
            and merged.items.index(other) not in set(gold.tolist())
        ]
        assert all(twin[2] in dev.reference[twin[:2]] and key[2] in dev.reference[key[:2]] for twin in twins)


def test_segmentation_pairs_link_each_fact_in_context_to_its_own_text(tiny_dev):
    split = read_split(tiny_dev / "propsegment" / "v1", "dev", True)
    assert fact_groups(split.segmentations[("d2", 0)]) == [
        [frozenset({0, 5, 6, 7}), frozenset({0, 5, 6, 7, 8})],
        [frozenset({0, 2, 3, 4})],
        [frozenset({0, 3})],
    ]
    data, counts = segmentation_pairs(split, {"c1"})
    assert counts["pairs"] == 5  # d1: one fact in each of two sentences; d2: three facts
    alice = [pair for pair in data.pairs if pair.first == "Alice , a painter , lives in Paris ."]
    first = alice[0]
    assert first.second == "Alice lives in Paris" and first.second_propositions == (((0, 20),),)
    text = first.first
    assert [[text[a:b] for a, b in spans] for spans in first.first_propositions] == [
        ["Alice", "lives in Paris"],
        ["Alice", "lives in Paris ."],
        ["Alice", "a painter ,"],
        ["Alice", "painter"],
    ]
    assert first.positives == ((0, 0), (1, 0))  # the fact and its rater variant; the siblings are negatives
    others, _ = segmentation_pairs(split, {"c2", "c3"})  # only the clusters asked for
    assert {pair.first for pair in others.pairs} == {
        "Bob plays chess well .",
        "Bob is good at chess .",
        "Carol sings opera .",
    }


def test_heldout_split_keeps_training_and_evaluated_clusters_disjoint():
    root = propsegment.folder(None)
    dev = propsegment._read(root, "dev", True)
    training, evaluated = heldout_clusters(dev)
    assert training and evaluated and not training & evaluated
    assert training | evaluated == {r.cluster for r in dev.relationships}
    pairs, _ = training_pairs(dev, training, "majority", "entails")
    evaluated_texts = {s.text for s in dev.sentences.values() if s.cluster in evaluated}
    assert not ({p.first for p in pairs.pairs} | {p.second for p in pairs.pairs}) & evaluated_texts
    task = PropSegmentRetrieval({}, None)
    splits = task.training_data(PROPOSITION_PAIRS, eval_context())
    assert splits.train.kind == PROPOSITION_PAIRS and len(splits.train) > 0
    assert not set(splits.train.sentences()) & evaluated_texts
    for pairs in ("segmentations", "both"):
        splits = PropSegmentRetrieval({"pairs": pairs}, None).training_data(PROPOSITION_PAIRS, eval_context())
        training_texts = {s.text for s in dev.sentences.values() if s.cluster in training}
        assert {p.first for p in splits.train.pairs} <= training_texts and len(splits.train) > 1000


def test_the_bundled_task_runs_with_a_span_encoder_and_reports_what_was_left_out():
    report = check_task(PropSegmentRetrieval, HashingSpanEncoder())
    assert set(report.scores) == {"p@1", "r@5", "r@10", "r@20"}
    task = PropSegmentRetrieval({}, None)
    result = task.evaluate(HashingSpanEncoder(), eval_context())
    details = result.details
    assert details["left_out_without_text"]["relationships_without_text"] > 0  # NewSHead judgements
    assert details["queries"] == 200  # the smoke profile's cut of the 220 held-out queries
    assert details["distractor_clusters"] == 24


@pytest.mark.parametrize("task_class,main", [(SENTENCES, "r@5"), (DOCUMENTS, "r@5")])
def test_unit_level_members(task_class, main):
    result = task_class({}, None).evaluate(HashingSpanEncoder(), eval_context())
    assert task_class.metadata.main_score == main and result.details["candidates"] == 100
    assert result.details["level"] in ("sentence", "document")


def test_split_all_offers_no_training_data():
    with pytest.raises(IncompatibleError, match="split=all"):
        PropSegmentRetrieval({"split": "all"}, None).training_data(PROPOSITION_PAIRS, eval_context())


def test_official_split_without_the_full_files_says_where_to_get_them(tiny_dev):
    task = PropSegmentRetrieval({"split": "official"}, tiny_dev)
    with pytest.raises(MissingDataError, match="relationships.test.json.*google-research-datasets/PropSegmEnt"):
        task.check_data()


def test_official_split_from_a_users_data_dir(tmp_path):
    folder = tmp_path / "propsegment" / "v1"
    write_split(folder, "train")
    write_split(folder, "test", gz=True)
    write_split(folder, "dev")
    task = PropSegmentRetrieval({"split": "official"}, tmp_path)
    result = task.evaluate(HashingSpanEncoder(), eval_context())
    assert result.details["queries"] == 4 and result.details["distractor_clusters"] == 0
    splits = task.training_data(PROPOSITION_PAIRS, eval_context())
    assert len(splits.train) == 1  # the mutual Alice/Paris pair of the train files


def test_a_malformed_file_names_itself(tmp_path):
    folder = tmp_path / "propsegment" / "v1"
    write_split(folder, "dev")
    write_split(folder, "test", with_relationships=False)
    (folder / "relationships.dev.json").write_text('{"not": "an array"}')
    with pytest.raises(harness.DataFileError, match="relationships.dev.json.*JSON array"):
        PropSegmentRetrieval({}, tmp_path).check_data()


def test_a_model_returning_the_wrong_number_of_rows_is_an_error(tiny_dev):
    class Short:
        def encode_spans(self, items):
            return np.zeros((len(items) - 1, 4), dtype=np.float32)

    with pytest.raises(harness.DataFileError, match="one row per item"):
        PropSegmentRetrieval({}, tiny_dev).evaluate(Short(), eval_context())


def test_the_family_encodes_the_corpus_once_per_model(tiny_dev):
    class Counting(HashingSpanEncoder):
        calls = 0

        def encode_spans(self, items):
            Counting.calls += 1
            return super().encode_spans(items)

    model = Counting()
    results = [
        task_class({}, tiny_dev).evaluate(model, eval_context())
        for task_class in (PropSegmentRetrieval, SENTENCES, DOCUMENTS)
    ]
    assert Counting.calls == 1 and len(results) == 3
    PropSegmentRetrieval({"distractors": "none"}, tiny_dev).evaluate(model, eval_context())
    assert Counting.calls == 2  # another corpus
    PropSegmentRetrieval({}, tiny_dev).evaluate(Counting(), eval_context())
    assert Counting.calls == 3  # another model


@pytest.mark.parametrize("task_class,metric,k", [(PropSegmentRetrieval, "p@1", 1), (SENTENCES, "r@5", 5)])
def test_stored_top_hits_agree_with_the_per_query_scores(task_class, metric, k):
    """Each query's stored top hits (what the results site shows) are the ranking its score was computed from."""
    result = task_class({}, None).evaluate(HashingSpanEncoder(), eval_context())
    hits = result.examples.hits
    assert hits.top.shape == (len(result.examples), 10)
    for position, value in enumerate(result.examples.arrays["values"]):
        gold = set(hits.gold[position][hits.gold[position] >= 0].tolist())
        found = len(gold & set(hits.top[position, :k].tolist()))
        assert value == pytest.approx(found / (1 if k == 1 else len(gold)))
        rank = hits.gold_rank[position]
        assert (rank == 0 or hits.top[position, rank - 1] in gold) if rank <= 10 else rank <= hits.depth
    assert result.scores[metric] == pytest.approx(100 * result.examples.arrays["values"].mean())


@pytest.mark.parametrize("task_class", [PropSegmentRetrieval, SENTENCES, DOCUMENTS])
def test_ranked_texts_name_the_stored_hits_queries_and_units(task_class):
    """The texts the results site shows: a query is its proposition's tokens, a document what the level ranks (a
    proposition, its sentence, or the document's sentences); exactly the ids asked for; an unknown id is an error."""
    task = task_class({}, None)
    ctx = eval_context()
    result = task.evaluate(HashingSpanEncoder(), ctx)
    ids, hits = result.examples.ids.tolist(), result.examples.hits
    queries = {str(i) for i in ids[:3]}
    documents = {str(d) for d in hits.top[:3].ravel().tolist() + hits.gold[:3].ravel().tolist() if d >= 0}
    texts = task.ranked_texts(ctx, queries, documents)
    assert isinstance(texts, harness.RankedTexts)
    assert set(texts.queries) == queries and set(texts.documents) == documents
    assert all(texts.queries.values()) and all(texts.documents.values())
    collection = task._collection(ctx)
    row = int(ids[0])
    sentence_text = collection.span_items[row][0]
    assert texts.queries[str(row)] in sentence_text or set(texts.queries[str(row)].split()) <= set(
        sentence_text.split()
    )
    gold_unit = str(hits.gold[0][0])
    if task_class is SENTENCES:  # the gold sentence holds a gold proposition's text
        gold_row = int(collection.queries.gold[0][0])
        assert (
            texts.documents.get(gold_unit, task.ranked_texts(ctx, (), {gold_unit}).documents[gold_unit])
            == (collection.span_items[gold_row][0])
        )
    if task_class is DOCUMENTS:  # a document is longer than any one of its sentences
        document = task.ranked_texts(ctx, (), {gold_unit}).documents[gold_unit]
        assert collection.span_items[int(collection.queries.gold[0][0])][0] in document
    with pytest.raises(harness.DataFileError, match="no document '999999'"):
        task.ranked_texts(ctx, queries, {"999999"})
