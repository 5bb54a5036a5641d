#!/usr/bin/env bash
# Installs PyTorch into the given Python environment before the harness itself, so that:
# - a machine with an NVIDIA GPU gets a CUDA build (PyPI's default Linux wheel),
# - a CPU-only machine never downloads the multi-GB CUDA build: it takes a CPU build, either one that pip's
#   configured sources already offer (a local wheel) or the one on PyTorch's CPU wheel index.
# Usage: scripts/install-torch.sh PYTHON [TORCH_SPEC]   (TORCH_SPEC defaults to torch==2.13.0 on CPU, torch on GPU)
set -euo pipefail
python="${1:-python3}"
if "$python" -c "import torch" 2>/dev/null; then
  echo "install-torch: torch $("$python" -c 'import torch; print(torch.__version__)') already installed"
  exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "install-torch: NVIDIA GPU found, installing a CUDA build of torch"
  "$python" -m pip install "${2:-torch>=2.2}"
  exit 0
fi
spec="${2:-torch==2.13.0}"
# Ask pip (without installing) which file it would take; a '+cpu' local version is a CPU build.
report="$("$python" -m pip install --dry-run --quiet --no-deps --report - "$spec" 2>/dev/null || true)"
if grep -q '"version": *"[^"]*+cpu"' <<<"$report"; then
  echo "install-torch: no GPU; pip's sources offer a CPU build of $spec"
  "$python" -m pip install "$spec"
else
  echo "install-torch: no GPU; installing $spec from PyTorch's CPU wheel index"
  "$python" -m pip install "$spec" --index-url https://download.pytorch.org/whl/cpu \
    --extra-index-url https://pypi.org/simple
fi
