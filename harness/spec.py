"""Resolved model and task specs. The hash of a resolved model spec names its checkpoints and results, so a
changed option, backbone, profile or training source can never reuse a stale result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .capabilities import TRAINABLE
from .errors import IncompatibleError
from .fingerprint import folder_fingerprint, local_model_folder, path_content, stable_hash
from .options import format_options, resolve_options
from .plugin_api import RecipePlugin
from .profiles import DEFAULT_BUDGET_KEYS, Profile, check_budget, requested_budget, resolve_budget
from .registry import Registry
from .spec_grammar import parse_spec_text

SPEC_VERSION = 1
# ``--train-on self``: every evaluated task trains its own model on its own training data (the runner's
# ``trained_spec``); the spec keeps "self" as its source, so its cells form one leaderboard row.
SELF_TRAINING = "self"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    options: dict[str, Any]
    backbone: str
    profile: str
    train_on: str | None  # training source (a task name, with its options) or None for "as is"
    label: str  # what leaderboards show, e.g. "be:pooling=cls"
    recipe: bool = False  # the name is a training recipe (its option ``student`` names the model it trains)
    # The training budget of a trained spec where it differs from its profile's (harness.profiles.resolve_budget:
    # the profile's per-method budget, a matrix entry's or --set overrides); part of the identity only when set.
    budget: dict = field(default_factory=dict)
    # The overrides given for this spec (matrix entry / --set); models it trains through its context (teachers,
    # search encoders) get them too.
    budget_overrides: dict = field(default_factory=dict, compare=False)
    # The whole budget its training asks for (harness.profiles.requested_budget: profile < plugin budget < method
    # budget < overrides), for the keys its method honours; {} when untrained. Not part of the identity: it follows
    # from the identity's fields and the plugin's code.
    requested_budget: dict = field(default_factory=dict, compare=False)
    # Options left out of the identity: those declared with ``Option(hash_default=False)`` that are at their
    # default value (options added after specs were stored; such specs keep their hashes).
    unhashed_options: tuple[str, ...] = ()
    # sha256 of the backbone's files when the backbone is a local folder (harness.fingerprint): replacing the files
    # of ``--backbone ./my`` changes the spec hash. None for a registered backbone or a hub id (their specs keep the
    # hash they had before this field existed).
    backbone_content: str | None = None
    # The content checksum of each option declared ``Option(path=True)`` whose value names a local file or folder
    # (``st:model=./my-model``): what is at the path, not the path string, identifies the spec. Empty (and absent
    # from the identity, so hashes stay) when no such option names anything local.
    option_contents: dict = field(default_factory=dict)

    def identity(self) -> dict:
        options = self.options
        if self.unhashed_options:
            options = {key: value for key, value in options.items() if key not in self.unhashed_options}
        identity = {
            "spec_version": SPEC_VERSION,
            "name": self.name,
            "options": options,
            "backbone": self.backbone,
            "profile": self.profile,
            "train_on": self.train_on,
        }
        if self.recipe:  # models keep the identity (and so the stored results) they had before recipes existed
            identity["recipe"] = True
        if self.budget:  # likewise for specs trained with their profile's own budget
            identity["budget"] = dict(self.budget)
        if self.backbone_content:  # likewise for registered and hub backbones
            identity["backbone_content"] = self.backbone_content
        if self.option_contents:  # likewise for specs whose options name no local file or folder
            identity["option_contents"] = dict(self.option_contents)
        return identity

    @property
    def hash(self) -> str:
        return stable_hash(self.identity())

    @property
    def key(self) -> str:
        """Folder name in the store: readable name plus hash prefix."""
        return f"{self.name}-{self.hash[:12]}"

    def as_record(self) -> dict:
        return {**self.identity(), "hash": self.hash, "label": self.label}


def resolve_model_spec(
    registry: Registry,
    text: str,
    profile: Profile,
    backbone: str | None = None,
    train_on: str | None = None,
    budget_overrides: dict | None = None,
    content_cache: Path | None = None,
) -> ModelSpec:
    """``be:pooling=cls`` (or a recipe, ``augsbert:teacher=cbe``) -> validated ModelSpec. Models that need training
    get their default source; a trained spec gets its budget (the profile's per-method budget and
    ``budget_overrides``, harness.profiles.resolve_budget). A backbone that is a local folder is identified by its
    files too (:func:`backbone_content`; ``content_cache``: where their checksums are cached)."""
    name, raw_options = parse_spec_text(text)
    plugin = registry.spec_plugin(name)
    is_recipe = isinstance(plugin, RecipePlugin)
    kind = "recipe" if is_recipe else "model"
    options = resolve_options(f"{kind} {plugin.name!r}", plugin.options, raw_options)
    defaults = {key: option.default for key, option in plugin.options.items()}
    if train_on is None and not is_recipe and plugin.requires_training:
        train_on = registry.default_train_on(plugin)
    if is_recipe:
        _check_student(registry, plugin, options["student"], profile, backbone)
    changed = format_options(options, defaults)
    label = plugin.name + (f":{changed}" if changed else "")
    overrides = check_budget(budget_overrides or {}, f"budget of {label}")
    budget = resolve_budget(profile, plugin.budgets, overrides) if train_on is not None else {}
    backbone = backbone or profile.default_backbone
    requested = {}
    if train_on is not None:
        method_budget = plugin.budget_for(options, profile.name) if plugin.budget_for is not None else None
        requested = requested_budget(profile, plugin.budgets, method_budget, overrides, budget_keys(plugin))
    return ModelSpec(
        name=plugin.name,
        options=options,
        backbone=backbone,
        profile=profile.name,
        train_on=train_on,
        label=label,
        recipe=is_recipe,
        budget=budget,
        budget_overrides=overrides,
        requested_budget=requested,
        unhashed_options=tuple(
            key
            for key, option in plugin.options.items()
            if not option.hash_default
            and options[key] == option.default
            and not (option.hash_when and option.hash_when(options))
        ),
        backbone_content=backbone_content(registry, backbone, content_cache),
        option_contents=option_contents(plugin.options, options, content_cache),
    )


def option_contents(declared: dict, options: dict, cache_dir: Path | None = None) -> dict[str, str]:
    """``{key: content checksum}`` of the options declared ``Option(path=True)`` whose value names a local file or
    folder (:func:`harness.fingerprint.path_content`)."""
    found = {}
    for key, option in declared.items():
        if option.path:
            content = path_content(options.get(key), cache_dir)
            if content is not None:
                found[key] = content
    return found


def backbone_content(registry: Registry, backbone: str, cache_dir: Path | None = None) -> str | None:
    """The content checksum of a backbone that is a local folder; None for a registered backbone (shipped in a
    package, versioned with it) or a name that is not a folder here (a hub id)."""
    if ("backbone", backbone) in registry.components:
        return None
    folder = local_model_folder(backbone)
    return folder_fingerprint(folder, cache_dir) if folder is not None else None


def budget_keys(plugin: Any) -> tuple[str, ...]:
    """The budget keys a model's or recipe's training honours (its ``budget_keys``, else the defaults)."""
    return tuple(plugin.budget_keys) if plugin.budget_keys is not None else DEFAULT_BUDGET_KEYS


def _check_student(
    registry: Registry, recipe: RecipePlugin, student: str, profile: Profile, backbone: str | None
) -> None:
    """The student of a recipe is a plain trainable model that learns from what the recipe feeds it."""
    learners = sorted(
        name
        for name, model in registry.models.items()
        if TRAINABLE in model.capabilities and set(recipe.student_kinds) <= set(model.training_kinds)
    )
    if not student.strip():  # a recipe that declares no default_student
        raise IncompatibleError(
            f"recipe {recipe.name!r} has no default student; give one: "
            f"{recipe.name}:student=MODEL (students that can: {', '.join(learners) or '(none)'})."
        )
    student_name, _ = parse_spec_text(student)
    if registry.is_recipe(student_name):
        example = recipe.default_student or (learners[0] if learners else "MODEL")
        raise IncompatibleError(
            f"recipe {recipe.name!r}: the student {student!r} is itself a recipe; name a model, e.g. student={example}."
        )
    student_spec = resolve_model_spec(registry, student, profile, backbone)
    student_plugin = registry.model(student_spec.name)
    if TRAINABLE not in student_plugin.capabilities or not set(recipe.student_kinds) <= set(
        student_plugin.training_kinds
    ):
        raise IncompatibleError(
            f"recipe {recipe.name!r} trains its student on {', '.join(recipe.student_kinds)}, which model "
            f"{student_plugin.name!r} cannot learn from; students that can: {', '.join(learners) or '(none)'}."
        )


def student_spec(registry: Registry, spec: ModelSpec, profile: Profile) -> ModelSpec:
    """The resolved spec of a recipe's student (same backbone and profile, never trained on its own)."""
    return resolve_model_spec(registry, spec.options["student"], profile, spec.backbone)


@dataclass(frozen=True)
class TaskSpec:
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    changed: str = ""  # options that differ from the defaults, "k=v,..."
    # As ModelSpec.option_contents: the content checksums of path options that name a local file or folder.
    option_contents: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        if not self.changed:
            return self.name
        if self.option_contents:  # what a data path names, not its string, tells two such cells apart
            return f"{self.name}-{stable_hash({'options': self.options, 'contents': self.option_contents}, 8)}"
        return f"{self.name}-{stable_hash(self.options, 8)}"

    @property
    def label(self) -> str:
        return self.name if not self.changed else f"{self.name}:{self.changed}"


def resolve_task_specs(registry: Registry, text: str) -> list[TaskSpec]:
    """``senteval`` -> its members; ``sickr:split=all`` -> one task with options (family options apply to
    every member that declares them); ``mteb:STS22`` -> the task its namespace resolves it to (the planner's
    explicit resolve step, :meth:`Registry.resolve_task`)."""
    name, raw_options = registry.split_task_text(text)  # keeps a task namespace's prefix: mteb:STS22
    members = registry.expand_task(registry.resolve_task(name))
    specs = []
    for member in members:
        plugin = registry.task(member)
        applicable = raw_options if len(members) == 1 else {k: v for k, v in raw_options.items() if k in plugin.options}
        options = resolve_options(f"task {member!r}", plugin.options, applicable)
        defaults = {key: option.default for key, option in plugin.options.items()}
        changed = format_options(options, defaults)
        contents = option_contents(plugin.options, options) if changed else {}
        specs.append(TaskSpec(member, options, changed, contents))
    if len(members) > 1:
        unused = set(raw_options) - {key for m in members for key in registry.task(m).options}
        if unused:
            # Same message as for a single task, against the union of the members' options.
            union = {k: o for m in members for k, o in registry.task(m).options.items()}
            resolve_options(f"task family {name!r}", union, {k: raw_options[k] for k in unused})
    return specs
