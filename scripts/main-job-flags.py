"""The flags `make run` adds to the main job for this machine, printed on one line (the reason goes to stderr).

On a CPU: ``--set precision=bf16`` (bfloat16 autocast in training) when the CPU has bfloat16 instructions; precision
is not part of a model's identity, so the README's next commands find these models and records. Evaluation stays in
torch: each runtime keeps its own cells (``--runtime onnx`` records are ``<task>@onnx.json``), and the commands that
follow the main job evaluate and compare torch cells. On a GPU: nothing (training already uses CUDA mixed precision).
"""

from __future__ import annotations

import sys

import torch

from harness.device import cpu_bf16_supported


def main() -> None:
    flags, reasons = [], []
    if torch.cuda.is_available():
        reasons.append("a CUDA GPU: torch runtime, CUDA mixed precision")
    else:
        if cpu_bf16_supported():
            flags.append("--set precision=bf16")
            reasons.append("training under bfloat16 autocast (the CPU has bfloat16 instructions)")
    print(f"main job on this machine: {'; '.join(reasons) or 'defaults'}", file=sys.stderr)
    print(" ".join(flags))


if __name__ == "__main__":
    main()
