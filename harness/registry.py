"""Plugin discovery through the ``harness`` entry-point group, and the registries the hooks fill.

- Every entry point in the group is imported; one that fails to import is recorded (``harness list`` shows it with
  its error) and the others keep working.
- Registration is checked and isolated the same way: a plugin whose hook implementation has a misspelled name or a
  wrong signature, or registers something that breaks the contract (a bad name, an unknown capability, a model class
  without the methods of its declared capabilities, a component that does not satisfy its kind's Protocol), is
  listed as failed with one line; nothing it registered is kept, and every other plugin keeps working.
- ``HARNESS_PLUGINS=a,b`` allow-lists entry-point names (a distribution name is accepted too and means all of its
  entry points); ``HARNESS_DISABLE_PLUGIN_AUTOLOAD=1`` loads none of them.
- ``HARNESS_EXTRA_PLUGINS=pkg.module,...`` also loads these modules (handy for tests and local experiments).
- Two plugins registering one name is an error naming both packages (which one would win is not a thing to guess).
"""

from __future__ import annotations

import importlib
import importlib.metadata as importlib_metadata
import inspect
import logging
import os
import traceback
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import pluggy

from . import hookspecs
from .baseline import Baseline
from .capabilities import missing_methods
from .errors import DuplicateNameError, HarnessError, UnknownNameError, close_matches_hint, unknown_name
from .plugin_api import (
    Component,
    ComponentKind,
    ModelPlugin,
    PluginContractError,
    RecipePlugin,
    Task,
    TaskPlugin,
)
from .spec_grammar import namespaced_name, split_task_text

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "harness"
# Executors' plugins have an entry-point group of their own: the command line loads only these to list every
# executor's options in `harness run --help`, without importing the model plugins (and torch).
EXECUTOR_ENTRY_POINT_GROUP = "harness.executors"
ENTRY_POINT_GROUPS = (ENTRY_POINT_GROUP, EXECUTOR_ENTRY_POINT_GROUP)


class _Callable(typing.Protocol):
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


class _TaskNamespace(typing.Protocol):
    """A ``task-namespace`` component: tasks whose names are only known at run time (``mteb:STS22``,
    ``beir:scifact``). ``resolve("STS22")`` returns the task (a Task subclass or TaskPlugin, its metadata name a
    plain task name such as ``mteb.sts22``) or raises a HarnessError naming close matches."""

    def resolve(self, name: str) -> Any: ...


class _ExecutorFactory(typing.Protocol):
    """An ``executor`` component (harness.ExecutorFactory): its command-line options and ``create(values)``."""

    options: tuple

    def create(self, given: Any = None) -> Any: ...


# Component kinds the core itself consumes, with what their objects must be.
CORE_COMPONENT_KINDS = {
    "backbone": ComponentKind("backbone", _Callable, "a callable returning a local folder or Hugging Face id"),
    "plot": ComponentKind("plot", _Callable, "a callable (results_dir, output_dir) -> list of written paths"),
    "dataset": ComponentKind("dataset", None, "an object with download(target_dir, progress) (harness data)"),
    "results-format": ComponentKind(
        "results-format",
        _Callable,
        "a callable (records, output_dir) -> list of written paths (harness export-results --format NAME)",
    ),
    "leaderboard-format": ComponentKind(
        "leaderboard-format",
        _Callable,
        "a callable (sections, output_dir) -> the text of a family's leaderboard file "
        "(harness leaderboard --formats NAME); one with a render_matrix(board, outcomes) attribute also renders "
        "--matrix tables (harness.leaderboard.formats)",
    ),
    "executor": ComponentKind(
        "executor",
        _ExecutorFactory,
        "a harness.ExecutorFactory: where a run's cells run (harness run --executor NAME) and the options it takes; "
        "its plugin's entry point belongs to the 'harness.executors' group",
    ),
    "task-namespace": ComponentKind(
        "task-namespace",
        _TaskNamespace,
        "an object whose resolve(name) returns the Task subclass (or TaskPlugin) "
        "of the task 'NAMESPACE:name' (tasks named at run time, e.g. mteb:STS22)",
    ),
}


CORE_PACKAGE = "sentence-harness (core)"
# The packages of the built-in plugins (this distribution's entry points) and of the core.
BUILTIN_PACKAGES = ("sentence-harness", CORE_PACKAGE)


@dataclass
class PluginInfo:
    name: str  # entry-point name or module path
    package: str  # distribution that declared it ("(local)" for HARNESS_EXTRA_PLUGINS)
    module: str
    error: str | None = None
    error_traceback: str | None = None
    names: list[tuple[str, str]] = field(default_factory=list)  # (kind, name) it registered or tried to


@dataclass
class Registry:
    models: dict[str, ModelPlugin] = field(default_factory=dict)
    recipes: dict[str, RecipePlugin] = field(default_factory=dict)
    tasks: dict[str, TaskPlugin] = field(default_factory=dict)
    components: dict[tuple[str, str], Component] = field(default_factory=dict)
    component_kinds: dict[str, ComponentKind] = field(default_factory=lambda: dict(CORE_COMPONENT_KINDS))
    plugins: list[PluginInfo] = field(default_factory=list)
    model_aliases: dict[str, str] = field(default_factory=dict)
    recipe_aliases: dict[str, str] = field(default_factory=dict)
    task_aliases: dict[str, str] = field(default_factory=dict)
    origin: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> package

    def add(self, item: Any, package: str) -> None:
        """Register one checked item (model, recipe, task, component or kind) as ``package``'s; a name another
        package registered is refused (:class:`DuplicateNameError`). The CLI adds the core's own components this way
        (:func:`harness.components.register_core_components`)."""
        _add(self, item, package)

    # -- lookups -----------------------------------------------------------------------------------------------
    def _unknown(self, kind: str, name: str, candidates: Iterable[str]) -> HarnessError:
        """An unknown name; if a plugin that failed to load claimed it (or any failed), say so."""
        for info in self.plugins:
            if info.error and any(n == name for _, n in info.names):
                return UnknownNameError(
                    f"{kind} {name!r} comes from plugin {info.name!r} ({info.package}), which failed to load: "
                    f"{info.error}. Fix or uninstall that plugin; `harness list` shows every failed plugin."
                )
        error = unknown_name(kind, name, candidates)
        failed = [info for info in self.plugins if info.error]
        if failed:
            listed = "; ".join(f"{info.name} ({info.package}): {info.error}" for info in failed)
            return UnknownNameError(f"{error} Plugins that failed to load (it may come from one of them): {listed}")
        return error

    def model(self, name: str) -> ModelPlugin:
        name = self.model_aliases.get(name, name)
        if name not in self.models:
            raise self._unknown("model", name, [*self.models, *self.model_aliases, *self.recipes])
        return self.models[name]

    def recipe(self, name: str) -> RecipePlugin:
        name = self.recipe_aliases.get(name, name)
        if name not in self.recipes:
            raise self._unknown("recipe", name, [*self.recipes, *self.recipe_aliases])
        return self.recipes[name]

    def is_recipe(self, name: str) -> bool:
        return self.recipe_aliases.get(name, name) in self.recipes

    def spec_plugin(self, name: str) -> ModelPlugin | RecipePlugin:
        """What a model spec's name refers to: a model or a recipe."""
        if self.is_recipe(name):
            return self.recipe(name)
        name = self.model_aliases.get(name, name)
        if name not in self.models:
            raise self._unknown("model", name, [*self.models, *self.model_aliases, *self.recipes, *self.recipe_aliases])
        return self.models[name]

    def default_train_on(self, plugin: ModelPlugin) -> str | None:
        """Where a model that must be trained trains when no source is given: its own ``default_train_on``, else
        the task that declares itself the default source (``Task.default_source_for``) of the first of the model's
        training kinds one declares; None when there is none."""
        if plugin.default_train_on:
            return plugin.default_train_on
        for kind in plugin.training_kinds:
            for name, task in sorted(self.tasks.items()):
                if kind in task.default_source_for:
                    return name
        return None

    def families(self) -> dict[str, list[str]]:
        families: dict[str, list[str]] = {}
        for task_name, plugin in self.tasks.items():
            families.setdefault(plugin.metadata.family, []).append(task_name)
        return families

    def family_baselines(self) -> dict:
        """Family -> the leaderboard baseline one of its tasks declares (``details["leaderboard_baseline"]``)."""
        baselines = {}
        for plugin in self.tasks.values():
            baseline = Baseline.from_details(dict(plugin.metadata.details or {}))
            if baseline is not None:
                baselines.setdefault(plugin.metadata.family, baseline)
        return baselines

    def expand_task(self, name: str) -> list[str]:
        """A task name (or alias) as itself, a family name as its member tasks. A lookup only: a task namespace's
        name (``mteb:STS22``) is known here once :meth:`resolve_task` has resolved it."""
        name = self.task_aliases.get(name, name)
        if name in self.tasks:
            return [name]
        families = self.families()
        if name in families:
            return families[name]
        if ("task-namespace", name) in self.components:
            raise UnknownNameError(
                f"{name!r} names tasks at run time; give one: --tasks {name}:NAME "
                f"({self.components[('task-namespace', name)].description})."
            )
        raise self._unknown("task", name, [*self.tasks, *families, *self.task_aliases])

    def task_namespaces(self) -> set[str]:
        """The prefixes of the registered ``task-namespace`` components (``mteb``, ``beir``, ...)."""
        return {name for kind, name in self.components if kind == "task-namespace"}

    def split_task_text(self, text: str) -> tuple[str, dict[str, str]]:
        """``name:key=value,...`` -> (name, raw options), a task namespace's name keeping its prefix
        (harness.spec_grammar.split_task_text against the registered namespaces)."""
        return split_task_text(text, self.task_namespaces())

    def resolve_task(self, name: str) -> str:
        """The explicit step that makes a task namespace's task known: ``NAMESPACE:member`` (or ``NAMESPACE.member``,
        the form resolved names take, as stored in records) is resolved by the namespace's component once, its task
        registered under its own name, and ``name`` becomes an alias of it. Returns the name to look up; any other
        name comes back as given (lookups such as :meth:`task` never resolve). Planning calls it
        (harness.spec.resolve_task_specs), and so does whatever reads task names from stored records."""
        name = self.task_aliases.get(name, name)
        parts = None if name in self.tasks else namespaced_name(name, self.task_namespaces())
        if parts is None:
            return name
        prefix, member = parts
        resolved = self.component("task-namespace", prefix).resolve(member)
        plugin = resolved if isinstance(resolved, TaskPlugin) else TaskPlugin.from_class(resolved)
        if plugin.name not in self.tasks:
            self.tasks[plugin.name] = plugin
            self.origin.setdefault(("task", plugin.name), self.package_of("task-namespace", prefix))
        if name != plugin.name:
            self.task_aliases[name] = plugin.name
        return plugin.name

    def task(self, name: str) -> TaskPlugin:
        name = self.task_aliases.get(name, name)
        if name not in self.tasks:
            raise self._unknown("task", name, [*self.tasks, *self.families(), *self.task_aliases])
        return self.tasks[name]

    def component(self, kind: str, name: str) -> Any:
        if (kind, name) not in self.components:
            raise self._unknown(kind, name, [n for k, n in self.components if k == kind])
        return self.components[(kind, name)].obj

    def component_names(self, kind: str) -> list[str]:
        return sorted(n for k, n in self.components if k == kind)

    def package_of(self, kind: str, name: str) -> str:
        return self.origin.get((kind, name), "?")


def _distribution_of(entry_point: importlib_metadata.EntryPoint) -> str:
    dist = getattr(entry_point, "dist", None)
    return dist.metadata["Name"] if dist is not None else "?"


def _entry_points(groups: Iterable[str] = ENTRY_POINT_GROUPS) -> list[importlib_metadata.EntryPoint]:
    seen: set[tuple[str, str]] = set()
    found = []
    for entry_point in (ep for group in groups for ep in importlib_metadata.entry_points(group=group)):
        key = (entry_point.name, entry_point.value)
        if key not in seen:  # an editable install can expose one distribution twice
            seen.add(key)
            found.append(entry_point)
    return found


def _allowed(entry_points: list[importlib_metadata.EntryPoint]) -> list[importlib_metadata.EntryPoint]:
    allow = [n.strip() for n in os.environ.get("HARNESS_PLUGINS", "").split(",") if n.strip()]
    if not allow:
        return entry_points
    kept = [ep for ep in entry_points if ep.name in allow or _distribution_of(ep) in allow]
    every = _entry_points()  # a name of another group than the ones loaded is no mistake
    known = {ep.name for ep in every} | {_distribution_of(ep) for ep in every}
    for name in allow:
        if name not in known:
            logger.warning(
                "HARNESS_PLUGINS names %r, which is neither an entry-point name nor a distribution.%s",
                name,
                close_matches_hint(name, known),
            )
    return kept


def _load_modules(groups: Iterable[str] = ENTRY_POINT_GROUPS) -> list[tuple[PluginInfo, Any]]:
    loaded: list[tuple[PluginInfo, Any]] = []
    if os.environ.get("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "") not in ("", "0"):
        entry_points = []
    else:
        entry_points = _allowed(_entry_points(groups))
    for entry_point in entry_points:
        info = PluginInfo(entry_point.name, _distribution_of(entry_point), entry_point.value)
        try:
            module = entry_point.load()
        except Exception as exc:  # a broken plugin must not take the others down
            info.error = " ".join(f"{type(exc).__name__}: {exc}".split())
            info.error_traceback = traceback.format_exc()
            module = None
        loaded.append((info, module))
    for module_path in [m.strip() for m in os.environ.get("HARNESS_EXTRA_PLUGINS", "").split(",") if m.strip()]:
        info = PluginInfo(module_path, "(local)", module_path)
        try:
            module = importlib.import_module(module_path)
        except Exception as exc:
            info.error = " ".join(f"{type(exc).__name__}: {exc}".split())
            info.error_traceback = traceback.format_exc()
            module = None
        loaded.append((info, module))
    return loaded


def _misspelled_hooks(manager: pluggy.PluginManager, plugin: Any) -> list[str]:
    """Hook implementations of ``plugin`` whose name is no hook of harness."""
    problems = []
    for caller in manager.get_hookcallers(plugin) or []:
        if caller.name not in hookspecs.HOOK_NAMES:
            problems.append(
                f"hook {caller.name!r} is not a harness hook.{close_matches_hint(caller.name, hookspecs.HOOK_NAMES)}"
            )
    return problems


def _model_class(plugin: ModelPlugin) -> type | None:
    """The class a model factory builds, when it can be known without building a model."""
    if plugin.model_class is not None:
        return plugin.model_class
    if inspect.isclass(plugin.factory):
        return plugin.factory
    try:
        hints = typing.get_type_hints(plugin.factory)
    except Exception:  # unresolvable annotations: the runner checks the built object instead
        return None
    returned = hints.get("return")
    return returned if inspect.isclass(returned) and returned is not type(None) else None


def check_model_object(plugin: ModelPlugin, model: Any) -> None:
    """The built model has the methods of every capability its plugin declares (run by the runner)."""
    missing = missing_methods(model, plugin.capabilities)
    if missing:
        raise PluginContractError(_missing_text(f"model {plugin.name!r}", type(model).__name__, missing))


def _missing_text(owner: str, class_name: str, missing: dict[str, list[str]]) -> str:
    parts = [f"{capability} needs {', '.join(methods)}" for capability, methods in missing.items()]
    return f"{owner} declares capabilities its class {class_name} lacks: {'; '.join(parts)}."


def _check_item(item: Any, kinds: dict[str, ComponentKind]) -> Any:
    """Validate one registered item; returns it (a Task subclass becomes a TaskPlugin)."""
    if inspect.isclass(item) and issubclass(item, Task):
        return TaskPlugin.from_class(item)
    if isinstance(item, ModelPlugin):
        model_class = _model_class(item)
        if model_class is not None:
            missing = missing_methods(model_class, item.capabilities)
            if missing:
                raise PluginContractError(_missing_text(f"model {item.name!r}", model_class.__name__, missing))
        return item
    if isinstance(item, (TaskPlugin, RecipePlugin, ComponentKind)):
        return item
    if isinstance(item, Component):
        kind = kinds.get(item.kind)
        if kind is not None and kind.protocol is not None:
            protocol = kind.protocol
            if protocol is _Callable:
                ok = callable(item.obj)
            else:
                ok = not missing_methods_of_protocol(item.obj, protocol)
            if not ok:
                raise PluginContractError(
                    f"component {item.name!r} of kind {item.kind!r} does not satisfy the kind's protocol "
                    f"({kind.description or protocol.__name__})."
                )
        return item
    raise PluginContractError(
        f"registered {item!r}, which is not a harness type (ModelPlugin, TaskPlugin, Task "
        "subclass, RecipePlugin, Component, ComponentKind)."
    )


def missing_methods_of_protocol(candidate: Any, protocol: type) -> list[str]:
    names = getattr(protocol, "__protocol_attrs__", None) or [n for n in vars(protocol) if not n.startswith("_")]
    return sorted(n for n in names if not n.startswith("_") and not hasattr(candidate, n))


def _names_of(item: Any) -> list[tuple[str, str]]:
    if isinstance(item, ModelPlugin):
        return [("model", n) for n in (item.name, *item.aliases)]
    if isinstance(item, RecipePlugin):
        # Models and recipes share one namespace: both are written as a model spec.
        return [("model", n) for n in (item.name, *item.aliases)]
    if isinstance(item, TaskPlugin):
        return [("task", n) for n in (item.name, *item.aliases)]
    if isinstance(item, Component):
        return [(item.kind, item.name)]
    if isinstance(item, ComponentKind):
        return [("component kind", item.name)]
    return []


def _call_hooks(plugin_hooks: list[tuple[str, Callable]], info: PluginInfo) -> list:
    """Call one plugin's hook implementations and return what they registered, unchecked."""
    items: list[Any] = []
    for _hook_name, function in plugin_hooks:
        raw: list[Any] = []
        try:
            function(raw.append)
        finally:
            items.extend(raw)
            for item in raw:  # remembered even on failure, so a lookup can say "its plugin failed"
                try:
                    info.names.extend(
                        _names_of(item)
                        or (
                            _names_of(TaskPlugin.from_class(item))
                            if inspect.isclass(item) and issubclass(item, Task)
                            else []
                        )
                    )
                except Exception:
                    pass
    return items


def _fail(info: PluginInfo, exc: BaseException) -> None:
    message = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
    info.error = " ".join(message.split())  # one line
    info.error_traceback = traceback.format_exc()
    logger.debug("plugin %s failed to register:\n%s", info.name, info.error_traceback)


_HOOK_ORDER = {name: index for index, name in enumerate(hookspecs.HOOK_NAMES)}


def build_registry(extra_plugins: Iterable[Any] = (), groups: Iterable[str] = ENTRY_POINT_GROUPS) -> Registry:
    """Discover plugins and collect what their hooks register. ``extra_plugins`` are objects/modules to add;
    ``groups``: the entry-point groups to load (:func:`executor_registry` loads the executors' alone)."""
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    registry = Registry()
    candidates: list[tuple[PluginInfo, Any]] = list(_load_modules(groups))
    for index, extra in enumerate(extra_plugins):
        candidates.append((PluginInfo(f"(in-process):{index}", "(in-process)", repr(extra)), extra))

    registered: list[tuple[PluginInfo, Any]] = []
    for info, module in candidates:
        registry.plugins.append(info)
        if module is None or info.error:
            continue
        if manager.is_registered(module):
            continue
        try:
            manager.register(module, name=f"{info.package}:{info.name}")
        except pluggy.PluginValidationError as exc:  # e.g. a hook implementation with the wrong arguments
            info.error = "wrong hook signature: " + " ".join(str(exc).split()) + " (hooks take `register`)"
            continue
        problems = _misspelled_hooks(manager, module)
        if problems:
            info.error = "; ".join(problems)
            manager.unregister(module)
            continue
        registered.append((info, module))

    # Every plugin's hooks are called first, so all ComponentKind declarations are known before any component is
    # checked, whatever order the plugins load in; then each plugin's items are checked as a unit.
    collected: list[tuple[PluginInfo, list[Any]]] = []
    for info, module in registered:
        hooks = sorted(
            (
                (caller.name, impl.function)
                for caller in manager.get_hookcallers(module) or []
                for impl in caller.get_hookimpls()
                if impl.plugin is module
            ),
            key=lambda pair: _HOOK_ORDER.get(pair[0], 99),
        )
        try:
            collected.append((info, _call_hooks(hooks, info)))
        except Exception as exc:  # the plugin at fault fails; the others keep working
            _fail(info, exc)
    for _info, items in collected:
        for item in items:
            if isinstance(item, ComponentKind):
                registry.component_kinds.setdefault(item.name, item)
    pending: list[tuple[PluginInfo, list[Any]]] = []
    for info, items in collected:
        try:
            pending.append((info, [_check_item(item, registry.component_kinds) for item in items]))
        except Exception as exc:
            _fail(info, exc)

    for info, items in pending:
        for item in items:
            _add(registry, item, info.package)

    declared: dict[str, list[str]] = {}
    for name, task in sorted(registry.tasks.items()):
        for kind in task.default_source_for:
            declared.setdefault(kind, []).append(name)
    for kind, names in declared.items():
        if len(names) > 1:
            raise DuplicateNameError(
                f"tasks {', '.join(repr(n) + ' (' + registry.package_of('task', n) + ')' for n in names)} each declare "
                f"themselves the default {kind} training source; only one may (Task.default_source_for)."
            )
    families = registry.families()
    for name in set(families) & set(registry.tasks):
        if families[name] != [name]:
            raise DuplicateNameError(
                f"{name!r} is both a task (from {registry.package_of('task', name)!r}) and a task family; "
                "rename one of them."
            )
    return registry


def _add(registry: Registry, item: Any, package: str) -> None:
    def claim(kind: str, name: str) -> None:
        if (kind, name) in registry.origin:
            raise DuplicateNameError(
                f"{kind} name {name!r} is registered by two packages: {registry.origin[(kind, name)]!r} and "
                f"{package!r}. Uninstall one of them, or allow-list plugins with HARNESS_PLUGINS."
            )
        registry.origin[(kind, name)] = package

    for kind, name in _names_of(item):
        claim(kind, name)
    if isinstance(item, ModelPlugin):
        registry.models[item.name] = item
        registry.model_aliases.update(dict.fromkeys(item.aliases, item.name))
    elif isinstance(item, RecipePlugin):
        registry.recipes[item.name] = item
        registry.recipe_aliases.update(dict.fromkeys(item.aliases, item.name))
        registry.origin[("recipe", item.name)] = package
    elif isinstance(item, TaskPlugin):
        registry.tasks[item.name] = item
        registry.task_aliases.update(dict.fromkeys(item.aliases, item.name))
    elif isinstance(item, Component):
        registry.components[(item.kind, item.name)] = item
    elif isinstance(item, ComponentKind):
        registry.component_kinds[item.name] = item


@lru_cache(maxsize=1)
def default_registry() -> Registry:
    return build_registry()


@lru_cache(maxsize=1)
def executor_registry() -> Registry:
    """The plugins of the ``harness.executors`` entry-point group (and ``HARNESS_EXTRA_PLUGINS``) alone: what the
    command line reads to offer every executor's options, without loading the model and task plugins."""
    return build_registry(groups=(EXECUTOR_ENTRY_POINT_GROUP,))
