"""Experiment trackers (harness.trackers): one real run reports to every installed backend, read back with each
backend's own reader (TensorBoard's EventAccumulator, MLflow's client on a SQLite store, W&B's offline run file);
a tracker that raises never stops or changes a run; --log-to / log_to / HARNESS_LOG_TO and their refusals."""

from __future__ import annotations

import importlib.util
import json
import logging
import struct
from pathlib import Path

import pytest

from harness.errors import InvalidOptionError
from harness.trackers import RunTrackers, parse_log_to

SMOKE = ("--profile", "smoke", "--no-progress")
INSTALLED = [name for name in ("tensorboard", "mlflow", "wandb") if importlib.util.find_spec(name) is not None]


def needs(name: str):
    return pytest.mark.skipif(name not in INSTALLED, reason=f"{name} is not installed (pip install '.[{name}]')")


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory):
    """`harness run --log-to <every installed tracker>`: be trained on stsb (smoke), evaluated on stsb."""
    if not INSTALLED:
        pytest.skip("no tracker package is installed (pip install '.[tensorboard,mlflow,wandb]')")
    from harness.cli import main
    from harness.testing import tiny_bert

    root = tmp_path_factory.mktemp("tracked")
    backbone = tiny_bert(root / "bert")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{root / 'mlflow.db'}")
        patch.setenv("WANDB_MODE", "offline")
        patch.setenv("WANDB_DIR", str(root / "wandb"))
        patch.setenv("WANDB_SILENT", "true")
        (root / "wandb").mkdir()
        code = main(
            [
                "run",
                "--models",
                "be",
                "--train-on",
                "stsb",
                "--tasks",
                "stsb",
                "--backbone",
                str(backbone),
                "--results",
                str(root / "results"),
                "--log-to",
                ",".join(INSTALLED),
                *SMOKE,
            ]
        )
    assert code == 0
    (training,) = (root / "results" / "checkpoints").glob("be-*/seed-42/training.json")
    (record,) = (root / "results").glob("be-*/seed-42/stsb.json")
    return root, json.loads(training.read_text()), json.loads(record.read_text())


def _losses(training: dict) -> list[float]:
    (fit,) = training["curves"]["fits"]
    return fit["loss"]["loss"]["value"]


@needs("tensorboard")
def test_tensorboard_event_files_hold_the_steps_dev_scores_cell_scores_and_hyperparameters(tracked_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    root, training, record = tracked_run
    (folder,) = (root / "results" / "tensorboard").glob("be-*/seed-42")
    events = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    scalars = events.Tags()["scalars"]
    losses = [event.value for event in events.Scalars("train/loss")]
    assert [event.step for event in events.Scalars("train/loss")] == list(range(1, training["report"]["steps"] + 1))
    assert losses == pytest.approx(_losses(training), abs=1e-5)
    assert [event.value for event in events.Scalars("dev/score")] == pytest.approx(
        training["report"]["dev_history"], abs=1e-6
    )
    assert events.Scalars("stsb/main_score")[0].value == pytest.approx(record["main_score"], abs=1e-4)
    assert {"stsb/ci_low", "stsb/ci_high"} <= set(scalars)
    low, high = events.Scalars("stsb/ci_low")[0].value, events.Scalars("stsb/ci_high")[0].value
    assert low <= record["main_score"] <= high
    text = events.Tensors("hyperparameters/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "spec.name" in text and "requested_budget.max_steps" in text


@needs("mlflow")
def test_mlflow_run_read_back_through_its_client(tracked_run):
    from mlflow.tracking import MlflowClient

    root, training, record = tracked_run
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("harness")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "be seed 42" and run.info.status == "FINISHED"
    assert run.data.params["spec.name"] == "be" and run.data.params["seed"] == "42"
    assert json.loads(run.data.params["applied_budget.steps"]) == training["report"]["steps"]
    history = client.get_metric_history(run.info.run_id, "train/loss")
    assert [metric.value for metric in sorted(history, key=lambda m: m.step)] == pytest.approx(
        _losses(training), abs=1e-5
    )
    assert run.data.metrics["stsb/main_score"] == pytest.approx(record["main_score"], abs=1e-6)
    assert run.data.metrics["stsb/ci_low"] <= record["main_score"] <= run.data.metrics["stsb/ci_high"]
    assert run.data.metrics["dev/score"] == pytest.approx(training["report"]["dev_history"][-1], abs=1e-6)


def _wandb_records(path: Path):
    """The records of a W&B offline run file (LevelDB's log format: 32 KiB blocks of CRC, length, type)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", "a W&B run file"
    block, position, pending = 32768, 7, b""
    while position + 7 <= len(data):
        left = block - position % block
        if left < 7:  # a block's tail too short for a header is padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if kind == 0 and length == 0:
            position += left
            continue
        chunk = data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # full, or the last part of a record
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending + chunk)
            pending = b""
            yield record
        else:  # first or middle part
            pending += chunk


@needs("wandb")
def test_wandb_offline_run_file_holds_the_config_steps_and_scores(tracked_run):
    root, training, record = tracked_run
    (run_file,) = (root / "wandb").glob("wandb/offline-run-*/run-*.wandb")
    records = list(_wandb_records(run_file))
    (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert run.display_name == "be seed 42" and run.run_group == "be"
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert config["spec"]["name"] == "be" and config["seed"] == 42
    history = [
        {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
        for r in records
        if r.WhichOneof("record_type") == "history"
    ]
    losses = [row["train/loss"] for row in history if "train/loss" in row]
    assert losses == pytest.approx(_losses(training), abs=1e-5)
    (scores,) = [row for row in history if "stsb/main_score" in row]
    assert scores["stsb/main_score"] == pytest.approx(record["main_score"], abs=1e-6)
    assert scores["stsb/ci_low"] <= record["main_score"] <= scores["stsb/ci_high"]


def test_the_record_names_the_trackers_but_the_cell_key_does_not_change(tracked_run, tmp_path):
    root, training, record = tracked_run
    assert record["log_to"] == INSTALLED
    assert training["curves"]["fits"][0]["steps"] == training["report"]["steps"]


class Raising:
    """A tracker that fails on its third call (mid-training)."""

    name = "raising"

    def __init__(self) -> None:
        self.calls = 0

    def _call(self) -> None:
        self.calls += 1
        if self.calls == 3:
            raise RuntimeError("tracking server went away")

    def start(self, run_name, group, params, key) -> None:
        self._call()

    def add_params(self, params) -> None:
        self._call()

    def log(self, values, step) -> None:
        self._call()

    def finish(self) -> None:
        self._call()


def test_a_tracker_that_raises_mid_run_is_logged_once_and_changes_no_result(tmp_path, tiny_bert, caplog, monkeypatch):
    from harness.executors import make_executor
    from harness.matrix import ModelEntry
    from harness.registry import default_registry
    from harness.run.config import RunConfig
    from harness.run.driver import Run

    monkeypatch.setattr("harness.trackers.installed", lambda name: True)  # the raising stand-in replaces it
    registry = default_registry()
    raising = Raising()
    records = {}
    for name, trackers in (("plain", ()), ("raising", ("tensorboard",))):
        config = RunConfig(
            models=[ModelEntry("be")],
            tasks=["stsb"],
            profile="smoke",
            backbone=str(tiny_bert),
            train_on="stsb",
            results_dir=tmp_path / name,
            progress=False,
            device="cpu",
            log_to=trackers,
        )
        run = Run(registry, config)
        if trackers:
            run.trackers = RunTrackers(trackers, tmp_path, factory=lambda name, results_dir: raising)
        with caplog.at_level(logging.WARNING, logger="harness.trackers"):
            outcomes = run.run(make_executor("local"))
        assert [outcome.status for outcome in outcomes] == ["ok"]
        (path,) = (tmp_path / name).glob("be-*/seed-42/stsb.json")
        records[name] = json.loads(path.read_text())
    failures = [r for r in caplog.records if "tracker" in r.getMessage() and "failed" in r.getMessage()]
    assert len(failures) == 1 and "tracking server went away" in failures[0].getMessage()
    assert raising.calls == 3  # dropped after its failure: never called again
    assert records["raising"]["scores"] == records["plain"]["scores"]
    # log_to names only the trackers that worked (it once named the one that failed in training), and is no
    # property of the result: the same model key and cell hash
    assert "log_to" not in records["raising"] and "log_to" not in records["plain"]
    for field in ("model_key", "config_hash", "main_score"):
        assert records["raising"][field] == records["plain"][field]
    (plain,) = (tmp_path / "plain" / "checkpoints").glob("be-*/seed-42/training.json")
    (raised,) = (tmp_path / "raising" / "checkpoints").glob("be-*/seed-42/training.json")
    assert json.loads(plain.read_text())["curves"] == json.loads(raised.read_text())["curves"]


def test_log_to_values_and_refusals(monkeypatch):
    assert parse_log_to(None) == () and parse_log_to("none") == () and parse_log_to("") == ()
    with pytest.raises(InvalidOptionError, match="unknown tracker 'tensorbord'; choose from tensorboard, mlflow"):
        parse_log_to("tensorbord")
    monkeypatch.setattr("harness.trackers.installed", lambda name: False)
    with pytest.raises(InvalidOptionError, match=r"--log-to mlflow needs the mlflow package: pip install "):
        parse_log_to("mlflow")
    assert parse_log_to("all") == ()


def test_flag_then_matrix_then_environment(monkeypatch, tmp_path):
    from harness.cli.values import log_to

    monkeypatch.setattr("harness.trackers.installed", lambda name: True)
    monkeypatch.setenv("HARNESS_LOG_TO", "wandb")
    assert log_to("tensorboard,mlflow", ["wandb"]) == ("tensorboard", "mlflow")
    assert log_to(None, ["mlflow"]) == ("mlflow",)
    assert log_to(None, None) == ("wandb",)
    monkeypatch.setenv("HARNESS_LOG_TO", "nope")
    with pytest.raises(InvalidOptionError, match="HARNESS_LOG_TO: unknown tracker 'nope'"):
        log_to(None, None)
    from harness.matrix import load_matrix

    matrix = tmp_path / "m.yaml"
    matrix.write_text("models: [be]\ntasks: [stsb]\nlog_to: [tensorboard]\n")
    assert load_matrix(matrix)["log_to"] == ["tensorboard"]
    matrix.write_text("models: [be]\ntasks: [stsb]\nlog_to: {a: 1}\n")
    with pytest.raises(Exception, match="log_to must be tracker names"):
        load_matrix(matrix)


def test_no_trackers_do_nothing():
    trackers = RunTrackers()
    assert not trackers and trackers.training("k", 1, "label", {}) is None
    trackers.cell({"status": "ok"}, None)
    trackers.finish()


def test_a_failing_trackers_warning_is_one_line_and_the_record_names_only_working_trackers(tmp_path, caplog):
    """MLflow's errors span lines (the server's reply); the warning is one line, and a tracker that failed
    to set up is not named by the records (``working``), while one that works is."""

    class Failing(Raising):
        name = "mlflow"

        def start(self, run_name, group, params, key) -> None:
            raise RuntimeError("API request to http://mlflow:5000 failed\n\nResponse body:\n  <html>502</html>")

    def make(name, results_dir):
        if name == "wandb":
            raise RuntimeError("wandb: login needed\nrun `wandb login`")
        if name == "mlflow":
            return Failing()
        working = Raising()
        working.name = name
        return working

    trackers = RunTrackers(("tensorboard", "mlflow", "wandb"), tmp_path, factory=make)
    with caplog.at_level(logging.WARNING, logger="harness.trackers"):
        trackers.open("be-1", 42, "be", {})
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 2 and all("\n" not in message for message in warnings)
    assert "failed to start a run (RuntimeError: API request to http://mlflow:5000 failed Response body:" in warnings[1]
    assert trackers.working(["tensorboard", "mlflow", "wandb"]) == ["tensorboard"]
