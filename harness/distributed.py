"""Training one model on several devices: ``torch.distributed`` with one process per device (DistributedDataParallel).

Launched by ``torchrun --nproc-per-node N -m harness run ...`` (torchrun sets ``WORLD_SIZE``, ``RANK`` and
``LOCAL_RANK``): every process runs the same plan; :func:`setup` joins the process group (NCCL on CUDA, gloo on the
CPU) and gives each process its own device (``cuda:LOCAL_RANK``). :func:`harness.training.fit` then wraps the module
in ``DistributedDataParallel`` and gives each rank a contiguous share of every global batch (the batch size of the
profile stays the global batch); the loss each rank backpropagates is weighted by its share, so the averaged
gradient is the gradient of the global batch's mean loss. Only rank 0 writes checkpoints and records.

In-batch negatives: :func:`gather_with_grad` concatenates a tensor of every rank in rank order (the global batch's
order), keeping the gradient of every part (``torch.distributed.nn.functional.all_gather``, as sentence-transformers'
``gather_across_devices``); :func:`harness.nn.objectives.in_batch_contrastive` uses it during a distributed training
step, so its negatives are the whole global batch, as on one device.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from .errors import InvalidOptionError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Shard:
    """This rank's part of the global batch of the current training step."""

    rank: int
    world_size: int
    offset: int  # examples of the global batch before this rank's share
    count: int  # examples in this rank's share
    total: int  # examples in the global batch


# Set by harness.training.fit around the forward pass of a distributed training step (a context variable: it travels
# with the call, whatever module or thread computes the loss).
_current_shard: contextvars.ContextVar[Shard | None] = contextvars.ContextVar("harness_shard", default=None)


def launched_world_size() -> int:
    """The number of processes torchrun started for this run (1 without torchrun)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise InvalidOptionError(
            f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number; launch with torchrun --nproc-per-node N."
        ) from None


def active() -> bool:
    """Whether this process belongs to a process group of several ranks."""
    return (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
        and torch.distributed.get_world_size() > 1
    )


def rank() -> int:
    """This process's rank under torchrun (0 when not distributed)."""
    return torch.distributed.get_rank() if active() else 0


def world_size() -> int:
    """How many processes train together (1 when not distributed)."""
    return torch.distributed.get_world_size() if active() else 1


def is_main_process() -> bool:
    """Rank 0, or the only process: the one that writes checkpoints and records."""
    return rank() == 0


def setup(device: str) -> str:
    """Join torchrun's process group when this run was launched with several processes; returns this rank's device
    (``cuda:LOCAL_RANK`` for cuda/auto with a GPU, else the CPU with gloo). Without torchrun: ``device`` unchanged."""
    if launched_world_size() <= 1:
        return device
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
    uses_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    if device.startswith("cuda:"):
        raise InvalidOptionError(
            f"--device {device} under torchrun: each process takes the GPU of its LOCAL_RANK; "
            "use --device cuda (or auto)."
        )
    if uses_cuda:
        if local_rank >= torch.cuda.device_count():
            raise InvalidOptionError(
                f"torchrun started process LOCAL_RANK={local_rank} but only "
                f"{torch.cuda.device_count()} GPU(s) are visible; use --nproc-per-node "
                f"{torch.cuda.device_count()} or fewer."
            )
        torch.cuda.set_device(local_rank)
        device = f"cuda:{local_rank}"
    elif device == "auto":
        device = "cpu"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if uses_cuda else "gloo")
    logger.info("distributed training: rank %d of %d on %s", rank(), world_size(), device)
    return device


def barrier() -> None:
    """Wait until every process reaches this point (nothing when not distributed)."""
    if active():
        torch.distributed.barrier()


def broadcast_from_main(value):
    """``value`` of rank 0 on every rank (any picklable object); ``value`` itself without a process group."""
    if not active():
        return value
    holder = [value]
    torch.distributed.broadcast_object_list(holder, src=0)
    return holder[0]


def shard_of(batch_indices: list, rank_: int, world_size_: int) -> Shard:
    """Rank ``rank_``'s contiguous share of a global batch (the first ``len % world_size`` ranks get one more)."""
    total = len(batch_indices)
    base, extra = divmod(total, world_size_)
    count = base + (1 if rank_ < extra else 0)
    offset = rank_ * base + min(rank_, extra)
    return Shard(rank_, world_size_, offset, count, total)


@contextlib.contextmanager
def training_step(shard: Shard | None) -> Iterator[None]:
    """Marks the forward pass of a distributed training step (see :func:`current_shard`)."""
    token = _current_shard.set(shard)
    try:
        yield
    finally:
        _current_shard.reset(token)


def current_shard() -> Shard | None:
    """This rank's share of the global batch while a distributed training step computes its loss, else None."""
    return _current_shard.get()


def gather_with_grad(tensor: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(every rank's ``tensor`` concatenated along dim 0 in rank order, the offset of this rank's rows) during a
    distributed training step; (``tensor``, 0) otherwise. Ranks may hold different numbers of rows; the gradient of
    every row flows back to the rank that computed it."""
    shard = current_shard()
    if shard is None or not active():
        return tensor, 0
    from torch.distributed.nn.functional import all_gather

    # A rank whose share is empty computes on a stand-in example with weight 0 (harness.training.fit): no rows.
    rows = torch.tensor([tensor.shape[0] if shard.count else 0], device=tensor.device)
    counts = [torch.zeros_like(rows) for _ in range(shard.world_size)]
    torch.distributed.all_gather(counts, rows)
    counts = [int(count.item()) for count in counts]
    padded = tensor
    if tensor.shape[0] < max(counts):  # all_gather needs one shape on every rank
        padding = tensor.new_zeros((max(counts) - tensor.shape[0], *tensor.shape[1:]))
        padded = torch.cat([tensor, padding])
    parts = all_gather(padded)
    gathered = torch.cat([part[:count] for part, count in zip(parts, counts)])
    return gathered, sum(counts[: shard.rank])
