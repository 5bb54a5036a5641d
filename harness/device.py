"""Device choice, mixed precision and seeding.

``auto`` picks CUDA, then Apple MPS, then the CPU. On CUDA, forward passes run under autocast (bfloat16 where the GPU
supports it, else float16 with a gradient scaler during training; ``HARNESS_NO_AMP=1`` turns it off). One process
uses one GPU (``cuda`` is the current one, ``cuda:N`` GPU N); several GPUs train one model with one process each
(``torchrun``, harness.distributed). Training's precision is a budget key outside the spec's identity
(``--set precision=bf16``: bfloat16 autocast on the CPU too; ``fp16``: float16 with a gradient scaler; see
harness.profiles.PRECISIONS).
Which GPUs are visible is ``CUDA_VISIBLE_DEVICES``'s choice: a Ray task asking for one GPU sees exactly its own, as
``cuda:0``. CI has no GPU: the CUDA paths are covered by tests that fake torch's CUDA queries (tests/test_device.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys

import numpy as np
import torch

from .errors import InvalidOptionError, invalid_choice
from .profiles import PRECISIONS

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")
# What people call a device otherwise -> its name here (spelling alone would suggest cpu for gpu).
DEVICE_SYNONYMS = {"gpu": "cuda", "nvidia": "cuda", "metal": "mps", "apple": "mps"}


def check_device_name(requested: str) -> str:
    """``requested`` if it names a device this harness knows (auto, cpu, cuda, cuda:N, mps), without looking for
    it: a distributed driver checks the name and each worker resolves it on its own hardware."""
    base, colon, index = requested.partition(":")
    if base not in DEVICE_CHOICES or (colon and (base != "cuda" or not index.isdigit())):
        synonyms = {**DEVICE_SYNONYMS, f"gpu:{index}": f"cuda:{index}"} if index.isdigit() else DEVICE_SYNONYMS
        raise invalid_choice("--device", requested, (*DEVICE_CHOICES, "cuda:N"), synonyms)
    return requested


def visible_cuda_devices() -> list[str] | None:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` lets this process see (ids or UUIDs), or None when it is unset (all)."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item.strip()]


def _visible_text() -> str:
    visible = visible_cuda_devices()
    return "all" if visible is None else (",".join(visible) or "none")


def resolve_device(requested: str = "auto") -> str:
    check_device_name(requested)
    base = requested.split(":")[0]
    if base == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if base == "cuda" and not torch.cuda.is_available():
        raise InvalidOptionError(
            f"--device {requested} was asked for, but PyTorch sees no CUDA GPU "
            f"(CUDA_VISIBLE_DEVICES: {_visible_text()}); use --device cpu or auto."
        )
    if ":" in requested and int(requested.split(":")[1]) >= torch.cuda.device_count():
        raise InvalidOptionError(
            f"--device {requested}: only {torch.cuda.device_count()} GPU(s) are visible (CUDA_VISIBLE_DEVICES: "
            f"{_visible_text()}), numbered from cuda:0; use --device cuda:0..cuda:{torch.cuda.device_count() - 1}."
        )
    if base == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InvalidOptionError("--device mps was asked for, but MPS is not available; use --device cpu or auto.")
    return requested


def autocast_dtype(device: str, precision: str = "auto") -> torch.dtype | None:
    """The mixed-precision dtype for ``device`` under ``precision`` (harness.profiles.PRECISIONS), or None for full
    precision. ``auto``: CUDA's (below), none on CPU and MPS; ``fp32``: none; ``bf16``: bfloat16 on CPU or CUDA."""
    if precision not in PRECISIONS:
        raise invalid_choice("precision", precision, PRECISIONS)
    if precision == "fp32":
        return None
    if precision == "fp16":
        if device.startswith("mps"):
            raise InvalidOptionError("precision fp16 runs on cpu and cuda, not mps; use precision=auto or fp32.")
        return torch.float16
    if precision == "bf16":
        if device.startswith("mps"):
            raise InvalidOptionError("precision bf16 runs on cpu and cuda, not mps; use precision=auto or fp32.")
        if device.startswith("cuda") and not torch.cuda.is_bf16_supported():
            raise InvalidOptionError(
                "precision bf16: this GPU has no bfloat16 support; use precision=auto "
                "(float16 with a gradient scaler) or fp32."
            )
        return torch.bfloat16
    if not device.startswith("cuda") or os.environ.get("HARNESS_NO_AMP"):
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def cpu_bf16_supported() -> bool:
    """Whether this CPU has bfloat16 instructions (AVX512-BF16 or AMX) that make ``precision=bf16`` training faster
    than float32; without them PyTorch emulates bfloat16, which is slower."""
    try:
        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN, or without the query
        return False


def precision_name(dtype: torch.dtype | None) -> str:
    """How a training record names the autocast dtype it used: bf16, fp16 or fp32 (no autocast)."""
    return {torch.bfloat16: "bf16", torch.float16: "fp16", None: "fp32"}[dtype]


def gradient_scaler(device_type: str, dtype: torch.dtype | None):
    """The loss scaler float16 training needs (its gradients underflow without one) on ``device_type``, or None."""
    if dtype != torch.float16:
        return None
    return torch.amp.GradScaler(device_type)


_GPU_NOTE_SAID: set[int] = set()


def single_gpu_note(device: str) -> None:
    """Once per process: plain ``cuda`` with several visible GPUs trains on one of them; torchrun uses them all."""
    if device != "cuda" or not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        return
    count = torch.cuda.device_count()
    if count not in _GPU_NOTE_SAID:
        _GPU_NOTE_SAID.add(count)
        logging.getLogger(__name__).warning(
            "training on one of the %d visible GPUs; to train on all of them, launch with torchrun "
            "--nproc-per-node %d -m harness run ... (DistributedDataParallel, docs/scaling.md)",
            count,
            count,
        )


def autocast(device: str):
    dtype = autocast_dtype(device)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=dtype)


# glibc's mallopt parameters (malloc.h) and the environment variables that set them before a process starts.
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_ALLOCATOR_VARIABLES = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
_allocator_kept: bool | None = None


def keep_freed_cpu_memory() -> bool:
    """Let glibc's malloc keep freed memory for reuse instead of returning it to the kernel (once per process;
    whether it applied is returned). A CPU training step allocates and frees the same large buffers every step (the
    embedding table's gradient alone is 47 MB for MiniLM); by default glibc serves blocks over 32 MB with a fresh
    ``mmap`` and unmaps them when freed, so every step faults in ~11,000 new pages (about 30 ms a step on the
    project's machine: docs/core/training.md, "Speed"). With ``mmap`` off for the heap and a 1 GiB trim threshold
    the freed blocks are reused. Nothing changes where glibc is not the allocator, or where the user already set any
    ``MALLOC_*`` tuning variable (theirs stays in force)."""
    global _allocator_kept
    if _allocator_kept is not None:
        return _allocator_kept
    _allocator_kept = False
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _ALLOCATOR_VARIABLES):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p  # glibc only (musl lacks it; its mallopt does nothing)
    except (OSError, AttributeError):
        return False
    _allocator_kept = bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30))
    logging.getLogger(__name__).debug("glibc malloc keeps freed memory for reuse: %s", _allocator_kept)
    return _allocator_kept


def seed_everything(seed: int) -> None:
    """Seeds Python, NumPy and torch (every GPU), and makes CUDA pick deterministic kernels: cuDNN without autotuning
    (which picks kernels by timing) and deterministic algorithms, cuBLAS with a fixed workspace (needed for
    deterministic matrix products; it applies to cuBLAS handles made after this, i.e. before any CUDA work)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def hardware_description(device: str) -> str:
    """E.g. 'cpu (2 cores, AMD EPYC ...)' or 'cuda (NVIDIA A100 x2)'; written into every result record."""
    if device.startswith("cuda") and torch.cuda.is_available():
        from .distributed import world_size

        # The GPU this process uses (cuda:N is GPU N, cuda the current one), times the processes training together.
        index = int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
        return f"cuda ({torch.cuda.get_device_name(index)} x{world_size()})"
    cpu_name = ""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu_name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        import platform

        cpu_name = platform.processor()
    from .distributed import world_size

    processes = f", x{world_size()} processes" if world_size() > 1 else ""  # torchrun with gloo
    return f"{device} ({os.cpu_count()} cores{', ' + cpu_name if cpu_name else ''}{processes})"
