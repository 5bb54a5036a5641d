"""Code, tests and docs say what a thing does or guarantees, not which tracker issue asked for it: an issue number
means nothing to a reader without the tracker, and sections numbered by issue grow by history instead of by topic.
The release history (CHANGELOG.md) is left out: it describes each change in its own words."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\d", re.IGNORECASE)
FOLDERS = ("harness", "plugins", "tasks", "tests", "docs", "benchmarks", "scripts", "examples", "matrices")
TOP_LEVEL_FILES = ("README.md", "Makefile", "pyproject.toml")
# What people and tools write; data files are left out (STS sentences such as "forces issue 4 demolition orders").
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".cfg", ".sh", ".html", ".css", ".js", ".j2", ".rst"}
SKIPPED_PARTS = {"build", "__pycache__", ".venv", "node_modules"}
THIS_FILE = Path(__file__).resolve()  # its examples name issues on purpose


def written_files():
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            if not path.is_file() or SKIPPED_PARTS & set(path.relative_to(REPO).parts) or path == THIS_FILE:
                continue
            if path.suffix in TEXT_SUFFIXES or (folder == "scripts" and not path.suffix):
                yield path
    for name in TOP_LEVEL_FILES:
        yield REPO / name


def test_no_issue_numbers_in_code_tests_or_docs():
    found = []
    for path in written_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in ISSUE_NUMBER.finditer(text):  # over the whole text: "issue" may end a line, its number begin one
            number = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(REPO)}:{number}: {text.splitlines()[number - 1].strip()[:100]}")
    assert not found, "describe the change or the guarantee instead of citing its issue:\n" + "\n".join(found)


def test_the_check_finds_an_issue_number():
    assert ISSUE_NUMBER.search("a FIFO is refused (Issue 50)") and ISSUE_NUMBER.search("since issues 34, 49")
    assert ISSUE_NUMBER.search("see issue #25") and ISSUE_NUMBER.search("the rule before issue\n    49")
    assert not ISSUE_NUMBER.search("an issue of the data, 4 files") and not ISSUE_NUMBER.search("tissue 4")
