"""SimCSE, unsupervised (Gao et al. 2021, section 3; thesis 2.4.5, 5.4.2, table 6.10).

Each sentence goes through the encoder twice in training mode; the two dropout masks are the only noise. The loss is
InfoNCE with in-batch negatives on cosine similarity over a temperature tau (option ``temperature``, 0.05):
sentence i must pick its own second view among the second views of the batch (thesis eq. 2.7). The pooled vector
(option ``pooling``: CLS, the default of SimCSE and the thesis code, or MEAN; the thesis reports both) is the
embedding, evaluated by cosine. sentence-transformers counterpart: ``MultipleNegativesRankingLoss`` on (s, s) pairs
with ``scale = 1 / temperature`` (tests/test_unsupervised.py checks the loss is the same on the same batch).

As an auxiliary (``mlm:aux=simcse``, thesis "MLM + SimCSE") the same term is added to the other objective's loss
with weight ``aux_weight``.

Deviations:
- ``directions=both`` (the default) adds the transposed term (view 2 picks view 1), as the thesis code
  (``SimCseModel``) does for every table 6.10 run; ``directions=one`` is SimCSE's eq. 1 alone.
- SimCSE trains CLS pooling with an MLP on top (Linear + tanh, ``mlp_only_train``) that is dropped at test time;
  the thesis code uses none, nor does this plugin by default; option ``mlp_head=true`` adds it (a fresh layer per
  training run, never saved).
- SimCSE evaluates on STS-B dev every 250 steps and keeps the best checkpoint; by default (the thesis code, the quick
  profile) the last step is kept. ``select_every=250`` turns SimCSE's selection on (``select_on``, default stsb:
  the cosine Spearman of STS-B's dev pairs, cut to the profile's evaluation budget); each evaluation encodes the
  ~3000 dev sentences (the paper setting: ``simcse:mlp_head=true,select_every=250`` on the paper profile).
- The two views are one encoder call on the batch stacked twice (the rows get independent dropout masks, exactly as
  two calls would); budgets (steps, batch size, max length) come from the profile (paper: batch 64, 12.5K steps,
  lr 3e-5, thesis 5.4.2), SimCSE itself used batch 64, lr 3e-5, max length 32 and 1M Wikipedia sentences.
"""
from __future__ import annotations

import torch
from torch import nn

from harness import Option, hookimpl
from harness.blocks import CLEAN, Objective, ObjectiveSetup, TrainingStep, in_batch_contrastive, objective_model

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


OBJECTIVE = Objective(
    name=NAME,
    description="SimCSE: two dropout views of each sentence, InfoNCE over in-batch negatives",
    build=DropoutContrast,
    views=(CLEAN,),
    reads=("temperature", "directions", "mlp_head"),
    reference="Gao et al. 2021 (SimCSE); thesis 2.4.5",
    # SimCSE selects on STS-B dev (with select_every=250); a plugin may name a task, the core may not.
    options={"select_on": Option("stsb", "the task whose scored-pair dev split select_every scores (SimCSE: stsb)",
                                 type=str, hash_default=False)},
)


COMPONENT, MODEL = objective_model(
    OBJECTIVE,
    description="unsupervised SimCSE (dropout noise, in-batch InfoNCE, cosine); learns from unlabeled sentences",
    reference="Gao et al. 2021 (SimCSE); thesis 2.4.5, 5.4.2, table 6.10",
)


@hookimpl
def register_components(register):
    register(COMPONENT)


@hookimpl
def register_models(register):
    register(MODEL)
