"""PaSeR, Phrase-aware Sentence Representation, unsupervised (Wu et al. 2023, section 3; tables 1 and 5, appendix A):
the objective ``paser`` and its embedder. A copy of each sentence has its RAKE key phrases masked, and a decoder
reading both sentence vectors generates the masked phrases; loss L_MLM + L_gen (eq. 4).

The method step by step (phrases, decoding signal, decoder, EDA synonyms), the training setup, the defined
behaviour at the edges (tests/test_paser.py) and every deviation: docs/methods/paser.md, section "PaSeR" and its
``paser`` table rows.
"""

from __future__ import annotations

import logging
import random
import re
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from harness import IncompatibleError, InvalidOptionError, Option
from harness.blocks import (
    CLEAN,
    IGNORED_LABEL,
    Objective,
    ObjectiveSetup,
    TrainingSetup,
    TrainingStep,
    TransformerDecoder,
    language_model_head,
    load_masked_lm,
    mask_tokens,
    objective_hooks,
    scored_token_loss,
    share_parameters,
    transformer_inputs,
    wordnet,
)

logger = logging.getLogger(__name__)

NAME = "paser"
PHRASES = "paser"  # the batch entry this objective's collator adds
SIGNALS = ("paper", "public")
SETUP = TrainingSetup(  # section 4.2: lr 3e-5, batch 64, 5 epochs
    "paser-4.2",
    schedule="linear",
    warmup_ratio=0.0,
    weight_decay=0.0,
    budgets={"quick": {"max_steps": 40}, "paper": {"batch_size": 64, "epochs": 5}},
)


# -- RAKE key phrases and the masked copy (section 3.1) ------------------------------------------------------------
# Key phrases of a sentence by RAKE, and a copy of the sentence with chosen phrases masked (PaSeR, section 3.1).
#
# RAKE (Rose et al. 2010), as the reference library rake-nltk 1.0.6 computes it (``Rake`` with the default metric
# ``DEGREE_TO_FREQUENCY_RATIO``, repeated phrases included, the whole text as one sentence):
#
# - words: the text split by NLTK's ``wordpunct_tokenize`` rule (runs of word characters, or runs of other
#   non-space characters), lower-cased;
# - candidate phrases: maximal runs of words that are neither a stopword nor a punctuation mark (a single character of
#   ``string.punctuation``; a run such as ``?!`` is neither, as in the library);
# - word score deg(w) / freq(w): freq counts the word's occurrences in the candidate phrases, deg sums the lengths of
#   the phrases it occurs in (the row sum of the co-occurrence matrix);
# - phrase score: the sum of its words' scores; phrases ranked by (score, phrase text) descending, as the library's
#   ``rank_list.sort(reverse=True)``; occurrences of the same phrase keep their text order.
#
# :func:`rake_phrases` returns every occurrence with its character span, so a tokenizer's offset mapping can mask
# exactly its tokens (:func:`masked_copy`). tests/test_paser.py checks phrases and scores against rake-nltk on the same
# stopwords and tokenizers. No NLTK data is needed (rake-nltk itself would load NLTK's stopword corpus and Punkt
# sentence splitter when not given a stopword list and a sentence tokenizer).
#
# Stopwords: scikit-learn's English list (``ENGLISH_STOP_WORDS``, 318 words, shipped with scikit-learn) by default; the
# PaSeR code uses rake-nltk's default, NLTK's English stopword corpus (179 words), which needs a data download.
WORD_PATTERN = re.compile(r"\w+|[^\w\s]+")  # nltk.tokenize.WordPunctTokenizer's pattern
PUNCTUATION = frozenset(string.punctuation)


def english_stopwords() -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


@dataclass(frozen=True)
class Phrase:
    text: str  # lower-cased words joined by one space (rake-nltk's phrase string)
    score: float  # sum of deg(w) / freq(w) over its words
    start: int  # character span in the original text
    end: int
    word_spans: tuple[tuple[int, int], ...]


def words_with_spans(text: str) -> list[tuple[str, int, int]]:
    return [(match.group(0), match.start(), match.end()) for match in WORD_PATTERN.finditer(text)]


def rake_phrases(
    text: str, stopwords: Iterable[str] | None = None, punctuation: Iterable[str] = PUNCTUATION
) -> list[Phrase]:
    """Every candidate phrase occurrence of ``text``, best first (RAKE; ties as rake-nltk sorts them)."""
    ignored = set(english_stopwords() if stopwords is None else stopwords) | set(punctuation)
    occurrences: list[list[tuple[str, int, int]]] = []
    current: list[tuple[str, int, int]] = []
    for word, start, end in words_with_spans(text):
        lowered = word.lower()
        if lowered in ignored:
            if current:
                occurrences.append(current)
            current = []
        else:
            current.append((lowered, start, end))
    if current:
        occurrences.append(current)
    frequency: dict[str, int] = {}
    degree: dict[str, int] = {}
    for phrase in occurrences:
        for word, _, _ in phrase:
            frequency[word] = frequency.get(word, 0) + 1
            degree[word] = degree.get(word, 0) + len(phrase)
    phrases = []
    for phrase in occurrences:
        score = 0.0
        for word, _, _ in phrase:
            score += 1.0 * degree[word] / frequency[word]
        spans = tuple((start, end) for _, start, end in phrase)
        phrases.append(Phrase(" ".join(w for w, _, _ in phrase), score, spans[0][0], spans[-1][1], spans))
    # Python's sort is stable under reverse=True: equal (score, text) keep their text order.
    return sorted(phrases, key=lambda p: (p.score, p.text), reverse=True)


@dataclass
class MaskedCopy:
    input_ids: list[int]  # the sentence's token ids with the chosen phrases' tokens replaced by the mask token
    masked_positions: list[int]  # token positions that were masked
    phrases: list[Phrase]  # the chosen phrases, best first
    covers_sentence: bool  # every non-special token is masked


def masked_copy(text: str, phrases: Sequence[Phrase], tokenizer, max_length: int, mask_token_id: int) -> MaskedCopy:
    """``text`` tokenised (truncated to ``max_length``) with every token whose characters overlap a word of
    ``phrases`` replaced by ``mask_token_id``; special tokens (empty offsets) are never masked."""
    encoded = tokenizer(
        text, truncation=True, max_length=max_length, return_offsets_mapping=True, return_special_tokens_mask=True
    )
    spans = [span for phrase in phrases for span in phrase.word_spans]
    ids = list(encoded["input_ids"])
    masked = []
    content = 0
    for position, ((start, end), special) in enumerate(zip(encoded["offset_mapping"], encoded["special_tokens_mask"])):
        if special or start == end:
            continue
        content += 1
        if any(start < span_end and span_start < end for span_start, span_end in spans):
            ids[position] = mask_token_id
            masked.append(position)
    return MaskedCopy(ids, masked, list(phrases), covers_sentence=bool(masked) and len(masked) == content)


def pad_ids(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``[b, longest]`` ids and their attention mask."""
    longest = max((len(row) for row in rows), default=0)
    ids = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for index, row in enumerate(rows):
        ids[index, : len(row)] = torch.tensor(row, dtype=torch.long)
        mask[index, : len(row)] = 1
    return ids, mask


# -- EDA synonym replacement ---------------------------------------------------------------------------------------
def wordnet_synonyms() -> Callable[[str], list[str]]:
    """``word -> synonyms`` from WordNet (the data bundled with harness, or ``HARNESS_WORDNET_DIR``)."""
    try:
        synonyms, source = wordnet.wordnet_synonyms()
    except wordnet.WordNetMissingError as error:
        raise IncompatibleError(f"paser option synonyms: {error}") from None
    logger.info("paser: WordNet synonyms from %s", source)
    return synonyms


def replace_synonyms(
    text: str, share: float, synonyms: Callable[[str], list[str]], stopwords: frozenset[str], rng: random.Random
) -> str:
    """EDA's synonym replacement: ``max(1, int(share * words))`` content words (not stopwords, not punctuation)
    replaced by a random synonym each, in random order, skipping words without one."""
    words = [
        (word, start, end)
        for word, start, end in words_with_spans(text)
        if word.isalpha() and word.lower() not in stopwords
    ]
    wanted = max(1, int(share * len(words)))
    rng.shuffle(words)
    replacements: list[tuple[int, int, str]] = []
    for word, start, end in words:
        if len(replacements) == wanted:
            break
        options = synonyms(word)
        if options:
            replacements.append((start, end, rng.choice(options)))
    for start, end, synonym in sorted(replacements, reverse=True):
        text = text[:start] + synonym + text[end:]
    return text


# -- batches -------------------------------------------------------------------------------------------------------
class PhraseMasking:
    """``sentences -> {"paser": {masked_ids, masked_mask, target_ids, target_mask, has_phrase, covers}}``, plus
    ``clean_ids`` / ``clean_mask`` (s after synonym replacement) when the replacement reaches both views (3.1.3: "on
    both s and s~"): s~ is the masked copy of the replaced s, so both views carry the same replacements."""

    def __init__(self, setup: ObjectiveSetup):
        tokenizer = setup.encoder.tokenizer
        if tokenizer.mask_token_id is None or not getattr(tokenizer, "is_fast", False):
            raise IncompatibleError(
                "paser needs a fast tokenizer with a mask token (offsets locate the phrases); "
                "choose a BERT- or RoBERTa-style --backbone."
            )
        self.tokenizer = tokenizer
        self.max_length = setup.encoder.max_length
        self.top_k = int(setup.options["top_k"])
        self.stopwords = english_stopwords()
        share = float(setup.options["synonyms"])
        self.synonym_share = share
        self.synonyms = wordnet_synonyms() if share > 0 else None
        self.both_views = setup.options["synonym_views"] == "both"
        self.rng = random.Random(setup.seed)

    def __call__(self, sentences: list[str]) -> dict[str, Any]:
        masked_rows, target_rows, has_phrase, covers, clean_texts = [], [], [], [], []
        for sentence in sentences:
            if self.synonyms is not None:
                sentence = replace_synonyms(sentence, self.synonym_share, self.synonyms, self.stopwords, self.rng)
            clean_texts.append(sentence)
            chosen = rake_phrases(sentence, self.stopwords)[: self.top_k]
            copy = masked_copy(sentence, chosen, self.tokenizer, self.max_length, self.tokenizer.mask_token_id)
            masked_rows.append(copy.input_ids)
            has_phrase.append(bool(copy.masked_positions))
            covers.append(copy.covers_sentence)
            target_text = " ".join(sentence[p.start : p.end] for p in chosen)
            target_rows.append(self.tokenizer(target_text, truncation=True, max_length=self.max_length)["input_ids"])
        pad = self.tokenizer.pad_token_id or 0
        masked_ids, masked_mask = pad_ids(masked_rows, pad)
        target_ids, target_mask = pad_ids(target_rows, pad)
        entry = {
            "masked_ids": masked_ids,
            "masked_mask": masked_mask,
            "target_ids": target_ids,
            "target_mask": target_mask,
            "has_phrase": torch.tensor(has_phrase),
            "covers": torch.tensor(covers),
        }
        if self.synonyms is not None and self.both_views:  # the clean view of the replaced sentences
            clean = self.tokenizer(
                clean_texts, truncation=True, max_length=self.max_length, padding=True, return_tensors="pt"
            )
            entry.update(clean_ids=clean["input_ids"], clean_mask=clean["attention_mask"])
        return {PHRASES: entry}


# -- the objective -------------------------------------------------------------------------------------------------
class PhraseReconstruction(nn.Module):
    """L_MLM + L_gen (eq. 4)."""

    def __init__(self, setup: ObjectiveSetup):
        super().__init__()
        options = setup.options
        transformer = setup.encoder.transformer
        tokenizer = setup.encoder.tokenizer
        if tokenizer.mask_token_id is None:
            raise IncompatibleError(
                "paser needs a tokenizer with a mask token; choose a BERT- or RoBERTa-style --backbone."
            )
        depth = transformer.config.num_hidden_layers
        layers = min(int(options["decoder_layers"]), depth)
        if layers < int(options["decoder_layers"]):
            logger.info(
                "paser: the backbone has %d layers; the decoder gets %d instead of %s",
                depth,
                depth,
                options["decoder_layers"],
            )
        self.decoder = TransformerDecoder.from_encoder(
            transformer, share="embeddings", num_layers=layers, backbone=setup.backbone, fresh_layers=True
        )
        self.decoder_head = language_model_head(self.decoder.language_model)
        mlm = load_masked_lm(setup.backbone).to(next(transformer.parameters()).device)
        share_parameters(mlm.base_model, transformer)
        mlm.get_output_embeddings().weight = transformer.get_input_embeddings().weight
        self.mlm = mlm
        self.mlm_head = language_model_head(mlm)
        width = transformer.config.hidden_size
        self.signal = str(options["signal"])
        self.projection = nn.Linear(width, width) if self.signal == "public" else None
        self.scale_difference = float(options["signal_m"])
        self.scale_product = float(options["signal_n"])
        self.mask_token_id = int(tokenizer.mask_token_id)
        self.vocab_size = int(transformer.config.vocab_size)
        self.special_ids = torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)
        self.generator = torch.Generator().manual_seed(setup.seed + 2)
        self.last_terms: dict[str, float] = {}
        # Training examples seen, those without any phrase and those whose mask covers the whole sentence (report).
        self.counts = {"examples": 0, "without_phrase": 0, "fully_masked": 0}

    def decoding_signal(self, sentence: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        """``[b, 4, d]``: eq. 2 (``signal=paper``) or the public code's variant."""
        if self.projection is not None:
            masked = self.projection(masked)
            parts = [
                sentence,
                masked,
                self.scale_difference * (sentence - masked),
                self.scale_product * (sentence * masked),
            ]
        else:
            parts = [
                sentence,
                masked,
                self.scale_difference * (sentence - masked).abs(),
                self.scale_product * (sentence * masked).abs(),
            ]
        return torch.stack(parts, dim=1)

    def mlm_loss(self, features: Mapping[str, torch.Tensor]) -> torch.Tensor:
        inputs = transformer_inputs(features)
        ids = inputs["input_ids"]
        maskable = inputs["attention_mask"].bool() & ~torch.isin(ids, self.special_ids.to(ids.device))
        masked, labels = mask_tokens(ids.cpu(), maskable.cpu(), self.mask_token_id, self.vocab_size, self.generator)
        hidden = self.mlm.base_model(**{**inputs, "input_ids": masked.to(ids.device)}).last_hidden_state
        return scored_token_loss(self.mlm_head, hidden, labels.to(ids.device))

    @staticmethod
    def replaced_view(step: TrainingStep) -> dict[str, torch.Tensor] | None:
        """The clean view after synonym replacement (s of 3.1.3), or None when s is the unchanged sentence."""
        phrases = step.features(PHRASES)
        if "clean_ids" not in phrases:
            return None
        return {"input_ids": phrases["clean_ids"], "attention_mask": phrases["clean_mask"]}

    def generation_loss(self, step: TrainingStep) -> torch.Tensor:
        phrases = step.features(PHRASES)
        replaced = self.replaced_view(step)
        sentence = step.sentence_vectors(CLEAN) if replaced is None else step.encoder(replaced)
        masked = step.encoder({"input_ids": phrases["masked_ids"], "attention_mask": phrases["masked_mask"]})
        memory = self.decoding_signal(sentence, masked)
        ids, mask = phrases["target_ids"], phrases["target_mask"]
        hidden = self.decoder.hidden_states(memory, ids[:, :-1], attention_mask=mask[:, :-1])
        labels = ids[:, 1:].masked_fill(mask[:, 1:] == 0, IGNORED_LABEL)
        labels = labels.masked_fill(~phrases["has_phrase"].to(labels.device)[:, None], IGNORED_LABEL)
        if not (labels != IGNORED_LABEL).any():  # no sentence of the batch has a phrase: nothing to generate
            return hidden.sum() * 0.0
        return scored_token_loss(self.decoder_head, hidden, labels)

    def forward(self, step: TrainingStep) -> torch.Tensor:
        if self.training:
            phrases = step.features(PHRASES)
            self.counts["examples"] += len(phrases["has_phrase"])
            self.counts["without_phrase"] += int((~phrases["has_phrase"]).sum())
            self.counts["fully_masked"] += int(phrases["covers"].sum())
        replaced = self.replaced_view(step)
        mlm = self.mlm_loss(step.features(CLEAN) if replaced is None else replaced)
        generation = self.generation_loss(step)
        self.last_terms = {"mlm": float(mlm.detach()), "generation": float(generation.detach())}
        return mlm + generation


def check_options(options: Mapping[str, Any], owner: str) -> None:
    if int(options["top_k"]) < 1:
        raise InvalidOptionError(
            f"{owner}: option top_k must be at least 1 (phrases masked per sentence; paper: "
            f"5, the method's p0: 1); got {options['top_k']!r}."
        )
    if int(options["decoder_layers"]) < 1:
        raise InvalidOptionError(
            f"{owner}: option decoder_layers must be at least 1 (paper: 6); got {options['decoder_layers']!r}."
        )
    for key in ("signal_m", "signal_n"):
        if not float(options[key]) > 0:
            raise InvalidOptionError(f"{owner}: option {key} must be positive (paper: 10); got {options[key]!r}.")
    share = float(options["synonyms"])
    if not 0.0 <= share < 1.0:
        raise InvalidOptionError(
            f"{owner}: option synonyms must be 0 (off) or lie in (0, 1), e.g. 0.1 (EDA's alpha_sr); got {share!r}."
        )
    if share == 0 and options["synonym_views"] != "both":
        raise InvalidOptionError(
            f"{owner}: option synonym_views={options['synonym_views']} says where synonym "
            "replacement reaches, and synonyms=0 turns it off; set synonyms (e.g. 0.1) or leave "
            "synonym_views out."
        )
    if share > 0:
        try:
            wordnet.wordnet_source()
        except wordnet.WordNetMissingError as error:
            raise InvalidOptionError(
                f"{owner}: synonyms={share} (EDA synonym replacement, the paper's table 1 setting): {error}"
            ) from None


OBJECTIVE = Objective(
    name=NAME,
    description="PaSeR: generate the RAKE-top phrases from [E_s, E_s~, m|E_s-E_s~|, n|E_s*E_s~|], plus MLM",
    build=PhraseReconstruction,
    views=(CLEAN,),
    setup=SETUP,
    reference="Wu et al. 2023 (PaSeR), section 3",
    prepare=PhraseMasking,
    options={
        "top_k": Option(
            5,
            "RAKE phrases masked and generated per sentence (table 1 = table 5's top-5; 1: the "
            "method's single phrase p0)",
            type=int,
        ),
        "signal": Option(
            "paper",
            "decoder memory: paper (eq. 2, absolute values) or public (a Linear on E_s~, no absolute values)",
            choices=SIGNALS,
        ),
        "signal_m": Option(10.0, "scale m of the difference term (appendix A: 10)", type=float),
        "signal_n": Option(10.0, "scale n of the product term (appendix A: 10)", type=float),
        "decoder_layers": Option(6, "layers of the randomly initialised decoder (paper: 6)", type=int),
        "synonyms": Option(
            0.1,
            "EDA synonym replacement share (table 1 = table 4's + SR; 0: off; WordNet 3.0 "
            "synonyms bundled with harness)",
            type=float,
        ),
        # Added after PaSeR rows were published: without synonym replacement (synonyms=0) the option changes
        # nothing, so those specs keep their keys and records; with it, the new default (both views) is a new model.
        "synonym_views": Option(
            "both",
            "where synonym replacement reaches: both (s and s~, section 3.1.3) or "
            "masked (s~ and the target only; harness 0.2)",
            choices=("both", "masked"),
            hash_default=False,
            hash_when=lambda options: float(options["synonyms"]) != 0,
        ),
    },
    check=check_options,
)

register_components, register_models = objective_hooks(
    OBJECTIVE,
    description="PaSeR (unsupervised): masked-phrase generation from both views' [CLS] plus MLM; [CLS] at inference",
    reference="Wu et al. 2023 (PaSeR), section 3, tables 1 and 5",
)
