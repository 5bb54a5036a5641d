"""Resolved model and task specs. The hash of a resolved model spec names its checkpoints and results, so a
changed option, backbone, profile or training source can never reuse a stale result."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from .options import format_options, parse_spec_text, resolve_options
from .profiles import Profile
from .registry import Registry

SPEC_VERSION = 1


def stable_hash(payload: Any, length: int = 64) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    options: dict[str, Any]
    backbone: str
    profile: str
    train_on: str | None  # training source (a task name, with its options) or None for "as is"
    label: str  # what leaderboards show, e.g. "be:pooling=cls"

    def identity(self) -> dict:
        return {
            "spec_version": SPEC_VERSION,
            "name": self.name,
            "options": self.options,
            "backbone": self.backbone,
            "profile": self.profile,
            "train_on": self.train_on,
        }

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
    registry: Registry, text: str, profile: Profile, backbone: str | None = None, train_on: str | None = None
) -> ModelSpec:
    """``be:pooling=cls`` -> validated ModelSpec. Models that need training get their default source."""
    name, raw_options = parse_spec_text(text)
    plugin = registry.model(name)
    options = resolve_options(f"model {plugin.name!r}", plugin.options, raw_options)
    defaults = {key: option.default for key, option in plugin.options.items()}
    if train_on is None and plugin.requires_training:
        train_on = plugin.default_train_on
    changed = format_options(options, defaults)
    label = plugin.name + (f":{changed}" if changed else "")
    return ModelSpec(
        name=plugin.name,
        options=options,
        backbone=backbone or profile.default_backbone,
        profile=profile.name,
        train_on=train_on,
        label=label,
    )


@dataclass(frozen=True)
class TaskSpec:
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    changed: str = ""  # options that differ from the defaults, "k=v,..."

    @property
    def key(self) -> str:
        return self.name if not self.changed else f"{self.name}-{stable_hash(self.options, 8)}"

    @property
    def label(self) -> str:
        return self.name if not self.changed else f"{self.name}:{self.changed}"


def resolve_task_specs(registry: Registry, text: str) -> list[TaskSpec]:
    """``senteval`` -> its members; ``sickr:split=all`` -> one task with options (family options apply to
    every member that declares them)."""
    name, raw_options = parse_spec_text(text)
    members = registry.expand_task(name)
    specs = []
    for member in members:
        plugin = registry.task(member)
        applicable = raw_options if len(members) == 1 else {k: v for k, v in raw_options.items() if k in plugin.options}
        options = resolve_options(f"task {member!r}", plugin.options, applicable)
        defaults = {key: option.default for key, option in plugin.options.items()}
        specs.append(TaskSpec(member, options, format_options(options, defaults)))
    if len(members) > 1:
        unused = set(raw_options) - {key for m in members for key in registry.task(m).options}
        if unused:
            # Same message as for a single task, against the union of the members' options.
            union = {k: o for m in members for k, o in registry.task(m).options.items()}
            resolve_options(f"task family {name!r}", union, {k: raw_options[k] for k in unused})
    return specs
