"""The in-batch contrastive criterion, the loss family of the contrastive objectives: SimCSE (Gao et al. 2021,
section 3, eq. 1; thesis 2.4.5, eq. 2.7) and Noise Matching (thesis 4.2.3, the positive a word-deleted copy), alone
or as an auxiliary term (thesis 5.4.2). sentence-transformers' MultipleNegativesRankingLoss is its one-direction
form.
"""

from __future__ import annotations

import torch
from torch import nn

from ...distributed import gather_with_grad

DIRECTIONS = ("one", "both")


def in_batch_contrastive(
    anchors: torch.Tensor, positives: torch.Tensor, temperature: float, directions: str
) -> torch.Tensor:
    """InfoNCE over in-batch negatives on cosine / temperature (SimCSE eq. 1, thesis eq. 2.7): anchor i must pick
    positive i among all positives. ``directions="both"`` adds the transposed term (positive i picks anchor i), as
    the thesis code sums both; ``"one"`` is sentence-transformers' MultipleNegativesRankingLoss with
    ``scale = 1 / temperature``.

    In a distributed training step (harness.distributed) the candidates are those of the whole global batch, as on one
    device (SimCSE's and the thesis' in-batch negatives are the batch's): this rank's anchors pick among every rank's
    positives (and, with "both", this rank's positives among every rank's anchors), gathered with their gradients;
    the mean over this rank's rows is weighted into the global mean by the training loop."""
    all_positives, offset = gather_with_grad(positives)
    logits = nn.functional.normalize(anchors, dim=-1) @ nn.functional.normalize(all_positives, dim=-1).T
    logits = logits.float() / temperature
    targets = torch.arange(offset, offset + len(anchors), device=anchors.device)
    loss = nn.functional.cross_entropy(logits, targets)
    if directions == "both":
        all_anchors, _ = gather_with_grad(anchors)
        reverse = nn.functional.normalize(positives, dim=-1) @ nn.functional.normalize(all_anchors, dim=-1).T
        loss = loss + nn.functional.cross_entropy(reverse.float() / temperature, targets)
    return loss
