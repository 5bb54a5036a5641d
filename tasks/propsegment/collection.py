"""From PropSegmEnt judgements to what the tasks need: the atomic-fact retrieval collection (queries, corpus, gold)
and proposition-pair training data.

Sub-Sentence Encoder (Chen et al. 2023, arXiv 2311.04335), section 4.2.1: a query is one proposition in its
sentence, the corpus is every proposition, the gold of a query are the propositions annotated as entailing it. The
paper's retrieval data is not public; this is a reconstruction from the v1 judgements. How rater disagreement
(``agreement``), the reference segmentation, rater variants (``variants``), distractors, judged and segmentation
training pairs (``positives``, ``pairs``) and the smoke cut are handled, and the deviations: docs/tasks/propsegment.md,
section "PropSegmEnt tasks", subsection "From judgements to the collection".
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from harness import PropositionPair, PropositionPairs
from harness.blocks import RetrievalQueries, evaluation_sample

from .files import PropositionKey, PropSegmentSplit, Relationship, Sentence, SentenceKey

logger = logging.getLogger(__name__)

AGREEMENT_CHOICES = ("majority", "any", "unanimous")
POSITIVES_CHOICES = ("mutual", "entails")
VARIANTS_CHOICES = ("merge", "keep")
NEAR_DUPLICATE_JACCARD = 0.8  # token-set Jaccard at or above which two propositions of a sentence are one fact


def counts_as_entailment(relationship: Relationship, agreement: str) -> bool:
    votes, responses = relationship.entail_votes(), len(relationship.verdicts)
    if agreement == "majority":
        return 2 * votes > responses
    if agreement == "any":
        return votes >= 1
    if agreement == "unanimous":
        return responses > 0 and votes == responses
    raise ValueError(f"agreement must be one of {AGREEMENT_CHOICES}, got {agreement!r}")


def gold_links(
    relationships: Iterable[Relationship], agreement: str, clusters: set[str]
) -> dict[PropositionKey, set[PropositionKey]]:
    """Hypothesis proposition -> its gold (supporting) propositions, from the counted judgements of ``clusters``."""
    gold: dict[PropositionKey, set[PropositionKey]] = defaultdict(set)
    for relationship in relationships:
        if relationship.cluster in clusters and counts_as_entailment(relationship, agreement):
            supports = relationship.entailing_supports()
            if supports:
                gold[relationship.hypothesis].update(supports)
    return dict(gold)


def jaccard(first: frozenset, second: frozenset) -> float:
    return len(first & second) / len(first | second)


def variant_of(candidate: frozenset, known: list[frozenset]) -> frozenset | None:
    """The proposition of ``known`` that ``candidate`` is a rater variant of (highest token Jaccard, at least
    NEAR_DUPLICATE_JACCARD; the earlier one on a tie), or None."""
    best, best_score = None, NEAR_DUPLICATE_JACCARD
    for proposition in known:
        score = jaccard(candidate, proposition)
        if score >= best_score and (best is None or score > best_score):
            best, best_score = proposition, score
    return best


def merge_variants(
    gold: dict[PropositionKey, set[PropositionKey]], reference: dict[SentenceKey, list[frozenset]]
) -> tuple[dict[PropositionKey, set[PropositionKey]], int]:
    """``variants=merge``: a query or gold proposition that is a rater variant of a proposition already in its
    sentence (the reference segmentation first, then the added ones in order) becomes that proposition. Queries
    that become one proposition share their gold. Returns the merged gold and how many propositions were merged."""
    known: dict[SentenceKey, list[frozenset]] = {key: list(props) for key, props in reference.items()}
    canonical: dict[PropositionKey, PropositionKey] = {}
    for key in sorted({k for hypothesis, supports in gold.items() for k in (hypothesis, *supports)}, key=_order):
        in_sentence = known.setdefault((key[0], key[1]), [])
        if key[2] in in_sentence:
            canonical[key] = key
            continue
        twin = variant_of(key[2], in_sentence)
        if twin is None:
            in_sentence.append(key[2])
        canonical[key] = key if twin is None else (key[0], key[1], twin)
    merged: dict[PropositionKey, set[PropositionKey]] = defaultdict(set)
    for hypothesis, supports in gold.items():
        query = canonical[hypothesis]
        merged[query].update(canonical[support] for support in supports if canonical[support] != query)
    return {query: supports for query, supports in merged.items() if supports}, sum(
        key != target for key, target in canonical.items()
    )


def own_sentence_near_duplicates(items: list[PropositionKey], queries: RetrievalQueries) -> int:
    """How many queries have a corpus proposition of their own sentence, not gold, at token Jaccard >=
    NEAR_DUPLICATE_JACCARD (with ``variants=keep`` these rank near the top and count as misses)."""
    rows_of_sentence: dict[SentenceKey, list[int]] = defaultdict(list)
    for row, key in enumerate(items):
        rows_of_sentence[(key[0], key[1])].append(row)
    count = 0
    for row, gold in zip(queries.rows, queries.gold):
        key, gold_rows = items[row], set(np.asarray(gold).tolist())
        count += any(
            other != row and other not in gold_rows and jaccard(items[other][2], key[2]) >= NEAR_DUPLICATE_JACCARD
            for other in rows_of_sentence[(key[0], key[1])]
        )
    return count


@dataclass
class RetrievalCollection:
    """The corpus items (propositions) with their sentence and document, and the queries."""

    items: list[PropositionKey]
    span_items: list[tuple[str, list[tuple[int, int]]]]  # what the span encoder reads, one per item
    sentence_of_item: np.ndarray  # unit id of each item's sentence
    document_of_item: np.ndarray  # unit id of each item's document
    queries: RetrievalQueries
    stats: dict


def _span_item(sentences: dict[SentenceKey, Sentence], key: PropositionKey) -> tuple[str, list[tuple[int, int]]]:
    sentence = sentences[(key[0], key[1])]
    return (sentence.text, sentence.spans_of(key[2]))


def build_collection(
    evaluated: PropSegmentSplit,
    clusters: set[str],
    agreement: str,
    distractors: PropSegmentSplit | None = None,
    limit: int | None = None,
    variants: str = "merge",
) -> RetrievalCollection:
    """The retrieval collection of the judged ``clusters`` of ``evaluated`` (plus every cluster of
    ``distractors``), cut to ``limit`` queries when a limit is given."""
    gold, merged = judged_gold(evaluated, clusters, agreement, variants)
    query_keys = sorted(gold, key=_order)
    chosen = [query_keys[i] for i in evaluation_sample(len(query_keys), limit)]
    sentences = dict(evaluated.sentences)
    reference = dict(evaluated.reference)
    corpus_sentences = [key for key, s in sorted(evaluated.sentences.items()) if s.cluster in clusters]
    if distractors is not None:
        sentences.update(distractors.sentences)
        reference.update(distractors.reference)
        corpus_sentences += [key for key in sorted(distractors.sentences) if key not in evaluated.sentences]
    if limit is not None:
        needed = {(k[0], k[1]) for query in chosen for k in (query, *gold[query])}
        others = [key for key in corpus_sentences if key not in needed]
        corpus_sentences = sorted(needed) + [others[i] for i in evaluation_sample(len(others), limit)]

    row_of: dict[PropositionKey, int] = {}

    def add(key: PropositionKey) -> int:
        return row_of.setdefault(key, len(row_of))

    for sentence_key in corpus_sentences:
        for token_indices in reference.get(sentence_key, []):
            add((sentence_key[0], sentence_key[1], token_indices))
    in_reference = len(row_of)
    query_rows = np.array([add(query) for query in chosen], dtype=np.int64)
    gold_rows = [np.array(sorted(add(g) for g in gold[query]), dtype=np.int64) for query in chosen]
    items = list(row_of)
    sentence_ids: dict[SentenceKey, int] = {}
    document_ids: dict[str, int] = {}
    stats = {
        "queries": len(chosen),
        "corpus_propositions": len(items),
        "corpus_sentences": len({(k[0], k[1]) for k in items}),
        "corpus_documents": len({k[0] for k in items}),
        "added_outside_reference_segmentation": len(items) - in_reference,
        "mean_gold_per_query": round(float(np.mean([len(g) for g in gold_rows])), 4) if gold_rows else 0.0,
        "sentences_without_reference_segmentation": sum(key not in reference for key in corpus_sentences),
        "evaluated_clusters": sorted(clusters),
        "distractor_clusters": len(distractors.clusters()) if distractors is not None else 0,
        "left_out_without_text": {
            **evaluated.left_out,
            **({f"distractors_{k}": v for k, v in distractors.left_out.items()} if distractors else {}),
        },
        "agreement": agreement,
        "variants": variants,
        "variants_merged": merged,
    }
    queries = RetrievalQueries(query_rows, gold_rows)
    stats["queries_with_own_sentence_near_duplicate"] = own_sentence_near_duplicates(items, queries)
    return RetrievalCollection(
        items=items,
        span_items=[_span_item(sentences, key) for key in items],
        sentence_of_item=np.array([sentence_ids.setdefault((k[0], k[1]), len(sentence_ids)) for k in items]),
        document_of_item=np.array([document_ids.setdefault(k[0], len(document_ids)) for k in items]),
        queries=queries,
        stats=stats,
    )


def _order(key: PropositionKey) -> tuple:
    return (key[0], key[1], sorted(key[2]))


def judged_gold(
    split: PropSegmentSplit, clusters: set[str], agreement: str, variants: str
) -> tuple[dict[PropositionKey, set[PropositionKey]], int]:
    """The gold links of ``clusters``, with rater variants merged (``variants=merge``) or kept; and how many
    propositions were merged."""
    if variants not in VARIANTS_CHOICES:
        raise ValueError(f"variants must be one of {VARIANTS_CHOICES}, got {variants!r}")
    gold = gold_links(split.relationships or [], agreement, clusters)
    if variants == "keep":
        return gold, 0
    return merge_variants(gold, split.reference)


def training_pairs(
    split: PropSegmentSplit, clusters: set[str], agreement: str, positives: str, variants: str = "merge"
) -> tuple[PropositionPairs, dict]:
    """Proposition-pair training data from the judged ``clusters`` (see docs/tasks/propsegment.md, "From judgements to
    the collection")."""
    if positives not in POSITIVES_CHOICES:
        raise ValueError(f"positives must be one of {POSITIVES_CHOICES}, got {positives!r}")
    gold, _ = judged_gold(split, clusters, agreement, variants)
    links = {(hypothesis, support) for hypothesis, supports in gold.items() for support in supports}
    if positives == "mutual":
        links = {(a, b) for a, b in links if (b, a) in links}
    by_pair: dict[tuple[SentenceKey, SentenceKey], set[tuple[PropositionKey, PropositionKey]]] = defaultdict(set)
    for a, b in links:
        first, second = sorted([a, b], key=_order)  # a mutual link and its reverse are one example
        by_pair[((first[0], first[1]), (second[0], second[1]))].add((first, second))
    pairs = []
    for (first_key, second_key), pair_links in sorted(by_pair.items()):
        first_props = _sentence_propositions(split, first_key, [a for a, _ in pair_links])
        second_props = _sentence_propositions(split, second_key, [b for _, b in pair_links])
        first_index = {props: i for i, props in enumerate(first_props)}
        second_index = {props: i for i, props in enumerate(second_props)}
        first_sentence, second_sentence = split.sentences[first_key], split.sentences[second_key]
        pairs.append(
            PropositionPair(
                first=first_sentence.text,
                second=second_sentence.text,
                first_propositions=tuple(tuple(first_sentence.spans_of(p)) for p in first_props),
                second_propositions=tuple(tuple(second_sentence.spans_of(p)) for p in second_props),
                positives=tuple(sorted((first_index[a[2]], second_index[b[2]]) for a, b in pair_links)),
            )
        )
    data = PropositionPairs(pairs)
    return data, {**data.counts(), "positives": positives, "agreement": agreement, "clusters": sorted(clusters)}


def _sentence_propositions(split: PropSegmentSplit, key: SentenceKey, linked: list[PropositionKey]) -> list[frozenset]:
    """The sentence's reference propositions, then its linked propositions the reference does not hold."""
    propositions = list(split.reference.get(key, []))
    for extra in sorted({link[2] for link in linked} - set(propositions), key=sorted):
        propositions.append(extra)
    return propositions


def options_checksum(paths_checksum: str, **options: object) -> str:
    """The data files' checksum combined with the options that change what is built from them."""
    payload = json.dumps({"files": paths_checksum, **options}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def proposition_text(sentence: Sentence, token_indices: frozenset) -> str:
    """A proposition as a sentence of its own: its tokens' text in order, runs of consecutive tokens as they stand
    in the sentence, separate runs joined by a space."""
    return " ".join(sentence.text[start:end] for start, end in sentence.spans_of(token_indices))


def fact_groups(segmentations: list[list[frozenset]]) -> list[list[frozenset]]:
    """The distinct propositions of a sentence over its raters, grouped into facts: a proposition joins the first
    group whose first member it is a rater variant of (token Jaccard >= NEAR_DUPLICATE_JACCARD); the reference
    response comes first, so its propositions lead their groups."""
    groups: list[list[frozenset]] = []
    for response in segmentations:
        for proposition in response:
            if any(proposition in group for group in groups):
                continue
            leader = variant_of(proposition, [group[0] for group in groups])
            if leader is None:
                groups.append([proposition])
            else:
                next(group for group in groups if group[0] == leader).append(proposition)
    return groups


def segmentation_pairs(split: PropSegmentSplit, clusters: set[str]) -> tuple[PropositionPairs, dict]:
    """``pairs=segmentations``: proposition-pair training data from the segmentations alone (no judgement). One
    example per fact of a sentence of ``clusters``: the sentence with every rater variant of the fact and the
    leading proposition of each other fact (its siblings, the hard negatives), paired with the fact's own text
    (the leader's tokens, ``proposition_text``) as a sentence encoded whole; the variants are linked to it."""
    pairs = []
    for key in sorted(split.segmentations):
        sentence = split.sentences[key]
        if sentence.cluster not in clusters:
            continue
        groups = fact_groups(split.segmentations[key])
        leaders = [group[0] for group in groups]
        for group in groups:
            propositions = group + [leader for leader in leaders if leader != group[0]]
            text = proposition_text(sentence, group[0])
            if text == sentence.text:
                continue  # the whole sentence is the fact: nothing to tell apart
            pairs.append(
                PropositionPair(
                    first=sentence.text,
                    second=text,
                    first_propositions=tuple(tuple(sentence.spans_of(p)) for p in propositions),
                    second_propositions=(((0, len(text)),),),
                    positives=tuple((i, 0) for i in range(len(group))),
                )
            )
    data = PropositionPairs(pairs)
    return data, {**data.counts(), "clusters": sorted(clusters)}
