"""What the runner hands plugins, built for tests: the smoke profile, a ModelContext and an EvalContext, a registry
of given plugins, and the ``harness`` command run in-process; part of the test kit :mod:`harness.testing`."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import logging
import os
import random
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..api import (
    EvalContext,
    HarnessError,
    ModelContext,
    ModelPlugin,
    Profile,
    TrainingSplits,
)
from ..options import parse_spec_text, resolve_options
from ..profiles import get_profile
from .backbones import default_tiny_backbone
from .contract import ContractCheckError

if TYPE_CHECKING:  # the registry is private; the kit hands it around but plugins only pass it back
    from ..registry import Registry


def smoke_profile(**changes: Any) -> Profile:
    """The smoke profile (tiny budgets, evaluation cut to ``max_eval_examples``), with ``changes`` applied."""
    return dataclasses.replace(get_profile("smoke"), **changes)


def _profile(profile: Profile | str | None) -> Profile:
    if profile is None:
        return smoke_profile()
    return get_profile(profile) if isinstance(profile, str) else profile


def _unavailable(what: str, argument: str) -> Callable[..., Any]:
    def lookup(*args: Any, **kwargs: Any) -> Any:
        raise HarnessError(
            f"{what} is not available in this harness.testing context (asked for {args!r}); pass "
            f"{argument}=... to the check or context."
        )

    return lookup


def model_context(
    backbone: str | None = None,
    options: Mapping[str, Any] | None = None,
    *,
    plugin: ModelPlugin | None = None,
    profile: Profile | str | None = None,
    seed: int = 42,
    device: str = "cpu",
    artifact_dir: Path | None = None,
    cache_dir: Path | None = None,
    registry: Registry | None = None,
    train_on: str | None = None,
    trained_model: Callable[..., Any] | None = None,
    training_data: Callable[[str, str], TrainingSplits] | None = None,
) -> ModelContext:
    """A ModelContext as the runner builds one: ``options`` resolved against ``plugin.options`` (defaults filled),
    the smoke profile, a tiny BERT backbone unless one is given, the profile's eval batch size, progress bars off.
    Lookups that need a full run (``trained_model``, ``training_data``) raise a HarnessError unless given."""
    resolved_profile = _profile(profile)
    resolved_options = dict(options or {})
    if plugin is not None:
        resolved_options = resolve_options(f"model {plugin.name!r}", plugin.options, resolved_options)
    return ModelContext(
        options=resolved_options,
        backbone=backbone if backbone is not None else default_tiny_backbone(),
        profile=resolved_profile,
        device=device,
        seed=seed,
        progress=False,
        trained_model=trained_model or _unavailable("ctx.trained_model", "trained_model"),
        training_data=training_data or _unavailable("ctx.training_data", "training_data"),
        component=registry.component if registry is not None else _unavailable("ctx.component", "registry"),
        artifact_dir=artifact_dir,
        cache_dir=cache_dir,
        train_on=train_on,
        eval_batch_size=resolved_profile.eval_batch_size,
        logger=logging.getLogger(f"harness.model.{plugin.name if plugin else 'testing'}"),
    )


def eval_context(
    profile: Profile | str | None = None,
    *,
    data_dir: Path | str | None = None,
    seed: int = 42,
    device: str = "cpu",
    registry: Registry | None = None,
    embedder: Callable[[str], Any] | None = None,
) -> EvalContext:
    """An EvalContext as the runner builds one (smoke profile, its eval batch size, progress bars off).
    ``ctx.embedder(spec)`` builds the untrained model of ``spec`` from ``registry`` with a tiny backbone."""
    resolved_profile = _profile(profile)

    def build_by_spec(spec: str) -> Any:
        if registry is None:
            raise HarnessError(f"ctx.embedder({spec!r}) needs a registry; pass registry=... or embedder=...")
        name, raw_options = parse_spec_text(spec)
        model_plugin = registry.model(name)
        return model_plugin.factory(
            model_context(
                options=raw_options,
                plugin=model_plugin,
                profile=resolved_profile,
                seed=seed,
                device=device,
                registry=registry,
            )
        )

    return EvalContext(
        profile=resolved_profile,
        device=device,
        seed=seed,
        batch_size=resolved_profile.eval_batch_size,
        progress=False,
        data_dir=Path(data_dir) if data_dir is not None else None,
        component=registry.component if registry is not None else _unavailable("ctx.component", "registry"),
        embedder=embedder or build_by_spec,
        logger=logging.getLogger("harness.task"),
    )


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    if "torch" in sys.modules:  # seeding torch is only needed (and only worth importing it) when a plugin uses it
        from ..device import seed_everything

        seed_everything(seed)


@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in changes}
    try:
        for key, value in changes.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _module(plugin: Any) -> Any:
    return importlib.import_module(plugin) if isinstance(plugin, str) else plugin


def plugin_registry(*plugins: Any, autoload: bool = False) -> Registry:
    """A registry of ``plugins`` (modules, objects with hook methods, or dotted module names) as harness would
    build it, with installed plugins too when ``autoload`` (else none of them: the result does not depend on what
    else is installed). Raises :class:`ContractCheckError` with the registry's one-line reason when one of
    ``plugins`` fails to load (a misspelled hook, a bad name, a model class missing a capability's methods, ...)."""
    from ..registry import build_registry

    modules = [_module(plugin) for plugin in plugins]
    changes: dict[str, str | None] = (
        {}
        if autoload
        else {"HARNESS_DISABLE_PLUGIN_AUTOLOAD": "1", "HARNESS_EXTRA_PLUGINS": None, "HARNESS_PLUGINS": None}
    )
    with _environment(changes):
        registry = build_registry(extra_plugins=modules)
    names = {getattr(module, "__name__", None) for module in modules} - {None}
    failed = [
        info for info in registry.plugins if info.error and (info.package == "(in-process)" or info.module in names)
    ]
    if failed:
        raise ContractCheckError(
            "plugin failed to load:\n"
            + "\n".join(
                f"- {info.module if info.package == '(in-process)' else info.name}: {info.error}" for info in failed
            )
        )
    return registry


@dataclass
class HarnessRun:
    """The outcome of :func:`run_harness`: the CLI's exit code and what it printed."""

    exit_code: int
    stdout: str
    stderr: str


def run_harness(
    *argv: str | Path, plugins: Sequence[str] = (), autoload: bool = True, env: Mapping[str, str | None] | None = None
) -> HarnessRun:
    """Run the ``harness`` command in this process (``run_harness("run", "--models", "x", ...)``) with a fresh
    registry. ``plugins`` are dotted module names added through ``HARNESS_EXTRA_PLUGINS``; ``autoload=False`` loads
    no installed plugin (``HARNESS_DISABLE_PLUGIN_AUTOLOAD=1``); ``env`` sets (or with None, removes) variables."""
    from ..cli import main
    from ..registry import default_registry

    changes: dict[str, str | None] = dict(env or {})
    if plugins:
        changes["HARNESS_EXTRA_PLUGINS"] = ",".join(plugins)
    if not autoload:
        changes["HARNESS_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    stdout, stderr = io.StringIO(), io.StringIO()
    # The CLI points the "harness" logger at the (captured) streams; put the caller's logging back afterwards.
    package_logger = logging.getLogger("harness")
    saved_logging = (list(package_logger.handlers), package_logger.level, package_logger.propagate)
    default_registry.cache_clear()
    try:
        with _environment(changes), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            exit_code = main([str(arg) for arg in argv])
    finally:
        default_registry.cache_clear()
        handlers, level, propagate = saved_logging
        package_logger.handlers[:] = handlers
        package_logger.setLevel(level)
        package_logger.propagate = propagate
    return HarnessRun(exit_code, stdout.getvalue(), stderr.getvalue())
