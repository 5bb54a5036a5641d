"""The command line groups and guides: every command builds its own parser with option groups and examples, an
internal command stays out of `harness --help`, a misspelled or abbreviated option is one line naming the option
meant, and the help is printed without importing torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO


def _help(capsys, *argv: str) -> str:
    from harness.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["run", "--modles", "be"], "error: unknown option --modles; did you mean --models?"),
        (["run", "--models", "be", "--task", "stsb"], "error: unknown option --task; did you mean --tasks?"),
        (["run", "--models=be", "--seed", "1"], "error: unknown option --seed; did you mean --seeds?"),
        (
            ["compare", "be", "ce", "--tasks", "stsb", "--json", "--resample", "9"],
            "error: unknown option --resample; did you mean --resamples?",
        ),
        (["rnu"], "error: unknown command 'rnu'; did you mean run?"),
        (["run", "be"], "error: unexpected argument 'be'"),
    ],
)
def test_a_misspelled_or_abbreviated_option_is_one_line_naming_the_one_meant(capsys, argv, expected):
    from harness.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith(expected) and err.count("\n") == 1, err


def test_every_listed_command_has_groups_or_examples_and_internal_ones_are_hidden(capsys):
    from harness.cli import commands

    top = _help(capsys)
    assert "slurm-task" not in top and "run " in top and "examples:" in top
    for name in sorted(set(commands()) - {"slurm-task"}):
        text = _help(capsys, name)
        assert f"usage: harness {name} [options]" in text, name
        assert "examples:\n  harness " + name in text, name
    run_help = _help(capsys, "run")
    headings = [line for line in run_help.splitlines() if line and not line.startswith(" ") and line.endswith(":")]
    assert headings[:4] == ["options:", "what to run:", "training budget:", "evaluation:"]
    assert {"where to run:", "with --executor ray:", "with --executor slurm:", "results and output:"} <= set(headings)


def test_help_does_not_import_torch():
    """`harness --help` and `harness run --help` read the executors' plugins, not the model plugins (and torch)."""
    code = (
        "import sys\n"
        "from harness.cli import main\n"
        "for argv in ([], ['run'], ['validate'], ['compare']):\n"
        "    try:\n"
        "        main([*argv, '--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('loaded:', sorted(m for m in ('torch', 'scipy', 'pandas', 'ray', 'sklearn') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "--slurm-partition" in result.stdout
    assert result.stdout.rstrip().endswith("loaded: []"), result.stdout[-300:]
