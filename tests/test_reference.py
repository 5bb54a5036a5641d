"""docs/reference.md, the reference of every public name, is generated from the docstrings
(scripts/build-reference.py): the committed page equals a fresh generation, and every public name of ``harness``,
its hooks, the groups of ``harness.blocks`` and ``harness.testing`` is documented (a docstring, or a comment on a
constant's assignment) and has its entry on the page. The model: datasette's tests/test_docs.py."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def build_reference():
    spec = importlib.util.spec_from_file_location("build_reference", REPO / "scripts" / "build-reference.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.fixture(scope="module")
def page(build_reference):
    return build_reference.render()


def test_committed_reference_equals_a_fresh_generation(page):
    committed = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    assert committed == page, "docs/reference.md is out of date: run python scripts/build-reference.py"


def test_every_public_name_is_documented(build_reference):
    missing = build_reference.undocumented()
    assert not missing, "give these a docstring (or a comment on the constant's line): " + ", ".join(missing)


def test_every_public_name_has_its_entry(page):
    import harness
    import harness.blocks as blocks
    import harness.testing as testing

    headings = set(re.findall(r"^### `(?:class )?(\w+)", page, flags=re.MULTILINE))
    names = {*harness.__all__, *testing.__all__, *(name for name in blocks.__all__ if name not in blocks._MODULES)}
    assert sorted(names - headings) == []
    for group in (*blocks._GROUPS, *blocks._MODULES):
        assert f"\n## harness.blocks.{group}\n" in page, group


def test_a_name_without_documentation_is_reported(build_reference, monkeypatch):
    """The check can fail: a block added without a docstring is named."""
    import harness.blocks.losses as losses

    def undocumented_loss(rows):
        return rows

    monkeypatch.setattr(losses, "undocumented_loss", undocumented_loss, raising=False)
    monkeypatch.setattr(losses, "__all__", [*losses.__all__, "undocumented_loss"])
    assert build_reference.undocumented() == ["harness.blocks.losses.undocumented_loss"]
