"""docs/fidelity.md is the generated index of the fidelity pages (docs/methods, docs/tasks, docs/core): it is current,
every page has its parts, and every section or deviation that the code cites ("docs/methods/be.md, section X") is on
the page the citation names (never the index: a reader should not need two hops)."""

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


FIDELITY_PAGE = re.compile(r"docs/(?:methods|tasks|core)/[\w.-]+\.md|docs/fidelity\.md")


def cited_names() -> set[tuple[str, str, str]]:
    """(name, page, file) for every section, subsection or deviation that code cites after a fidelity page's path
    (up to the end of the sentence or the next page)."""
    cited = set()
    for folder in ("harness", "plugins", "tasks", "examples", "tests", "benchmarks"):
        for path in (REPO / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for mention in FIDELITY_PAGE.finditer(text):
                window = text[mention.end() : mention.end() + 260].replace('\\"', '"')
                window = re.sub(r'"\s*\n\s*f?"', "", window)  # adjacent string literals, e.g. "Two " f"units ..."
                window = " ".join(window.split())
                window = FIDELITY_PAGE.split(re.split(r'\.(?: |""")', window)[0])[0]
                for name in re.findall(
                    r'(?:^,|section|subsection|rows?|its|and|\(|: the|objective:) ?"([^"]+)"', window
                ):
                    cited.add((name, mention.group(0), str(path.relative_to(REPO))))
    return cited


def test_every_citation_in_the_code_finds_its_page():
    index = load_index_script()
    known: dict[str, set[str]] = {}
    for page in (page for pages in index.pages().values() for page in pages):
        named = page.sections + page.deviations  # a citation may leave out the trailing parenthesis
        known[str(page.path.relative_to(REPO))] = set(named) | {index.short_title(name) for name in named}
    cited = cited_names()
    assert len(cited) > 40, "the citation scan found almost nothing: has the citation style changed?"
    through_index = sorted(f"{file}: {name!r}" for name, page, file in cited if page == "docs/fidelity.md")
    assert not through_index, "cite the page that holds the text, not the index docs/fidelity.md:\n" + "\n".join(
        through_index
    )
    missing = sorted(f"{file}: {name!r} ({page})" for name, page, file in cited if name not in known.get(page, ()))
    assert not missing, "cited in code but not on the page the citation names:\n" + "\n".join(missing)
