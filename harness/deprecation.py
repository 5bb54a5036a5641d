"""Old spellings of public names: each keeps working for one more minor version, with a ``DeprecationWarning``
that names its replacement, and is listed in CHANGELOG.md under the release that deprecated it.

A module offers its old names through :func:`deprecated_names`, a PEP 562 module ``__getattr__``; the old name is
looked up on each use (never cached in the module), so every first use from a new place warns.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

# The minor version in which the names deprecated by the next release disappear.
REMOVAL_VERSION = "0.4"


def deprecated_names(module: str, replacements: Mapping[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``: ``replacements`` maps an old name to ``(new module, new name)``;
    reading an old name warns and returns the new one, any other unknown name raises ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        if name not in replacements:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new_module, new_name = replacements[name]
        warnings.warn(
            f"{module}.{name} is deprecated and will be removed in harness {REMOVAL_VERSION}; use "
            f"{new_module}.{new_name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_module), new_name)

    return __getattr__
