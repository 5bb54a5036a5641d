"""The example plugin keeps the harness plugin contract: harness.testing's checks, the data dir, the CLI."""

from __future__ import annotations

import shutil

import harness_example_plugin
import pytest
from harness_example_plugin import BUNDLED_DATA, GOLD_FILE, INPUT_FILE, HashedBagOfWords, STS17English

import harness
import harness.testing as ht


@pytest.fixture(scope="module")
def registry():
    """This plugin alone, as harness loads it (fails with the registry's reason if it does not load cleanly)."""
    return ht.plugin_registry(harness_example_plugin)


def test_plugin_registers_its_model_and_task(registry):
    assert "hashed-bow" in registry.models
    assert registry.task("sts17-en").metadata.family == "example"


def test_hashed_bow_keeps_the_model_contract(registry):
    # hashed-bow loads no backbone, so any backbone text will do (and no tiny transformer is built).
    report = ht.check_model("hashed-bow", registry=registry, options={"dim": 512}, backbone="unused")
    assert report.dimension == 512


def test_sts17_keeps_the_task_contract():
    report = ht.check_task(STS17English)
    assert report.texts_seen <= 2 * ht.smoke_profile().max_eval_examples  # the smoke cut: at most 200 pairs
    assert report.texts_seen > report.texts_seen_with_small_cut
    assert -100 <= report.main_score <= 100


def test_sts17_with_its_own_model_and_option():
    report = ht.check_task(STS17English, HashedBagOfWords(4096), options={"whitespace": "collapse"})
    assert report.main_score > 20  # a lexical baseline correlates clearly with STS gold scores


def test_data_dir_overrides_the_bundled_copy(tmp_path):
    bundled = ht.check_task(STS17English, small_cut=None)
    override = tmp_path / "sts17"
    override.mkdir()
    for name in (INPUT_FILE, GOLD_FILE):  # the first 40 pairs only
        lines = (BUNDLED_DATA / name).read_text(encoding="utf-8").splitlines(keepends=True)[:40]
        (override / name).write_text("".join(lines), encoding="utf-8")
    overridden = ht.check_task(STS17English, data_dir=tmp_path, small_cut=None)
    assert overridden.checksum != bundled.checksum
    assert overridden.texts_seen <= 80
    # A data dir without an sts17/ folder falls back to the bundled copy.
    assert ht.check_task(STS17English, data_dir=tmp_path / "elsewhere", small_cut=None).checksum == bundled.checksum


def test_malformed_data_names_file_and_line(tmp_path):
    shutil.copytree(BUNDLED_DATA, tmp_path / "sts17")
    (tmp_path / "sts17" / INPUT_FILE).write_text("one sentence without its partner\n", encoding="utf-8")
    (tmp_path / "sts17" / GOLD_FILE).write_text("3.0\n", encoding="utf-8")
    with pytest.raises(harness.DataFileError, match=rf"{INPUT_FILE}:1: expected"):
        STS17English({}, tmp_path).check_data()


def test_runs_through_the_harness_command(harness_cli, tmp_path):
    result = harness_cli(
        "run",
        "--models",
        "hashed-bow",
        "--tasks",
        "sts17-en",
        "--profile",
        "smoke",
        "--results",
        tmp_path / "results",
        "--no-progress",
        plugins=["harness_example_plugin"],
        autoload=False,
    )
    assert result.exit_code == 0, result.stderr
    assert "| hashed-bow" in result.stdout and "1 cells computed" in result.stdout
