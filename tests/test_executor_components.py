"""Executors are components: a package adds one with one module (its ``register_components``) and one entry point in
the ``harness.executors`` group, and `harness run --executor NAME` lists and takes its own options, exactly as for
the built-in local, ray and slurm executors."""

from __future__ import annotations

import textwrap

import pytest

import harness.testing as ht
from harness import HarnessError

TOY_MODULE = '''
"""A toy executor, as a third-party package ships one: every job in this process, one after another."""

from harness import Component, ExecutorFactory, ExecutorOption, hookimpl


class ToyExecutor:
    def __init__(self, toy_greeting, toy_repeat):
        self.greeting = toy_greeting * toy_repeat

    def device(self, requested):
        return "cpu"

    def start(self, plan, worker):
        worker.check_locking()

    def run(self, plan, worker):
        worker.log(f"toy executor says {self.greeting} to {len(plan.jobs())} job(s)")
        cells = []
        for job in plan.jobs():
            lock = worker.cells_lock(job)
            lock.acquire()
            try:
                cells += worker.run_job(job)
            finally:
                lock.release()
        return cells


TOY = ExecutorFactory(
    build=ToyExecutor,
    options=(
        ExecutorOption("--toy-greeting", "what the toy executor says", "hello"),
        ExecutorOption("--toy-repeat", "how many times it says it", 1, type=int),
    ),
)


@hookimpl
def register_components(register):
    register(Component("executor", "toy", TOY, "every job in this process, with a greeting"))
'''


@pytest.fixture()
def toy_executor_installed(tmp_path, monkeypatch):
    """``toy_executor`` installed as a package installs it: its module and a distribution whose metadata declares
    the entry point ``toy = toy_executor`` in the ``harness.executors`` group."""
    from harness.registry import default_registry, executor_registry

    site = tmp_path / "site"
    (site / "toy_executor-0.1.dist-info").mkdir(parents=True)
    (site / "toy_executor.py").write_text(textwrap.dedent(TOY_MODULE))
    (site / "toy_executor-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-executor\n")
    (site / "toy_executor-0.1.dist-info" / "entry_points.txt").write_text("[harness.executors]\ntoy = toy_executor\n")
    monkeypatch.syspath_prepend(str(site))
    executor_registry.cache_clear()
    default_registry.cache_clear()
    yield
    executor_registry.cache_clear()
    default_registry.cache_clear()


def test_a_new_executor_is_one_module_and_one_entry_point(toy_executor_installed, tmp_path, capsys):
    from harness.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    shown = capsys.readouterr().out
    assert "with --executor toy:" in shown and "--toy-greeting" in shown and "how many times it says it" in shown
    assert "toy: every job in this process, with a greeting" in " ".join(shown.split())

    result = ht.run_harness(
        "run",
        "--models",
        "testing-embedder",
        "--tasks",
        "stsb",
        "--results",
        tmp_path / "results",
        "--no-progress",
        "--executor",
        "toy",
        "--toy-greeting",
        "hi",
        "--toy-repeat",
        "2",
        plugins=["harness.testing"],
    )
    assert result.exit_code == 0, result.stderr
    assert "toy executor says hihi to 1 job(s)" in result.stdout
    assert "1 cells computed" in result.stdout
    assert list((tmp_path / "results").glob("*/seed-42/stsb.json"))

    listed = ht.run_harness("list", plugins=["harness.testing"])
    assert "executor: local, ray, slurm, toy" in listed.stdout


def test_an_executor_option_without_its_executor_is_one_line(toy_executor_installed, tmp_path):
    result = ht.run_harness(
        "run", "--models", "testing-embedder", "--tasks", "stsb", "--results", tmp_path, "--toy-repeat", "3"
    )
    assert result.exit_code == 2 and result.stderr == "error: --toy-repeat only applies with --executor toy.\n"


def test_the_built_in_executors_are_components_with_their_options():
    from harness.executors import executor_names, make_executor
    from harness.executors.slurm import SlurmExecutor

    assert executor_names() == ["local", "ray", "slurm"]
    slurm = make_executor("slurm", {"slurm_partition": "gpu", "slurm_sbatch_lines": ("--constraint=a100",)})
    assert isinstance(slurm, SlurmExecutor)
    assert slurm.options.directives() == ["--partition=gpu", "--constraint=a100"] and slurm.options.retries == 2
    assert make_executor("ray", {"gpus_per_task": 0.5}).gpus_per_task == 0.5
    with pytest.raises(HarnessError, match="invalid value 'kubernetes' for --executor; allowed values: local, ray"):
        make_executor("kubernetes")


def test_the_local_executor_is_there_without_any_plugin():
    """Plugin autoload off (a third party's own tests): the core still offers the default executor."""
    from harness.executors import executor_names

    assert executor_names(ht.plugin_registry()) == ["local"]
