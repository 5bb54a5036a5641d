"""C-STS on a fixture in the official CSV format: the three input modes, the span selectors (lexical, embedding, a
third-party one registered as a component), missing and malformed data, an unlabelled test file, and a CLI run."""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import numpy as np
import pytest

import harness
from harness import Component, MissingDataError
from harness.nn.spans import SpanError
from harness.plugins import bi_encoder, csts_selectors
from harness.plugins.csts_selectors import LexicalSelector, WordListSelector, normalise
from harness.tasks import csts
from harness.testing import (
    HashingEmbedder,
    HashingSpanEncoder,
    OverlapPairScorer,
    check_task,
    eval_context,
    plugin_registry,
    run_harness,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def registry():
    return plugin_registry(csts_selectors, bi_encoder)


def evaluate(model, registry, data_dir=FIXTURES, **options):
    task = csts.CSTS(options, data_dir)
    return task.evaluate(model, eval_context(registry=registry))


def test_the_fixture_reads_as_the_official_format():
    validation = csts.read_csts(FIXTURES / "csts" / "csts_validation.csv")
    assert len(validation) == 12 and validation.labels is not None and set(validation.labels) <= {1, 2, 5}
    assert (
        validation.first[0].startswith("A man in a red jacket")
        and validation.conditions[0] == "The color of the clothing."
    )
    assert csts.read_csts(FIXTURES / "csts" / "csts_test.csv").labels is None


def test_the_task_contract_with_each_kind_of_model(registry):
    for model in (HashingSpanEncoder(), HashingEmbedder(), OverlapPairScorer()):
        report = check_task(csts.CSTS, model, registry=registry, data_dir=FIXTURES, small_cut=None)
        assert set(report.scores) == {"spearman", "spearman_validation"}


@pytest.mark.parametrize(
    "model,mode",
    [(HashingSpanEncoder(), "spans"), (HashingEmbedder(), "no-condition"), (OverlapPairScorer(), "prepend")],
)
def test_auto_input_follows_what_the_model_offers(registry, model, mode):
    result = evaluate(model, registry)
    assert result.details["validation"]["input"] == mode
    assert result.details["test_status"].startswith("3 rows without labels")
    assert "spearman_test" not in result.scores


def test_spans_get_the_selected_words_and_embedders_the_condition(registry):
    seen = []

    class Recording(HashingSpanEncoder):
        def encode_spans(self, items):
            seen.extend(items)
            return super().encode_spans(items)

    class RecordingEmbedder(HashingEmbedder):
        def encode(self, texts):
            seen.extend(texts)
            return super().encode(texts)

    evaluate(Recording(), registry)
    text, spans = seen[0]  # row 0, sentence1, "The color of the clothing."
    assert text.startswith("A man in a red jacket") and [text[a:b] for a, b in spans] == [text]  # nothing matched
    kinds = [(t, [t[a:b] for a, b in s]) for t, s in seen]
    assert ("A chef slices onions in a busy kitchen.", ["A chef slices onions in a busy kitchen."]) in kinds
    old = [words for t, words in kinds if t == "An elderly man plays guitar in a park."]
    assert old == [["An elderly man plays guitar in a park."]]  # "age" matches nothing: whole sentence
    seen.clear()
    evaluate(RecordingEmbedder(), registry)  # auto: the paper's baseline never reads the condition
    assert "A man in a red jacket rides a bicycle down a hill." in seen
    assert not any("The color of the clothing." in text for text in seen)
    seen.clear()
    evaluate(RecordingEmbedder(), registry, input="condition")  # the named variant
    assert "A man in a red jacket rides a bicycle down a hill. The color of the clothing." in seen


def test_no_condition_scores_do_not_depend_on_the_condition(registry, tmp_path):
    (tmp_path / "csts").mkdir()
    table = list(csv.reader(io.StringIO((FIXTURES / "csts" / "csts_validation.csv").read_text())))
    column = table[0].index("condition")
    for row in table[1:]:
        row[column] = "Something else entirely."
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(table)
    (tmp_path / "csts" / "csts_validation.csv").write_text(buffer.getvalue())
    original = evaluate(HashingEmbedder(), registry, input="no-condition").scores["spearman"]
    assert evaluate(HashingEmbedder(), registry, tmp_path, input="no-condition").scores["spearman"] == original
    assert (
        evaluate(HashingEmbedder(), registry, tmp_path, input="condition").scores["spearman"]
        != evaluate(HashingEmbedder(), registry, input="condition").scores["spearman"]
    )


def test_a_condition_that_matches_no_word_falls_back_to_the_whole_sentence_and_is_counted(registry):
    result = evaluate(HashingSpanEncoder(), registry)
    details = result.details["validation"]
    assert details["selector"] == "lexical"
    assert details["no_selection"] + details["selected_sentences"] == 24
    assert 0 < details["no_selection"] < 24


def test_lexical_selector_matches_words_and_near_forms():
    selector = LexicalSelector()
    sentence = "Two dogs run across a snowy field with colourful collars."
    (spans,) = selector.select([sentence], ["The number of dogs and the colours."])
    assert [sentence[a:b] for a, b in spans] == ["dogs", "colourful"]
    assert selector.select(["Nothing here."], ["The age of the person."]) == [[]]
    assert normalise("Cities") == "city" and normalise("person's") == "person"


def test_embedding_selector_picks_words_with_the_pretrained_be(registry):
    result = evaluate(HashingSpanEncoder(), registry, selector="embedding")
    details = result.details["validation"]
    assert details["selector"] == "embedding" and details["selected_sentences"] == 24


def test_a_third_party_selector_plugs_in_without_touching_the_task():
    class LLMLikePlugin:
        """A stand-in for an LLM selector: answers the words for the condition."""

        @harness.hookimpl
        def register_components(self, register):
            answers = {"color": ["red", "blue"], "vehicle": ["bicycle", "scooter"]}
            register(
                Component(
                    "span-selector",
                    "llm",
                    WordListSelector(
                        lambda sentence, condition: next(
                            (words for key, words in answers.items() if key in condition), []
                        )
                    ),
                )
            )

    registry = plugin_registry(csts_selectors, LLMLikePlugin())
    assert "llm" in registry.component_names("span-selector")
    seen = []

    class Recording(HashingSpanEncoder):
        def encode_spans(self, items):
            seen.extend((t, [t[a:b] for a, b in s]) for t, s in items)
            return super().encode_spans(items)

    result = evaluate(Recording(), registry, selector="llm")
    assert result.details["validation"]["selector"] == "llm"
    assert ("A man in a red jacket rides a bicycle down a hill.", ["red"]) in seen
    assert ("A boy in a red shirt rides a scooter on the street.", ["scooter"]) in seen


def test_a_component_without_select_is_refused_at_registration():
    class Broken:
        @harness.hookimpl
        def register_components(self, register):
            register(Component("span-selector", "broken", object()))

    with pytest.raises(harness.testing.ContractCheckError, match="does not satisfy"):
        plugin_registry(csts_selectors, Broken())


def test_a_selector_returning_spans_outside_the_sentence_is_an_error_naming_the_row():
    class Bad:
        @harness.hookimpl
        def register_components(self, register):
            register(Component("span-selector", "bad", WordListSelector(lambda s, c: [])))
            register(
                Component(
                    "span-selector",
                    "worse",
                    type(
                        "Worse", (), {"select": lambda self, sentences, conditions, ctx: [[(0, 999)]] * len(sentences)}
                    )(),
                )
            )

    registry = plugin_registry(csts_selectors, Bad())
    with pytest.raises(SpanError, match=r"csts row 0 \(sentence1\), selector 'worse'.*outside the sentence"):
        evaluate(HashingSpanEncoder(), registry, selector="worse")
    assert evaluate(HashingSpanEncoder(), registry, selector="bad").details["validation"]["no_selection"] == 24


def test_forcing_a_mode_the_model_lacks_is_refused(registry):
    with pytest.raises(harness.IncompatibleError, match="input=spans needs a span encoder"):
        evaluate(HashingEmbedder(), registry, input="spans")


def test_missing_data_says_how_to_obtain_and_decrypt_it(tmp_path):
    task = csts.CSTS({}, tmp_path)
    with pytest.raises(MissingDataError) as raised:
        task.check_data()
    message = str(raised.value)
    for needed in (
        "princeton-nlp/c-sts",
        "extract.sh csts.tar.enc <password>",
        "<data-dir>/csts/",
        "never bundles or downloads",
        str(tmp_path / "csts" / "csts_validation.csv"),
    ):
        assert needed in message
    with pytest.raises(MissingDataError, match="no --data-dir given"):
        csts.CSTS({}, None).check_data()


def test_a_labelled_test_file_is_scored(tmp_path, registry):
    folder = tmp_path / "csts"
    folder.mkdir()
    shutil.copy(FIXTURES / "csts" / "csts_validation.csv", folder / "csts_validation.csv")
    shutil.copy(FIXTURES / "csts" / "csts_validation.csv", folder / "csts_test.csv")
    result = evaluate(HashingEmbedder(), registry, data_dir=tmp_path)
    assert result.scores["spearman_test"] == pytest.approx(result.scores["spearman_validation"])
    (folder / "csts_test.csv").unlink()
    assert "not scored" in evaluate(HashingEmbedder(), registry, data_dir=tmp_path).details["test_status"]


@pytest.mark.parametrize(
    "content,message",
    [
        ("sentence1,sentence2,label\na,b,3\n", r"csts_validation.csv:1: the header has no condition column"),
        ("sentence1,sentence2,condition,label\na,b,c,3\na,b,c,seven\n", r"csts_validation.csv:3: label 'seven'"),
        ("sentence1,sentence2,condition,label\na,b,c,3\na,b,c,9\n", r"csts_validation.csv:3: label 9 is outside"),
        ("sentence1,sentence2,condition,label\na,,c,3\n", r"csts_validation.csv:2: sentence1, sentence2 and condition"),
    ],
)
def test_malformed_files_name_the_line(tmp_path, content, message):
    (tmp_path / "csts").mkdir()
    (tmp_path / "csts" / "csts_validation.csv").write_text(content)
    with pytest.raises(harness.DataFileError, match=message):
        csts.CSTS({}, tmp_path).check_data()


def test_end_to_end_through_the_cli_with_subencoder_and_be(tmp_path, tiny_bert):
    run = run_harness(
        "run",
        "--models",
        "subencoder,be",
        "--tasks",
        "csts",
        "--data-dir",
        FIXTURES,
        "--backbone",
        tiny_bert,
        "--profile",
        "smoke",
        "--results",
        tmp_path / "results",
        "--device",
        "cpu",
    )
    assert run.exit_code == 0, run.stderr + run.stdout
    records = sorted((tmp_path / "results").glob("*/seed-42/csts.json"))
    assert len(records) == 2
    import json

    inputs = {
        json.loads(p.read_text())["model"]["name"]: json.loads(p.read_text())["details"]["validation"]["input"]
        for p in records
    }
    assert inputs == {"subencoder": "spans", "be": "no-condition"}
    assert all(np.isfinite(json.loads(p.read_text())["main_score"]) for p in records)


def test_without_the_data_the_cli_stores_the_cell_as_missing_and_runs_the_rest(tmp_path, tiny_bert):
    run = run_harness(
        "run",
        "--models",
        "be",
        "--tasks",
        "csts,stsb",
        "--data-dir",
        tmp_path,
        "--backbone",
        tiny_bert,
        "--profile",
        "smoke",
        "--results",
        tmp_path / "results",
        "--device",
        "cpu",
    )
    assert run.exit_code == 0, run.stderr + run.stdout
    output = run.stdout + run.stderr
    assert "extract.sh csts.tar.enc <password>" in output
    import json

    statuses = {p.stem: json.loads(p.read_text())["status"] for p in (tmp_path / "results").glob("*/seed-42/*.json")}
    assert statuses == {"csts": "missing", "stsb": "ok"}
