"""The ``mlm`` objective and model (plugins/mlm.py): uniform masking of content tokens only, at least one per batch,
and MLM trained with a contrastive auxiliary (``mlm:aux=simcse``, ``mlm:aux=nm``) on the tiny BERT."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import harness.testing as ht
from harness.plugins.mlm import MaskedLanguageModelling

pytestmark = pytest.mark.usefixtures("one_torch_thread")

CLS, SEP, PAD, MASK = 101, 102, 0, 103


def _masker(probability: float, seed: int = 0) -> MaskedLanguageModelling:
    """The objective's masking alone (no model): its probability, mask id, special ids and seeded generator."""
    masker = MaskedLanguageModelling.__new__(MaskedLanguageModelling)
    nn.Module.__init__(masker)
    masker.probability, masker.mask_token_id = probability, MASK
    masker.special_ids = torch.tensor([PAD, CLS, SEP])
    masker.generator = torch.Generator().manual_seed(seed)
    return masker


IDS = torch.tensor([[CLS, 2000, 2001, 2002, SEP, PAD], [CLS, 2003, SEP, PAD, PAD, PAD]])
ATTENTION = (IDS != PAD).long()
CONTENT = IDS >= 2000


def test_every_content_token_and_nothing_else_can_be_masked():
    masked, labels = _masker(1.0).mask(IDS, ATTENTION)
    assert torch.equal(masked == MASK, CONTENT)  # specials and padding are never masked
    assert torch.equal(labels[CONTENT], IDS[CONTENT]) and (labels[~CONTENT] < 0).all()  # scored only where masked


def test_a_draw_that_masks_nothing_masks_one_token():
    masked, labels = _masker(0.0).mask(IDS, ATTENTION)
    assert int((masked == MASK).sum()) == 1 and bool(CONTENT[masked == MASK].all())
    assert int((labels >= 0).sum()) == 1


def test_masking_is_seeded_and_about_the_probability():
    ids = torch.cat(
        [
            torch.tensor([[CLS]]).repeat(64, 1),
            torch.arange(2000, 2100).repeat(64, 1),
            torch.tensor([[SEP]]).repeat(64, 1),
        ],
        dim=1,
    )
    first, _ = _masker(0.2, seed=7).mask(ids, torch.ones_like(ids))
    again, _ = _masker(0.2, seed=7).mask(ids, torch.ones_like(ids))
    assert torch.equal(first, again)
    assert 0.17 < float((first == MASK).float().sum()) / (64 * 100) < 0.23


@pytest.mark.parametrize("aux", ["simcse", "nm"])
def test_mlm_with_a_contrastive_auxiliary_keeps_the_contract(aux, tiny_bert, registry):
    report = ht.check_model("mlm", registry=registry, backbone=tiny_bert, options={"aux": aux})
    assert report.dimension == 32 and report.training_report["steps"] >= 1
