"""Checked before anything is computed: the store and output folders, the data (named by file and line; a task
whose data is bad fails its own cells and the rest runs), CLI and matrix values (ranges, non-finite and repeated
values, seeds) are refused in one line up front (docs/guide/store.md, "Checked before anything is computed")."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import harness
from store_toys import SEEN_CONTEXTS, SMOKE, sts_data, toy_run, write_toy_data


def test_a_file_given_as_results_is_refused_before_anything_runs(run_cli, tmp_path):
    not_a_folder = tmp_path / "results.txt"
    not_a_folder.write_text("notes")
    started = time.monotonic()
    code, out, err = run_cli(
        "run", "--models", "be", "--tasks", "stsb", "--train-on", "stsb", *SMOKE, "--results", not_a_folder
    )
    assert code == 2 and "is a file, not a folder" in err and "Traceback" not in err
    assert "training" not in out and time.monotonic() - started < 30


def test_a_read_only_store_is_refused_before_anything_runs(run_cli, tmp_path):
    if os.geteuid() == 0:  # root writes through file modes; /proc refuses even root
        read_only = Path("/proc/harness-results")
    else:
        read_only = tmp_path / "read-only"
        read_only.mkdir()
        read_only.chmod(0o555)
    code, out, err = run_cli("run", "--models", "be", "--tasks", "stsb", *SMOKE, "--results", read_only)
    assert code == 2 and "is not writable" in err and "Traceback" not in err, err
    assert "cells computed" not in out


def test_leaderboard_output_that_is_a_file_is_one_clear_error(run_cli, tmp_path):
    output = tmp_path / "board.md"
    output.write_text("mine")
    code, _, err = run_cli("leaderboard", "--output", output)
    assert code == 2 and "is a file, not a folder" in err and "Traceback" not in err
    assert output.read_text() == "mine"


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "the data file is empty"),
        (b"\n \n", "the data file is empty"),
        (b"genre\tfile\x00\x01\x02\xff", ":1: not a text file"),
        (b"a\tb\n" + b"\xff\xfe broken", ":2: not valid UTF-8 text"),
    ],
)
def test_empty_or_binary_data_file_is_named_by_validate(run_cli, tmp_path, content, message):
    data_dir = sts_data(tmp_path)
    test_file = data_dir / "stsb" / "senteval_tokenized" / "sts-test.csv"
    test_file.write_bytes(content)
    code, out, err = run_cli("validate", "--models", "be", "--tasks", "stsb,sts12", "--data-dir", data_dir)
    assert code == 2 and "Traceback" not in err, err
    assert f"{test_file}" in err and message in err
    assert "task sts12: data ok" in out


def test_malformed_data_fails_its_cells_and_the_rest_of_the_matrix_runs(run_cli, tmp_path, tiny_bert):
    data_dir = sts_data(tmp_path)
    (data_dir / "stsb" / "senteval_tokenized" / "sts-test.csv").write_bytes(b"")
    results = tmp_path / "results"
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb,sickr",
        *SMOKE,
        "--backbone",
        tiny_bert,
        "--data-dir",
        data_dir,
        "--results",
        results,
    )
    assert code == 1 and "Traceback" not in err
    assert "1 cells computed" in out and "1 failed" in out and "the data file is empty" in err
    statuses = {p.stem: json.loads(p.read_text())["status"] for p in results.glob("*/seed-*/*.json")}
    assert statuses == {"stsb": "failed", "sickr": "ok"}


def test_read_text_lines_names_file_and_line(tmp_path):
    from harness.data import read_text_lines

    path = tmp_path / "x.txt"
    path.write_bytes("first\nsecond\nthird \xe9\n".encode("latin-1"))
    with pytest.raises(harness.DataFileError, match=rf"{path}:3: not valid UTF-8"):
        read_text_lines(path)
    path.write_text("")
    assert read_text_lines(path, allow_empty=True) == []


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--seeds", "4294967296"], "outside 0..4294967295"),
        (["--seeds", "-1"], "outside 0..4294967295"),
        (["--batch-size", "-3"], "--batch-size must be a positive integer"),
        (["--batch-size", "0"], "--batch-size must be a positive integer"),
    ],
)
def test_bad_run_values_are_refused_up_front(run_cli, tmp_path, extra, expected):
    code, _, err = run_cli("run", "--models", "be", "--tasks", "stsb", *SMOKE, "--results", tmp_path / "r", *extra)
    assert code == 2 and expected in err and "Traceback" not in err


def test_non_finite_option_is_refused_at_plan_time(run_cli, tmp_path):
    code, _, err = run_cli("validate", "--models", "be:lr=nan", "--tasks", "stsb", "--train-on", "stsb")
    assert code == 2 and "option 'lr' of model" in err and "is nan; give a finite number" in err


@pytest.mark.parametrize(
    "matrix, expected",
    [
        ("models: [be]\ntasks: [stsb]\ntrain_on: 5\n", "train_on must be a text"),
        ("models: be\ntasks: [stsb]\n", "models must be a list"),
        ("models: [{model: be, train_on: 5}]\ntasks: [stsb]\n", "models entry 1: train_on must be a text"),
        ("models: [be]\ntasks: [stsb]\nseeds: [true]\n", "seed True is not an integer"),
        ("models: [be]\ntasks: [stsb]\nseeds: []\n", "seeds is empty"),
        ("models: [be]\ntasks: [stsb]\nseeds: 42\n", "seeds must be a list"),
        ("models: [be]\ntasks: [stsb]\nseeds: [4294967296]\n", "outside 0..4294967295"),
    ],
)
def test_bad_matrix_values_are_one_clear_error(run_cli, tmp_path, matrix, expected):
    path = tmp_path / "m.yaml"
    path.write_text(matrix)
    code, _, err = run_cli("validate", "--matrix", path)
    assert code == 2 and str(path) in err and expected in err and "Traceback" not in err, err


def test_batch_size_reaches_the_model_context(tmp_path):
    write_toy_data(tmp_path / "data")
    SEEN_CONTEXTS.clear()
    toy_run(tmp_path, batch_size=7)
    assert SEEN_CONTEXTS and {ctx.eval_batch_size for ctx in SEEN_CONTEXTS} == {7}


def test_zero_cells_is_an_error(tmp_path):
    write_toy_data(tmp_path / "data")
    with pytest.raises(harness.HarnessError, match="seeds is empty|--seeds is empty"):
        toy_run(tmp_path, seeds=[])


def test_missing_data_dir_is_refused(run_cli, tmp_path, monkeypatch):
    missing = tmp_path / "no-such-data"
    code, _, err = run_cli(
        "run", "--models", "be", "--tasks", "stsb", *SMOKE, "--results", tmp_path / "r", "--data-dir", missing
    )
    assert code == 2 and f"--data-dir {missing} does not exist" in err
    monkeypatch.setenv("HARNESS_DATA_DIR", str(missing))
    code, _, err = run_cli("validate", "--models", "be", "--tasks", "stsb")
    assert code == 2 and f"HARNESS_DATA_DIR {missing} does not exist" in err


@pytest.mark.parametrize(
    "extra, expected",
    [
        (("--models", "be:lr=-1"), "option 'lr' of model 'be' is -1.0; it must lie in (0, inf)"),
        (("--models", "be:lr=inf"), "option 'lr' of model 'be' is inf; give a finite number"),
        (("--models", "be", "--set", "learning_rate=inf"), "learning_rate must be a finite number"),
        (
            ("--models", "augsbert:teacher=ce,top_k=0"),
            "option 'top_k' of recipe 'augsbert' is 0; it must lie in [1, inf)",
        ),
    ],
)
def test_out_of_range_options_are_refused_by_validate(run_cli, extra, expected):
    code, _, err = run_cli("validate", *extra, "--tasks", "stsb", "--train-on", "stsb")
    assert code == 2 and expected in err and "Traceback" not in err, err


def test_a_matrix_with_an_out_of_range_option_runs_nothing(run_cli, tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("models: [be, 'be:lr=-1']\ntasks: [stsb]\ntrain_on: stsb\nprofile: smoke\n")
    code, out, err = run_cli("run", "--matrix", matrix, "--results", tmp_path / "results", "--no-progress")
    assert code == 2 and "must lie in (0, inf)" in err and not (tmp_path / "results" / "checkpoints").exists()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (("run", "--models", "be", "--tasks", "stsb", "--seeds", ""), "--seeds needs at least one integer"),
        (
            ("validate", "--models", "be:pooling=cls,pooling=mean", "--tasks", "stsb"),
            "option 'pooling' is given twice in 'be:pooling=cls,pooling=mean' ('cls' and 'mean'); give it once",
        ),
    ],
)
def test_empty_seeds_and_repeated_options_are_refused(run_cli, tmp_path, argv, expected):
    code, out, err = run_cli(*argv, "--results", tmp_path / "r") if argv[0] == "run" else run_cli(*argv)
    assert code == 2 and expected in err and "cells computed" not in out, err


def test_a_set_key_given_twice_is_refused_in_one_line(run_cli, tmp_path):
    code, out, err = run_cli(
        "run",
        "--models",
        "be",
        "--tasks",
        "stsb",
        "--train-on",
        "stsb",
        "--set",
        "epochs=1",
        "--set",
        "epochs=2",
        *SMOKE,
        "--results",
        tmp_path / "r",
    )
    assert code == 2 and "--set epochs is given twice ('1' and '2'); give it once." in err and "Traceback" not in err
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("*.json"))


@pytest.mark.parametrize(
    "matrix, expected",
    [
        ("models: [{model: be, train_on: stsb, epochs: .nan}]\ntasks: [stsb]\n", "epochs must be a finite number"),
        (
            "models: [{model: be, train_on: stsb, max_steps: 1.0e+400}]\ntasks: [stsb]\n",
            "max_steps must be a finite number",
        ),
        ("budget: {learning_rate: -.inf}\nmodels: [be]\ntasks: [stsb]\n", "learning_rate must be a finite number"),
        ("tasks: [stsb]\nmodels: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ],
)
def test_non_finite_or_deeply_nested_matrix_values_are_one_line(run_cli, tmp_path, matrix, expected):
    path = tmp_path / "matrix.yaml"
    path.write_text(matrix)
    code, out, err = run_cli("run", "--matrix", path, "--results", tmp_path / "results")
    assert code == 2 and expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
