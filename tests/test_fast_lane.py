"""The fast lane (`make test-fast`, -m "not slow"): the slow list in tests/conftest.py names tests that exist, and a
listed or ``integration`` test carries the ``slow`` mark."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from conftest import SLOW_TESTS, _slow_key

TESTS = Path(__file__).resolve().parent


@functools.cache
def _test_functions(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test")
    )


def test_every_slow_entry_names_an_existing_test():
    stale = []
    for key in SLOW_TESTS:
        file_name, _, function = key.partition("::")
        path = TESTS / file_name
        if not path.is_file() or function not in _test_functions(path):
            stale.append(key)
    assert not stale, f"tests/conftest.py SLOW_TESTS names tests that no longer exist (renamed?): {stale}"


def test_listed_and_integration_tests_carry_the_slow_mark(request):
    """Whatever this session collected (a test may also be marked ``@pytest.mark.slow`` in its own file)."""
    assert request.session.items
    for item in request.session.items:
        if _slow_key(item) in SLOW_TESTS or item.get_closest_marker("integration") is not None:
            assert item.get_closest_marker("slow") is not None, item.nodeid
    assert _slow_key(request.node) not in SLOW_TESTS and request.node.get_closest_marker("slow") is None
