"""harness: a plugin-based benchmark harness for sentence-embedding methods.

Plugins implement the hooks in :mod:`harness.hookspecs` and use two front doors: the contract exported here (see
:mod:`harness.api`) and the building blocks of :mod:`harness.blocks` (loaded on first use, so ``import harness`` does
not load torch). docs/writing-plugins.md explains both.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from .api import *  # noqa: F401,F403  (the public API)
from .api import _STORE_INTERNALS
from .api import __all__ as _api_names
from .curves import load_training_curves  # results as data (harness.curves); not part of the plugin contract
from .deprecation import deprecated_names, watch_removed_modules

try:
    __version__ = version("sentence-harness")  # the installed distribution's version
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

# Version of the plugin API (hooks, contexts, capabilities); bumped on incompatible changes (CHANGELOG.md).
PLUGIN_API_VERSION = 3

__all__ = [*_api_names, "__version__", "PLUGIN_API_VERSION", "load_training_curves"]

watch_removed_modules()  # a module a release removed fails to import with its replacement named

if not TYPE_CHECKING:  # store internals, deprecated at the top level (harness.api._STORE_INTERNALS)
    __getattr__ = deprecated_names(__name__, {name: (module, name) for name, module in _STORE_INTERNALS.items()})
