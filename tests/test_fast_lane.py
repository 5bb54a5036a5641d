"""The two lanes (tests/lanes.py): tests/durations.json names tests that exist and leaves few unmeasured, the slow
mark follows it, and the recorder behind `make durations` measures what a test costs and merges it into the file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import lanes

# Above this share of unmeasured tests (which the lanes count as slow) the fast lane has drifted from the suite.
UNMEASURED_SHARE_ALLOWED = 0.05


def test_every_measured_test_exists():
    defined = lanes.every_defined_test()
    stale = sorted(key for key in lanes.read_durations() if key not in defined)
    assert not stale, (
        f"tests/durations.json names tests that no longer exist (renamed?): {stale}; `make durations` measures the "
        "suite again and drops them"
    )


def test_few_tests_are_unmeasured_and_they_are_named():
    defined = lanes.every_defined_test() - lanes.gpu_tests()
    unmeasured = sorted(defined - set(lanes.read_durations()))
    share = len(unmeasured) / len(defined)
    advice = (
        f"{len(unmeasured)} of {len(defined)} tests ({share:.0%}) are not in tests/durations.json and count as slow: "
        f"{unmeasured[:20]}; measure them with `make durations DURATIONS_TESTS=...` (their files)"
    )
    assert share <= UNMEASURED_SHARE_ALLOWED, advice
    if unmeasured:
        warnings.warn(lanes.UnmeasuredTestsWarning(advice), stacklevel=1)


def test_slow_unmeasured_and_integration_tests_carry_the_slow_mark(request):
    """Whatever this session collected (a test may also be marked ``@pytest.mark.slow`` in its own file)."""
    durations = lanes.read_durations()
    assert request.session.items
    for item in request.session.items:
        key = lanes.duration_key(item.nodeid)
        if lanes.is_slow(key, durations) or item.get_closest_marker("integration") is not None:
            assert item.get_closest_marker("slow") is not None, item.nodeid
    assert not lanes.is_slow(lanes.duration_key(request.node.nodeid), durations), "this test is measured and quick"
    assert request.node.get_closest_marker("slow") is None


def test_the_slow_mark_reads_the_threshold():
    durations = {"test_a.py::test_quick": lanes.SLOW_SECONDS, "test_a.py::test_long": lanes.SLOW_SECONDS + 0.1}
    assert not lanes.is_slow("test_a.py::test_quick", durations)
    assert lanes.is_slow("test_a.py::test_long", durations)
    assert lanes.is_slow("test_a.py::test_new", durations)
    assert lanes.duration_key("tests/test_a.py::Group::test_quick[x-1]") == "test_a.py::test_quick"


SAMPLE_TESTS = """
import time

import pytest


@pytest.fixture(scope="session")
def backbone():
    time.sleep(0.6)


@pytest.fixture(scope="module")
def trained_store():
    time.sleep(0.6)


def test_first_user_of_the_store(trained_store):
    pass


def test_second_user_of_the_store(trained_store):
    pass


def test_quick_on_the_backbone(backbone):
    pass


@pytest.mark.parametrize("seconds", [0.2, 0.2, 0.2])
def test_parametrised(seconds):
    time.sleep(seconds)


@pytest.mark.skip(reason="not measurable here")
def test_skipped():
    time.sleep(5)
"""


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["one-process", "xdist"])
def test_the_recorder_measures_shared_fixtures_for_each_user_and_merges_the_file(tmp_path, workers):
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(f"""
            import sys

            sys.path.insert(0, {str(lanes.TESTS)!r})
            import lanes


            def pytest_addoption(parser):
                lanes.add_option(parser)


            def pytest_configure(config):
                lanes.configure(config)
            """)
    )
    (tmp_path / "test_sample.py").write_text(SAMPLE_TESTS)
    (tmp_path / "test_other.py").write_text("def test_kept():\n    pass\n")
    durations_file = tmp_path / "durations.json"
    durations_file.write_text(
        json.dumps(
            {
                "test_sample.py::test_renamed_since": 9.0,  # its file was measured, it was not: gone
                "test_other.py::test_kept": 7.0,  # a file this session did not run: kept
                "test_removed_file.py::test_x": 8.0,  # its file is gone
            }
        )
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    finished = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *workers,
            "--record-durations",
            str(durations_file),
            "test_sample.py",
        ],  # fmt: skip
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    assert "durations: 4 tests measured" in finished.stdout
    durations = json.loads(durations_file.read_text())
    assert set(durations) == {
        "test_other.py::test_kept",
        "test_sample.py::test_first_user_of_the_store",
        "test_sample.py::test_second_user_of_the_store",
        "test_sample.py::test_quick_on_the_backbone",
        "test_sample.py::test_parametrised",
    }
    assert durations["test_other.py::test_kept"] == 7.0
    # A module fixture counts for each test that uses it; a session fixture for none; parametrisations add up.
    assert durations["test_sample.py::test_first_user_of_the_store"] >= 0.6
    assert durations["test_sample.py::test_second_user_of_the_store"] >= 0.6
    assert durations["test_sample.py::test_quick_on_the_backbone"] < 0.5
    assert durations["test_sample.py::test_parametrised"] >= 0.6
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".durations")) == []
    assert durations_file.stat().st_mode & 0o777 == 0o644  # as checked in, not mkstemp's private mode
