"""What every record says about where it was computed."""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except (metadata.PackageNotFoundError, ValueError):  # not installed, or not a distribution name ("?")
        return None


@functools.lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the harness checkout, when it runs from one (editable installs); None otherwise."""
    source = Path(__file__).resolve().parent.parent
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if result.returncode != 0:
        return None
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=source,
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


# The packages that compute a run's scores under --runtime onnx; its records name their versions too.
RUNTIME_PACKAGES = ("onnxruntime", "onnx")


@functools.lru_cache(maxsize=2)
def environment_record(extra_packages: tuple[str, ...] = ()) -> dict:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {
            name: package_version(name)
            for name in ("harness", "torch", "transformers", "numpy", "scipy", "pluggy", "tokenizers", *extra_packages)
        },
        "git_commit": git_commit(),
    }
