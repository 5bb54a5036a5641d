"""The core hook for tasks named at run time: a ``task-namespace`` component resolves ``PREFIX:name``."""

from __future__ import annotations

import pytest

import harness
import harness.testing as ht
from harness.spec import resolve_task_specs


class Toy(harness.Task):
    options = {"size": harness.Option(3, "how many items", type=int)}

    def check_data(self) -> str:
        return "0" * 64

    def evaluate(self, model, ctx):
        return harness.EvalResult({"score": float(self.options["size"])}, self.check_data())


class ToyNamespace:
    def __init__(self):
        self.calls: list[str] = []

    def resolve(self, name: str):
        self.calls.append(name)
        if name.startswith("bad"):
            raise harness.HarnessError(f"toy has no task {name!r}; did you mean toy:good?")
        metadata = harness.TaskMetadata(
            name=f"toy.{name.lower()}",
            family="toy",
            description=f"toy task {name}",
            main_score="score",
            metric="the size",
            reference="-",
            dataset="toy",
            dataset_source="code",
            license="none",
        )
        return Toy.variant(metadata)


NAMESPACE = ToyNamespace()


@harness.hookimpl
def register_components(register):
    register(harness.Component("task-namespace", "toy", NAMESPACE, "toy tasks"))


class NoResolve:
    @harness.hookimpl
    def register_components(self, register):
        register(harness.Component("task-namespace", "broken", object()))


def test_prefixed_names_resolve_once_and_take_options():
    registry = ht.plugin_registry(__name__)
    assert registry.split_task_text("toy:Apple") == ("toy:Apple", {})
    assert registry.split_task_text("toy:Apple:size=5") == ("toy:Apple", {"size": "5"})
    assert registry.split_task_text("stsb:text=raw") == ("stsb", {"text": "raw"})  # no namespace: unchanged
    (spec,) = resolve_task_specs(registry, "toy:Apple:size=5")
    assert (spec.name, spec.options, spec.label) == ("toy.apple", {"size": 5}, "toy.apple:size=5")
    assert registry.task("toy:Apple").metadata.family == "toy"
    assert registry.expand_task("toy.apple") == ["toy.apple"]  # the resolved name is a plain task from now on
    assert registry.resolve_task("toy:Apple") == "toy.apple"  # resolving again: known, the namespace is not asked
    assert registry.families()["toy"] == ["toy.apple"]
    assert NAMESPACE.calls.count("Apple") == 1


def test_resolution_errors_pass_through_and_unprefixed_names_are_untouched():
    registry = ht.plugin_registry(__name__)
    with pytest.raises(harness.HarnessError, match="did you mean toy:good"):
        registry.resolve_task("toy:bad-name")
    with pytest.raises(harness.HarnessError, match="unknown task 'nothing:here'"):
        registry.expand_task(registry.resolve_task("nothing:here"))
    with pytest.raises(harness.HarnessError, match="give one: --tasks toy:NAME"):
        registry.expand_task("toy")


def test_a_namespace_without_resolve_fails_its_plugin_only():
    with pytest.raises(AssertionError, match="does not satisfy the kind's protocol"):
        ht.plugin_registry(NoResolve())


def test_lookups_never_resolve_a_namespace_the_resolve_step_does():
    registry = ht.plugin_registry(__name__)
    calls = len(NAMESPACE.calls)
    with pytest.raises(harness.HarnessError, match="unknown task 'toy:Pear'"):
        registry.task("toy:Pear")
    with pytest.raises(harness.HarnessError, match="unknown task 'toy.pear'"):
        registry.expand_task("toy.pear")
    assert len(NAMESPACE.calls) == calls and "toy.pear" not in registry.tasks
    assert registry.resolve_task("toy.pear") == "toy.pear"  # a stored record's name, in a fresh process
    assert registry.task("toy.pear").metadata.family == "toy" and NAMESPACE.calls[-1] == "pear"
    assert registry.resolve_task("stsb") == "stsb" and registry.resolve_task("toy") == "toy"  # not namespaced
