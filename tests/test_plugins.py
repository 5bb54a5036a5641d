"""Plugin discovery: built-ins through entry points, broken plugins reported, duplicate names refused."""
from __future__ import annotations

import sys
import textwrap

import pytest

import harness
from harness.errors import DuplicateNameError
from harness.registry import build_registry


def test_builtins_come_from_entry_points(registry):
    assert "be" in registry.models
    assert registry.package_of("model", "be") == "harness"
    assert set(registry.expand_task("senteval")) == {"sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"}
    assert {p.name for p in registry.plugins if p.package == "harness"} >= {"bi_encoder", "senteval", "backbones"}
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
    assert "'harness'" in message and "(in-process)" in message and "'be'" in message


def test_allow_list_and_disable_autoload(monkeypatch):
    monkeypatch.setenv("HARNESS_PLUGINS", "senteval")
    registry = build_registry()
    assert "be" not in registry.models and "stsb" in registry.tasks
    monkeypatch.delenv("HARNESS_PLUGINS")
    monkeypatch.setenv("HARNESS_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert build_registry().models == {}


def test_task_metadata_is_validated():
    with pytest.raises(ValueError, match="main_score"):
        harness.TaskMetadata(name="x", family="f", description="d", main_score="", metric="m", reference="r",
                             dataset="d", dataset_source="s", license="l")
    with pytest.raises(ValueError, match="lower-case"):
        harness.ModelPlugin("Bad Name", "d", lambda ctx: None, ("embedder",))
    with pytest.raises(ValueError, match="capability"):
        harness.ModelPlugin("ok", "d", lambda ctx: None, ("telepathy",))
