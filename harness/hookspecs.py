"""Hook specifications: the whole plugin API of harness.

A plugin is any module exposed under the ``harness`` entry-point group that implements some of these hooks
with ``@harness.hookimpl``. Each hook receives a ``register`` callable and calls it once per thing it offers.
"""
from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("harness")
hookimpl = pluggy.HookimplMarker("harness")


@hookspec
def register_models(register):  # pragma: no cover - specification only
    """Register model plugins: ``register(harness.ModelPlugin(...))``."""


@hookspec
def register_tasks(register):  # pragma: no cover - specification only
    """Register task plugins: ``register(harness.TaskPlugin(...))``."""


@hookspec
def register_components(register):  # pragma: no cover - specification only
    """Register named components other plugins look up by kind, such as silver-pair samplers or first-stage
    retrievers: ``register(harness.Component(kind="sampler", name="bm25", obj=..., description=...))``."""
