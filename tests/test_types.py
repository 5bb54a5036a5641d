"""The typed front doors: mypy passes on the modules listed under ``[tool.mypy] files`` in pyproject.toml (the plugin
contract ``harness/api.py`` and the building blocks ``harness/blocks``), and a plugin author's type checker sees the
blocks' real types, not the ``Any`` of their lazy ``__getattr__``. Offline; a few seconds with mypy's cache."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from conftest import REPO

pytest.importorskip("mypy", reason="mypy comes with the test extras: pip install -e '.[test]'")


def _mypy(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mypy", *arguments], cwd=REPO, capture_output=True, text=True, timeout=600
    )


def test_front_doors_pass_mypy():
    result = _mypy()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "harness/api.py" not in result.stdout


def test_type_checkers_see_the_blocks_real_types(tmp_path):
    """A wrong use of a block is an error, a deprecated or unknown name too (the lazy ``__getattr__`` is hidden from
    type checkers), and a name's revealed type is its own class or function."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent("""\
        import harness
        import harness.blocks as blocks
        from harness.blocks import InfoNCE
        from harness.blocks.retrieval import BM25_FIRST_STAGE

        reveal_type(InfoNCE)
        reveal_type(blocks.evaluation_sample)
        count: int = BM25_FIRST_STAGE
        blocks.no_such_block
        blocks.FIRST
        harness.build_checkpoint
        """)
    )
    # its own cache: mypy's cache is not safe to share with the check above when pytest-xdist runs both at once
    result = _mypy("--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), str(probe))
    lines = result.stdout
    assert 'Revealed type is "def (temperature: float =) -> harness.nn.losses.InfoNCE"' in lines, lines
    assert 'Revealed type is "def (count: int, limit: int | None) -> list[int]"' in lines, lines
    assert 'probe.py:8: error: Incompatible types in assignment (expression has type "str"' in lines, lines
    for line, name in ((9, "no_such_block"), (10, "FIRST"), (11, "build_checkpoint")):
        assert f'probe.py:{line}: error: Module has no attribute "{name}"' in lines, lines
