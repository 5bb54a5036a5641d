"""Third-party packages are discovered through their entry points, with no change to this repository: the current
example plugin (examples/harness-example-plugin) and a verbatim copy of the harness 0.1 example
(tests/fixtures/legacy-example-plugin), which must keep working unchanged next to it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import harness.testing as ht
from conftest import REPO

EXAMPLE = REPO / "examples" / "harness-example-plugin"
LEGACY = REPO / "tests" / "fixtures" / "legacy-example-plugin"


def install(sources: list[Path], target: Path, scratch: Path) -> Path:
    """pip-install ``sources`` into ``target`` from copies (an in-tree build would leave build/ and *.egg-info/
    folders in the repository)."""
    copies = []
    for source in sources:
        copy = scratch / source.name
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        copies.append(str(copy))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            *copies,
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


@pytest.fixture(scope="module")
def example_site(tmp_path_factory) -> Path:
    """examples/harness-example-plugin installed into a folder on the test environment's path."""
    return install([EXAMPLE], tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="module")
def both_site(tmp_path_factory) -> Path:
    """The current example and the harness 0.1 example (verbatim but for its names) installed side by side."""
    return install([EXAMPLE, LEGACY], tmp_path_factory.mktemp("both-site"), tmp_path_factory.mktemp("both-build"))


def harness_cli(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=env, cwd=cwd)


def failed_plugins(list_output: str) -> str:
    """The "Plugins that failed to load" part of `harness list` (other packages' failures are not ours to judge)."""
    return list_output.partition("Plugins that failed to load:")[2]


def summary_cells(stdout: str, row_start: str) -> list[str]:
    """The cells of the run summary's row for one model."""
    table = stdout.split("| model")[1]
    row = [line for line in table.splitlines() if line.startswith(row_start + " ")][0]
    return [cell.strip() for cell in row.strip("|").split("|")][1:]


# -- the current example ---------------------------------------------------------------------------------------------
def test_list_shows_third_party_plugin(example_site, tmp_path):
    result = harness_cli(example_site, "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "hashed-bow" in result.stdout and "sts17-en" in result.stdout
    assert "[harness-example-plugin]" in result.stdout
    assert "harness-example-plugin" not in failed_plugins(result.stdout)


def test_run_mixes_third_party_and_builtin(example_site, tmp_path, tiny_bert):
    result = harness_cli(
        example_site,
        "run",
        "--models",
        "hashed-bow,be",
        "--tasks",
        "sts17-en,stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        str(tmp_path / "results"),
        "--no-progress",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    for row_start in ("| hashed-bow", "| be"):
        cells = summary_cells(result.stdout, row_start)
        assert len(cells) == 2 and all(c not in ("-", "missing") for c in cells), cells
        assert all(-100 <= float(c) <= 100 for c in cells)
    assert "4 cells computed" in result.stdout


def test_data_dir_overrides_the_bundled_copy(example_site, tmp_path):
    bundled = harness_cli(example_site, "validate", "--models", "hashed-bow", "--tasks", "sts17-en", cwd=tmp_path)
    assert bundled.returncode == 0, bundled.stderr
    data_dir = tmp_path / "data"
    shutil.copytree(EXAMPLE / "harness_example_plugin" / "data", data_dir / "sts17")
    with open(data_dir / "sts17" / "STS.gs.track5.en-en.txt", "r+", encoding="utf-8") as gold:
        first_line = gold.readline()
        gold.seek(0)
        gold.write(first_line.replace("2.4", "2.5"))  # one changed gold score: another dataset checksum
    overridden = harness_cli(
        example_site,
        "validate",
        "--models",
        "hashed-bow",
        "--tasks",
        "sts17-en",
        "--data-dir",
        str(data_dir),
        cwd=tmp_path,
    )
    assert overridden.returncode == 0, overridden.stderr

    def checksum(stdout: str) -> str:
        return [line for line in stdout.splitlines() if line.startswith("task sts17-en")][0].split("sha256 ")[1]

    assert checksum(overridden.stdout) != checksum(bundled.stdout)


def test_example_runs_its_own_contract_tests(example_site, tmp_path):
    """The example's tests/ (harness.testing's contract checks) pass against the installed package."""
    env = {
        **os.environ,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": os.pathsep.join([str(example_site), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failed" not in result.stdout


# -- the harness 0.1 example, unchanged ------------------------------------------------------------------------------
def test_legacy_plugin_is_listed_next_to_the_current_one(both_site, tmp_path):
    result = harness_cli(both_site, "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "hashed-bow-legacy" in result.stdout and "sts17-en-legacy" in result.stdout
    assert "[harness-legacy-example-plugin]" in result.stdout and "[harness-example-plugin]" in result.stdout
    assert "example-plugin" not in failed_plugins(result.stdout)


def test_legacy_plugin_runs_mixed_with_builtins(both_site, tmp_path, tiny_bert):
    result = harness_cli(
        both_site,
        "run",
        "--models",
        "hashed-bow-legacy,be",
        "--tasks",
        "sts17-en-legacy,stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--results",
        str(tmp_path / "results"),
        "--no-progress",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    for row_start in ("| hashed-bow-legacy", "| be"):
        cells = summary_cells(result.stdout, row_start)
        assert len(cells) == 2 and all(-100 <= float(c) <= 100 for c in cells), cells


def test_legacy_and_current_example_side_by_side_agree(both_site, tmp_path):
    """The legacy code computes what the current example computes (quick profile: no evaluation cut, which the 0.1
    example did not know)."""
    result = harness_cli(
        both_site,
        "run",
        "--models",
        "hashed-bow,hashed-bow-legacy",
        "--tasks",
        "sts17-en,sts17-en-legacy",
        "--profile",
        "quick",
        "--results",
        str(tmp_path / "results"),
        "--no-progress",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    current, legacy = summary_cells(result.stdout, "| hashed-bow"), summary_cells(result.stdout, "| hashed-bow-legacy")
    assert len(set(current + legacy)) == 1, (current, legacy)


def test_legacy_plugin_passes_the_contract_checks_but_the_smoke_cut(both_site, monkeypatch):
    """In-process: the 0.1 plugin loads and keeps the contract (deprecation warnings allowed); the one thing it
    cannot know is the smoke profile's evaluation cut, which check_task reports."""
    monkeypatch.syspath_prepend(str(both_site))
    with warnings.catch_warnings():
        warnings.simplefilter("default", DeprecationWarning)
        import harness_legacy_example_plugin

        registry = ht.plugin_registry(harness_legacy_example_plugin)
    ht.check_model("hashed-bow-legacy", registry=registry, backbone="unused")
    report = ht.check_task("sts17-en-legacy", registry=registry, small_cut=None)
    assert report.texts_seen > 2 * 200  # all 250 pairs: no smoke cut
    with pytest.raises(ht.ContractCheckError, match="max_eval_examples"):
        ht.check_task("sts17-en-legacy", registry=registry)
