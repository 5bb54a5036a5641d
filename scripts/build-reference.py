"""Write docs/reference.md, the reference of every public name, from the docstrings in the code.

One section per public module: ``harness`` (the plugin contract), its hooks (``harness.hookspecs``), each group of
the building blocks (``harness.blocks.<group>``, and the whole modules it offers), and ``harness.testing``. A name is
documented by its docstring or, for a constant, by the comment on the line that assigns it.

    python scripts/build-reference.py           # rewrite docs/reference.md
    python scripts/build-reference.py --check   # exit 1 if docs/reference.md differs from a fresh generation

tests/test_reference.py checks that the committed page equals a fresh generation and that no public name lacks
documentation.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "reference.md"
HEADER = """# Reference

Every public name of harness, with its signature and its documentation, generated from the code by
`scripts/build-reference.py` (do not edit by hand: tests/test_reference.py checks this page equals a fresh
generation). The guides say when to use what: [writing-plugins.md](writing-plugins.md) and
[testing-plugins.md](testing-plugins.md). Deprecated names are listed in [CHANGELOG.md](../CHANGELOG.md), not here.
"""
MAX_VALUE_CHARACTERS = 100  # a constant's value is shown when its repr is at most this long


@dataclass
class Entry:
    name: str
    heading: str  # the name with its signature, or with its value
    text: str  # its documentation; empty when it has none


def public_modules() -> list[tuple[str, Any, str, list[str]]]:
    """``(section title, module, what it is, its public names)`` in page order."""
    import harness
    import harness.blocks as blocks
    import harness.testing as testing

    sections = [
        (
            "harness",
            harness,
            "The plugin contract (the first front door; the same names as `harness.api`).",
            sorted(harness.__all__, key=str.lower),
        )
    ]
    hooks = importlib.import_module("harness.hookspecs")
    hook_names = [
        name for name, value in vars(hooks).items() if inspect.isfunction(value) and hasattr(value, "harness_spec")
    ]
    sections.append(
        ("harness.hookspecs", hooks, "The hooks a plugin implements (with `@harness.hookimpl`).", hook_names)
    )
    for group in blocks._GROUPS:
        module = importlib.import_module(f"harness.blocks.{group}")
        sections.append(
            (module.__name__, module, _first_paragraph(module.__doc__), sorted(module.__all__, key=str.lower))
        )
    for name, module_name in blocks._MODULES.items():
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [
            key for key, value in vars(module).items() if not key.startswith("_") and _defined_in(value, module)
        ]
        sections.append(
            (
                f"harness.blocks.{name}",
                module,
                f"`{module_name}`, offered as one name. " + _first_paragraph(module.__doc__),
                sorted(names, key=str.lower),
            )
        )
    sections.append(("harness.testing", testing, _first_paragraph(testing.__doc__), list(testing.__all__)))
    return sections


def _defined_in(value: Any, module: Any) -> bool:
    return (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == module.__name__


def _first_paragraph(text: str | None) -> str:
    paragraph = inspect.cleandoc(text or "").split("\n\n")[0]
    return " ".join(paragraph.split())


def _assignment_comments(module_name: str) -> dict[str, str]:
    """``name -> comment`` for module-level assignments with a comment on their line, or on the lines just above."""
    module = importlib.import_module(module_name)
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comments: dict[str, str] = {}
    for node in _top_level(ast.parse(source).body):
        targets = []
        if isinstance(node, ast.Assign):
            targets = [
                element
                for target in node.targets
                for element in (target.elts if isinstance(target, ast.Tuple) else [target])
            ]
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        names = [target.id for target in targets if isinstance(target, ast.Name)]
        if not names:
            continue
        trailing = re.search(r"#\s*(.*)$", lines[node.end_lineno - 1]) or re.search(
            r"#\s*(.*)$", lines[node.lineno - 1]
        )
        above = []
        row = node.lineno - 2
        while row >= 0 and lines[row].lstrip().startswith("#"):
            above.insert(0, lines[row].lstrip()[1:].strip())
            row -= 1
        text = " ".join([*above, trailing.group(1) if trailing and "noqa" not in trailing.group(1) else ""]).strip()
        for name in names:
            if text:
                comments[name] = text
    return comments


def _top_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's statements, with those inside top-level ``try``/``if`` blocks (a version read in a ``try``)."""
    statements = []
    for node in body:
        statements.append(node)
        if isinstance(node, (ast.Try, ast.If)):
            statements += _top_level([*node.body, *node.orelse])
    return statements


def _source_module(owner: str, name: str, value: Any) -> str:
    """The module whose source assigns a constant ``name`` (the first that does, following re-exports)."""
    module = importlib.import_module(owner)
    seen = {owner}
    queue = [owner]
    while queue:
        current = queue.pop(0)
        try:
            tree = ast.parse(inspect.getsource(importlib.import_module(current)))
        except (OSError, TypeError):
            continue
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                flat = [
                    element
                    for target in targets
                    for element in (target.elts if isinstance(target, ast.Tuple) else [target])
                ]
                if any(isinstance(target, ast.Name) and target.id == name for target in flat):
                    return current
            if isinstance(node, ast.ImportFrom) and any(alias.name in (name, "*") for alias in node.names):
                base = current if hasattr(importlib.import_module(current), "__path__") else current.rpartition(".")[0]
                source = node.module or ""
                if node.level:
                    parts = base.split(".")
                    source = ".".join(parts[: len(parts) - node.level + 1] + ([source] if source else []))
                if source not in seen:
                    seen.add(source)
                    queue.append(source)
    return module.__name__


class _Annotation(str):
    """An annotation kept as text (``from __future__ import annotations``), shown without quotes."""

    def __repr__(self) -> str:
        return str(self)


def _signature(value: Any) -> str:
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return "(...)"

    def unquoted(annotation: Any) -> Any:
        return _Annotation(annotation) if isinstance(annotation, str) else annotation

    signature = signature.replace(
        parameters=[
            parameter.replace(annotation=unquoted(parameter.annotation)) for parameter in signature.parameters.values()
        ],
        return_annotation=unquoted(signature.return_annotation),
    )
    return re.sub(r" at 0x[0-9a-f]+", "", str(signature))


def _own_docstring(cls: type) -> str:
    """A class's docstring, not one it inherits nor the signature a dataclass writes in its place."""
    text = vars(cls).get("__doc__") or ""
    return "" if text.startswith(f"{cls.__name__}(") else inspect.cleandoc(text)


def entry_for(owner: str, name: str, value: Any) -> Entry:
    if inspect.isclass(value):
        bases = [base.__name__ for base in value.__bases__ if base is not object]
        heading = f"class {name}" + (f"({', '.join(bases)})" if bases else "")
        if not issubclass(value, BaseException):
            heading += (
                f"\n\n`{name}{_signature(value)}`"
                if "__init__" in vars(value) or hasattr(value, "__dataclass_fields__")
                else ""
            )
        text = _own_docstring(value)
    elif inspect.ismodule(value):
        heading = f"module {value.__name__}"
        text = inspect.getdoc(value) or ""
    elif callable(value) and (inspect.isfunction(value) or inspect.isbuiltin(value) or hasattr(value, "__wrapped__")):
        heading = f"{name}{_signature(value)}"
        text = inspect.getdoc(value) or ""
    else:
        shown = repr(value)
        plain = isinstance(value, (str, int, float, tuple, frozenset)) and not name.startswith("__")
        heading = (
            f"{name} = {shown}" if plain and len(shown) <= MAX_VALUE_CHARACTERS else (f"{name}: {type(value).__name__}")
        )
        text = _assignment_comments(_source_module(owner, name, value)).get(name, "")
    return Entry(name, heading, text.strip())


def entries() -> list[tuple[str, str, list[Entry]]]:
    return [
        (title, about, [entry_for(module.__name__, name, getattr(module, name)) for name in names])
        for title, module, about, names in public_modules()
    ]


def render() -> str:
    sections = entries()
    out = [HEADER, "## Contents\n"]
    out += [f"- [`{module}`](#{_anchor(module)}) ({len(items)})" for module, _, items in sections]
    for module, about, items in sections:
        out.append(f"\n## {module}\n\n{_markdown(about)}\n")
        for item in items:
            first, _, rest = item.heading.partition("\n\n")
            out.append(f"### `{first}`\n")
            if rest:
                out.append(rest + "\n")
            if item.text:
                out.append(_markdown(item.text) + "\n")
    return "\n".join(out).rstrip("\n") + "\n"


def _anchor(module: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", module.lower())


def _markdown(text: str) -> str:
    """A docstring as Markdown: reST roles and double backticks become code spans; headings in it become bold."""
    text = re.sub(r":(?:func|class|mod|meth|attr|data|exc|obj):`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    return "\n".join(f"**{line.lstrip('#').strip()}**" if line.startswith("#") else line for line in text.splitlines())


def undocumented() -> list[str]:
    """``module.name`` of every public name without a docstring or comment."""
    return [f"{module}.{item.name}" for module, _, items in entries() for item in items if not item.text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/reference.md is not up to date")
    arguments = parser.parse_args(argv)
    page = render()
    if arguments.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        if current != page:
            print("docs/reference.md is out of date: run python scripts/build-reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO)} ({sum(len(items) for _, _, items in entries())} names)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
