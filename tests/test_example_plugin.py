"""The example third-party package is discovered through its entry point, with no change to this repository."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


@pytest.fixture(scope="module")
def example_site(tmp_path_factory) -> Path:
    """Install examples/harness-example-plugin into a folder on the test environment's path."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target",
         str(target), str(REPO / "examples" / "harness-example-plugin")],
        check=True, capture_output=True, text=True,
    )
    return target


def harness_cli(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_list_shows_third_party_plugin(example_site, tmp_path):
    result = harness_cli(example_site, "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "hashed-bow" in result.stdout and "sts17-en" in result.stdout
    assert "[harness-example-plugin]" in result.stdout


def test_run_mixes_third_party_and_builtin(example_site, tmp_path, tiny_bert):
    result = harness_cli(
        example_site, "run", "--models", "hashed-bow,be", "--tasks", "sts17-en,stsb", "--profile", "smoke",
        "--backbone", tiny_bert, "--results", str(tmp_path / "results"), "--no-progress", cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("| model")[1]
    for row_start in ("| hashed-bow", "| be"):
        row = [line for line in table.splitlines() if line.startswith(row_start + " ")][0]
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        assert len(cells) == 2 and all(c not in ("-", "missing") for c in cells), row
        assert all(-100 <= float(c) <= 100 for c in cells)
    records = list((tmp_path / "results").glob("*/seed-42/*.json"))
    assert len(records) == 4
