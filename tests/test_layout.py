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
                    target = module[len(prefix):].split(".")[0]
                    if target and target != own and target != "__init__":
                        offenders.append(f"{path.relative_to(REPO)} imports {module}")
            if folder == "plugins" and (module.startswith("harness.tasks") or module.startswith("tasks.")):
                offenders.append(f"{path.relative_to(REPO)} imports {module}")
            if folder == "tasks" and (module.startswith("harness.plugins") or module.startswith("plugins.")):
                offenders.append(f"{path.relative_to(REPO)} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_core_names_no_plugin_or_task():
    offenders = []
    for path in sorted((REPO / "harness").rglob("*.py")):
        for module in imported_modules(path):
            if module.split(".")[:2] in (["harness", "plugins"], ["harness", "tasks"]) or module.split(".")[0] in (
                "plugins", "tasks"
            ):
                offenders.append(f"{path.relative_to(REPO)} imports {module}")
    assert not offenders, "\n".join(offenders)


BUILTIN_ENTRY_POINTS = sorted(
    ep.name for ep in importlib.metadata.entry_points(group="harness")
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


PUBLIC_MODULES = ("harness", "harness.api", "harness.nn", "harness.evaluation", "harness.training", "harness.testing")


@pytest.mark.parametrize("folder", ["plugins", "tasks"])
def test_builtins_use_only_the_public_api(folder):
    """Built-in plugins are written like third-party ones: only the public modules of harness."""
    namespace = f"harness.{folder}"
    offenders = []
    for path in sorted((REPO / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = []
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules = [node.module]
            for module in modules:
                if module.split(".")[0] != "harness" or module.startswith(namespace):
                    continue
                if not any(module == public or module.startswith(public + ".") for public in PUBLIC_MODULES[2:]) \
                        and module not in PUBLIC_MODULES[:2]:
                    offenders.append(f"{path.relative_to(REPO)} imports {module}")
    assert not offenders, "\n".join(offenders)


def test_importing_harness_does_not_load_torch():
    # `harness list`, `harness validate` and plugin discovery stay fast; torch loads with the first model.
    code = "import sys, harness, harness.capabilities; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
