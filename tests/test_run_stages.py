"""The run stages: a config that checks its own values, a frozen plan whose cells carry their
status, executors that get ``run(plan, worker)`` and a driver that alone writes records."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import pytest

from harness.errors import DataFileError, InvalidOptionError
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.registry import build_registry
from harness.run.cell import CellStatus
from harness.run.config import RunConfig
from harness.run.driver import Run
from store_toys import ToyPlugin, write_toy_data

HARNESS = Path(__file__).resolve().parent.parent / "harness"


@pytest.mark.parametrize(
    "values, message",
    [
        ({"seeds": [-1]}, "--seeds: seed -1 is outside"),
        ({"seeds": []}, "--seeds is empty"),
        ({"batch_size": 0}, "--batch-size must be a positive integer, got 0."),
        ({"batch_size": True}, "--batch-size must be a positive integer, got True."),
    ],
)
def test_run_config_refuses_bad_values_when_built(values, message):
    with pytest.raises(InvalidOptionError, match=message.replace(".", r"\.")):
        RunConfig(models=[ModelEntry("be")], tasks=["stsb"], **values)


def test_run_config_refuses_a_missing_data_dir_and_is_frozen(tmp_path):
    with pytest.raises(DataFileError, match="does not exist"):
        RunConfig(models=[ModelEntry("be")], tasks=["stsb"], data_dir=tmp_path / "absent")
    config = RunConfig(models=[ModelEntry("be")], tasks=["stsb"], data_dir=str(tmp_path))
    assert config.data_dir == tmp_path
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.device = "cpu"  # type: ignore[misc]


def _toy(tmp_path: Path, tasks=("toy-pairs", "toy-nan")) -> Run:
    config = RunConfig(
        models=[ModelEntry("toy-embedder")],
        tasks=list(tasks),
        profile="smoke",
        device="cpu",
        results_dir=tmp_path / "results",
        data_dir=tmp_path / "data",
        progress=False,
    )
    return Run(build_registry(extra_plugins=[ToyPlugin()]), config, log=lambda message: None)


def test_the_plan_carries_each_cells_status_and_is_frozen(tmp_path):
    (tmp_path / "data").mkdir()
    plan = _toy(tmp_path).plan()  # no toy data yet: both cells are problems, stored as missing
    assert [cell.status for cell in plan.cells] == [CellStatus.MISSING] * 2 and plan.jobs() == []
    assert plan.cell_count == 2 and all(cell.problem is not None for cell in plan.cells)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.device = "cuda"  # type: ignore[misc]
    write_toy_data(tmp_path / "data")
    run = _toy(tmp_path)
    plan = run.plan()
    assert [cell.status for cell in plan.cells] == [CellStatus.PENDING] * 2
    assert [len(job.tasks) for job in plan.jobs()] == [2]  # one model serves both cells
    outcomes = run.run(LocalExecutor(), plan)
    assert [o.status for o in outcomes] == ["ok", "failed"]
    again = _toy(tmp_path).plan()
    assert [cell.status for cell in again.cells] == [CellStatus.CACHED, CellStatus.PENDING]  # a failed cell: again
    assert again.cells[0].record["main_score"] == outcomes[0].main_score
    assert [str(cell.status) for cell in again.cells] == ["cached", "pending"]  # the words records and the CLI use
    with pytest.warns(DeprecationWarning, match="Plan.cells"):
        assert again.statuses == again.cells


def test_executors_get_the_plan_and_a_worker_whose_record_alone_writes(tmp_path):
    write_toy_data(tmp_path / "data")
    run = _toy(tmp_path, tasks=("toy-pairs",))
    seen = []

    class Recording:
        name = "recording"

        def device(self, requested):
            return "cpu"

        def start(self, plan, worker):
            worker.check_locking()

        def run(self, plan, worker):
            (job,) = plan.jobs()
            results = list(worker._work.job_results(job))  # computed, not stored
            assert not list((tmp_path / "results").glob("*/seed-*/*.json"))
            seen.extend(results)
            return [worker.record(result) for result in results]

    (outcome,) = run.run(Recording())
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    assert outcome.status == "ok" and json.loads(path.read_text())["main_score"] == seen[0].record["main_score"]
    assert json.loads(path.read_text())["data_dir"] == str(tmp_path / "data")


def test_the_run_stages_import_no_executor_and_the_executors_no_driver_internals():
    for path in (HARNESS / "run").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not any("executors" in name for name in imported), path
    for path in (HARNESS / "executors").glob("*.py"):
        assert "._" not in "".join(
            line for line in path.read_text().splitlines() if "worker." in line or "work." in line
        ), path
    assert not (HARNESS / "runner.py").exists()


def test_a_run_config_is_checked_without_torch_and_the_plan_stage_imports_no_models_stage():
    import subprocess
    import sys

    code = (
        "import sys; from harness.matrix import ModelEntry; from harness.run.config import RunConfig; "
        "RunConfig(models=[ModelEntry('be')], tasks=['stsb']); assert 'torch' not in sys.modules, 'torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(InvalidOptionError, match="--runtime must be one of torch, onnx, onnx-int8, got 'tf'"):
        RunConfig(models=[ModelEntry("be")], tasks=["stsb"], runtime="tf")
    from harness.nn.onnx_runtime import RUNTIMES
    from harness.run.config import RUNTIMES as CONFIG_RUNTIMES

    assert CONFIG_RUNTIMES == RUNTIMES
    tree = ast.parse((HARNESS / "run" / "plan.py").read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"models", "build", "evaluate", "driver"}, imported


def test_a_cell_status_is_its_word_in_sets_dicts_and_text():
    from harness.run.cell import Cell
    from harness.run.driver import summary_rows
    from harness.spec import ModelSpec, TaskSpec

    assert "failed" in {CellStatus.FAILED} and {CellStatus.OK: 1}["ok"] == 1
    assert f"{CellStatus.MISSING}" == "missing" and str(CellStatus.CACHED) == "cached"
    spec = ModelSpec("toy-embedder", {}, "tiny", "smoke", None, "toy-embedder")
    task = TaskSpec("toy-pairs")
    cells = [
        Cell(spec, 1, task, CellStatus.FAILED, message="diverged"),
        Cell(spec, 2, task, CellStatus.CACHED, record={"main_score": 50.0}),
    ]
    assert cells[0].main_score is None and cells[1].main_score == 50.0
    _, rows = summary_rows(cells)
    assert rows == [["toy-embedder", "50.00"]]
    _, rows = summary_rows(cells[:1])
    assert rows == [["toy-embedder", "failed"]]
