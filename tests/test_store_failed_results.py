"""Never a made-up score: a NaN, infinite or undefined result (constant predictions, NaN gold scores or vectors,
diverging training, a plugin that returns the wrong rows or raises) is a failed cell with its reason, shown as
failed, never ranked; the rest of the matrix runs (docs/guide/store.md, "Never a made-up score")."""

from __future__ import annotations

import numpy as np
import pytest

import harness
from harness.store import Store
from store_toys import SMOKE, TOY_ROWS, file_toy_run, nan_run, only_record, sts_data, toy_run, write_toy_data


def test_correlations_refuse_input_they_are_undefined_for():
    from harness.metrics import ConstantPredictionError, ScoreError, pearson, spearman

    assert spearman([1, 2, 3], [1, 2, 4]) == pytest.approx(1.0)
    with pytest.raises(ConstantPredictionError, match="same score"):
        spearman([0.5, 0.5, 0.5], [1, 2, 3])
    with pytest.raises(ScoreError, match="predicted scores are NaN or infinite"):
        pearson([0.1, float("nan"), 0.3], [1, 2, 3])
    with pytest.raises(ScoreError, match="gold scores are NaN"):
        spearman([0.1, 0.2, 0.3], [1, float("nan"), 3])
    with pytest.raises(ScoreError, match="at least 2 scored pairs, got 0"):
        spearman([], [])


def test_constant_predictions_are_a_failed_cell_with_the_reason(tmp_path):
    write_toy_data(tmp_path / "data")
    outcomes, _ = toy_run(tmp_path, models=("toy-constant",))
    assert [o.status for o in outcomes] == ["failed"]
    record = only_record(tmp_path / "results")
    assert record["status"] == "failed" and "same score" in record["message"] and "main_score" not in record


def test_nan_score_from_a_task_is_a_failed_cell(tmp_path):
    write_toy_data(tmp_path / "data")
    outcomes, _ = toy_run(tmp_path, tasks=("toy-nan",))
    assert outcomes[0].status == "failed" and "non-finite scores (spearman=nan)" in outcomes[0].message
    assert only_record(tmp_path / "results")["status"] == "failed"


def test_a_task_that_finds_the_model_incompatible_fails_its_cell_not_the_run(tmp_path):
    write_toy_data(tmp_path / "data")
    outcomes, _ = toy_run(tmp_path, tasks=("toy-incompatible", "toy-pairs"))
    assert [o.status for o in outcomes] == ["failed", "ok"]
    assert "needs a first-stage retriever" in outcomes[0].message


def test_nan_gold_score_in_a_users_file_is_a_failed_cell(tmp_path):
    rows = list(TOY_ROWS)
    rows[2] = (rows[2][0], rows[2][1], "nan")
    write_toy_data(tmp_path / "data", rows)
    outcomes, _ = toy_run(tmp_path)
    assert outcomes[0].status == "failed" and "1 of 6 gold scores are NaN" in outcomes[0].message


def test_diverging_training_stops_and_is_stored_as_failed(run_cli, tmp_path, tiny_bert):
    from harness.leaderboard import collect_tables

    results = tmp_path / "results"
    code, out, err = run_cli(
        "run",
        "--models",
        "be:lr=1e6",
        "--tasks",
        "stsb",
        "--train-on",
        "stsb",
        *SMOKE,
        "--backbone",
        tiny_bert,
        "--results",
        results,
    )
    assert code == 1, err
    assert "Traceback" not in err and "training loss became nan at step" in err and "Lower the learning rate" in err
    assert "0 cells computed" in out and "1 failed" in out
    record = only_record(results)
    assert record["status"] == "failed" and "training loss became nan" in record["message"]
    assert not (results / "checkpoints").exists() or not list((results / "checkpoints").rglob("*.safetensors"))
    (table,) = collect_tables(Store(results), include_samples=True)  # a smoke record: computed on a sample
    (row,) = table.rows
    assert table.cell_text(row, "stsb") == "failed" and table.ranked()[0][0] is None  # never ranked


def test_nan_training_labels_are_a_data_problem_not_a_learning_rate(run_cli, tmp_path):
    data_dir = sts_data(tmp_path)
    train = data_dir / "stsb" / "senteval_tokenized" / "sts-train.csv"
    rows = [line.split("\t") for line in train.read_text().splitlines()]
    for row in rows[::3]:  # enough of them for the profile's subsample of the train split to meet some
        row[4] = "nan"
    train.write_text("".join("\t".join(row) + "\n" for row in rows))
    code, out, err = run_cli(
        "validate", "--models", "be", "--tasks", "sts12", "--train-on", "stsb", "--data-dir", data_dir
    )
    assert code == 2 and "train labels are NaN or infinite" in err and "the learning rate is not the cause" in err, err


def test_a_failed_cell_shows_failed_in_the_run_summary_not_a_dash(tmp_path):
    from harness.run.driver import summary_rows

    write_toy_data(tmp_path / "data")
    outcomes, _ = toy_run(tmp_path, models=("toy-constant", "toy-embedder"))
    _, rows = summary_rows(outcomes)
    assert [row[1] for row in rows][0] == "failed" and rows[1][1] not in ("failed", "-")  # "-" means not run


def test_run_summary_says_how_long_the_whole_run_took():
    from harness.cli.run import wall_time_text

    assert wall_time_text(41.26) == "41.3 s" and wall_time_text(725.4) == "12 min 5 s"


def test_a_nan_vector_fails_its_cell_instead_of_becoming_a_similarity_of_0(tmp_path):
    write_toy_data(tmp_path / "data")
    (outcome,) = nan_run(tmp_path, "toy-nan-row")
    assert outcome.status == "failed", outcome
    assert "returned 1 of 6 vectors with NaN or infinite values" in outcome.message
    assert only_record(tmp_path / "results")["status"] == "failed"


def test_every_similarity_path_refuses_nan_vectors():
    from harness.evaluation.maxsim import maxsim_pairs
    from harness.evaluation.search import cosine_top_k
    from harness.metrics import NonFiniteVectorsError

    good, bad = np.ones((2, 4)), np.array([[1.0, 0, 0, 0], [np.nan, 0, 0, 0]])
    assert harness.cosine_rows(np.zeros((1, 4)), np.ones((1, 4))).tolist() == [0.0]  # a zero vector stays 0
    for compute in (
        lambda: harness.cosine_rows(good, bad),
        lambda: harness.maxsim(bad, good),
        lambda: cosine_top_k(good, bad, 1),
        lambda: maxsim_pairs([good, bad], [good, good]),
        lambda: maxsim_pairs([good, bad], [good, good], engine="sparse"),
    ):
        with pytest.raises(NonFiniteVectorsError, match=r"1 of \d vectors with NaN"):
            compute()


def test_nan_vectors_are_reported_as_nan_not_as_dropout_or_a_collapse(tmp_path):
    write_toy_data(tmp_path / "data")
    (outcome,) = nan_run(tmp_path, "toy-all-nan")
    assert outcome.status == "failed" and "NaN or infinite values" in outcome.message, outcome.message
    assert "dropout" not in outcome.message and "collapsed" not in outcome.message
    assert not list((tmp_path / "results" / "cache").glob("batch-probe/*"))  # not the plugin's verdict: not cached


def test_a_nan_gold_score_keeps_a_good_stored_result(tmp_path, caplog):
    data_file = write_toy_data(tmp_path / "data")
    (computed,), _ = toy_run(tmp_path)
    data_file.write_text(data_file.read_text().replace("\t4.8\n", "\tnan\n"))
    with caplog.at_level("ERROR"):
        (outcome,), _ = toy_run(tmp_path)
    assert outcome.status == "failed" and "gold scores are NaN" in outcome.message
    assert "stored ok result (computed from the data as it was) is kept" in caplog.text
    record = only_record(tmp_path / "results")
    assert record["status"] == "ok" and record["main_score"] == computed.main_score


def test_a_plugin_with_wrong_rows_objects_or_an_exception_fails_its_cell_only(tmp_path):
    write_toy_data(tmp_path / "data")
    outcomes, _ = file_toy_run(
        tmp_path, models=("toy-few-rows", "toy-raises", "toy-objects", "toy-embedder"), tasks=("toy-pairs",)
    )
    by_model = {o.spec.name: o for o in outcomes}
    assert [by_model[m].status for m in ("toy-few-rows", "toy-raises", "toy-objects", "toy-embedder")] == [
        "failed",
        "failed",
        "failed",
        "ok",
    ]
    assert "returned an array of shape (11, 64) for 12 texts" in by_model["toy-few-rows"].message
    assert (
        "raised RuntimeError: the plugin's server went away at store_toys.py" in by_model["toy-raises"].message
        and "a bug in the model or task plugin" in by_model["toy-raises"].message
    )
    assert "returned an array of object values, not numbers" in by_model["toy-objects"].message
    assert all("\n" not in o.message for o in outcomes)


def test_checked_vectors_accepts_numbers_and_names_what_is_wrong():
    from harness import ModelOutputError, checked_vectors

    assert checked_vectors([[1, 2], [3, 4]], 2).dtype == np.float64
    with pytest.raises(ModelOutputError, match=r"shape \(3,\) for 3 texts"):
        checked_vectors([1.0, 2.0, 3.0], 3)
    with pytest.raises(ModelOutputError, match="not an array of numbers"):
        checked_vectors([[1.0], "ab"], 2)
