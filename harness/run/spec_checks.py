"""What the planner checks of a resolved model spec before anything runs: the budget keys its training honours, the
tasks it can run (its capabilities; under ``--train-on self`` the tasks' own training data), the source it trains on,
and the evaluation runtime. Each refusal is one line saying what to do (harness.run.plan collects them).
"""

from __future__ import annotations

from ..capabilities import TRAINABLE, reachable_capabilities
from ..errors import IncompatibleError, InvalidOptionError
from ..plugin_api import ModelPlugin
from ..profiles import get_profile
from ..registry import Registry
from ..spec import SELF_TRAINING, ModelSpec, TaskSpec, budget_keys, resolve_task_specs, student_spec
from .config import runtime_refused


class SpecChecks:
    """The checks of model specs against the registry (what their plugins declare) and the run's ``runtime``."""

    def __init__(self, registry: Registry, runtime: str):
        self.registry = registry
        self.runtime = runtime

    # -- budgets ---------------------------------------------------------------------------------------------------
    def honoured_budget_keys(self, spec: ModelSpec) -> tuple[str, ...]:
        """The budget keys ``spec``'s training honours; none when it is not trained."""
        return budget_keys(self.registry.spec_plugin(spec.name)) if spec.train_on is not None else ()

    def check_budget_keys(self, spec: ModelSpec, entry_keys: list[str]) -> None:
        """A matrix entry's budget key that the spec's training cannot honour is refused (never silently ignored)."""
        honoured = self.honoured_budget_keys(spec)
        refused = [key for key in entry_keys if key not in honoured]
        if not refused:
            return
        if not honoured:
            raise InvalidOptionError(
                f"model {spec.label!r} is not trained (no train_on), so its budget "
                f"{', '.join(refused)} would have no effect; drop it or give train_on."
            )
        raise InvalidOptionError(
            f"model {spec.label!r} cannot honour budget key(s) {', '.join(refused)}; "
            f"{spec.name} takes {', '.join(honoured)}."
        )

    def check_run_budget_keys(self, specs: list[ModelSpec], shared: dict) -> None:
        """``--set`` (and a matrix-wide ``budget:``) applies to every trained spec: each key must be honoured by at
        least one of them."""
        if not shared:
            return
        takes = {spec.name: self.honoured_budget_keys(spec) for spec in specs if spec.train_on is not None}
        if not takes:
            raise InvalidOptionError(
                f"--set {', '.join(shared)}: no model of this run is trained, so a training "
                "budget has no effect; drop it or add --train-on."
            )
        for key in shared:
            if not any(key in keys for keys in takes.values()):
                shown = "; ".join(f"{name} takes {', '.join(keys)}" for name, keys in takes.items())
                raise InvalidOptionError(f"--set {key}: no trained model of this run honours it ({shown}).")

    def check_runtime(self, specs: list[ModelSpec], device: str) -> None:
        """Under ``--runtime`` other than torch every model must offer ``use_runtime`` (a recipe: its student), so
        no model is silently evaluated in torch; refused before anything runs. (JobModels.use_runtime checks
        again for a model whose class the registry does not know.)"""
        runtime = self.runtime
        if runtime == "torch":
            return
        for spec in specs:
            name = student_spec(self.registry, spec, get_profile(spec.profile)).name if spec.recipe else spec.name
            model_class = self.registry.model(name).model_class
            if model_class is not None and not hasattr(model_class, "use_runtime"):
                raise runtime_refused(spec.label, runtime, model_class)
        if device not in ("cpu", "auto"):
            # ONNX Runtime runs here with its CPU provider only: a GPU run is refused rather than moved to the CPU
            # (a Ray worker that resolves "auto" to a GPU is refused by RuntimeSwitch.stand_in, in one line too)
            raise IncompatibleError(
                f"--runtime {runtime} runs on the CPU (ONNX Runtime's CPU provider); use "
                f"--device cpu with it, or --runtime torch on {device}."
            )

    # -- training compatibility ----------------------------------------------------------------------------------------
    def capabilities(self, spec: ModelSpec) -> tuple[str, ...]:
        """A model's declared capabilities; a recipe's are its student's."""
        if spec.recipe:
            return self.registry.model(student_spec(self.registry, spec, get_profile(spec.profile)).name).capabilities
        return self.registry.model(spec.name).capabilities

    def incompatibility(self, spec: ModelSpec, task_spec: TaskSpec) -> str | None:
        metadata = self.registry.task(task_spec.name).metadata
        available = reachable_capabilities(self.capabilities(spec))
        kinds = self.registry.spec_plugin(spec.name).training_kinds
        if spec.train_on == SELF_TRAINING and not set(metadata.training_kinds) & set(kinds):
            return (
                f"model {spec.label!r} is trained on each task's own data (--train-on self), but task "
                f"{task_spec.name!r} offers no {', '.join(kinds)}; tasks that do: {', '.join(self.sources(kinds))}."
            )
        if set(metadata.requires) <= available:
            return None
        return (
            f"model {spec.label!r} cannot run task {task_spec.name!r}: the task needs "
            f"{', '.join(metadata.requires)}, the model offers {', '.join(sorted(available))}."
        )

    def check_training(self, spec: ModelSpec) -> None:
        plugin = self.registry.spec_plugin(spec.name)
        if spec.train_on is None:
            if spec.recipe:
                sources = self.sources(plugin.training_kinds, None)[:4]
                raise IncompatibleError(
                    f"recipe {spec.label!r} trains on a source; add --train-on TASK (or train_on in the matrix), "
                    f"e.g. {', '.join(sources) or '(no installed task offers its data)'}."
                )
            return
        if isinstance(plugin, ModelPlugin) and (TRAINABLE not in plugin.capabilities or not plugin.training_kinds):
            raise IncompatibleError(f"model {spec.name!r} cannot be trained; drop --train-on for it.")
        if spec.train_on == SELF_TRAINING:
            return  # every task trains on its own data: checked per task by incompatibility
        source_specs = resolve_task_specs(self.registry, spec.train_on)
        if len(source_specs) != 1:
            raise IncompatibleError(
                f"--train-on {spec.train_on!r} names a task family; name one task of it: "
                f"{', '.join(s.name for s in source_specs)}."
            )
        offered = self.registry.task(source_specs[0].name).metadata.training_kinds
        if not set(offered) & set(plugin.training_kinds):
            raise IncompatibleError(
                f"model {spec.name!r} learns from {', '.join(plugin.training_kinds)}, but task {spec.train_on!r} "
                f"offers {', '.join(offered) or 'no training data'}. Training sources that would work: "
                f"{', '.join(self.sources(plugin.training_kinds))}."
            )

    def sources(self, kinds: tuple[str, ...], none: str | None = "(none installed)") -> list[str]:
        """Tasks that offer training data of one of ``kinds`` (``[none]`` when there are none)."""
        sources = sorted(
            name
            for name, task_plugin in self.registry.tasks.items()
            if set(task_plugin.metadata.training_kinds) & set(kinds)
        )
        return sources or ([none] if none else [])
