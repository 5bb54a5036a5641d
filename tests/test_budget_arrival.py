"""Budgets that always arrive: every registered trainable built-in model, the objective
combinations and a recipe with its inner models train with exactly the budget they were asked for (smoke profile,
tiny backbone), the record says so, and a key a method cannot honour is refused at plan time."""

from __future__ import annotations

import json

import pytest

from harness.capabilities import TRAINABLE
from harness.errors import InvalidOptionError
from harness.matrix import ModelEntry
from harness.profiles import budget_differences, format_budget, get_profile, requested_budget
from harness.run.config import RunConfig
from harness.run.driver import Run
from harness.spec import resolve_model_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Every value differs from the smoke profile's (epochs 1, batch 8, 8 steps, 64 examples), so a budget that does not
# arrive shows. Two epochs of 24 examples at batch 4 would be 12 steps; max_steps stops them at 7.
REQUEST = {"epochs": 2, "batch_size": 4, "max_steps": 7, "learning_rate": 1e-4, "max_train_examples": 24}
# Where the walk trains a model; the others use their default source or the first task offering their data.
SOURCES = {"classifier": "20ng-topic", "subencoder": "propsegment-facts"}
SPECS = {"nugget": "nugget:layer=1"}  # the tiny backbone has two layers
COMBINATIONS = ("tsdae:aux=nm", "mlm:aux=simcse")
RECIPES = ("augsbert:teacher=be,mode=self-distillation,max_sentences=16",)


def _source(registry, name: str) -> str:
    plugin = registry.model(name)
    if name in SOURCES:
        return SOURCES[name]
    if registry.default_train_on(plugin):
        return registry.default_train_on(plugin)
    return next(
        task
        for task, task_plugin in sorted(registry.tasks.items())
        if set(task_plugin.metadata.training_kinds) & set(plugin.training_kinds)
        and task in ("stsb", "bws-cross-topic", "20ng-topic")
    )


def _walked(registry) -> list[tuple[str, str]]:
    builtin = [
        name
        for name, plugin in sorted(registry.models.items())
        if TRAINABLE in plugin.capabilities
        and registry.package_of("model", name) == "sentence-harness"
        and not name.startswith("testing-")
    ]
    return (
        [(SPECS.get(name, name), _source(registry, name)) for name in builtin]
        + [(spec, "bws-cross-topic") for spec in COMBINATIONS]
        + [(spec, "stsb") for spec in RECIPES]
    )


def test_the_walk_covers_the_trainable_builtins(registry):
    names = {spec.split(":")[0] for spec, _ in _walked(registry)}
    assert {
        "be",
        "ce",
        "cbe",
        "simcse",
        "tsdae",
        "nm",
        "mlm",
        "paser",
        "nugget",
        "subencoder",
        "classifier",
        "augsbert",
    } <= names


def test_every_trainable_model_applies_the_budget_it_requested(registry, tiny_bert, tmp_path, tiny_wordnet):
    walked = _walked(registry)
    entries = [ModelEntry(spec, source, budget=dict(REQUEST)) for spec, source in walked]
    config = RunConfig(
        models=entries,
        tasks=["stsb"],
        profile="smoke",
        backbone=tiny_bert,
        device="cpu",
        results_dir=tmp_path / "results",
        progress=False,
    )
    runner = Run(registry, config, log=lambda message: None)
    profile = get_profile("smoke")
    checked = []
    for entry in entries:
        spec = resolve_model_spec(registry, entry.spec, profile, tiny_bert, entry.train_on, entry.budget)
        runner.models.checkpoints.trained_model(spec, profile, "cpu", 42)
        checked.append(spec.label)
    # Every trained model (the walked ones and a recipe's inner models: its teacher) left a checkpoint whose
    # training applied exactly what it requested.
    records = [json.loads(path.read_text()) for path in (tmp_path / "results").glob("**/training.json")]
    assert len(records) >= len(entries)
    for record in records:
        requested, applied = record["requested_budget"], record["report"]["applied_budget"]
        label = record["spec"]["label"]
        for key, value in REQUEST.items():
            assert requested.get(key) == value, (label, key, requested)
        assert budget_differences(requested, applied, strict=True) == [], (label, applied)
        assert applied["steps"] == 7 and applied["train_examples"] <= 24, (label, applied)
    assert len(checked) == len(walked)


def test_precedence_profile_then_plugin_then_method_then_overrides(registry):
    quick = get_profile("quick")
    tsdae = resolve_model_spec(registry, "tsdae", quick, None, "bws-cross-topic")
    assert tsdae.requested_budget["max_steps"] == 40 and tsdae.requested_budget["epochs"] is None  # setup's
    combined = resolve_model_spec(registry, "tsdae:aux=nm", get_profile("paper"), None, "bws-cross-topic")
    assert combined.requested_budget["batch_size"] == 64  # a combination trains in the contrastive setup
    asked = resolve_model_spec(
        registry, "tsdae", quick, None, "bws-cross-topic", {"epochs": 1, "max_steps": 100000, "batch_size": 8}
    )
    assert {k: asked.requested_budget[k] for k in ("epochs", "max_steps", "batch_size")} == {
        "epochs": 1,
        "max_steps": 100000,
        "batch_size": 8,
    }  # the user's values win over the setup's
    ce = resolve_model_spec(registry, "ce", quick, None, "stsb")
    assert ce.requested_budget["max_steps"] == 360 and ce.requested_budget["seed_trials"] == 1
    assert "seed_trials" not in tsdae.requested_budget  # only scored-pair training runs seed trials
    assert requested_budget(quick, {}, None, {"epochs": 3})["epochs"] == 3


def test_budget_text_is_key_value():
    assert (
        format_budget({"epochs": 1, "max_steps": None, "learning_rate": 3e-5})
        == "epochs=1 max_steps=none learning_rate=3e-05"
    )


def test_steps_short_of_the_budget_are_a_difference():
    applied = {"epochs": 1, "max_steps": 100000, "batch_size": 8, "examples": 2686, "steps": 40}
    assert budget_differences({"epochs": 1, "max_steps": 100000}, applied) == ["steps: the budget gives 336, 40 done"]


@pytest.mark.parametrize(
    "entries, budget, message",
    [
        (
            [ModelEntry("tsdae", "bws-cross-topic", budget={"seed_trials": 3})],
            {},
            "model 'tsdae' cannot honour budget key.s. seed_trials; tsdae takes epochs, max_steps, batch_size",
        ),
        ([ModelEntry("st", budget={"epochs": 3})], {}, "model .st. is not trained"),
        ([ModelEntry("tsdae", "bws-cross-topic")], {"seed_trials": 3}, "--set seed_trials: no trained model"),
        ([ModelEntry("st")], {"epochs": 3}, "no model of this run is trained"),
    ],
)
def test_a_budget_key_a_method_cannot_honour_is_refused_at_plan_time(registry, tmp_path, entries, budget, message):
    config = RunConfig(models=entries, tasks=["stsb"], profile="smoke", results_dir=tmp_path, budget=budget)
    with pytest.raises(InvalidOptionError, match=message):
        Run(registry, config).plan()


def test_a_user_budget_wins_over_the_setup_budget_and_the_record_shows_both(registry, tiny_bert, tmp_path):
    # Under quick the unsupervised setups ask for 40 steps; --set must still decide (tsdae trained 40).
    config = RunConfig(
        models=[ModelEntry("tsdae"), ModelEntry("nugget:layer=1")],
        tasks=["stsb"],
        profile="quick",
        backbone=tiny_bert,
        train_on="bws-cross-topic",
        device="cpu",
        results_dir=tmp_path,
        progress=False,
        budget={"epochs": 1, "max_steps": 100000, "max_train_examples": 50, "batch_size": 16},
    )
    runner = Run(registry, config, log=lambda message: None)
    plan = runner.plan()
    for planned in plan.models:
        runner.models.checkpoints.trained_model(planned.spec, plan.profile, "cpu", 42)
        applied = runner.models.checkpoints.training_report(planned.spec, 42)["applied_budget"]
        assert applied["steps"] == 4 and applied["max_steps"] == 100000, applied  # ceil(50 / 16), not 40
        record = runner.models.checkpoints.budget_record(planned.spec, 42)["budget"]
        assert record["requested"]["max_steps"] == 100000 and record["applied"]["steps"] == 4
        assert budget_differences(record["requested"], record["applied"], strict=True) == []
