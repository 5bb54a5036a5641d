"""The code of docs/plugins/unsupervised-objective.md ("An unsupervised method in one file") runs as written: its
plugin module is written to a folder on sys.path and its test block is executed (tiny BERT backbone, smoke budget)."""

from __future__ import annotations

import re
import sys

from conftest import REPO

CHAPTER = "# An unsupervised method in one file"


def chapter_code_blocks(text: str, heading: str) -> list[str]:
    """The ```python blocks of one ``## `` chapter of a Markdown page, in order."""
    start = text.index(heading + "\n")
    following = text.find("\n## ", start + len(heading))
    chapter = text[start : following if following >= 0 else len(text)]
    return re.findall(r"^```python\n(.*?)^```$", chapter, flags=re.S | re.M)


def test_unsupervised_method_chapter_runs(tmp_path, monkeypatch):
    page = REPO / "docs" / "plugins" / "unsupervised-objective.md"
    blocks = chapter_code_blocks(page.read_text(encoding="utf-8"), CHAPTER)
    assert len(blocks) == 2, "the chapter has the plugin module and its test"
    plugin_code, test_code = blocks
    assert "from harness.blocks import" in plugin_code and "objective_model(" in plugin_code
    (tmp_path / "word_order.py").write_text(plugin_code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "word_order", raising=False)
    try:
        exec(compile(test_code, "docs/plugins/unsupervised-objective.md (test block)", "exec"), {})
    finally:
        sys.modules.pop("word_order", None)
