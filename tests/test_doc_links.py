"""Every pointer into the documentation leads somewhere: each ``docs/<page>.md`` (with or without ``#anchor``), each
markdown link to a ``.md`` page, each ``README.md#anchor`` and each README section named in words (``README
"Section"``) that the code, the tests or the docs cite names a page that exists and a heading on it (GitHub's
anchors). A page that moves or a heading that is renamed fails here, not in a reader's browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

SCANNED = ("harness", "plugins", "tasks", "tests", "docs", "examples", "benchmarks", "scripts")
# A repository path of a page, as code and docs cite it: docs/guide/store.md, docs/core/statistics.md#anchor.
CITED_PAGE = re.compile(r"(?<![\w/.-])(docs/[\w./-]+?\.md)(?:#([\w-]+))?")
# A markdown link to a page of the tree, resolved from the linking page's folder: [text](../guide/store.md#anchor).
LINK = re.compile(r"\]\((?!https?:|mailto:)([^)#\s]*\.md)(?:#([\w-]+))?\)")
README_ANCHOR = re.compile(r"(?<![\w/.-])README\.md#([\w-]+)")
README_SECTION = re.compile(r'README(?:\'s)? (?:section )?"([^"]+)"')


def sources() -> list[Path]:
    found = [REPO / "README.md", REPO / "CHANGELOG.md"]
    for folder in SCANNED:
        found += [path for path in sorted((REPO / folder).rglob("*")) if path.suffix in (".py", ".md")]
    # fixtures are copies of other projects' files; this file's own examples point nowhere on purpose
    return [path for path in found if "fixtures" not in path.relative_to(REPO).parts and path != Path(__file__)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to
    hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def headings(page: Path) -> list[str]:
    """The headings of a markdown page, outside code fences."""
    found, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            found.append(match.group(1).strip())
    return found


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (a repeated heading's get -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for heading in headings(page):
        base = slug(heading)
        count = seen.get(base, 0)
        found.add(base if count == 0 else f"{base}-{count}")
        seen[base] = count + 1
    return found


def problems_of(path: Path, text: str) -> list[str]:
    """What in ``text`` (the content of ``path``) points nowhere."""
    where = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    found = []
    targets: list[tuple[Path, str | None, str]] = []
    targets += [(REPO / page, anchor, page) for page, anchor in CITED_PAGE.findall(text)]
    if path.suffix == ".md":
        targets += [((path.parent / page).resolve(), anchor, page) for page, anchor in LINK.findall(text)]
    targets += [(REPO / "README.md", anchor, "README.md") for anchor in README_ANCHOR.findall(text)]
    for page, anchor, cited in targets:
        if not page.is_file():
            found.append(f"{where}: {cited} does not exist")
        elif anchor and anchor not in anchors(page):
            found.append(f"{where}: {cited}#{anchor}: no such heading")
    readme = set(headings(REPO / "README.md"))
    found += [
        f'{where}: README "{section}": no such section (cite the page that holds the text)'
        for section in README_SECTION.findall(text)
        if section not in readme
    ]
    return found


def test_the_checks_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## A `code` heading, too\n", encoding="utf-8")
    assert anchors(page) == {"title", "a-code-heading-too"}
    text = (
        'see docs/no-such-page.md, docs/guide/store.md#no-such-heading, README.md#nowhere, README "Gone", '
        "[here](missing.md), [there](page.md#a-code-heading-too)"
    )
    assert problems_of(page, text) == [
        f"{page}: docs/no-such-page.md does not exist",
        f"{page}: docs/guide/store.md#no-such-heading: no such heading",
        f"{page}: missing.md does not exist",
        f"{page}: README.md#nowhere: no such heading",
        f'{page}: README "Gone": no such section (cite the page that holds the text)',
    ]


@pytest.mark.parametrize("folder", ["code", "docs"])
def test_every_cited_page_and_heading_exists(folder):
    scanned = [path for path in sources() if (path.suffix == ".md") == (folder == "docs")]
    assert len(scanned) > 20, "the scan found almost nothing"
    found = [problem for path in scanned for problem in problems_of(path, path.read_text(encoding="utf-8"))]
    assert not found, "pointers that lead nowhere:\n" + "\n".join(found)
