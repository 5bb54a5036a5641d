"""`harness list` and `harness describe`: what the installed plugins offer."""

from __future__ import annotations

from ..errors import UnknownNameError, close_matches_hint
from .common import load_registry
from .parsing import add_command


def add_parser(commands) -> None:
    add_command(
        commands,
        "list",
        "list model and task plugins, their packages and plugins that failed to load",
        ("harness list",),
    ).set_defaults(handler=cmd_list)
    describe = add_command(
        commands,
        "describe",
        "show a model's or task's metadata and options",
        ("harness describe be", "harness describe senteval"),
    )
    describe.add_argument("name", help="a model, recipe, task or task family")
    describe.set_defaults(handler=cmd_describe)


def cmd_list(args) -> int:
    registry = load_registry()
    print("Models:")
    for name, plugin in sorted(registry.models.items()):
        aliases = f" (aliases: {', '.join(plugin.aliases)})" if plugin.aliases else ""
        print(
            f"  {name:<14} {', '.join(plugin.capabilities):<28} [{registry.package_of('model', name)}]"
            f"{aliases}  {plugin.description}"
        )
    if registry.recipes:
        print("Recipes (train a student model; written like a model spec):")
        for name, recipe in sorted(registry.recipes.items()):
            aliases = f" (aliases: {', '.join(recipe.aliases)})" if recipe.aliases else ""
            print(
                f"  {name:<14} student {recipe.default_student:<20} [{registry.package_of('recipe', name)}]"
                f"{aliases}  {recipe.description}"
            )
    print("Tasks:")
    for family, members in sorted(registry.families().items()):
        print(f"  {family} (family): {', '.join(sorted(members))}")
        for name in sorted(members):
            metadata = registry.task(name).metadata
            print(
                f"    {name:<14} main score {metadata.main_score:<16} [{registry.package_of('task', name)}]"
                f"  {metadata.description}"
            )
    kinds = sorted({kind for kind, _ in registry.components})
    if kinds:
        print("Components:")
        for kind in kinds:
            print(f"  {kind}: {', '.join(registry.component_names(kind))}")
    failed = [p for p in registry.plugins if p.error]
    if failed:
        print("Plugins that failed to load:")
        for info in failed:
            print(f"  {info.name} ({info.package}, {info.module}): {info.error}")
    return 0


def cmd_describe(args) -> int:
    registry = load_registry()
    name = args.name
    from ..capabilities import TRAINABLE
    from ..options import describe_options
    from ..spec import budget_keys

    if registry.is_recipe(name):
        recipe = registry.recipe(name)
        print(f"recipe {recipe.name}  [{registry.package_of('recipe', recipe.name)}]")
        print(f"  {recipe.description}")
        print(
            f"  trains on: {', '.join(recipe.training_kinds)}; student learns from: {', '.join(recipe.student_kinds)}"
        )
        if recipe.reference:
            print(f"  reference: {recipe.reference}")
        for line in describe_options(recipe.options):
            print(f"  option {line}")
        print(f"  budget keys: {', '.join(budget_keys(recipe))}")
        return 0
    if name in registry.models or name in registry.model_aliases:
        plugin = registry.model(name)
        print(f"model {plugin.name}  [{registry.package_of('model', plugin.name)}]")
        print(f"  {plugin.description}")
        print(f"  capabilities: {', '.join(plugin.capabilities)}")
        print(f"  learns from: {', '.join(plugin.training_kinds) or '(not trainable)'}")
        if plugin.requires_training:
            print(f"  needs training; default source: {registry.default_train_on(plugin)}")
        if plugin.reference:
            print(f"  reference: {plugin.reference}")
        for line in describe_options(plugin.options):
            print(f"  option {line}")
        if TRAINABLE in plugin.capabilities:
            print(f"  budget keys: {', '.join(budget_keys(plugin))}")
        return 0
    try:
        members = registry.expand_task(registry.resolve_task(name))
    except UnknownNameError:
        if ":" in name or "." in name:  # a namespaced task (mteb:NAME) says itself what is wrong
            raise
        known = sorted(
            {
                *registry.models,
                *registry.model_aliases,
                *registry.recipes,
                *registry.recipe_aliases,
                *registry.tasks,
                *registry.families(),
                *registry.task_aliases,
            }
        )
        raise UnknownNameError(
            f"unknown model or task {name!r}.{close_matches_hint(name, known)} `harness list` shows them all."
        ) from None
    for member in members:
        plugin = registry.task(member)
        print(f"task {member}  [{registry.package_of('task', member)}]")
        for key, value in plugin.metadata.as_record().items():
            if key != "name":
                print(f"  {key}: {value}")
        for line in describe_options(plugin.options):
            print(f"  option {line}")
    return 0
