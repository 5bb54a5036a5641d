"""Training budgets per method (profiles), per matrix entry and from ``--set``; they enter the spec hash only when
they differ from the profile's own values."""

from __future__ import annotations

import pytest
import yaml

from harness.errors import DataFileError, HarnessError
from harness.matrix import load_matrix
from harness.profiles import format_budget, get_profile, resolve_budget
from harness.spec import resolve_model_spec


def test_untrained_and_unbudgeted_specs_keep_their_identity(registry):
    quick = get_profile("quick")
    be = resolve_model_spec(registry, "be", quick)
    assert be.budget == {} and "budget" not in be.identity()
    smoke = resolve_model_spec(registry, "be", get_profile("smoke"), None, "stsb")
    assert smoke.budget == {} and "budget" not in smoke.identity()  # the smoke profile has no per-method budget


def test_quick_profile_gives_pair_scorers_their_own_budget(registry):
    quick = get_profile("quick")
    ce = resolve_model_spec(registry, "ce", quick, None, "stsb")
    cbe = resolve_model_spec(registry, "cbe", quick, None, "stsb")
    assert ce.budget == {"max_steps": 360, "max_train_examples": None}
    assert cbe.budget == {"max_steps": None, "max_train_examples": None, "epochs": 2}
    assert ce.identity()["budget"] == ce.budget
    trained = quick.with_budget(ce.budget)
    assert trained.max_train_examples is None and trained.max_steps == 360 and trained.name == "quick"


def test_overrides_enter_the_spec_hash(registry):
    quick = get_profile("quick")
    plain = resolve_model_spec(registry, "ce", quick, None, "stsb")
    five = resolve_model_spec(registry, "ce", quick, None, "stsb", {"epochs": "5", "learning_rate": "3e-5"})
    assert five.budget["epochs"] == 5 and five.budget["learning_rate"] == pytest.approx(3e-5)
    assert five.hash != plain.hash
    same = resolve_model_spec(registry, "ce", quick, None, "stsb", {"epochs": 5, "learning_rate": 3e-5})
    assert same.hash == five.hash
    assert (
        resolve_budget(quick, registry.model("ce").budgets, {"epochs": 1}) == plain.budget
    )  # equal to the profile: no key


def test_matrix_entries_set_their_own_budget(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "tasks": ["stsb"],
                "budget": {"epochs": 3},
                "models": [
                    "be",
                    {
                        "model": "ce",
                        "train_on": "stsb",
                        "epochs": 5,
                        "max_steps": 100,
                        "batch_size": 8,
                        "learning_rate": "3e-5",
                    },
                ],
            }
        )
    )
    matrix = load_matrix(path)
    be, ce = matrix["models"]
    assert be.budget == {"epochs": 3}
    assert ce.budget == {"epochs": 5, "max_steps": 100, "batch_size": 8, "learning_rate": pytest.approx(3e-5)}


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"model": "ce", "epochs": "many"}, "epochs expects a int"),
        ({"model": "ce", "epochs": 0}, "epochs must be positive"),
        ({"model": "ce", "warmup": 3}, "unknown key .warmup."),
        ({"model": "ce", "epoch": 3}, "Did you mean: epochs"),
    ],
)
def test_bad_budgets_in_a_matrix_are_refused_at_plan_time(tmp_path, entry, message):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"tasks": ["stsb"], "models": [entry]}))
    with pytest.raises(DataFileError, match=message):
        load_matrix(path)


def test_set_on_the_command_line_reaches_every_trained_spec(registry):
    from argparse import Namespace

    from harness.cli.values import budget_set as _budget_set

    assert _budget_set(["epochs=5", "max_train_examples=none"]) == {"epochs": 5, "max_train_examples": None}
    with pytest.raises(HarnessError, match="unknown budget key 'warmup'"):
        _budget_set(["warmup=3"])
    with pytest.raises(HarnessError, match="write --set KEY=VALUE"):
        _budget_set(["epochs"])
    del Namespace


def test_runner_plans_entry_and_set_budgets_into_the_spec(registry, tmp_path):
    from harness.matrix import ModelEntry
    from harness.run.config import RunConfig
    from harness.run.driver import Run

    config = RunConfig(
        models=[ModelEntry("ce", "stsb", budget={"epochs": 2}), ModelEntry("cbe", "stsb")],
        tasks=["stsb"],
        results_dir=tmp_path,
        budget={"epochs": 3, "max_steps": 10},
    )
    plan = Run(registry, config).plan()
    ce, cbe = (planned.spec for planned in plan.models)
    assert ce.budget == {"epochs": 2, "max_steps": 10, "max_train_examples": None}  # the entry's own wins
    assert cbe.budget == {"epochs": 3, "max_steps": 10, "max_train_examples": None}
    assert ce.budget_overrides == {"epochs": 2, "max_steps": 10}


def test_training_precision_is_a_budget_key_outside_the_spec_identity(registry):
    """`make run`'s ``--set precision=bf16`` trains the models the README's next commands (no --set)
    find: precision is requested and recorded, but does not split a spec's identity."""
    quick = get_profile("quick")
    plain = resolve_model_spec(registry, "cbe", quick, None, "stsb")
    auto = resolve_model_spec(registry, "cbe", quick, None, "stsb", {"precision": "auto"})
    bf16 = resolve_model_spec(registry, "cbe", quick, None, "stsb", {"precision": "bf16"})
    assert auto.hash == plain.hash == bf16.hash and "precision" not in bf16.budget
    assert bf16.requested_budget["precision"] == "bf16" and plain.requested_budget["precision"] == "auto"
    with pytest.raises(HarnessError, match="fp8.*precision.*auto, fp32, bf16, fp16"):
        resolve_model_spec(registry, "cbe", quick, None, "stsb", {"precision": "fp8"})


def test_group_by_length_is_a_budget_key_whose_opt_out_is_a_new_spec(registry):
    """Length-grouped batches are the loop's default: asking for them keeps the spec (and every published key);
    ``group_by_length=false`` is another training, so another spec; a value that is not true/false is refused."""
    quick = get_profile("quick")
    plain = resolve_model_spec(registry, "cbe", quick, None, "stsb")
    grouped = resolve_model_spec(registry, "cbe", quick, None, "stsb", {"group_by_length": "true"})
    random_batches = resolve_model_spec(registry, "cbe", quick, None, "stsb", {"group_by_length": "false"})
    assert grouped.hash == plain.hash and "group_by_length" not in grouped.budget
    assert random_batches.hash != plain.hash and random_batches.budget["group_by_length"] is False
    assert plain.requested_budget["group_by_length"] is True
    assert random_batches.requested_budget["group_by_length"] is False
    assert "group_by_length" not in quick.as_record()  # profile records (and cache keys) made before it stay
    assert quick.with_budget({"group_by_length": False}).as_record()["group_by_length"] is False
    assert format_budget({"epochs": 2, "group_by_length": False}) == "epochs=2 group_by_length=false"
    with pytest.raises(HarnessError, match="group_by_length expects true or false, got 'maybe'"):
        resolve_model_spec(registry, "cbe", quick, None, "stsb", {"group_by_length": "maybe"})


@pytest.mark.parametrize(
    "requested, applied, reused",
    [
        ("auto", "bf16", True),
        ("auto", "fp32", True),
        ("bf16", "bf16", True),
        ("fp32", "bf16", False),
        ("bf16", "auto", False),
        ("bf16", None, True),
    ],
)
def test_a_stored_record_answers_auto_and_its_own_precision_only(requested, applied, reused):
    from harness.record import reuse_problem

    record = {
        "status": "ok",
        "model": {"hash": "h"},
        "task": {"version": "1"},
        "dataset_checksum": "d",
        "budget": {"requested": {}, "applied": {} if applied is None else {"precision": applied}},
    }
    why = reuse_problem(
        record, model_hash="h", task_version="1", dataset_checksum="d", requested_budget={"precision": requested}
    )
    assert (why is None) is reused
    if not reused:
        assert why == f"it was trained under precision {applied}, this run asks for {requested}"


def test_bf16_models_answer_a_run_without_set_and_an_explicit_fp32_retrains(tiny_bert, tmp_path):
    """End to end: the main job's ``--set precision=bf16`` cells answer the same command without it (the
    record says bf16 trained it); ``--set precision=fp32`` retrains rather than reusing a bf16 model."""
    import json

    from harness.testing import run_harness

    def run(*extra):
        return run_harness(
            "run",
            "--models",
            "ce",
            "--backbone",
            tiny_bert,
            "--tasks",
            "stsb",
            "--profile",
            "smoke",
            "--train-on",
            "stsb",
            "--set",
            "max_steps=2",
            "--results",
            tmp_path,
            "--no-progress",
            *extra,
        )

    assert run("--set", "precision=bf16").exit_code == 0
    again = run()
    assert again.exit_code == 0 and "0 cells computed, 1 from the store" in again.stdout
    (path,) = tmp_path.glob("ce-*/seed-42/stsb.json")
    record = json.loads(path.read_text())
    assert record["budget"]["applied"]["precision"] == "bf16" and "precision" not in record["model"]["budget"]
    fp32 = run("--set", "precision=fp32")
    assert fp32.exit_code == 0 and "1 cells computed" in fp32.stdout
    assert "trained under precision bf16, this run asks for fp32" in fp32.stdout + fp32.stderr
    assert json.loads(path.read_text())["budget"]["applied"]["precision"] == "fp32"
