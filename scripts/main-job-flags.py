"""The flags `make run` adds to the main job for this machine, printed on one line (the reason goes to stderr).

On a CPU: ``--runtime onnx`` (evaluation through ONNX Runtime, same scores as torch to float rounding) when
onnxruntime is installed, and ``--set precision=bf16`` (bfloat16 autocast in training) when the CPU has bfloat16
instructions. On a GPU: nothing (training already uses CUDA mixed precision; the ONNX path is CPU-only).
"""
from __future__ import annotations

import importlib.util
import sys

import torch

from harness.device import cpu_bf16_supported


def main() -> None:
    flags, reasons = [], []
    if torch.cuda.is_available():
        reasons.append("a CUDA GPU: torch runtime, CUDA mixed precision")
    else:
        if importlib.util.find_spec("onnxruntime") is not None:
            flags.append("--runtime onnx")
            reasons.append("evaluation through ONNX Runtime")
        if cpu_bf16_supported():
            flags.append("--set precision=bf16")
            reasons.append("training under bfloat16 autocast (the CPU has bfloat16 instructions)")
    print(f"main job on this machine: {'; '.join(reasons) or 'defaults'}", file=sys.stderr)
    print(" ".join(flags))


if __name__ == "__main__":
    main()
