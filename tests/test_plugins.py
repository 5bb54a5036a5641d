"""Plugin discovery: built-ins through entry points, broken plugins reported, duplicate names refused."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import harness
from harness.errors import DuplicateNameError
from harness.registry import build_registry


def test_builtins_come_from_entry_points(registry):
    assert "be" in registry.models
    assert registry.package_of("model", "be") == "sentence-harness"
    assert set(registry.expand_task("senteval")) == {"sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"}
    assert {p.name for p in registry.plugins if p.package == "sentence-harness"} >= {
        "bi_encoder",
        "senteval",
        "backbones",
    }
    assert not [p for p in registry.plugins if p.error], [p.error for p in registry.plugins if p.error]


def test_broken_plugin_is_reported_and_others_keep_working(tmp_path, monkeypatch, run_cli):
    (tmp_path / "broken_plugin_mod.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HARNESS_EXTRA_PLUGINS", "broken_plugin_mod")
    registry = build_registry()
    (broken,) = [p for p in registry.plugins if p.name == "broken_plugin_mod"]
    assert "boom at import" in broken.error
    assert "be" in registry.models  # the others still work
    from harness.registry import default_registry

    default_registry.cache_clear()
    try:
        code, out, _ = run_cli("list")
    finally:
        default_registry.cache_clear()
    assert code == 0
    assert "failed to load" in out and "boom at import" in out and "be " in out


def test_duplicate_name_names_both_packages():
    class Duplicate:
        @harness.hookimpl
        def register_models(self, register):
            register(harness.ModelPlugin("be", "another be", lambda ctx: None, ("embedder",)))

    with pytest.raises(DuplicateNameError) as caught:
        build_registry(extra_plugins=[Duplicate()])
    message = str(caught.value)
    assert "'sentence-harness'" in message and "(in-process)" in message and "'be'" in message


def test_allow_list_and_disable_autoload(monkeypatch):
    monkeypatch.setenv("HARNESS_PLUGINS", "senteval")
    registry = build_registry()
    assert "be" not in registry.models and "stsb" in registry.tasks
    monkeypatch.delenv("HARNESS_PLUGINS")
    monkeypatch.setenv("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert build_registry().models == {}


def test_task_metadata_is_validated():
    with pytest.raises(ValueError, match="main_score"):
        harness.TaskMetadata(
            name="x",
            family="f",
            description="d",
            main_score="",
            metric="m",
            reference="r",
            dataset="d",
            dataset_source="s",
            license="l",
        )
    with pytest.raises(ValueError, match="lower-case"):
        harness.ModelPlugin("Bad Name", "d", lambda ctx: None, ("embedder",))
    with pytest.raises(ValueError, match="capability"):
        harness.ModelPlugin("ok", "d", lambda ctx: None, ("telepathy",))
    with pytest.raises(harness.PluginContractError, match="Did you mean: embedder"):
        harness.ModelPlugin("ok", "d", lambda ctx: None, ("embeder",))


# -- the enforced contract: a plugin at fault is listed as failed with one line; the others keep working -------------
BROKEN_PLUGINS = {
    "bad_name_plugin": """
import harness

@harness.hookimpl
def register_models(register):
    register(harness.ModelPlugin("Upper", "bad name", lambda ctx: None, ("embedder",)))
""",
    "typo_hook_plugin": """
import harness

@harness.hookimpl
def register_model(register):
    register(harness.ModelPlugin("never-registered", "typo in the hook name", lambda ctx: None, ("embedder",)))
""",
    "bad_capability_plugin": """
import harness

class NoEncode:
    def score(self, first, second):
        return [0.0] * len(first)

def build(ctx) -> NoEncode:
    return NoEncode()

@harness.hookimpl
def register_models(register):
    register(harness.ModelPlugin("claims-embedder", "declares embedder without encode", build, ("embedder",)))
""",
    "bad_signature_plugin": """
import harness

@harness.hookimpl
def register_tasks(reg):
    pass
""",
}


@pytest.fixture()
def broken_plugins(tmp_path, monkeypatch):
    for module, source in BROKEN_PLUGINS.items():
        (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HARNESS_EXTRA_PLUGINS", ",".join(BROKEN_PLUGINS))
    from harness.registry import default_registry

    default_registry.cache_clear()
    yield
    default_registry.cache_clear()
    for module in BROKEN_PLUGINS:
        sys.modules.pop(module, None)


def test_registration_failures_are_isolated(broken_plugins):
    registry = build_registry()
    errors = {p.name: p.error for p in registry.plugins if p.error}
    assert set(errors) == set(BROKEN_PLUGINS), errors
    assert "lower-case" in errors["bad_name_plugin"]
    assert (
        "register_model" in errors["typo_hook_plugin"] and "Did you mean: register_models" in errors["typo_hook_plugin"]
    )
    assert "encode" in errors["bad_capability_plugin"] and "NoEncode" in errors["bad_capability_plugin"]
    assert "reg" in errors["bad_signature_plugin"]
    assert all("\n" not in error for error in errors.values())  # one line each
    assert "claims-embedder" not in registry.models and "be" in registry.models


def test_a_model_of_a_failed_plugin_says_its_plugin_failed(broken_plugins):
    registry = build_registry()
    with pytest.raises(harness.HarnessError, match="bad_capability_plugin.*failed to load"):
        registry.model("claims-embedder")


def test_broken_plugins_leave_list_and_runs_working(broken_plugins, run_cli, tmp_path, tiny_bert):
    code, out, _ = run_cli("list")
    assert code == 0
    for module in BROKEN_PLUGINS:
        assert module in out
    assert "be " in out
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        str(tmp_path / "results"),
        "--backbone",
        tiny_bert,
    )
    assert code == 0, err


def test_capability_checked_when_built(registry):
    from harness.registry import check_model_object

    plugin = harness.ModelPlugin("lazy", "no class known", lambda ctx: object(), ("embedder",))
    with pytest.raises(harness.PluginContractError, match="encode"):
        check_model_object(plugin, object())


def test_task_class_registration_resolves_options():
    class Toy(harness.Task):
        metadata = harness.TaskMetadata(
            name="toy-task",
            family="toy",
            description="d",
            main_score="s",
            metric="m",
            reference="r",
            dataset="d",
            dataset_source="s",
            license="l",
        )
        options = {
            "size": harness.Option(3, "how many", type=int),
            "mode": harness.Option("a", "m", choices=("a", "b")),
        }

    class Plugin:
        @harness.hookimpl
        def register_tasks(self, register):
            register(Toy)

    registry = build_registry(extra_plugins=[Plugin()])
    task = registry.task("toy-task").factory({"size": "5"}, None)
    assert task.options == {"size": 5, "mode": "a"}  # parsed and defaults filled
    assert Toy().options == {"size": 3, "mode": "a"}
    variant = Toy.variant(
        harness.TaskMetadata(
            name="toy-two",
            family="toy",
            description="d",
            main_score="s",
            metric="m",
            reference="r",
            dataset="d",
            dataset_source="s",
            license="l",
        )
    )
    assert variant.metadata.name == "toy-two" and issubclass(variant, Toy)


def test_the_spellings_deprecated_in_0_1_and_0_2_are_gone():
    """Removed in 0.3 after a release of deprecation (CHANGELOG.md, "Removed"): each fails with one clear error."""
    import harness.plugin_api as plugin_api
    import harness.plugins.bi_encoder as bi_encoder
    import harness.plugins.cross_bi_encoder as cross_bi_encoder

    with pytest.raises(TypeError, match="eval_splits"):
        harness.TaskMetadata(
            name="x",
            family="f",
            description="d",
            main_score="s",
            metric="m",
            reference="r",
            dataset="d",
            dataset_source="s",
            license="l",
            eval_splits=("test",),
        )
    assert not hasattr(harness.ModelContext, "work_dir") and not hasattr(bi_encoder.BiEncoder, "fit_pairs")
    for module, name in ((plugin_api, "task_factory"), (cross_bi_encoder, "truncate_longest_first")):
        with pytest.raises(AttributeError, match=name):
            getattr(module, name)
    with pytest.raises(ModuleNotFoundError, match="harness.encoding"):
        __import__("harness.encoding")


@pytest.mark.parametrize("statement", ["import harness.encoding", "from harness import encoding"])
def test_a_removed_module_names_its_replacement_and_the_changelog(statement):
    """A plugin written against 0.1 that imports ``harness.encoding`` learns where its names went, in the error its
    cells show, and the CHANGELOG release the error names does list the module under "Removed"."""
    from harness.deprecation import REMOVED_MODULES

    with pytest.raises(ModuleNotFoundError) as raised:
        exec(statement, {})
    message = str(raised.value)
    assert raised.value.name == "harness.encoding"
    assert "harness.blocks" in message and 'CHANGELOG.md, 0.3.0, "Removed"' in message
    changelog = (Path(__file__).resolve().parent.parent / "CHANGELOG.md").read_text(encoding="utf-8")
    for module, (release, _) in REMOVED_MODULES.items():
        section = changelog.split(f"\n## {release} ", 1)[1].split("\n## ", 1)[0]
        assert f"The module `{module}`" in section.split("### Removed", 1)[1].split("\n### ", 1)[0], module


def test_allow_list_accepts_a_distribution_name(monkeypatch):
    monkeypatch.setenv("HARNESS_PLUGINS", "sentence-harness")
    registry = build_registry()
    assert "be" in registry.models and "stsb" in registry.tasks


def test_version_comes_from_package_metadata():
    import importlib.metadata

    assert harness.__version__ == importlib.metadata.version("sentence-harness")


@pytest.mark.parametrize("declarer_first", [True, False])
def test_component_kind_checked_whatever_the_plugin_order(declarer_first):
    from typing import Protocol

    class Widget(Protocol):
        def spin(self) -> None: ...

    class Declarer:
        @harness.hookimpl
        def register_components(self, register):
            register(harness.ComponentKind("widget", Widget, "has spin()"))

    class Offender:
        @harness.hookimpl
        def register_components(self, register):
            register(harness.Component("widget", "stiff", object()))

    plugins = [Declarer(), Offender()] if declarer_first else [Offender(), Declarer()]
    registry = build_registry(extra_plugins=plugins)
    errors = [p.error for p in registry.plugins if p.error]
    assert len(errors) == 1 and "widget" in errors[0] and "spin" in errors[0]
    assert ("widget", "stiff") not in registry.components
