"""Reading PropSegmEnt v1 files (Chen et al. 2023, "PropSegmEnt", Findings of ACL; google-research-datasets/
PropSegmEnt, ``v1/``) into sentences, reference segmentations and entailment judgements.

One split is three files, each a JSON array, plain (``.json``) or gzipped (``.json.gz``):

- ``document_clusters.<split>``: clusters of documents with the text of every sentence and its tokens (a token is
  a substring of the sentence at a character offset). Only clusters whose text is redistributed are here: the
  Wikipedia clusters (CC BY-SA 3.0). NewSHead clusters are published as URLs to re-crawl, so their propositions and
  judgements refer to text this file does not hold; they are counted as left out, never silently dropped.
- ``propositions.<split>``: per sentence the segmentation of each rater (1-3 raters), a proposition being a set of
  token indices; at most one response is marked ``is_reference_response`` (the paper's reconciled reference).
- ``relationships.<split>`` (absent for the public test split): per (premise document, hypothesis proposition) the
  raters' judgements, each with a ``supporting_premise_proposition`` when it entails or contradicts.

The released files name some fields differently from the dataset's README (``token_indices`` for
``included_token_indices``, ``relationship_responses``/``relationship`` for ``entailment_responses``/
``entailment_status``); both spellings are read.

Deviations: none (this module only reads).
"""

from __future__ import annotations

import gzip
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import MissingDataError, data_error

logger = logging.getLogger(__name__)

Span = tuple[int, int]
SentenceKey = tuple[str, int]  # (document id, sentence index)
PropositionKey = tuple[str, int, frozenset]  # (document id, sentence index, token indices)

ENTAILS = "RELATIONSHIP_ENTAILS"
OFFICIAL_SOURCE = "https://github.com/google-research-datasets/PropSegmEnt (folder v1/)"


@dataclass(frozen=True)
class Sentence:
    cluster: str
    document: str
    index: int
    text: str
    token_spans: tuple[Span, ...]  # the character span of each PropSegmEnt token

    @property
    def key(self) -> SentenceKey:
        return (self.document, self.index)

    def spans_of(self, token_indices: frozenset) -> list[Span]:
        """The character spans of a proposition's tokens, consecutive tokens merged into one span."""
        spans: list[Span] = []
        previous = None
        for index in sorted(token_indices):
            start, end = self.token_spans[index]
            if previous is not None and index == previous + 1:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
            previous = index
        return spans


@dataclass(frozen=True)
class Relationship:
    """The raters' judgements of whether ``premise_document`` entails ``hypothesis``."""

    cluster: str
    premise_document: str
    hypothesis: PropositionKey
    verdicts: tuple[str, ...]  # one per rater response
    supports: tuple[PropositionKey | None, ...]  # per response: its supporting premise proposition, if any

    def entailing_supports(self) -> list[PropositionKey]:
        """The supporting propositions named by the responses that say ENTAILS, one per response."""
        return [
            support
            for verdict, support in zip(self.verdicts, self.supports)
            if verdict == ENTAILS and support is not None
        ]

    def entail_votes(self) -> int:
        return sum(verdict == ENTAILS for verdict in self.verdicts)


@dataclass
class PropSegmentSplit:
    """One split as read: sentences with text, reference segmentations, judgements (None when the split's
    relationships file is not there), and what was left out because its text is not in the cluster file."""

    name: str
    sentences: dict[SentenceKey, Sentence]
    reference: dict[SentenceKey, list[frozenset]]  # sentences without a reference response are absent
    relationships: list[Relationship] | None
    paths: list[Path]
    left_out: dict[str, int] = field(default_factory=dict)
    # every rater's segmentation of a sentence, the reference response's first (training data reads them all)
    segmentations: dict[SentenceKey, list[list[frozenset]]] = field(default_factory=dict)

    def clusters(self) -> list[str]:
        return sorted({sentence.cluster for sentence in self.sentences.values()})


def find_file(folder: Path, stem: str) -> Path | None:
    for suffix in (".json", ".json.gz"):
        candidate = folder / f"{stem}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def _load_json_array(path: Path) -> list[Any]:
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        document = json.loads(raw.decode("utf-8"))
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise data_error(path, None, f"cannot be read ({type(exc).__name__}: {exc}); download it again.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise data_error(path, None, f"is not JSON text ({exc}); expected the PropSegmEnt v1 JSON array.") from None
    if not isinstance(document, list):
        raise data_error(path, None, f"expected a JSON array of entries, found {type(document).__name__}.")
    return document


def _field(entry: Any, path: Path, position: int, *names: str) -> Any:
    """The first of ``names`` present in ``entry`` (the README's and the files' spellings)."""
    if isinstance(entry, dict):
        for name in names:
            if name in entry:
                return entry[name]
    raise data_error(path, None, f"entry {position}: missing field {names[0]!r}; is this a PropSegmEnt v1 file?")


def _token_indices(entry: Any, path: Path, position: int) -> frozenset:
    indices = _field(entry, path, position, "token_indices", "included_token_indices")
    if not isinstance(indices, list) or not indices or not all(isinstance(i, int) for i in indices):
        raise data_error(path, None, f"entry {position}: a proposition needs a non-empty list of token indices.")
    return frozenset(indices)


def read_clusters(path: Path) -> dict[SentenceKey, Sentence]:
    sentences: dict[SentenceKey, Sentence] = {}
    for position, cluster in enumerate(_load_json_array(path)):
        cluster_id = str(_field(cluster, path, position, "cluster_id"))
        for document in _field(cluster, path, position, "documents"):
            document_id = str(_field(document, path, position, "document_id"))
            for index, sentence in enumerate(_field(document, path, position, "sentences")):
                text = _field(sentence, path, position, "sentence_text")
                spans = []
                for token in _field(sentence, path, position, "tokens"):
                    offset = _field(token, path, position, "character_offset_of_token_in_sentence")
                    token_text = _field(token, path, position, "text")
                    if text[offset : offset + len(token_text)] != token_text:
                        raise data_error(
                            path,
                            None,
                            f"cluster {cluster_id}, document {document_id}, sentence {index}: "
                            f"token {token_text!r} is not at offset {offset}.",
                        )
                    spans.append((offset, offset + len(token_text)))
                sentences[(document_id, index)] = Sentence(cluster_id, document_id, index, text, tuple(spans))
    return sentences


def _check_tokens(sentence: Sentence, indices: frozenset, path: Path, position: int) -> None:
    if max(indices) >= len(sentence.token_spans) or min(indices) < 0:
        raise data_error(
            path,
            None,
            f"entry {position}: token index {max(indices)} is outside sentence "
            f"{sentence.index} of document {sentence.document} "
            f"({len(sentence.token_spans)} tokens).",
        )


def read_reference(
    path: Path,
    sentences: dict[SentenceKey, Sentence],
    left_out: dict[str, int],
    segmentations: dict[SentenceKey, list[list[frozenset]]] | None = None,
) -> dict[SentenceKey, list[frozenset]]:
    """The reference segmentation of every sentence with text; every rater's (reference first) into
    ``segmentations`` when given."""
    reference: dict[SentenceKey, list[frozenset]] = {}
    for position, entry in enumerate(_load_json_array(path)):
        sentence_id = _field(entry, path, position, "sentence_id")
        key = (
            str(_field(sentence_id, path, position, "document_id")),
            int(_field(sentence_id, path, position, "sentence_index")),
        )
        if key not in sentences:
            left_out["segmented_sentences_without_text"] = left_out.get("segmented_sentences_without_text", 0) + 1
            continue
        for response in _field(entry, path, position, "segmentation_responses"):
            propositions = [_token_indices(p, path, position) for p in response.get("propositions") or []]
            for indices in propositions:
                _check_tokens(sentences[key], indices, path, position)
            propositions = list(dict.fromkeys(propositions))
            if segmentations is not None and propositions:
                responses = segmentations.setdefault(key, [])
                if response.get("is_reference_response"):
                    responses.insert(0, propositions)
                else:
                    responses.append(propositions)
            if response.get("is_reference_response"):
                reference[key] = propositions
    return reference


def _proposition_key(
    document: str,
    sentence_index: int,
    indices: frozenset,
    sentences: dict[SentenceKey, Sentence],
    path: Path,
    position: int,
) -> PropositionKey | None:
    key = (document, sentence_index)
    if key not in sentences:
        return None
    _check_tokens(sentences[key], indices, path, position)
    return (document, sentence_index, indices)


def read_relationships(
    path: Path, sentences: dict[SentenceKey, Sentence], left_out: dict[str, int]
) -> list[Relationship]:
    relationships = []
    documents = {document for document, _ in sentences}
    for position, entry in enumerate(_load_json_array(path)):
        hypothesis = _field(entry, path, position, "hypothesis_proposition")
        premise_document = str(_field(entry, path, position, "premise_document_id"))
        hypothesis_key = _proposition_key(
            str(_field(hypothesis, path, position, "document_id")),
            int(_field(hypothesis, path, position, "sentence_index")),
            _token_indices(_field(hypothesis, path, position, "proposition"), path, position),
            sentences,
            path,
            position,
        )
        if hypothesis_key is None or premise_document not in documents:
            left_out["relationships_without_text"] = left_out.get("relationships_without_text", 0) + 1
            continue
        verdicts, supports = [], []
        for response in _field(entry, path, position, "relationship_responses", "entailment_responses"):
            verdicts.append(str(_field(response, path, position, "relationship", "entailment_status")))
            support = response.get("supporting_premise_proposition")
            supports.append(
                None
                if support is None
                else _proposition_key(
                    premise_document,
                    int(_field(support, path, position, "sentence_index")),
                    _token_indices(_field(support, path, position, "proposition"), path, position),
                    sentences,
                    path,
                    position,
                )
            )
        relationships.append(
            Relationship(
                str(_field(entry, path, position, "cluster_id")),
                premise_document,
                hypothesis_key,
                tuple(verdicts),
                tuple(supports),
            )
        )
    return relationships


def read_split(folder: Path, split: str, need_relationships: bool) -> PropSegmentSplit:
    """The split's files under ``folder``; MissingDataError naming what is missing and where to get it."""
    paths = {
        stem: find_file(folder, f"{stem}.{split}") for stem in ("document_clusters", "propositions", "relationships")
    }
    wanted = ["document_clusters", "propositions"] + (["relationships"] if need_relationships else [])
    missing = [f"{stem}.{split}.json" for stem in wanted if paths[stem] is None]
    if missing:
        raise MissingDataError(
            f"PropSegmEnt: {', '.join(missing)} not found in {folder} (plain or .gz). Download the v1 files from "
            f"{OFFICIAL_SOURCE} and put them in <data-dir>/propsegment/v1/, then pass --data-dir."
        )
    left_out: dict[str, int] = {}
    sentences = read_clusters(paths["document_clusters"])
    segmentations: dict[SentenceKey, list[list[frozenset]]] = {}
    reference = read_reference(paths["propositions"], sentences, left_out, segmentations)
    relationships = None
    if paths["relationships"] is not None:
        relationships = read_relationships(paths["relationships"], sentences, left_out)
    used = [path for stem, path in paths.items() if path is not None and (stem in wanted or stem == "relationships")]
    return PropSegmentSplit(split, sentences, reference, relationships, used, left_out, segmentations)
