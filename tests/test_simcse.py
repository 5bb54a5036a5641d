"""SimCSE ``simcse`` (plugins/simcse.py): the training-only MLP head over [CLS] and its refusal under another pooling,
the plugin's own selection task, and a training round trip with the head (the checkpoint needs no head)."""

from __future__ import annotations

import pytest

import harness.testing as ht
from harness import InvalidOptionError
from harness.plugins.simcse import check_head

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_mlp_head_needs_cls_pooling():
    check_head({"mlp_head": True, "pooling": "cls"}, "model 'simcse'")
    check_head({"mlp_head": False, "pooling": "mean"}, "model 'simcse'")
    with pytest.raises(InvalidOptionError, match="needs pooling=cls.*got pooling=mean"):
        check_head({"mlp_head": True, "pooling": "mean"}, "model 'simcse'")


def test_simcse_selects_on_stsb_while_the_core_names_no_task(registry):
    assert registry.model("simcse").options["select_on"].default == "stsb"
    assert registry.model("mlm").options["select_on"].default == ""  # objectives without a task of their own
    assert "stsb" in registry.tasks


def test_training_with_the_mlp_head_round_trips_without_it(registry, tiny_bert):
    report = ht.check_model(
        "simcse",
        registry=registry,
        backbone=tiny_bert,
        options={"mlp_head": True, "pooling": "cls", "directions": "one"},
    )
    assert report.training_report["steps"] >= 1
    assert not [name for name in report.checkpoint_files if "head" in name]
