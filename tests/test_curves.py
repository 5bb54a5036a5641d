"""Training curves (harness.curves): bounded per-step series, what fit() records (loss, each term, dev scores, each
fit of seed trials), training.json keeping them beside its old fields, and load_training_curves' long frame."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import harness
from harness.curves import CURVE_COLUMNS, MAX_POINTS, Series, TrainingCurves, recording
from harness.training import TrainConfig, fit, fit_with_seed_trials


def test_a_series_keeps_every_step_then_means_over_doubling_windows():
    series = Series(max_points=16)
    for step in range(1, 11):
        series.add(step, float(step))
    assert series.as_record()["step"] == list(range(1, 11)) and series.stride == 1
    for step in range(11, 1001):
        series.add(step, float(step))
    record = series.as_record(last_step=1000)
    assert len(record["step"]) <= 16 and record["stride"] == 64
    # each point is the mean of the steps of its window, at the window's last step
    previous = 0
    for step, value in zip(record["step"], record["value"]):
        assert value == pytest.approx((previous + 1 + step) / 2)
        previous = step
    assert record["step"][-1] == 1000  # the partial last window is kept, not dropped


def test_the_default_bound_is_stated():
    assert MAX_POINTS == 1024


class Terms(nn.Module):
    """A combined objective's shape: the loss, and its terms of the step in ``last_terms``."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([2.0]))
        self.last_terms: dict[str, float] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = (self.weight * x).pow(2).mean(), self.weight.abs().mean()
        self.last_terms = {"first": float(first.detach()), "second": float(second.detach())}
        return first + second


def _collate(rows):
    return {"x": torch.tensor(rows, dtype=torch.float32)}


def test_fit_records_each_step_its_terms_and_dev_scores_into_the_current_recorder():
    curves = TrainingCurves()
    config = TrainConfig(epochs=2, batch_size=2, progress=False, learning_rate=0.1)
    with recording(curves):
        report = fit(Terms(), [1.0, 2.0, 3.0, 4.0], _collate, config, dev_score=lambda: 0.5)
    (record,) = curves.as_record()["fits"]
    assert record["steps"] == report.steps == 4
    assert set(record["loss"]) == {"loss", "first", "second"}
    assert record["loss"]["loss"]["step"] == [1, 2, 3, 4]
    for first, second, total in zip(*(record["loss"][t]["value"] for t in ("first", "second", "loss"))):
        assert first + second == pytest.approx(total, abs=1e-5)
    assert record["dev"] == {"stride": 1, "step": [2, 4], "value": [0.5, 0.5]}  # after each epoch


class Constant(nn.Module):
    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.tensor(value))

    def forward(self, step) -> torch.Tensor:
        return self.value * 1.0


def test_a_combined_objective_says_each_term_of_its_last_step():
    from harness.nn.objectives import ObjectiveSum

    combined = ObjectiveSum(nn.Identity(), [("simcse", Constant(2.0), 1.0), ("tsdae", Constant(4.0), 0.5)])
    combined.train()
    total = combined()
    assert float(total.detach()) == 4.0 and combined.last_terms == {"simcse": 2.0, "tsdae": 4.0}
    alone = ObjectiveSum(nn.Identity(), [("simcse", Constant(2.0), 1.0)])
    alone.train()
    alone()
    assert alone.last_terms == {}  # one term is the step's loss itself


def test_fit_outside_a_run_training_records_nothing():
    with recording(TrainingCurves()) as curves:
        pass
    fit(Terms(), [1.0, 2.0], _collate, TrainConfig(progress=False))  # e.g. a probe's fit during evaluation
    assert curves.fits == []


def test_seed_trials_are_one_fit_each_with_their_seed():
    curves = TrainingCurves()
    config = TrainConfig(epochs=1, batch_size=2, progress=False, seed=7)
    with recording(curves):
        report = fit_with_seed_trials(Terms(), [1.0, 2.0, 3.0], _collate, config, lambda: 0.1, None, trials=3)
    fits = curves.as_record()["fits"]
    assert [f["fit"] for f in fits] == [0, 1, 2]
    assert [f["seed"] for f in fits] == [trial["seed"] for trial in report.seed_trials]


def _checkpoint(root, key, seed, label, train_on, curves, content=None):
    """A checkpoint built as the runner builds one (COMPLETE names training.json's sha256): curves are read only
    from a checkpoint that verifies."""
    from harness.checkpoints import build_checkpoint

    folder = root / "checkpoints" / key / f"seed-{seed}"
    record = {"spec": {"label": label, "name": label.split(":")[0], "hash": "h" * 64, "train_on": train_on}}
    record.update(seed=seed, report={"steps": 2})
    if curves is not None:
        record["curves"] = curves
    text = json.dumps(record) if content is None else content
    return build_checkpoint(folder, lambda built: (built / "training.json").write_text(text))


def test_load_training_curves_is_a_long_frame_with_filters_and_reports_what_it_could_not_read(tmp_path, caplog):
    recorder = TrainingCurves()
    first = recorder.start_fit(42, "training")
    first.step(1, {"loss": 2.0, "mlm": 1.5})
    first.step(2, {"loss": 1.0, "mlm": 0.5})
    first.dev_score(2, 0.7)
    _checkpoint(tmp_path, "be-aaa", 42, "be", "stsb", recorder.as_record())
    _checkpoint(tmp_path, "be-aaa", 43, "be", "stsb", recorder.as_record())
    _checkpoint(tmp_path, "simcse-bbb", 42, "simcse", "sickr", recorder.as_record())
    _checkpoint(tmp_path, "old-ccc", 42, "old", "stsb", None)
    damaged = _checkpoint(tmp_path, "bad-ddd", 42, "bad", "stsb", None, content="{not json") / "training.json"
    frame = harness.load_training_curves(tmp_path)
    assert list(frame.columns) == list(CURVE_COLUMNS)
    assert len(frame) == 3 * 5 and set(frame["kind"]) == {"loss", "dev"}
    assert frame.attrs["skipped"][0][0] == str(damaged) and "cannot be read" in caplog.text
    assert frame.attrs["without_curves"] == [str(tmp_path / "checkpoints/old-ccc/seed-42/training.json")]
    be = harness.load_training_curves(tmp_path, models="be", train_on=["stsb"], seeds=[43])
    assert set(be["model_key"]) == {"be-aaa"} and set(be["seed"]) == {43}
    dev = be[be["kind"] == "dev"]
    assert dev[["step", "term", "value"]].values.tolist() == [[2, "dev", 0.7]]
    with pytest.raises(FileNotFoundError, match="no such result store"):
        harness.load_training_curves(tmp_path / "nowhere")


def test_a_trained_checkpoint_keeps_its_curves_and_still_verifies(run_cli, tmp_path, tiny_bert):
    from harness.checkpoints import trained_checkpoint_problem

    results = tmp_path / "results"
    common = ("run", "--models", "be", "--train-on", "stsb", "--tasks", "stsb", "--profile", "smoke")
    code, out, err = run_cli(*common, "--no-progress", "--backbone", tiny_bert, "--results", results)
    assert code == 0, err
    (training_json,) = (results / "checkpoints").glob("be-*/seed-42/training.json")
    training = json.loads(training_json.read_text())
    # the fields that were there before curves are all still there
    assert {"spec", "seed", "source_checksum", "train_examples", "requested_budget", "report", "training_data"} <= set(
        training
    )
    (fit_record,) = training["curves"]["fits"]
    assert fit_record["steps"] == training["report"]["steps"] == len(fit_record["loss"]["loss"]["value"])
    assert fit_record["dev"]["value"] == pytest.approx(training["report"]["dev_history"])
    assert trained_checkpoint_problem(training_json.parent, spec_hash=training["spec"]["hash"], seed=42) is None
    code, out, err = run_cli(*common, "--no-progress", "--backbone", tiny_bert, "--results", results, "--overwrite")
    assert code == 0 and "training be" in out  # retrained over it: the checkpoint is rebuilt with its curves
    frame = harness.load_training_curves(results)
    assert set(frame["term"]) == {"loss", "dev"} and frame["step"].max() == training["report"]["steps"]
    # the HTML leaderboard links the row to its curves (the store holds the checkpoint)
    code, out, err = run_cli(
        "leaderboard", "--results", results, "--formats", "html", "--include-samples", "--output", tmp_path / "board"
    )
    assert code == 0, err
    (page,) = (tmp_path / "board").glob("*.html")
    assert 'href="../results/checkpoints/be-' in page.read_text() and ">curves s42</a>" in page.read_text()
    code, out, err = run_cli("plot", "training", "--results", results, "--output", tmp_path / "plots")
    assert code == 0 and (tmp_path / "plots" / "training-curves.png").stat().st_size > 10_000, err


def test_plot_options_of_training_are_refused_for_another_plot(run_cli, tmp_path):
    code, out, err = run_cli("plot", "leaderboard", "--models", "be", "--output", tmp_path)
    assert code != 0 and "--models: only `harness plot training` takes them" in err
    code, out, err = run_cli("plot", "training", "--results", tmp_path, "--models", "be")
    assert code != 0 and f"no training curves in {tmp_path} for --models be" in err


def test_plot_training_skips_curves_with_text_values_and_refuses_bad_seeds(run_cli, tmp_path):
    """A training.json whose curve values are texts is skipped with one line (before: a TypeError inside
    the plot), and `--seeds abc` is refused in one line (before: a ValueError traceback)."""
    recorder = TrainingCurves()
    fit = recorder.start_fit(42, "training")
    fit.step(1, {"loss": 2.0})
    fit.step(2, {"loss": 1.0})
    _checkpoint(tmp_path, "be-aaa", 42, "be", "stsb", recorder.as_record())
    texts = recorder.as_record()
    texts["fits"][0]["loss"]["loss"]["value"] = ["high", "low"]
    edited = _checkpoint(tmp_path, "be-bbb", 43, "be", "stsb", texts) / "training.json"
    code, out, err = run_cli("plot", "training", "--results", tmp_path, "--output", tmp_path / "plots")
    assert code == 0, err
    assert f"skipped {edited}: fit 0 loss 'loss': a step or value is not a number" in out
    assert (tmp_path / "plots" / "training-curves.png").is_file()
    code, out, err = run_cli("plot", "training", "--results", tmp_path, "--seeds", "abc", "--output", tmp_path)
    assert code == 2 and "--seeds takes comma-separated integers" in err and len(err.strip().splitlines()) == 1
