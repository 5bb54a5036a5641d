"""SimCSE, unsupervised (Gao et al. 2021, section 3; thesis 2.4.5, 5.4.2, table 6.10): the objective ``simcse`` and
its embedder. Each sentence goes through the encoder twice in training mode (two dropout masks) and must pick its
own second view among the batch's (InfoNCE over cosine / temperature, thesis eq. 2.7).

The method, its use as an auxiliary, the options ``directions``, ``mlp_head`` and ``select_every``, and every
deviation: docs/methods/simcse.md, section "SimCSE" and its ``simcse`` table rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from harness import InvalidOptionError, Option
from harness.blocks import CLEAN, Objective, ObjectiveSetup, TrainingStep, in_batch_contrastive, objective_hooks

NAME = "simcse"


class DropoutContrast(nn.Module):
    """The SimCSE term: two dropout views of the clean sentences, InfoNCE over the batch."""

    def __init__(self, setup: ObjectiveSetup):
        super().__init__()
        self.temperature = float(setup.options["temperature"])
        self.directions = str(setup.options["directions"])
        width = setup.encoder.transformer.config.hidden_size
        self.head = nn.Sequential(nn.Linear(width, width), nn.Tanh()) if setup.options.get("mlp_head") else None

    def forward(self, step: TrainingStep) -> torch.Tensor:
        features = step.features(CLEAN)
        doubled = {key: torch.cat([value, value]) for key, value in features.items()}
        vectors = step.encoder(doubled)
        if self.head is not None:
            vectors = self.head(vectors)
        first, second = vectors.chunk(2)
        return in_batch_contrastive(first, second, self.temperature, self.directions)


def check_head(options: Mapping[str, Any], owner: str) -> None:
    """Unsupervised SimCSE (Gao et al. 2021) trains the [CLS] representation with an MLP over it; under another
    pooling the MLP would be a head the paper never trained, so it is refused."""
    if options["mlp_head"] and options["pooling"] != "cls":
        raise InvalidOptionError(
            f"{owner}: mlp_head=true is SimCSE's MLP over [CLS] and needs pooling=cls (got "
            f"pooling={options['pooling']}); set pooling=cls or drop mlp_head."
        )


OBJECTIVE = Objective(
    name=NAME,
    description="SimCSE: two dropout views of each sentence, InfoNCE over in-batch negatives",
    build=DropoutContrast,
    views=(CLEAN,),
    reads=("temperature", "directions", "mlp_head"),
    reference="Gao et al. 2021 (SimCSE); thesis 2.4.5",
    check=check_head,
    # SimCSE selects on STS-B dev (with select_every=250); a plugin may name a task, the core may not.
    options={
        "select_on": Option(
            "stsb",
            "the task whose scored-pair dev split select_every scores (SimCSE: stsb)",
            type=str,
            hash_default=False,
        )
    },
)


register_components, register_models = objective_hooks(
    OBJECTIVE,
    description="unsupervised SimCSE (dropout noise, in-batch InfoNCE, cosine); learns from unlabeled sentences",
    reference="Gao et al. 2021 (SimCSE); thesis 2.4.5, 5.4.2, table 6.10",
)
