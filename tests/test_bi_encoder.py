"""The Bi-Encoder ``be`` (plugins/bi_encoder.py) on the tiny BERT: its options (pooling, span_input), what its
checkpoint keeps. The registry contract test checks its capabilities and round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest

import harness.testing as ht
from harness import InvalidOptionError
from harness.options import resolve_options

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCE = "a man is playing a guitar on the stage ."


def _be(registry, backbone, **options):
    plugin = registry.model("be")
    return plugin.factory(ht.model_context(backbone, options, plugin=plugin, registry=registry))


def test_span_input_sentence_and_subset_encode_plain_texts(registry, tiny_bert):
    start = SENTENCE.index("playing")
    spans = [(0, 5), (start, start + len("playing"))]
    as_sentence = _be(registry, tiny_bert, span_input="sentence")
    np.testing.assert_allclose(as_sentence.encode_spans([(SENTENCE, spans)]), as_sentence.encode([SENTENCE]), atol=1e-6)
    as_subset = _be(registry, tiny_bert, span_input="subset")
    np.testing.assert_allclose(
        as_subset.encode_spans([(SENTENCE, spans)]), as_subset.encode(["a man playing"]), atol=1e-6
    )


def test_mask_span_inputs_depend_on_the_span(registry, tiny_bert):
    for span_input in ("mask", "full-mask"):
        model = _be(registry, tiny_bert, span_input=span_input)
        guitar = (SENTENCE.index("guitar"), SENTENCE.index("guitar") + len("guitar"))
        rows = model.encode_spans([(SENTENCE, [(0, 5)]), (SENTENCE, [guitar]), (SENTENCE, [(0, 5)])])
        assert rows.shape == (3, 32) and rows.dtype == np.float32
        assert not np.allclose(rows[0], rows[1]) and np.allclose(rows[0], rows[2], atol=1e-6)


def test_pooling_changes_the_embedding_and_the_checkpoint_records_it(registry, tiny_bert, tmp_path):
    mean, cls = _be(registry, tiny_bert), _be(registry, tiny_bert, pooling="cls")
    assert not np.allclose(mean.encode([SENTENCE]), cls.encode([SENTENCE]))
    cls.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["pooling"] == "cls" and config["max_length"] == ht.smoke_profile().max_seq_length


def test_unknown_option_values_are_refused_with_the_choices(registry):
    options = registry.model("be").options
    with pytest.raises(InvalidOptionError, match="mean.*cls"):
        resolve_options("model 'be'", options, {"pooling": "max"})
    with pytest.raises(InvalidOptionError, match="lr"):
        resolve_options("model 'be'", options, {"lr": "0"})
