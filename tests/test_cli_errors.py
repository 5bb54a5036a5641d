"""Bad input gets one clear error that says what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import REPO


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["run", "--models", "bee", "--tasks", "stsb"], ["unknown model 'bee'", "Did you mean: be"]),
        (["run", "--models", "be", "--tasks", "sts-12"], ["unknown task 'sts-12'", "sts12"]),
        (["run", "--models", "be", "--tasks", "sentevl"], ["unknown task", "senteval"]),
        (
            ["run", "--models", "be", "--tasks", "stsb", "--profile", "fast"],
            ["--profile", "allowed values: smoke, quick, paper"],
        ),
        (["run", "--models", "be:pooling=max", "--tasks", "stsb"], ["pooling", "allowed values: mean, cls"]),
        (["run", "--models", "be:poolin=cls", "--tasks", "stsb"], ["no option 'poolin'", "Did you mean: pooling"]),
        (["run", "--models", "be", "--tasks", "sickr:split=everything"], ["allowed values: test, all"]),
        (["run", "--models", "be", "--tasks", "stsb", "--seeds", "4x"], ["--seeds takes comma-separated integers"]),
        (["run", "--models", "be", "--tasks", "stsb", "--device", "tpu"], ["--device", "auto, cpu, cuda, mps"]),
        (["run", "--models", "be", "--tasks", "stsb", "--device", "gpu"], ["--device", "Did you mean: cuda?"]),
        (["run", "--models", "be", "--tasks", "stsb", "--train-on", "sts12"], ["offers no training data", "stsb"]),
        (["leaderboard", "--results", "/nonexistent/store"], ["no result store"]),
        (["describe", "sentevl"], ["Did you mean: senteval"]),
    ],
)
def test_bad_input_is_one_clear_error(run_cli, argv, expected, tmp_path):
    if argv[0] == "run":
        argv = [*argv, "--results", str(tmp_path / "r")]
    code, out, err = run_cli(*argv)
    assert code == 2
    assert "Traceback" not in err
    for text in expected:
        assert text in err, err


def _copy_sts12(tmp_path: Path) -> Path:
    data_dir = tmp_path / "data"
    shutil.copytree(REPO / "tasks" / "data" / "sts12", data_dir / "sts12")
    return data_dir


def test_malformed_data_file_names_file_and_line(run_cli, tmp_path, tiny_bert):
    data_dir = _copy_sts12(tmp_path)
    gold = data_dir / "sts12" / "senteval_tokenized" / "STS.gs.MSRvid.txt"
    lines = gold.read_text().splitlines()
    lines[6] = "four point five"
    gold.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli("validate", "--models", "be", "--tasks", "sts12", "--data-dir", data_dir)
    assert code == 2
    assert f"{gold}:7: gold score 'four point five' is not a number" in err


def test_missing_data_file_is_named(run_cli, tmp_path):
    data_dir = _copy_sts12(tmp_path)
    missing = data_dir / "sts12" / "senteval_tokenized" / "STS.input.MSRpar.txt"
    missing.unlink()
    code, _, err = run_cli("validate", "--models", "be", "--tasks", "sts12", "--data-dir", data_dir)
    assert code == 2 and f"{missing}: data file not found" in err


def test_matrix_file_errors_name_the_file(run_cli, tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("models: [be\ntasks: [stsb]\n")
    code, _, err = run_cli("validate", "--matrix", matrix)
    assert code == 2 and str(matrix) in err and "not valid YAML" in err
    matrix.write_text("models: [be]\ntasks: [stsb]\nseedz: [1]\n")
    code, _, err = run_cli("validate", "--matrix", matrix)
    assert code == 2 and "seedz" in err and "allowed keys" in err


def test_validate_accepts_a_good_matrix(run_cli, tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "profile: smoke\nseeds: [1, 2]\ntasks: [senteval]\nmodels:\n  - be\n  - {model: be, train_on: stsb}\n"
    )
    code, out, err = run_cli("validate", "--matrix", matrix)
    assert code == 0, err
    assert "ok: 28 cells" in out


def test_model_list_splitting_keeps_options_with_their_spec():
    from harness.spec_grammar import split_spec_list as _split

    assert _split("be:teacher=ce,be:teacher=cbe") == ["be:teacher=ce", "be:teacher=cbe"]
    assert _split("be:teacher=cbe,sampler=kde-iterative,ce") == ["be:teacher=cbe,sampler=kde-iterative", "ce"]
    assert _split("be:teacher=ce:activation=tanh,mode=self-distillation") == [
        "be:teacher=ce:activation=tanh,mode=self-distillation"
    ]


def test_every_command_names_its_handler():
    from harness.cli import commands

    handlers = commands()
    assert {"run", "rescore", "list", "results", "slurm-task"} <= set(handlers)
    assert all(callable(handler) for handler in handlers.values()), handlers


def test_a_reader_that_stops_reading_is_not_an_error():
    """`harness list | head -1`: the closed pipe ends the command quietly (no "error: Broken pipe" line)."""
    import subprocess
    import sys

    with subprocess.Popen(
        [sys.executable, "-m", "harness", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    ) as process:
        process.stdout.readline()
        process.stdout.close()
        stderr = process.stderr.read().decode()
        code = process.wait(timeout=120)
    assert "error" not in stderr.lower(), stderr
    assert code == 0
