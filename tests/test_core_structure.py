"""The core's structure: no import loops inside harness/, and no registered model's or task's name as a
string literal in harness/ (the core names no particular plugin; tests/test_layout.py checks its imports)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

HARNESS = REPO / "harness"

# Loops tolerated for now: none (a new one fails the test below).
KNOWN_LOOPS: frozenset[frozenset[str]] = frozenset()


def module_name(path: Path, root: Path = HARNESS) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path = HARNESS) -> dict[str, set[str]]:
    """Module -> the package modules it imports, from every import statement anywhere in the file: at the top, inside
    functions (lazy imports still make a loop: whichever runs first needs the other) and under TYPE_CHECKING (a type
    the lower module needs from the higher one is an arrow upwards all the same).

    ``from package import name`` is an arrow to ``package.name`` when that is a module, else to ``package``. The
    implicit import of a module's parent packages is not an arrow: a package's ``__init__`` importing its own
    submodules (its public face) would otherwise make every package a loop with each of its submodules."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(path, root) for path in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        name = module_name(path, root)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                    source = f"{base}.{node.module}" if node.module else base
                else:
                    source = node.module or ""
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    targets.add(submodule if submodule in modules else source)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def loops(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def describe(component: set[str], graph: dict[str, set[str]]) -> str:
    arrows = [f"  {a} -> {b}" for a in sorted(component) for b in sorted(graph[a] & component)]
    return f"loop of {len(component)} modules:\n" + "\n".join(arrows)


def test_loop_finder_sees_loops_at_every_depth(tmp_path):
    """The checks below can fail: a lazy import and a TYPE_CHECKING import each close a loop here."""
    package = tmp_path / "harness"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from .a import x\n")
    (package / "a.py").write_text("from .sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    from ..c import y\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import a\n")
    (package / "d.py").write_text("import harness.c\n")
    assert loops(import_graph(package)) == [{"harness.a", "harness.sub.b", "harness.c"}]


def test_no_import_loops_in_the_core():
    graph = import_graph()
    found = loops(graph)
    unexpected = [describe(component, graph) for component in found if frozenset(component) not in KNOWN_LOOPS]
    assert not unexpected, "import loops in harness/ (break them: move the shared piece down a layer):\n" + "\n".join(
        unexpected
    )
    stale = [sorted(known) for known in KNOWN_LOOPS if set(known) not in found]
    assert not stale, f"KNOWN_LOOPS lists loops that no longer exist; remove them: {stale}"


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (module, class, function)."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                ids.add(id(first.value))
    return ids


def test_core_names_no_registered_model_or_task(registry):
    """A string literal in harness/ equal to the name (or alias) of a registered model, recipe or task makes the core
    depend on that plugin. Docstrings are left out: they are documentation (examples such as ``be:pooling=cls``),
    never read by the code. Messages and log lines are not: a message naming a plugin's model is a default in
    disguise."""
    names = {
        *registry.models,
        *registry.model_aliases,
        *registry.recipes,
        *registry.recipe_aliases,
        *registry.tasks,
        *registry.task_aliases,
    }
    assert {"be", "stsb"} <= names, "the built-in plugins did not load; this check would see nothing"
    offenders = []
    for path in sorted(HARNESS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstring_nodes(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and node.value in names
            ):
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not offenders, "the core names registered models/tasks (declare them in the plugin instead):\n" + "\n".join(
        offenders
    )


def _scored_pairs_task(name: str) -> type:
    import harness

    class Declaring(harness.Task):
        metadata = harness.TaskMetadata(
            name=name,
            family=name,
            description="d",
            main_score="spearman",
            metric="m",
            reference="r",
            dataset=name,
            dataset_source="s",
            license="l",
            training_kinds=(harness.SCORED_PAIRS,),
        )
        default_source_for = (harness.SCORED_PAIRS,)

        def evaluate(self, model, ctx):  # pragma: no cover - never run
            raise NotImplementedError

    return Declaring


def test_default_training_source_is_declared_by_a_task(registry):
    """The cross-encoders name no task: their default source is the task that declares itself the default
    scored-pair source (stsb, so their spec keys and published records are unchanged); two declaring tasks are
    refused in one line."""
    import harness
    from harness.errors import DuplicateNameError
    from harness.registry import build_registry

    for name in ("ce", "cbe"):
        assert registry.model(name).default_train_on is None
        assert registry.default_train_on(registry.model(name)) == "stsb"

    class Rival:
        @harness.hookimpl
        def register_tasks(self, register):
            register(_scored_pairs_task("rival-pairs"))

    with pytest.raises(DuplicateNameError, match="'rival-pairs'.*'stsb'|'stsb'.*'rival-pairs'"):
        build_registry(extra_plugins=[Rival()])
    with pytest.raises(harness.PluginContractError, match="does not offer"):
        harness.TaskPlugin(
            _scored_pairs_task("x").metadata,
            lambda options, data_dir: None,
            default_source_for=(harness.UNLABELED_SENTENCES,),
        )
