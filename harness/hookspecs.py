"""Hook specifications: the whole plugin API of harness (docs/writing-plugins.md explains each hook).

A plugin is any module (or object) exposed under the ``harness`` entry-point group that implements some of these
hooks with ``@harness.hookimpl``. Each hook receives a ``register`` callable and calls it once per thing it offers.
An implementation whose name matches no hook here (a typo such as ``register_model``) makes its plugin fail to load,
with the close match named, instead of being ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .plugin_api import Component, ComponentKind, ModelPlugin, RecipePlugin, Task, TaskPlugin

hookspec = pluggy.HookspecMarker("harness")
hookimpl = pluggy.HookimplMarker("harness")  # marks a plugin's hook implementations: @harness.hookimpl


@hookspec
def register_models(register: Callable[[ModelPlugin], None]) -> None:  # pragma: no cover - specification only
    """Register model plugins: ``register(harness.ModelPlugin(...))``."""


@hookspec
def register_tasks(
    register: Callable[[TaskPlugin | type[Task]], None],
) -> None:  # pragma: no cover - specification only
    """Register tasks: ``register(MyTask)`` for a :class:`harness.Task` subclass carrying ``metadata`` and
    ``options``, or ``register(harness.TaskPlugin(metadata, factory, options))``."""


@hookspec
def register_recipes(register: Callable[[RecipePlugin], None]) -> None:  # pragma: no cover - specification only
    """Register training recipes applied to a student model: ``register(harness.RecipePlugin(...))``."""


@hookspec
def register_components(
    register: Callable[[Component | ComponentKind], None],
) -> None:  # pragma: no cover - specification only
    """Register named components other plugins look up by kind, such as silver-pair samplers, backbones, plots or
    datasets: ``register(harness.Component(kind="sampler", name="bm25", obj=..., description=...))``. A plugin that
    introduces a new kind may declare it with ``register(harness.ComponentKind(name, protocol))`` so objects of that
    kind are checked against ``protocol`` at registration."""


HOOK_NAMES = ("register_models", "register_tasks", "register_recipes", "register_components")
