"""Plugin discovery through the ``harness`` entry-point group, and the registries the hooks fill.

- Every entry point in the group is imported; one that fails to import is recorded (``harness list`` shows it with
  its error) and the others keep working.
- ``HARNESS_PLUGINS=a,b`` allow-lists entry-point names; ``HARNESS_DISABLE_PLUGIN_AUTOLOAD=1`` loads none of them.
- ``HARNESS_EXTRA_PLUGINS=pkg.module,...`` also loads these modules (handy for tests and local experiments).
- Two plugins registering one name is an error naming both packages.
"""
from __future__ import annotations

import importlib
import importlib.metadata as importlib_metadata
import os
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

import pluggy

from . import hookspecs
from .errors import DuplicateNameError, unknown_name
from .plugin_api import Component, ModelPlugin, TaskPlugin

ENTRY_POINT_GROUP = "harness"


@dataclass
class PluginInfo:
    name: str  # entry-point name or module path
    package: str  # distribution that declared it ("(local)" for HARNESS_EXTRA_PLUGINS)
    module: str
    error: str | None = None


@dataclass
class Registry:
    models: dict[str, ModelPlugin] = field(default_factory=dict)
    tasks: dict[str, TaskPlugin] = field(default_factory=dict)
    components: dict[tuple[str, str], Component] = field(default_factory=dict)
    plugins: list[PluginInfo] = field(default_factory=list)
    model_aliases: dict[str, str] = field(default_factory=dict)
    task_aliases: dict[str, str] = field(default_factory=dict)
    origin: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> package

    # -- lookups -----------------------------------------------------------------------------------------------
    def model(self, name: str) -> ModelPlugin:
        name = self.model_aliases.get(name, name)
        if name not in self.models:
            raise unknown_name("model", name, [*self.models, *self.model_aliases])
        return self.models[name]

    def families(self) -> dict[str, list[str]]:
        families: dict[str, list[str]] = {}
        for task_name, plugin in self.tasks.items():
            families.setdefault(plugin.metadata.family, []).append(task_name)
        return families

    def expand_task(self, name: str) -> list[str]:
        """A task name (or alias) as itself, a family name as its member tasks."""
        name = self.task_aliases.get(name, name)
        if name in self.tasks:
            return [name]
        families = self.families()
        if name in families:
            return families[name]
        raise unknown_name("task", name, [*self.tasks, *families, *self.task_aliases])

    def task(self, name: str) -> TaskPlugin:
        name = self.task_aliases.get(name, name)
        if name not in self.tasks:
            raise unknown_name("task", name, [*self.tasks, *self.families(), *self.task_aliases])
        return self.tasks[name]

    def component(self, kind: str, name: str) -> Any:
        if (kind, name) not in self.components:
            raise unknown_name(kind, name, [n for k, n in self.components if k == kind])
        return self.components[(kind, name)].obj

    def component_names(self, kind: str) -> list[str]:
        return sorted(n for k, n in self.components if k == kind)

    def package_of(self, kind: str, name: str) -> str:
        return self.origin.get((kind, name), "?")


def _distribution_of(entry_point: importlib_metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    return dist.metadata["Name"] if dist is not None else "?"


def _entry_points() -> list[importlib_metadata.EntryPoint]:
    seen: set[tuple[str, str]] = set()
    found = []
    for entry_point in importlib_metadata.entry_points(group=ENTRY_POINT_GROUP):
        key = (entry_point.name, entry_point.value)
        if key not in seen:  # an editable install can expose one distribution twice
            seen.add(key)
            found.append(entry_point)
    return found


def _load_modules() -> list[tuple[PluginInfo, Any]]:
    loaded: list[tuple[PluginInfo, Any]] = []
    if os.environ.get("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "") not in ("", "0"):
        entry_points = []
    else:
        entry_points = _entry_points()
        allow = [n.strip() for n in os.environ.get("HARNESS_PLUGINS", "").split(",") if n.strip()]
        if allow:
            entry_points = [ep for ep in entry_points if ep.name in allow]
    for entry_point in entry_points:
        info = PluginInfo(entry_point.name, _distribution_of(entry_point), entry_point.value)
        try:
            module = entry_point.load()
        except Exception as exc:  # a broken plugin must not take the others down
            info.error = f"{type(exc).__name__}: {exc}"
            info.error_traceback = traceback.format_exc()  # type: ignore[attr-defined]
            module = None
        loaded.append((info, module))
    for module_path in [m.strip() for m in os.environ.get("HARNESS_EXTRA_PLUGINS", "").split(",") if m.strip()]:
        info = PluginInfo(module_path, "(local)", module_path)
        try:
            module = importlib.import_module(module_path)
        except Exception as exc:
            info.error = f"{type(exc).__name__}: {exc}"
            module = None
        loaded.append((info, module))
    return loaded


def build_registry(extra_plugins: Iterable[Any] = ()) -> Registry:
    """Discover plugins and collect what their hooks register. ``extra_plugins`` are objects/modules to add."""
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    registry = Registry()
    package_of_plugin: dict[str, str] = {}
    for info, module in _load_modules():
        registry.plugins.append(info)
        if module is None:
            continue
        plugin_name = f"{info.package}:{info.name}"
        if manager.is_registered(module):
            continue
        manager.register(module, name=plugin_name)
        package_of_plugin[plugin_name] = info.package
    for index, extra in enumerate(extra_plugins):
        plugin_name = f"(in-process):{index}"
        manager.register(extra, name=plugin_name)
        package_of_plugin[plugin_name] = "(in-process)"
        registry.plugins.append(PluginInfo(plugin_name, "(in-process)", repr(extra)))

    def claim(kind: str, name: str, package: str) -> None:
        if (kind, name) in registry.origin:
            raise DuplicateNameError(
                f"{kind} name {name!r} is registered by two packages: {registry.origin[(kind, name)]!r} and "
                f"{package!r}. Uninstall one of them, or allow-list plugins with HARNESS_PLUGINS."
            )
        registry.origin[(kind, name)] = package

    for hook_name in ("register_models", "register_tasks", "register_components"):
        hook_caller = getattr(manager.hook, hook_name)
        for implementation in hook_caller.get_hookimpls():
            package = package_of_plugin.get(implementation.plugin_name, "?")
            collected: list[Any] = []
            implementation.function(collected.append)
            for item in collected:
                if isinstance(item, ModelPlugin):
                    for name in (item.name, *item.aliases):
                        claim("model", name, package)
                    registry.models[item.name] = item
                    registry.model_aliases.update({alias: item.name for alias in item.aliases})
                elif isinstance(item, TaskPlugin):
                    for name in (item.name, *item.aliases):
                        claim("task", name, package)
                    registry.tasks[item.name] = item
                    registry.task_aliases.update({alias: item.name for alias in item.aliases})
                elif isinstance(item, Component):
                    claim(item.kind, item.name, package)
                    registry.components[(item.kind, item.name)] = item
                else:
                    raise TypeError(f"{hook_name} in {package} registered {item!r}, which is not a harness type")
    overlap = set(registry.families()) & set(registry.tasks)
    for name in overlap:
        members = registry.families()[name]
        if members != [name]:
            raise DuplicateNameError(
                f"{name!r} is both a task (from {registry.package_of('task', name)!r}) and a task family; "
                "rename one of them."
            )
    return registry


@lru_cache(maxsize=1)
def default_registry() -> Registry:
    return build_registry()
