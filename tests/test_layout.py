"""The layout rules of the project: the core names no plugin or task, a plugin never imports another plugin, a task
module never imports another task module, and every built-in plugin works when allow-listed alone."""

from __future__ import annotations

import ast
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


def imported_modules(path: Path) -> set[str]:
    """Absolute module names imported by a file (relative imports resolved against its package)."""
    package_parts = path.relative_to(REPO).with_suffix("").parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package_parts[: len(package_parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def _family(path: Path, folder: str) -> str:
    """The unit a module belongs to: a module, or a package folder (tasks/useb/ is one family)."""
    relative = path.relative_to(REPO / folder).parts
    return relative[0].removesuffix(".py")


@pytest.mark.parametrize("folder,namespace", [("plugins", "harness.plugins"), ("tasks", "harness.tasks")])
def test_no_plugin_imports_another(folder, namespace):
    offenders = []
    for path in sorted((REPO / folder).rglob("*.py")):
        own = _family(path, folder)
        for module in imported_modules(path):
            for prefix in (f"{namespace}.", f"{folder}."):
                if module.startswith(prefix):
                    target = module[len(prefix) :].split(".")[0]
                    if target and target != own and target != "__init__":
                        offenders.append(f"{path.relative_to(REPO)} imports {module}")
            if folder == "plugins" and (module.startswith(("harness.tasks", "tasks."))):
                offenders.append(f"{path.relative_to(REPO)} imports {module}")
            if folder == "tasks" and (module.startswith(("harness.plugins", "plugins."))):
                offenders.append(f"{path.relative_to(REPO)} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_core_names_no_plugin_or_task():
    offenders = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        for module in imported_modules(path):
            if module.split(".")[:2] in (["harness", "plugins"], ["harness", "tasks"]) or module.split(".")[0] in (
                "plugins",
                "tasks",
            ):
                offenders.append(f"{path.relative_to(REPO)} imports {module}")
    assert not offenders, "\n".join(offenders)


BUILTIN_ENTRY_POINTS = sorted(
    ep.name
    for ep in importlib.metadata.entry_points(group="harness")
    if ep.value.startswith(("harness.plugins.", "harness.tasks."))
)


def test_every_builtin_plugin_loads_alone():
    """Each built-in entry point, allow-listed alone in a fresh interpreter, loads and registers without error."""
    script = (
        "import os, sys\n"
        "from harness.registry import build_registry\n"
        "failed = []\n"
        "for name in sys.argv[1:]:\n"
        "    os.environ['HARNESS_PLUGINS'] = name\n"
        "    registry = build_registry()\n"
        "    failed += [f'{p.name}: {p.error}' for p in registry.plugins if p.error]\n"
        "    if not (registry.models or registry.tasks or registry.components or registry.recipes):\n"
        "        failed.append(f'{name}: registered nothing')\n"
        "print('\\n'.join(failed))\n"
    )
    result = subprocess.run([sys.executable, "-c", script, *BUILTIN_ENTRY_POINTS], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", result.stdout


def test_top_level_plugins_and_tasks_are_not_installed():
    """The wheel installs the folders plugins/ and tasks/ inside the harness namespace, never as top-level packages
    with generic names."""
    import harness.plugins
    import harness.tasks

    assert Path(harness.plugins.__file__).parent == REPO / "plugins"
    assert Path(harness.tasks.__file__).parent == REPO / "tasks"
    distribution = importlib.metadata.distribution("sentence-harness")
    top_level = (distribution.read_text("top_level.txt") or "").split()
    assert "plugins" not in top_level and "tasks" not in top_level


def test_every_package_folder_is_in_the_wheel():
    """pyproject.toml lists the packages a wheel installs (plugins/ and tasks/ map into the harness namespace): a
    package folder left out of the list works from a clone and is missing from an installed wheel."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    roots = {"harness": REPO / "harness", "harness.plugins": REPO / "plugins", "harness.tasks": REPO / "tasks"}
    folders = {
        ".".join([prefix, *init.parent.relative_to(root).parts])
        for prefix, root in roots.items()
        for init in root.rglob("__init__.py")
        if "__pycache__" not in init.parts and "data" not in init.relative_to(root).parts
    }
    assert sorted(folders - listed) == [], "add these packages to [tool.setuptools] packages in pyproject.toml"


FRONT_DOORS = ("harness", "harness.blocks")


def _imported_module_names(path: Path) -> list[str]:
    """The modules a file imports, relative imports resolved (``from harness import x`` gives ``harness``)."""
    package_parts = path.relative_to(REPO).with_suffix("").parts[:-1]
    modules = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package_parts[: len(package_parts) - node.level + 1]) if node.level else ""
            modules.append(".".join(part for part in (base, node.module or "") if part))
    return modules


@pytest.mark.parametrize("folder", ["plugins", "tasks"])
def test_builtins_use_only_the_two_front_doors(folder):
    """Built-in plugins and tasks are written like third-party ones: they import ``harness`` (the contract) and
    ``harness.blocks`` (the building blocks), nothing else of the core (their own modules aside)."""
    namespace = f"harness.{folder}"
    offenders = [
        f"{path.relative_to(REPO)} imports {module}; take the name from harness or harness.blocks"
        for path in sorted((REPO / folder).rglob("*.py"))
        for module in _imported_module_names(path)
        if module.split(".")[0] == "harness"
        and module not in FRONT_DOORS
        and not module.startswith("harness.blocks.")  # a group of the building blocks
        and not (module == namespace or module.startswith(namespace + "."))
    ]
    assert not offenders, "\n".join(offenders)


# What the building blocks may import from the core besides the front door and each other: the layers below the
# plugin contract (errors, data types, capabilities, options, profiles, devices, metrics, the hub check, atomic files
# and checkpoints). Never the contract's implementation (plugin_api), the store, the runner, the registry, the CLI.
BLOCK_PACKAGES = (
    "harness.nn",
    "harness.evaluation",
    "harness.training",
    "harness.training_loop",
    "harness.pair_scorer",
    "harness.blocks",
)
BLOCK_FOUNDATIONS = (
    "harness",
    "harness.errors",
    "harness.data",
    "harness.capabilities",
    "harness.options",
    "harness.profiles",
    "harness.device",
    "harness.distributed",
    "harness.metrics",
    "harness.hub",
    "harness.store_files",
    "harness.files",
    "harness.checkpoints",
    "harness.progress",
    "harness.deprecation",
    # what a training step and an encode report to (the curve recorder, the embedding cache): both import only
    # foundations at module level
    "harness.curves",
    "harness.embedding_cache",
)


def _block_files() -> list[Path]:
    return sorted(
        [
            *(REPO / "harness" / "nn").rglob("*.py"),
            *(REPO / "harness" / "evaluation").rglob("*.py"),
            REPO / "harness" / "training.py",
            REPO / "harness" / "training_loop.py",
            *(REPO / "harness" / "blocks").glob("*.py"),
        ]
    )


def test_public_blocks_import_nothing_private():
    pending = set()
    if not (REPO / "harness" / "checkpoints.py").exists():  # until the checkpoint format has its public module
        pending.add(("harness/nn/mlm.py", "harness.store"))
    offenders = []
    for path in _block_files():
        for module in _imported_module_names(path):
            if module.split(".")[0] != "harness" or module in BLOCK_FOUNDATIONS:
                continue
            if any(module == package or module.startswith(package + ".") for package in BLOCK_PACKAGES):
                continue
            if (str(path.relative_to(REPO)), module) not in pending:
                offenders.append(f"{path.relative_to(REPO)} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_blocks_front_door_resolves_every_name():
    import harness.blocks as blocks

    listed = [name for names in blocks._GROUPS.values() for name in names]
    assert len(listed) == len(set(listed)), "a name of harness.blocks is in two groups"
    assert sorted(blocks.__all__) == sorted({*listed, *blocks._MODULES})
    assert not set(blocks.__all__) & set(blocks._DEPRECATED), "a deprecated name is still listed"
    for name in blocks.__all__:
        assert getattr(blocks, name) is not None, name
    assert set(blocks.__all__) <= set(dir(blocks))
    with pytest.raises(AttributeError, match="no attribute 'no_such_block'"):
        blocks.no_such_block  # noqa: B018
    assert not set(blocks.__all__) & set(__import__("harness").__all__), "a name is in both front doors"


def test_each_group_of_the_blocks_offers_what_the_front_door_lists():
    """``harness.blocks`` finds a name's group from the group module's ``__all__`` read from its source (importing a
    group to look would load torch): what it read is what the imported module declares, every name resolves to the
    same object both ways, and the groups' ``TYPE_CHECKING`` star imports (what IDEs and type checkers read) cover
    every group."""
    import harness.blocks as blocks

    source = (REPO / "harness" / "blocks" / "__init__.py").read_text(encoding="utf-8")
    for group, names in blocks._GROUPS.items():
        module = importlib.import_module(f"harness.blocks.{group}")
        assert sorted(module.__all__) == sorted(names), group
        assert f"from .{group} import *" in source, f"{group} is not imported under TYPE_CHECKING"
        for name in names:
            assert getattr(module, name) is getattr(blocks, name), name
    files = {path.stem for path in (REPO / "harness" / "blocks").glob("*.py")} - {"__init__"}
    assert files == set(blocks._GROUPS), "a group module is missing from harness.blocks._GROUP_MODULES"
    assert (REPO / "harness" / "py.typed").is_file()


@pytest.mark.parametrize("old", ["FIRST", "SECOND", "PADDING", "Pair", "BM25", "rake_phrases", "masked_copy"])
def test_deprecated_block_names_warn_and_still_work(old):
    import harness.blocks as blocks

    module, new = blocks._DEPRECATED[old]
    with pytest.warns(DeprecationWarning, match=rf"harness\.blocks\.{old} is deprecated.*use {module}\.{new}"):
        value = getattr(blocks, old)
    assert value is getattr(importlib.import_module(module), new)


@pytest.mark.parametrize(
    "name",
    [
        "stale_temporary",
        "remove_stale_temporaries",
        "temporary_prefix",
        "build_checkpoint",
        "checkpoint_complete",
        "checkpoint_problem",
    ],
)
def test_store_internals_are_deprecated_at_the_top_level(name):
    """The store's machinery left the contract: ``harness.<name>`` warns (and still works) for one version; its own
    module keeps it."""
    import harness
    import harness.api

    assert name not in harness.__all__ and name not in harness.api.__all__
    module = importlib.import_module(harness.api._STORE_INTERNALS[name])
    for front in (harness, harness.api):
        with pytest.warns(DeprecationWarning, match=rf"{front.__name__}\.{name} is deprecated.*{module.__name__}"):
            assert getattr(front, name) is getattr(module, name)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        harness.no_such_name  # noqa: B018


def test_importing_harness_does_not_load_torch():
    # `harness list`, `harness validate` and plugin discovery stay fast; torch loads with the first model.
    code = "import sys, harness, harness.capabilities; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_blocks_load_lazily():
    """``harness.blocks`` imports a name's module on first use: a task that takes only the evaluation sample and
    per-example scores does not load torch."""
    code = (
        "import sys, harness.blocks; from harness.blocks import evaluation_sample, ExampleScores, PairSet; "
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
