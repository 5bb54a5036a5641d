"""The core's structure: its layers (:data:`LAYERS`, the one declared order; docs/architecture.md shows it), no
import that runs up them and no import loop inside harness/, and no registered model's or task's name as a string
literal in harness/ (the core names no particular plugin; tests/test_layout.py checks the plugins' imports)."""

from __future__ import annotations

import ast
import re
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
    """Module -> the package modules it imports (:func:`imports`: every import statement anywhere in the file: lazy
    imports still make a loop, since whichever runs first needs the other, and a type the lower module needs from the
    higher one under TYPE_CHECKING is an arrow upwards all the same).

    The implicit import of a module's parent packages is not an arrow: a package's ``__init__`` importing its own
    submodules (its public face) would otherwise make every package a loop with each of its submodules."""
    graph: dict[str, set[str]] = {module_name(path, root): set() for path in root.rglob("*.py")}
    for module, target, _ in imports(root):
        graph[module].add(target)
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


# The core's layers, lowest first: a module imports only modules of its own layer and of the layers below it. An
# entry names a module or a package (then every module in it). docs/architecture.md, "Layers", shows this table
# (test_the_architecture_page_shows_the_declared_layers). ``from harness import X`` is an import of the module the
# front door takes X from (harness/__init__.py, harness/api.py): the building blocks import the contract that way.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "ground",
        (
            "harness.status",
            "harness.errors",
            "harness.deprecation",
            "harness.environment",
            "harness.progress",
            "harness.baseline",
            "harness.capabilities",
            "harness.metrics",
            "harness.spec_grammar",
            "harness.ranked_texts",
            "harness.profiles",
            "harness.distributed",
            "harness.hub",
            "harness.options",
            "harness.contamination",
        ),
    ),
    (
        "foundations",
        (
            "harness.store_files",
            "harness.files",
            "harness.locks",
            "harness.device",
            "harness.download",
            "harness.fingerprint",
            "harness.data",
            "harness.propositions",
            "harness.consistency",
            "harness.checkpoints",
            "harness.cache",
            "harness.embedding_cache",
        ),
    ),
    ("store", ("harness.record", "harness.store", "harness.curves")),
    ("contract", ("harness.plugin_api", "harness.hookspecs")),
    ("training loop", ("harness.training_loop",)),
    ("networks", ("harness.nn",)),
    ("evaluation", ("harness.evaluation",)),
    ("scored-pair training", ("harness.training", "harness.pair_scorer")),
    ("blocks front door", ("harness.blocks",)),
    ("registry and specs", ("harness.registry", "harness.spec", "harness.matrix")),
    ("stored scores", ("harness.stored_scores", "harness.trackers")),
    ("run stages", ("harness.run",)),
    ("comparison", ("harness.compare",)),
    ("outputs", ("harness.leaderboard", "harness.components", "harness.results")),
    ("contract front door", ("harness", "harness.api")),
    ("executors and exports", ("harness.executors", "harness.publish", "harness.export")),
    ("front end", ("harness.cli", "harness.testing", "harness.__main__")),
)


def layer_of(module: str, layers=LAYERS) -> int | None:
    """The index of the layer whose entry is ``module`` or a package holding it (the longest entry wins)."""
    best = None
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            inside = module == entry or module.startswith(entry + ".")
            if inside and (best is None or len(entry) > len(best[1])):
                best = (index, entry)
    return None if best is None else best[0]


def _front_door_names(root: Path) -> dict[str, str]:
    """Name -> the module the front door (``harness/__init__.py``, ``harness/api.py``) takes it from, for the names it
    imports at module level (``if TYPE_CHECKING`` included, functions not)."""
    names: dict[str, str] = {}
    for file in ("api.py", "__init__.py"):  # __init__ last: its ``from .api import *`` resolves through api's names
        path = root / file
        if not path.exists():
            continue
        body = list(ast.parse(path.read_text(encoding="utf-8")).body)
        statements = [*body, *(node for stmt in body if isinstance(stmt, ast.If) for node in stmt.body)]
        for node in statements:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                source = f"{root.name}.{node.module}"
                for alias in node.names:
                    if alias.name != "*":
                        names.setdefault(alias.asname or alias.name, names.get(alias.name, source))
    return names


def imports(root: Path = HARNESS) -> list[tuple[str, str, int]]:
    """(module, imported package module, line) for every import statement of every file under ``root``, wherever it
    stands (top level, inside a function, under TYPE_CHECKING). ``from package import name`` imports
    ``package.name`` when that is a module; ``from harness import name`` imports the module the front door takes
    ``name`` from (``harness`` itself for its own names, such as ``__version__``)."""
    files = sorted(root.rglob("*.py"))
    modules = {module_name(path, root) for path in files}
    front_door = _front_door_names(root)
    found = []
    for path in files:
        name = module_name(path, root)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                    source = f"{base}.{node.module}" if node.module else base
                else:
                    source = node.module or ""
                for alias in node.names:
                    submodule = f"{source}.{alias.name}"
                    if submodule in modules:
                        targets.append(submodule)
                    elif source == root.name and alias.name in front_door:
                        targets.append(front_door[alias.name])
                    else:
                        targets.append(source)
            found.extend((name, target, node.lineno) for target in targets if target in modules and target != name)
    return found


def upward_imports(root: Path = HARNESS, layers=LAYERS) -> list[str]:
    """Every import from a lower layer into a higher one, as ``module:line imports target (layer < layer)``."""
    found = []
    for module, target, line in imports(root):
        here, there = layer_of(module, layers), layer_of(target, layers)
        if here is not None and there is not None and there > here:
            found.append(f"{module}:{line} imports {target} ({layers[here][0]} < {layers[there][0]})")
    return sorted(set(found))


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A synthetic ``harness`` package of ``files`` (relative path -> source) under ``tmp_path``."""
    package = tmp_path / "harness"
    for relative, source in files.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(source)
    return package


def test_the_layer_checker_sees_every_kind_of_upward_import(tmp_path):
    """The layer check can fail: a module-level, a lazy, a TYPE_CHECKING and a front-door import up a synthetic
    tree's layers are each reported; imports down and within a layer are not."""
    package = _tree(
        tmp_path,
        {
            "__init__.py": "from .api import *\n",
            "api.py": "from .high import Thing\n",
            "low/__init__.py": "",
            "low/a.py": "from ..high import Thing\nfrom . import b\n",
            "low/b.py": "def f():\n    import harness.high\n",
            "low/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.high import Thing\n",
            "low/d.py": "from harness import Thing\n",
            "high.py": "from .low import a\nclass Thing: ...\n",
        },
    )
    layers = (("low", ("harness.low",)), ("high", ("harness.high",)), ("door", ("harness", "harness.api")))
    assert upward_imports(package, layers) == [
        "harness.low.a:1 imports harness.high (low < high)",
        "harness.low.b:2 imports harness.high (low < high)",
        "harness.low.c:3 imports harness.high (low < high)",
        "harness.low.d:1 imports harness.high (low < high)",
    ]


def test_every_core_module_has_a_layer():
    modules = {module_name(path) for path in HARNESS.rglob("*.py")}
    unplaced = sorted(module for module in modules if layer_of(module) is None)
    assert not unplaced, f"modules in no layer (add them to LAYERS and docs/architecture.md): {unplaced}"
    entries = [entry for _, layer in LAYERS for entry in layer]
    assert len(entries) == len(set(entries)), "a module is in two layers"
    missing = [entry for entry in entries if entry not in modules]
    assert not missing, f"LAYERS names modules that do not exist: {missing}"


def test_no_import_runs_up_the_layers():
    found = upward_imports()
    assert not found, "imports that run up the layers (move what both need down, or the importer up):\n" + "\n".join(
        found
    )


def test_the_architecture_page_shows_the_declared_layers():
    """docs/architecture.md's layer table lists LAYERS in the same order, the same modules per layer (written
    ``harness.x`` -> ``x``, packages as ``x/``)."""
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    shown = [(cells[0].strip(), sorted(re.findall(r"`([^`]+)`", cells[1]))) for cells in rows[1:]]

    def written(module: str) -> str:
        if module == "harness":
            return "harness"
        short = module.removeprefix("harness.")
        return f"{short}/" if (HARNESS / short.replace(".", "/")).is_dir() else short

    declared = [(name, sorted(written(module) for module in entries)) for name, entries in LAYERS]
    assert shown == declared


def test_loop_finder_sees_loops_at_every_depth(tmp_path):
    """The checks below can fail: a lazy import and a TYPE_CHECKING import each close a loop here."""
    package = _tree(
        tmp_path,
        {
            "__init__.py": "from .a import x\n",
            "a.py": "from .sub import b\n",
            "sub/__init__.py": "",
            "sub/b.py": "def f():\n    from ..c import y\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import a\n",
            "d.py": "import harness.c\n",
        },
    )
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
