"""Old spellings of public names: each keeps working for one more minor version, with a ``DeprecationWarning``
that names its replacement, and is listed in CHANGELOG.md under the release that deprecated it.

A module offers its old names through :func:`deprecated_names`, a PEP 562 module ``__getattr__``; the old name is
looked up on each use (never cached in the module), so every first use from a new place warns. A module that is gone
fails to import with a message that names its replacement (:class:`RemovedModuleFinder`), not a bare "No module
named ...".
"""

from __future__ import annotations

import importlib
import importlib.abc
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# The minor version in which the names deprecated by the next release disappear.
REMOVAL_VERSION = "0.4"

# Modules a release removed -> (that release, where their names went); CHANGELOG.md lists each under the release's
# "Removed" heading.
REMOVED_MODULES: dict[str, tuple[str, str]] = {
    "harness.encoding": (
        "0.3.0",
        "import its names from harness.blocks (or harness.nn); encoding.max_sequence_length(...) is "
        "harness.blocks.sequence_limits(...).sentence",
    ),
}


def removed_module_error(fullname: str) -> ModuleNotFoundError:
    """The error for importing ``fullname``, a module in :data:`REMOVED_MODULES`: it names the replacement and the
    CHANGELOG entry."""
    release, replacement = REMOVED_MODULES[fullname]
    return ModuleNotFoundError(
        f"No module named {fullname!r}: harness {release} removed it; {replacement} (CHANGELOG.md, {release}, "
        '"Removed")',
        name=fullname,
    )


class RemovedModuleFinder(importlib.abc.MetaPathFinder):
    """The last finder on ``sys.meta_path``: asked only for a module no other finder has, it turns the import of a
    module in :data:`REMOVED_MODULES` into :func:`removed_module_error` (a plugin written against an older harness
    sees what to change in its cell's error, not just "No module named ...")."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> None:
        if fullname in REMOVED_MODULES:
            raise removed_module_error(fullname)


def watch_removed_modules() -> None:
    """Put :class:`RemovedModuleFinder` last on ``sys.meta_path`` (once; ``import harness`` does it)."""
    if not any(isinstance(finder, RemovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(RemovedModuleFinder())


def deprecated_names(module: str, replacements: Mapping[str, tuple[str, str]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``: ``replacements`` maps an old name to ``(new module, new name)``;
    reading an old name warns and returns the new one, a submodule a release removed raises
    :func:`removed_module_error`, any other unknown name raises ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        if f"{module}.{name}" in REMOVED_MODULES:  # ``from harness import encoding`` asks here, not the finder
            raise removed_module_error(f"{module}.{name}")
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
