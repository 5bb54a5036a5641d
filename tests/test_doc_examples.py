"""Every code block of the plugin pages (docs/writing-plugins.md, docs/plugins/*.md) runs as written.

Each page runs in a temporary folder of its own, its blocks in order:

- a ```python block whose first line is ``# path.py`` (e.g. ``# my_plugin/__init__.py``) is that file: it is
  written there, and the folder is on ``sys.path``, as ``pip install -e`` would make it importable; later blocks
  import it, and the page's ``harness`` commands load it as a plugin; the files of the other plugin pages are
  written there too (a guide builds on an earlier one's module, as its reader does), but not loaded as plugins;
- any other ```python block is executed, all of a page's blocks in one namespace (a later block may use what an
  earlier one defined);
- a ```bash block runs line by line: ``harness ...`` (after optional ``VAR=value`` words) runs in this process
  (``harness.testing.run_harness``) and must exit 0, with the tiny BERT as backbone where the command takes one and
  names none; ``pip install -e ./folder`` is what the written files already are; any other command fails the test;
- a ```bash block whose first line is ``# doc-test: skip: REASON`` is not run, and says why on the page itself;
- other blocks (```toml, folder trees) are shown, not run.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import harness.testing as ht
from conftest import REPO

PAGES = [REPO / "docs" / "writing-plugins.md", *sorted((REPO / "docs" / "plugins").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", flags=re.S | re.M)
FILE_HEADER = re.compile(r"#\s+([\w/]+\.py)\s*$")
SKIP = re.compile(r"#\s*doc-test:\s*skip:\s*(\S.*)$")
ENV_WORD = re.compile(r"[A-Z_][A-Z0-9_]*=\S*$")
# Commands that take --backbone: the tests give them the tiny BERT when the page names none.
TAKES_BACKBONE = {"run", "validate", "rescore", "export"}


@dataclass
class Block:
    page: Path
    language: str
    code: str

    @property
    def where(self) -> str:
        page = self.page.relative_to(REPO) if self.page.is_relative_to(REPO) else self.page
        return f"{page} ({self.language} block: {self.code.splitlines()[0][:60]!r})"


@dataclass
class PageRun:
    ran: list[Block] = field(default_factory=list)
    skipped: list[tuple[Block, str]] = field(default_factory=list)
    shown: list[Block] = field(default_factory=list)


def blocks(page: Path) -> list[Block]:
    return [Block(page, language, code) for language, code in FENCE.findall(page.read_text(encoding="utf-8"))]


def module_names(files: list[Path], root: Path) -> list[str]:
    """The importable names of the written files: a package for ``pkg/__init__.py``, else the module."""
    names = []
    for path in files:
        relative = path.relative_to(root)
        name = relative.parent.as_posix() if relative.name == "__init__.py" else relative.with_suffix("").as_posix()
        if "/" not in name and name not in names:
            names.append(name)
    return names


def run_command_line(line: str, block: Block, plugins: list[str], tmp_path: Path) -> None:
    words = shlex.split(line, comments=True)
    if not words:
        return
    env = {}
    while words and ENV_WORD.match(words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    if words[:3] == ["pip", "install", "-e"]:
        return  # the page's files are written and importable already
    assert words and words[0] == "harness", (
        f"{block.where}: {line!r} is not a harness command; mark the block '# doc-test: skip: REASON'"
    )
    argv = words[1:]
    if argv and argv[0] in TAKES_BACKBONE and "--backbone" not in argv:
        argv += ["--backbone", ht.default_tiny_backbone()]
    extra = [name for name in env.pop("HARNESS_EXTRA_PLUGINS", "").split(",") if name]
    result = ht.run_harness(
        *argv,
        plugins=list(dict.fromkeys([*plugins, *extra])),
        env={"HARNESS_RESULTS_DIR": str(tmp_path / "results"), **env},
    )
    assert result.exit_code == 0, f"{block.where}: {line!r} exited {result.exit_code}:\n{result.stderr[-3000:]}"


def run_page(page: Path, tmp_path: Path, monkeypatch) -> PageRun:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    outcome, namespace, written = PageRun(), {"__name__": "doc_example"}, []
    for other in PAGES:
        for block in blocks(other):
            header = FILE_HEADER.match(block.code.splitlines()[0]) if block.language == "python" else None
            if other != page and header:
                (tmp_path / header.group(1)).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / header.group(1)).write_text(block.code, encoding="utf-8")
    modules_before = set(sys.modules)
    try:
        for block in blocks(page):
            first_line = block.code.splitlines()[0] if block.code.strip() else ""
            if block.language == "python" and FILE_HEADER.match(first_line):
                target = tmp_path / FILE_HEADER.match(first_line).group(1)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(block.code, encoding="utf-8")
                written.append(target)
                compile(block.code, str(target), "exec")  # a file with a syntax error fails here, not on import
                outcome.ran.append(block)
            elif block.language == "python":
                exec(compile(block.code, block.where, "exec"), namespace)
                outcome.ran.append(block)
            elif block.language == "bash" and SKIP.match(first_line):
                outcome.skipped.append((block, SKIP.match(first_line).group(1)))
            elif block.language == "bash":
                plugins = module_names(written, tmp_path)
                for line in block.code.replace("\\\n", " ").splitlines():
                    run_command_line(line, block, plugins, tmp_path)
                outcome.ran.append(block)
            else:
                outcome.shown.append(block)
    finally:
        for name in set(sys.modules) - modules_before:  # the page's modules must not leak into other tests
            if getattr(sys.modules[name], "__file__", None) and str(tmp_path) in str(sys.modules[name].__file__):
                del sys.modules[name]
    return outcome


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_code_block_of_the_page_runs(page, tmp_path, monkeypatch):
    outcome = run_page(page, tmp_path, monkeypatch)
    code_blocks = [block for block in blocks(page) if block.language in ("python", "bash")]
    assert len(outcome.ran) + len(outcome.skipped) == len(code_blocks)
    for block, reason in outcome.skipped:
        assert len(reason) > 10, f"{block.where}: a skip says why"


def test_the_plugin_pages_have_runnable_examples():
    """The guides keep their examples: a page of code blocks that all became skips or prose would pass above."""
    counted = {page.name: sum(block.language == "python" for block in blocks(page)) for page in PAGES}
    assert counted["quick-start.md"] >= 2 and sum(counted.values()) >= 15, counted
    skips = [
        block
        for page in PAGES
        for block in blocks(page)
        if block.language == "bash" and SKIP.match(block.code.splitlines()[0])
    ]
    assert len(skips) <= 3, [block.where for block in skips]


def test_a_failing_block_fails_the_page(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("```python\nassert 1 == 2, 'the block ran'\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="the block ran"):
        run_page(page, tmp_path, monkeypatch)
    page.write_text("```bash\nrm -rf build\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="not a harness command"):
        run_page(page, tmp_path, monkeypatch)


def heading_anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def outside_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def test_links_between_the_docs_resolve():
    """README.md, benchmarks/README.md and docs/: every relative link names a file that exists and, for a Markdown
    page, a heading it has."""
    pages = [REPO / "README.md", REPO / "benchmarks" / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", outside_code(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
                continue
            if anchor and destination.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", outside_code(destination.read_text(encoding="utf-8")), flags=re.M)
                if anchor not in {heading_anchor(heading) for heading in headings}:
                    broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert len(pages) > 40
    assert not broken, "\n".join(broken)
