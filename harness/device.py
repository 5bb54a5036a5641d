"""Device choice, mixed precision and seeding.

``auto`` picks CUDA, then Apple MPS, then the CPU. On CUDA, forward passes run under autocast (bfloat16 where the GPU
supports it, else float16 with a gradient scaler during training). Only the CPU path is exercised by this project's CI.
"""
from __future__ import annotations

import contextlib
import os
import random

import numpy as np
import torch

from .errors import InvalidOptionError, invalid_choice

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


def resolve_device(requested: str = "auto") -> str:
    base = requested.split(":")[0]
    if base not in DEVICE_CHOICES:
        raise invalid_choice("--device", requested, DEVICE_CHOICES)
    if base == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if base == "cuda" and not torch.cuda.is_available():
        raise InvalidOptionError("--device cuda was asked for, but PyTorch sees no CUDA GPU; use --device cpu or auto.")
    if base == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InvalidOptionError("--device mps was asked for, but MPS is not available; use --device cpu or auto.")
    return requested


def autocast_dtype(device: str) -> torch.dtype | None:
    """The mixed-precision dtype for ``device``, or None for full precision (CPU, MPS)."""
    if not device.startswith("cuda") or os.environ.get("HARNESS_NO_AMP"):
        return None
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


def autocast(device: str):
    dtype = autocast_dtype(device)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type="cuda", dtype=dtype)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def hardware_description(device: str) -> str:
    """E.g. 'cpu (2 cores, AMD EPYC ...)' or 'cuda (NVIDIA A100 x2)'; written into every result record."""
    if device.startswith("cuda") and torch.cuda.is_available():
        count = torch.cuda.device_count()
        return f"cuda ({torch.cuda.get_device_name(0)} x{count})"
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
    return f"{device} ({os.cpu_count()} cores{', ' + cpu_name if cpu_name else ''})"
