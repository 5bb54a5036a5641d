"""The shared training loop (thesis 5.1): AdamW (lr 2e-5, weight decay 0.01 except biases and LayerNorm weights),
linear warm-up over 10% of the steps then linear decay, a dev evaluation after every epoch, the best epoch's weights
kept, seeded shuffling. Mixed precision on CUDA (and on request on the CPU); several devices through
``DistributedDataParallel``, one process per device (harness.distributed: launched with torchrun).

A plugin supplies a module whose ``forward(**batch)`` returns the scalar loss, a ``collate`` that turns a list of
examples into that batch of tensors, and optionally ``dev_score`` (higher is better). With ``dev_every_steps``
the dev score is taken every that many optimiser steps (and after the last) instead of after every epoch, and the
best step's weights are kept (SimCSE section 4 / appendix A: every 250 steps on STS-B dev).

Length-grouped batches (``lengths`` given to :func:`fit`; :func:`harness.training.fit_scored_pairs` does it for scored
pairs): Hugging
Face's ``group_by_length`` idea. Each epoch the examples are shuffled (seeded) as before, cut into chunks of
``GROUP_CHUNK_BATCHES`` batches, each chunk is sorted by length and cut into batches, and the order of all batches is
shuffled. Every example is still seen once per epoch in a seeded random batch; a batch holds examples of similar
length, so short pairs are not padded to the longest pair of a random batch (most of the waste on STS data).

Deviations: thesis 5.1 / sentence-transformers draw uniformly random batches; length grouping changes which examples
share a batch (not the objective, the schedule or the number of steps).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from . import distributed
from .curves import current_curves
from .device import (
    autocast_dtype,
    gradient_scaler,
    keep_freed_cpu_memory,
    precision_name,
    seed_everything,
    single_gpu_note,
)
from .errors import HarnessError


class NonFiniteLossError(HarnessError):
    """The training loss became NaN or infinite (training diverged); the message names the step."""


@dataclass
class TrainConfig:
    """The settings of :func:`fit`: budget, optimiser, schedule, precision, evaluation and logging."""

    epochs: int | None = 1  # None: as many epochs as max_steps needs (a step budget, as Hugging Face's max_steps)
    batch_size: int = 16
    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    max_steps: int | None = None
    schedule: str = "linear"  # "linear" (warm-up + decay) or "constant" (TSDAE)
    seed: int = 42
    device: str = "cpu"
    progress: bool = True
    description: str = "training"
    group_by_length: bool = True  # used when fit() is given example lengths
    precision: str = "auto"  # harness.profiles.PRECISIONS: autocast of the forward pass (harness.device)


# Batches per length-sorted chunk (Hugging Face's LengthGroupedSampler uses 50).
GROUP_CHUNK_BATCHES = 50


def epoch_batches(
    count: int, batch_size: int, generator: torch.Generator, lengths: Sequence[int] | None = None
) -> list[list[int]]:
    """The batches of one epoch as example indices: a seeded permutation cut into batches, or, with ``lengths``,
    length-grouped batches (shuffle; sort within chunks of GROUP_CHUNK_BATCHES batches; shuffle the batch order)."""
    order = torch.randperm(count, generator=generator).tolist()
    if lengths is None:
        return [order[start : start + batch_size] for start in range(0, count, batch_size)]
    chunk = batch_size * GROUP_CHUNK_BATCHES
    batches: list[list[int]] = []
    for start in range(0, count, chunk):
        members = sorted(order[start : start + chunk], key=lambda index: -lengths[index])
        batches.extend(members[offset : offset + batch_size] for offset in range(0, len(members), batch_size))
    # A short final batch stays last within its chunk's sort, but its position in the epoch is random.
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


@dataclass
class TrainReport:
    """What :func:`fit` reports: steps, time, examples seen, losses and dev scores (stored in the record)."""

    steps: int = 0
    seconds: float = 0.0  # time spent optimising (throughput is computed from it)
    wall_seconds: float = 0.0  # including dev evaluations
    examples_seen: int = 0
    best_epoch: int | None = None
    best_dev_score: float | None = None
    best_step: int | None = None  # with dev_every_steps: the step whose weights were kept
    dev_history: list[float] = field(default_factory=list)
    loss_history: list[float] = field(default_factory=list)
    # Seed optimisation: per trial, its training seed and best dev score; the kept trial is the best one.
    seed_trials: list[dict] = field(default_factory=list)
    # The budget this training applied (what the loop was configured with and what it did): epochs, max_steps,
    # batch_size, learning_rate, examples, epochs_run, steps (and seed_trials where seed trials ran).
    applied_budget: dict = field(default_factory=dict)

    @property
    def examples_per_second(self) -> float:
        return self.examples_seen / self.seconds if self.seconds else 0.0

    def as_record(self) -> dict:
        return {
            "steps": self.steps,
            "seconds": round(self.seconds, 3),
            "wall_seconds": round(self.wall_seconds, 3),
            "examples_seen": self.examples_seen,
            "examples_per_second": round(self.examples_per_second, 3),
            "best_epoch": self.best_epoch,
            "best_dev_score": self.best_dev_score,
            **({"best_step": self.best_step} if self.best_step is not None else {}),
            "dev_history": self.dev_history,
            "mean_loss_per_epoch": self.loss_history,
            **({"seed_trials": self.seed_trials} if self.seed_trials else {}),
            **({"applied_budget": self.applied_budget} if self.applied_budget else {}),
        }


def parameter_groups(module: nn.Module, weight_decay: float) -> list[dict]:
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight", "LayerNorm.bias", "norm.weight")
    decay, plain = [], []
    for name, parameter in module.named_parameters():
        if not parameter.requires_grad:
            continue
        (plain if any(token in name for token in no_decay) else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]


def make_adamw(groups: list[dict], learning_rate: float) -> torch.optim.Optimizer:
    """AdamW with the fused kernel where this torch build has it (about 4x faster steps on CPU, as the HF Trainer
    uses); the same update rule either way."""
    devices = {parameter.device.type for group in groups for parameter in group["params"]}
    if not devices <= {"cpu", "cuda", "mps", "xpu"}:  # e.g. the meta device of harness.testing's device check
        return torch.optim.AdamW(groups, lr=learning_rate)
    try:
        return torch.optim.AdamW(groups, lr=learning_rate, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(groups, lr=learning_rate)


def clip_gradients(parameters: Sequence[nn.Parameter], max_norm: float) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_``, the same total norm and the same scaled gradients, one pass over the
    gradients cheaper on the CPU: torch multiplies every gradient by the clip coefficient clamped to 1 even when it
    is 1 (so that a GPU never waits for the norm); on the CPU reading the norm costs nothing, and a multiplication by
    1 changes no gradient, so that pass runs only where the norm exceeds ``max_norm`` (docs/core/training.md)."""
    grads = [parameter.grad for parameter in parameters if parameter.grad is not None]
    if not grads or any(grad.device.type != "cpu" or grad.is_sparse for grad in grads):
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    total_norm = torch.nn.utils.get_total_norm(grads, 2.0)
    clip_coefficient = max_norm / (total_norm + 1e-6)
    if not bool(clip_coefficient >= 1.0):  # also a NaN norm, which torch's scaling spreads to every gradient
        torch._foreach_mul_(grads, clip_coefficient)
    return total_norm


def linear_schedule(optimizer, warmup_steps: int, total_steps: int, schedule: str):
    def factor(step: int) -> float:
        if schedule == "constant":
            return 1.0
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def fit(
    module: nn.Module,
    examples: Sequence[Any],
    collate: Callable[[list[Any]], dict[str, torch.Tensor]],
    config: TrainConfig,
    dev_score: Callable[[], float] | None = None,
    lengths: Sequence[int] | None = None,
    dev_every_steps: int | None = None,
) -> TrainReport:
    """Train ``module`` in place; at the end it holds the weights of the best dev epoch (or the last epoch).
    ``lengths`` (one per example, e.g. characters of a pair) turns on length-grouped batches (see the module
    docstring) unless ``config.group_by_length`` is false. Inside a run's training, each step's loss (with the
    terms a combined objective leaves in ``module.last_terms``) and each dev score go to the model's training
    curves (harness.curves: its ``training.json``, and the run's trackers)."""
    if lengths is not None and len(lengths) != len(examples):
        raise ValueError(f"fit(): {len(lengths)} lengths for {len(examples)} examples")
    # Reported only where grouping was possible, so trainings without lengths keep the records they had.
    grouping = {"group_by_length": config.group_by_length} if lengths is not None else {}
    if not config.group_by_length:
        lengths = None
    from .progress import progress_bar

    seed_everything(config.seed)
    device = torch.device(config.device)
    module.to(device)
    if device.type == "cpu":
        keep_freed_cpu_memory()  # each step frees and reallocates the same large gradients (harness.device)
    runner: nn.Module = module
    ranks = distributed.world_size()
    if ranks > 1:  # torchrun: one process per device, gradients averaged across them
        runner = nn.parallel.DistributedDataParallel(
            module,
            device_ids=[device.index] if device.type == "cuda" else None,
            # Objectives with parts a step may leave unused (frozen layers, optional heads) must not stall a step.
            find_unused_parameters=True,
        )
        # Each rank draws its own dropout masks (as accelerate's set_seed(device_specific=True)); the batch order
        # comes from its own generator below, the same on every rank.
        torch.manual_seed(config.seed + distributed.rank())
    else:
        single_gpu_note(str(config.device))
    optimizer = make_adamw(parameter_groups(module, config.weight_decay), config.learning_rate)
    trained_parameters = [parameter for parameter in module.parameters() if parameter.requires_grad]
    steps_per_epoch = math.ceil(len(examples) / config.batch_size)
    epochs = config.epochs
    if epochs is None:  # a step budget: enough epochs to reach max_steps
        if config.max_steps is None:
            raise ValueError(f"{config.description}: epochs=None needs max_steps")
        epochs = max(1, math.ceil(config.max_steps / max(1, steps_per_epoch)))
    total_steps = steps_per_epoch * epochs
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    scheduler = linear_schedule(optimizer, int(total_steps * config.warmup_ratio), total_steps, config.schedule)
    amp_dtype = autocast_dtype(str(device), config.precision)
    scaler = gradient_scaler(device.type, amp_dtype)
    generator = torch.Generator().manual_seed(config.seed)

    report = TrainReport()
    # The run's recorder of this training (harness.curves): every step's loss and terms, every dev score.
    recorder = current_curves()
    curves = recorder.start_fit(config.seed, config.description) if recorder is not None else None
    best_state: dict[str, torch.Tensor] | None = None
    if dev_every_steps is not None and (dev_score is None or dev_every_steps < 1):
        raise ValueError("fit(): dev_every_steps needs a dev_score and must be at least 1")
    step_dev_seconds = 0.0  # time of in-epoch dev evaluations, kept out of the optimisation time

    def step_dev_evaluation() -> None:
        nonlocal best_state, step_dev_seconds
        evaluation_started = time.perf_counter()
        module.eval()
        score = float(dev_score())
        module.train()
        report.dev_history.append(score)
        if curves is not None:
            curves.dev_score(report.steps, score)
        if report.best_dev_score is None or score > report.best_dev_score:
            report.best_dev_score, report.best_step = score, report.steps
            best_state = copy.deepcopy({k: v.detach().cpu() for k, v in module.state_dict().items()})
        step_dev_seconds += time.perf_counter() - evaluation_started

    started = time.perf_counter()
    bar = progress_bar(total_steps, config.description, config.progress, unit="step")
    try:
        for epoch in range(epochs):
            if report.steps >= total_steps:
                break
            module.train()
            batches = epoch_batches(len(examples), config.batch_size, generator, lengths)
            epoch_losses = []
            epoch_started = time.perf_counter()
            for batch_indices in batches:
                if report.steps >= total_steps:
                    break
                shard = distributed.shard_of(batch_indices, distributed.rank(), ranks) if ranks > 1 else None
                local_indices = batch_indices[shard.offset : shard.offset + shard.count] if shard else batch_indices
                # A rank without a share of a tiny last batch computes on a stand-in example with weight 0, so that
                # every rank still takes part in the step's gradient exchange.
                batch = to_device(collate([examples[i] for i in local_indices or batch_indices[:1]]), device)
                with (
                    torch.autocast(device_type=device.type, dtype=amp_dtype) if amp_dtype else _null(),
                    distributed.training_step(shard),
                ):
                    loss = runner(**batch)
                if shard is not None:
                    # DDP averages gradients over ranks: weighting each rank's mean loss by its share makes that the
                    # gradient of the global batch's mean loss; the reported loss is that mean, summed over ranks.
                    loss = loss * (shard.count * ranks / shard.total)
                    reported = loss.detach() / ranks
                    torch.distributed.all_reduce(reported)
                else:
                    reported = loss.detach()
                optimizer.zero_grad(set_to_none=True)
                if scaler is not None:
                    scaler.scale(loss).backward()
                    scaler.unscale_(optimizer)
                    clip_gradients(trained_parameters, config.max_grad_norm)
                    scaler.step(optimizer)
                    scaler.update()
                else:
                    loss.backward()
                    clip_gradients(trained_parameters, config.max_grad_norm)
                    optimizer.step()
                scheduler.step()
                report.steps += 1
                report.examples_seen += len(batch_indices)
                epoch_losses.append(float(reported))
                if not math.isfinite(epoch_losses[-1]):
                    raise NonFiniteLossError(
                        f"{config.description}: the training loss became {epoch_losses[-1]} at step {report.steps} "
                        f"(epoch {epoch + 1}); training diverged. Lower the learning rate (e.g. the model option "
                        f"lr; it was {config.learning_rate:g})."
                    )
                if curves is not None:
                    # A combined objective (harness.nn.objectives.ObjectiveSum) says each term of its last step.
                    terms = getattr(module, "last_terms", None) or {}
                    curves.step(report.steps, {"loss": epoch_losses[-1], **terms})
                bar.update(1)
                bar.set_postfix(loss=f"{epoch_losses[-1]:.4f}")
                if dev_every_steps is not None and (report.steps % dev_every_steps == 0 or report.steps == total_steps):
                    step_dev_evaluation()
            report.seconds += time.perf_counter() - epoch_started  # optimisation only, not dev evaluation
            report.loss_history.append(sum(epoch_losses) / max(1, len(epoch_losses)))
            if dev_every_steps is not None:
                continue
            if dev_score is not None:
                module.eval()
                score = float(dev_score())
                report.dev_history.append(score)
                if curves is not None:
                    curves.dev_score(report.steps, score)
                if report.best_dev_score is None or score > report.best_dev_score:
                    report.best_dev_score, report.best_epoch = score, epoch
                    best_state = copy.deepcopy({k: v.detach().cpu() for k, v in module.state_dict().items()})
            else:
                report.best_epoch = epoch
    finally:
        bar.close()
    report.wall_seconds = time.perf_counter() - started
    report.applied_budget = {
        "epochs": config.epochs,
        "max_steps": config.max_steps,
        "batch_size": config.batch_size,
        "learning_rate": config.learning_rate,
        "examples": len(examples),
        "epochs_run": len(report.loss_history),
        "steps": report.steps,
        "precision": config.precision,
        "precision_used": precision_name(amp_dtype),  # what "auto" (or the request) came to on this device
        **grouping,
        **({"processes": ranks} if ranks > 1 else {}),
    }
    if dev_every_steps is not None:
        report.seconds -= step_dev_seconds
        if best_state is not None and report.best_step != report.steps:
            module.load_state_dict(best_state)
    elif best_state is not None and report.best_epoch != len(report.loss_history) - 1:
        module.load_state_dict(best_state)
    module.eval()
    return report


def to_device(value: Any, device: torch.device) -> Any:
    """Tensors, and tensors inside any Mapping (a dict, a tokenizer's ``BatchEncoding``), list, tuple or named
    tuple, at any depth, moved to ``device``; a Mapping comes back as a plain dict (what ``forward(**batch)`` and
    ``features["input_ids"]`` need), anything else unchanged."""
    if torch.is_tensor(value):
        return value.to(device, non_blocking=True)
    if isinstance(value, Mapping):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple takes its fields positionally
        return type(value)(*(to_device(v, device) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    return value


def config_from_profile(profile, seed: int, device: str, progress: bool = True, **overrides) -> TrainConfig:
    """The profile's budgets; a method's own hyperparameters (lr, schedule) come in ``overrides``."""
    values = {
        "epochs": profile.epochs,
        "batch_size": profile.batch_size,
        "max_steps": profile.max_steps,
        # A per-spec budget (profile per-method budget, matrix entry or --set) may fix the learning rate too; a
        # method's own lr in ``overrides`` gives way to it.
        "seed": seed,
        "device": device,
        "progress": progress,
        "precision": getattr(profile, "precision", "auto"),
        "group_by_length": getattr(profile, "group_by_length", True),
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    if getattr(profile, "learning_rate", None) is not None:
        values["learning_rate"] = profile.learning_rate
    return TrainConfig(**values)


def trial_seed(seed: int, trial: int) -> int:
    """The training seed of seed-optimisation trial ``trial`` (trial 0 is the run's own seed)."""
    return seed if trial == 0 else (seed * 1_000 + trial) % 2**32


def fit_with_seed_trials(
    module: nn.Module,
    examples: Sequence[Any],
    collate: Callable,
    config: TrainConfig,
    dev_score: Callable[[], float],
    lengths: Sequence[int] | None,
    trials: int,
) -> TrainReport:
    """Seed optimisation (thesis 5.1): ``trials`` trainings from the same initial weights with different training
    seeds (shuffling, dropout); the trial with the best dev score is kept, selected on dev only. Its report carries
    every trial's seed and best dev score."""
    initial = copy.deepcopy({k: v.detach().cpu() for k, v in module.state_dict().items()})
    best_report: TrainReport | None = None
    best_state: dict[str, torch.Tensor] | None = None
    history: list[dict] = []
    for trial in range(trials):
        module.load_state_dict(initial)
        trial_config = copy.copy(config)
        trial_config.seed = trial_seed(config.seed, trial)
        report = fit(module, examples, collate, trial_config, dev_score, lengths=lengths)
        history.append({"trial": trial, "seed": trial_config.seed, "best_dev_score": report.best_dev_score})
        if best_report is None or (report.best_dev_score or float("-inf")) > (
            best_report.best_dev_score or float("-inf")
        ):
            best_report = report
            best_state = copy.deepcopy({k: v.detach().cpu() for k, v in module.state_dict().items()})
    assert best_report is not None and best_state is not None
    module.load_state_dict(best_state)
    module.eval()
    best_report.seed_trials = history
    best_report.applied_budget["seed_trials"] = trials
    return best_report


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
