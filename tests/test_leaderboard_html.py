"""The HTML leaderboard page and the bar chart: same numbers as the markdown, sortable, linked to the records."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import harness.testing as ht
from harness.leaderboard import collect_tables, write_leaderboards
from harness.leaderboard.html import render_html_page
from harness.leaderboard.plots import plot_leaderboards
from harness.store import Store


def _record(model, seed, task, score, status="ok", family="fam", backbone="tiny"):
    record = {
        "status": status,
        "model": {
            "name": model,
            "label": model,
            "train_on": None,
            "backbone": backbone,
            "profile": "smoke",
            "hash": f"{model}-hash",
        },
        "model_key": re.sub(r"[^A-Za-z0-9_.\-]", "-", model) + "-key",
        "seed": seed,
        "task": {"name": task, "key": task, "label": task, "family": family, "version": "1"},
        "hardware": "cpu (2 cores)",
    }
    if status == "ok":
        record.update(main_score=score, scores={"spearman": score}, dataset_checksum="0" * 64)
    else:
        record["message"] = f"{status} for the test"
    return record


def _store(root: Path) -> Store:
    store = Store(root)
    for seed, (a, b) in {1: (80.0, 70.0), 2: (82.0, 72.0)}.items():
        store.write("good-key", seed, "t1", _record("good", seed, "t1", a))
        store.write("good-key", seed, "t2", _record("good", seed, "t2", b))
        store.write("other-with-comma-key", seed, "t1", _record("other,with=comma", seed, "t1", 60.0 + seed))
    store.write("other-with-comma-key", 1, "t2", _record("other,with=comma", 1, "t2", None, status="missing"))
    store.write("other-with-comma-key", 2, "t2", _record("other,with=comma", 2, "t2", None, status="missing"))
    return store


class _Cells(HTMLParser):
    """Rows of the page's table as lists of (text, data-sort, links)."""

    def __init__(self):
        super().__init__()
        self.rows, self.headers, self._cell, self._in_head = [], [], None, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = ["", attrs.get("data-sort"), []]
        elif tag == "a" and self._cell is not None:
            self._cell[2].append(attrs["href"])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            (self.headers if tag == "th" else self.rows[-1]).append(tuple(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data


def test_page_has_the_markdown_numbers_sorting_and_record_links(tmp_path):
    store = _store(tmp_path / "store")
    output = tmp_path / "boards"
    written = write_leaderboards(store, output, ("md", "html"))
    page = (output / "fam.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and '<table class="sortable">' in page and "<script>" in page
    assert "http" not in page  # self-contained: nothing fetched
    parser = _Cells()
    parser.feed(page)
    headers = [text for text, _, _ in parser.headers]
    assert headers == ["rank", "model", "seeds", "t1", "t2", "average"]  # one backbone and profile: in the header
    # title, one caption line (the shared backbone and profile), the table, then the notes; no literal backticks
    caption = re.search(r'<h1>[^<]*</h1>\n<p class="caption">([^\n]*)</p>\n<div class="scroll">', page)
    assert caption and "backbone tiny, profile smoke" in caption.group(1)
    assert page.index('<table class="sortable">') < page.index('<ul class="notes">') and "cpu (2 cores)" in page
    assert "`" not in page.split("<script>")[0]
    rows = {cells[1][0]: cells for cells in parser.rows if cells}
    good = rows["good"]
    assert good[3][0].startswith("81.00 ± 1.41") and good[3][1] == "81.000000"
    assert good[-1][0] == "76.00"
    for href in good[3][2]:  # every seed's record, relative to the page
        assert (output / href).resolve().is_file()
    assert len(good[3][2]) == 2
    other = rows["other,with=comma"]
    assert other[4][0].startswith("missing") and other[4][1] == "" and other[-1][0] == "incomplete"
    assert len(other[4][2]) == 2  # a missing cell links the records that say why
    markdown = (output / "fam.md").read_text()
    assert "81.00 ± 1.41" in markdown and "76.00" in markdown
    assert {p.suffix for p in written} == {".md", ".html"}


def test_uneven_backbones_get_a_column(tmp_path):
    store_root = tmp_path / "store"
    store = Store(store_root)
    store.write("a-key", 1, "t1", _record("a", 1, "t1", 50.0, backbone="b1"))
    store.write("b-key", 1, "t1", _record("b", 1, "t1", 55.0, backbone="b2"))
    (table,) = collect_tables(store)
    assert '<th class="text">backbone</th>' in render_html_page(table, store_root)


def test_plot_leaderboard_writes_one_png_per_family(tmp_path):
    store = _store(tmp_path / "store")
    store.write("good-key", 1, "u1", _record("good", 1, "u1", 40.0, family="other"))
    paths = plot_leaderboards(store.root, tmp_path / "plots")
    assert sorted(p.name for p in paths) == ["leaderboard-fam.png", "leaderboard-other.png"]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
    run = ht.run_harness("plot", "leaderboard", "--results", store.root, "--output", tmp_path / "cli-plots")
    assert run.exit_code == 0, run.stderr
    assert (tmp_path / "cli-plots" / "leaderboard-fam.png").is_file()
