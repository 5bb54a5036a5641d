"""The scaffolding every trainable model around one torch network shares, and the pair scorers' on top of it.

- :class:`NetworkModel`: a model whose state is one torch ``network`` on its device (its checkpoint is the network's
  weights, :class:`harness.CheckpointedModule`), whose inference can run through another runtime (``use_runtime``:
  :class:`harness.nn.onnx_runtime.RuntimeSwitch` swaps the transformer for scoring; training stays in torch), and
  which computes in eval mode whatever mode it is in (:meth:`NetworkModel.inference`). The Sub-Sentence Encoder is
  one.
- :class:`TrainablePairScorer`: a PairScorer on a :class:`NetworkModel`: each distinct pair scored once in
  length-sorted batches (:func:`harness.nn.pairs.score_in_length_sorted_batches`), trained on scored pairs by
  regression on its score (:func:`harness.training.fit_scored_pairs`, both pair orders unless ``pair_orders`` is
  ``given``). The Cross-Encoder and the Cross-Bi-Encoder are two: each says how a pair becomes its network's input.

Deviations: none (the scaffolding computes nothing of a method's own).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .checkpoints import CheckpointedModule
from .errors import invalid_choice
from .nn.losses import ScoreRegression
from .nn.onnx_runtime import RuntimeSwitch
from .nn.pairs import distinct_pairs, score_in_length_sorted_batches
from .training import TrainReport, fit_scored_pairs, with_both_orders

PAIR_ORDERS = ("both", "given")  # train on (a, b) and (b, a), or on the given order only


class NetworkModel(CheckpointedModule):
    """A trainable model whose state is one torch ``network``, kept on ``device``; ``batch_size`` and ``progress``
    are its evaluation's. A subclass names its settings in ``checkpoint_config``."""

    def __init__(self, network: nn.Module, device: str, batch_size: int, progress: bool):
        self.network = network.to(device)
        self.device = device
        self.batch_size = batch_size
        self.progress = progress
        self.runtime = RuntimeSwitch()

    def use_runtime(self, runtime: str, cache_dir: Path | None = None) -> None:
        """``harness run --runtime``: inference runs the network's transformer through ``runtime`` ("torch" or
        "onnx"; what the model computes on top of its token states stays in torch); training stays in torch."""
        self.runtime.use(runtime, cache_dir)

    @contextmanager
    def inference(self) -> Iterator[None]:
        """The network in eval mode, its transformer under the chosen runtime; its mode as before afterwards (a
        model evaluated on a dev set during its training goes on training)."""
        was_training = self.network.training
        self.network.eval()
        try:
            with self.runtime.inference(self.network):
                yield
        finally:
            self.network.train(was_training)

    # -- checkpoint: the network's weights (harness.CheckpointedModule) -------------------------------------------
    def checkpoint_module(self) -> nn.Module:
        return self.network


class TrainablePairScorer(NetworkModel):
    """A PairScorer trained on scored pairs. ``name``: the model's name in messages and progress bars. A subclass
    says how pairs become the network's input: :meth:`pair_features` (one unpadded feature dict per pair) and
    :meth:`collate_features` (a padded batch of them) for scoring, :meth:`training_batch` for training, and may
    choose its regression loss (:meth:`score_objective`; MSE on the network's score by default)."""

    name = "pair scorer"

    def __init__(
        self,
        network: nn.Module,
        device: str,
        batch_size: int,
        progress: bool,
        learning_rate: float,
        pair_orders: str = "both",
    ):
        if pair_orders not in PAIR_ORDERS:
            raise invalid_choice(f"option 'pair_orders' of model {self.name!r}", pair_orders, PAIR_ORDERS)
        super().__init__(network, device, batch_size, progress)
        self.network.eval()
        self.pair_orders = pair_orders
        self.learning_rate = learning_rate

    def pair_features(self, first: Sequence[str], second: Sequence[str]) -> Sequence[dict[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} must say how pairs become its input (pair_features)")

    def collate_features(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} must pad its pair features (collate_features)")

    def training_batch(self, first: Sequence[str], second: Sequence[str]) -> dict[str, torch.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} must say how a training batch is made (training_batch)")

    def score_objective(self) -> ScoreRegression:
        return ScoreRegression(self.network, "mse")

    def score(self, first: Sequence[str], second: Sequence[str]) -> np.ndarray:
        pairs, rows = distinct_pairs(first, second)
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        features = self.pair_features([a for a, _ in pairs], [b for _, b in pairs])
        with self.inference():
            scores = score_in_length_sorted_batches(
                features,
                self.collate_features,
                self.network,
                self.device,
                self.batch_size,
                self.progress,
                f"scoring pairs ({self.name})",
            )
        return scores[rows]

    def fit(self, splits: Any, ctx: Any) -> TrainReport:
        return self.fit_scored_pairs(splits.train, splits.dev, ctx)

    def fit_scored_pairs(self, train: Any, dev: Any, ctx: Any, description: str | None = None) -> TrainReport:
        """Regression of the pair's score on the gold score (:meth:`score_objective`) on ScoredPairs ``train``;
        ``dev`` (or None) selects the best epoch."""

        def collate(rows):
            first, second, scores = zip(*rows)
            return {"features": self.training_batch(first, second), "scores": torch.tensor(scores)}

        objective = self.score_objective()
        if self.pair_orders == "both":
            train = with_both_orders(train)
        return fit_scored_pairs(
            self,
            objective,
            collate,
            train,
            dev,
            ctx,
            self.learning_rate,
            description or f"training {self.name}",
        )

    def restore_checkpoint_config(self, config: dict) -> None:
        self.network.eval()
