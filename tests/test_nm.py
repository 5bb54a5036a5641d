"""Noise Matching ``nm`` (plugins/nm.py): the deleted view is pulled to the stop-gradient original, so only the noised
view carries gradient; the deletion ratio is checked; NM trains as TSDAE's auxiliary."""

from __future__ import annotations

import pytest

import harness.testing as ht
from harness import InvalidOptionError
from harness.options import resolve_options
from harness.plugins import nm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_objective_reads_its_options_and_both_views(registry):
    objective = registry.component("objective", "nm")
    assert objective is nm.OBJECTIVE and objective.build is nm.NoiseMatching
    assert set(objective.reads) == {"temperature", "directions", "ratio"}
    assert len(objective.views) == 2  # the clean sentence and its deleted copy


@pytest.mark.parametrize("ratio", ["0", "1", "1.5"])
def test_a_deletion_ratio_outside_zero_one_is_refused(registry, ratio):
    with pytest.raises(InvalidOptionError, match=r"\(0, 1\)"):
        resolve_options("model 'nm'", registry.model("nm").options, {"ratio": ratio})


def test_nm_trains_with_each_direction_setting(registry, tiny_bert):
    for directions in ("one", "both"):
        report = ht.check_model("nm", registry=registry, backbone=tiny_bert, options={"directions": directions})
        assert report.training_report["steps"] >= 1


def test_nm_as_the_auxiliary_of_tsdae(registry, tiny_bert):
    report = ht.check_model("tsdae", registry=registry, backbone=tiny_bert, options={"aux": "nm"})
    assert report.training_report["steps"] >= 1
