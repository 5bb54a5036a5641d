"""docs/fidelity.md is the generated index of the fidelity pages (docs/methods, docs/tasks, docs/core): it is current,
every page has its parts, and every section or deviation that the code cites ("docs/fidelity.md, section X") exists."""

from __future__ import annotations

import importlib.util
import re
import sys

from conftest import REPO


def load_index_script():
    spec = importlib.util.spec_from_file_location("fidelity_index", REPO / "scripts" / "fidelity_index.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_index_is_what_the_pages_give():
    index = load_index_script()
    assert (REPO / "docs" / "fidelity.md").read_text(encoding="utf-8") == index.render(index.pages()), (
        "docs/fidelity.md is out of date: run python scripts/fidelity_index.py"
    )


def test_every_page_has_a_title_sources_or_code_and_notes():
    index = load_index_script()
    found = index.pages()
    assert all(found[folder] for folder, _ in index.GROUPS), "a fidelity folder is empty"
    for page in (page for pages in found.values() for page in pages):
        name = page.path.relative_to(REPO)
        assert "Code:" in page.summary or "Sources:" in page.summary, f"{name}: the summary names no sources or code"
        assert page.sections or page.deviations, f"{name}: neither notes nor deviations"
        for deviation in page.deviations:
            assert (
                "Harness:" in page.path.read_text(encoding="utf-8").split(f"**{deviation}.**", 1)[1].split("\n- ")[0]
            ), f"{name}: deviation {deviation!r} does not say what harness does"


def test_the_index_reports_a_malformed_page(tmp_path):
    index = load_index_script()
    page = tmp_path / "x.md"
    page.write_text("no title\n", encoding="utf-8")
    try:
        index.read_page(page)
    except ValueError as error:
        assert "title" in str(error)
    else:
        raise AssertionError("a page without a title was read")


def cited_names() -> set[tuple[str, str]]:
    """(name, file) for every section, subsection or deviation that code cites after "docs/fidelity.md"."""
    cited = set()
    for folder in ("harness", "plugins", "tasks", "examples", "tests", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for mention in re.finditer(r"docs/fidelity\.md", text):
                window = text[mention.end() : mention.end() + 260].replace('\\"', '"')
                window = re.sub(r'"\s*\n\s*f?"', "", window)  # adjacent string literals, e.g. "Two " f"units ..."
                window = " ".join(window.split())
                window = re.split(r'\.(?: |""")', window)[0]
                for name in re.findall(r'(?:section|subsection|rows?|its|and|md,?|\() "([^"]+)"', window):
                    cited.add((name, str(path.relative_to(REPO))))
    return cited


def test_every_citation_in_the_code_finds_its_page():
    index = load_index_script()
    known = set()
    for page in (page for pages in index.pages().values() for page in pages):
        named = page.sections + page.deviations  # a citation may leave out the trailing parenthesis
        known |= set(named) | {index.short_title(name) for name in named}
    cited = cited_names()
    assert len(cited) > 40, "the citation scan found almost nothing: has the citation style changed?"
    missing = sorted(f"{file}: {name!r}" for name, file in cited if name not in known)
    assert not missing, "cited in code but on no fidelity page:\n" + "\n".join(missing)
