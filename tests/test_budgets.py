"""Training budgets per method (profiles), per matrix entry and from ``--set``; they enter the spec hash only when
they differ from the profile's own values."""
from __future__ import annotations

import pytest
import yaml

from harness.errors import DataFileError, HarnessError
from harness.matrix import load_matrix
from harness.profiles import get_profile, resolve_budget
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
    assert resolve_budget(quick, registry.model("ce").budgets, {"epochs": 1}) == plain.budget  # equal to the profile: no key


def test_matrix_entries_set_their_own_budget(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({
        "tasks": ["stsb"], "budget": {"epochs": 3},
        "models": ["be", {"model": "ce", "train_on": "stsb", "epochs": 5, "max_steps": 100, "batch_size": 8,
                          "learning_rate": "3e-5"}],
    }))
    matrix = load_matrix(path)
    be, ce = matrix["models"]
    assert be.budget == {"epochs": 3}
    assert ce.budget == {"epochs": 5, "max_steps": 100, "batch_size": 8, "learning_rate": pytest.approx(3e-5)}


@pytest.mark.parametrize("entry, message", [
    ({"model": "ce", "epochs": "many"}, "epochs expects a int"),
    ({"model": "ce", "epochs": 0}, "epochs must be positive"),
    ({"model": "ce", "warmup": 3}, "unknown key .warmup."),
    ({"model": "ce", "epoch": 3}, "Did you mean: epochs"),
])
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

    config = RunConfig(models=[ModelEntry("ce", "stsb", budget={"epochs": 2}), ModelEntry("cbe", "stsb")],
                       tasks=["stsb"], results_dir=tmp_path, budget={"epochs": 3, "max_steps": 10})
    plan = Run(registry, config).plan()
    ce, cbe = (planned.spec for planned in plan.models)
    assert ce.budget == {"epochs": 2, "max_steps": 10, "max_train_examples": None}  # the entry's own wins
    assert cbe.budget == {"epochs": 3, "max_steps": 10, "max_train_examples": None}
    assert ce.budget_overrides == {"epochs": 2, "max_steps": 10}


def test_training_precision_is_a_budget_key_in_the_spec_identity(registry):
    quick = get_profile("quick")
    plain = resolve_model_spec(registry, "cbe", quick, None, "stsb")
    auto = resolve_model_spec(registry, "cbe", quick, None, "stsb", {"precision": "auto"})
    bf16 = resolve_model_spec(registry, "cbe", quick, None, "stsb", {"precision": "bf16"})
    assert auto.hash == plain.hash and "precision" not in plain.budget  # the default keeps every stored result
    assert bf16.budget["precision"] == "bf16" and bf16.hash != plain.hash
    assert bf16.requested_budget["precision"] == "bf16" and plain.requested_budget["precision"] == "auto"
    with pytest.raises(HarnessError, match="fp8.*precision.*auto, fp32, bf16, fp16"):
        resolve_model_spec(registry, "cbe", quick, None, "stsb", {"precision": "fp8"})
