"""TSDAE ``tsdae`` (plugins/tsdae.py): the tied decoder reconstructs from the pooled vector on a BERT and a RoBERTa
backbone, the reconstruction loss starts near log |V| and falls, and a bad ratio is refused."""

from __future__ import annotations

import math

import pytest

import harness.testing as ht
from harness import InvalidOptionError
from harness.options import resolve_options

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("backbone", ["tiny_bert", "tiny_roberta"])
def test_tsdae_keeps_the_contract_on_bert_and_roberta(backbone, registry, request):
    report = ht.check_model("tsdae", registry=registry, backbone=request.getfixturevalue(backbone))
    assert report.dimension == 32 and report.training_report["steps"] >= 1


def test_the_loss_starts_near_uniform_over_the_vocabulary_and_falls(registry, tiny_bert):
    plugin = registry.model("tsdae")
    ctx = ht.model_context(tiny_bert, {"lr": "1e-3"}, plugin=plugin, registry=registry)
    model = plugin.factory(ctx)
    record = model.fit(ht.tiny_training_splits("unlabeled_sentences"), ctx)
    curve = record["loss_curve"]["total"]
    vocabulary = model.encoder.tokenizer.vocab_size
    # A random tiny decoder scores the whole vocabulary about evenly: cross-entropy about log(|V|).
    assert abs(curve["first"] - math.log(vocabulary)) < 1.0
    assert record["steps"] >= 2 and curve["last"] < curve["first"]
    assert record["setup"] == "thesis-5.4.1"  # TSDAE alone trains with the replication setup of thesis 5.4.1


def test_a_ratio_outside_zero_one_is_refused(registry):
    with pytest.raises(InvalidOptionError, match=r"\(0, 1\)"):
        resolve_options("model 'tsdae'", registry.model("tsdae").options, {"ratio": "1.0"})
