"""`harness site`: the generator (fast: a few records copied from published/) and the site in a real browser
(slow: Chromium through Playwright, Debian's `chromium` binary; skipped with the reason when either is missing)."""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

import harness
import harness.testing as ht
from harness.leaderboard.site import NOT_REDISTRIBUTABLE, build_site, finite, texts_payload
from harness.store import Store

PUBLISHED = Path(__file__).resolve().parent.parent / "published"
# Untrained pair (the examples unit decides), a pair trained on the same source (across runs decides), and a row
# trained elsewhere: their stsb (and sts12) records with per-example data.
MODELS = (
    "be-1bb093b549d5",
    "be-3be749136ee2",
    "cbe-dd3354f57000",
    "nm-7a13715212a5",
    "simcse-31026b00ada2",
    "tsdae-9362bfb6465f",
)
SEEDS = ("seed-42", "seed-43")  # the two seeds every row here has (some have seed 44 too)
LEFT_OUT = ("tsdae-9362bfb6465f", "seed-43", "sts12")  # one seed's record missing: a pair that cannot be compared
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def fixture_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site-store")
    for key in MODELS:
        for seed_dir in (PUBLISHED / key / seed for seed in SEEDS):
            for task in ("stsb", "sts12"):
                if (key, seed_dir.name, task) == LEFT_OUT:
                    continue
                for name in (f"{task}.json", f"{task}.examples.npz"):
                    if (seed_dir / name).exists():
                        target = root / key / seed_dir.name / name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy2(seed_dir / name, target)
    return root


@pytest.fixture(scope="module")
def built_site(fixture_store, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site") / "site"
    result = ht.run_harness("site", "--to", folder, "--results", fixture_store)
    assert result.exit_code == 0, result.stderr
    return folder


def _table(site: Path) -> dict:
    (family,) = json.loads((site / "data" / "index.json").read_text())["families"]
    (entry,) = family["tables"]
    return json.loads((site / "data" / "tables" / f"{entry['id']}.json").read_text())


def _row(table: dict, label: str) -> dict:
    return next(row for row in table["rows"] if row["label"] == label)


def _pair(site: Path, table: dict, first: str, second: str) -> dict:
    a, b = sorted((_row(table, first)["index"], _row(table, second)["index"]))
    return json.loads((site / "data" / "compare" / table["id"] / f"{a}-{b}.json").read_text())


def _cli_compare(store: Path, model_a: str, model_b: str, *extra: str) -> dict:
    result = ht.run_harness(
        "compare", model_a, model_b, "--tasks", "stsb,sts12", "--profile", "quick", "--results", store, "--json", *extra
    )
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_site_writes_the_leaderboard_tables_cells(built_site):
    table = _table(built_site)
    assert table["family"] == "senteval" and table["columns"] == ["sts12", "stsb"]
    by_label = {row["label"]: row for row in table["rows"]}
    assert set(by_label) == {
        "be",
        "be:pooling=cls",
        "cbe [train: stsb]",
        "nm [train: bws-cross-topic]",
        "simcse [train: bws-cross-topic]",
        "tsdae [train: bws-cross-topic]",
    }
    nm = by_label["nm [train: bws-cross-topic]"]
    assert nm["train_on"] == "bws-cross-topic" and nm["seeds"] == [42, 43] and nm["complete"]
    assert by_label["be"]["complete"] and not by_label["tsdae [train: bws-cross-topic]"]["complete"]
    assert by_label["tsdae [train: bws-cross-topic]"]["cells"][0]["text"].split(" ")[0].endswith("*")  # seed 42 only
    assert nm["cells"][1]["text"].startswith(f"{nm['cells'][1]['sort']:.2f} ± ") and "[" in nm["cells"][1]["text"]
    scripts = re.findall(r'<script src="([^"]+)"></script>', (built_site / "index.html").read_text())
    shipped = sorted(path.name for path in resources.files("harness.leaderboard").joinpath("site_assets").iterdir())
    assert scripts[0] == "core.js" and scripts[-1] == "app.js"  # the namespace first, the router last
    assert sorted([*scripts, "index.html", "site.css"]) == shipped  # every script loaded, none left out
    assert all((built_site / name).exists() for name in shipped)
    texts = json.loads((built_site / "data" / "texts" / "stsb.json").read_text())
    assert len(texts["pairs"]) == 1379  # the task's own texts, in the order of its per-example data


def _same_numbers(site_pair: dict, cli: dict, tasks: list[str]) -> None:
    site_tasks = {task["task"]: task for task in site_pair["tasks"]}
    cli_tasks = {task["task"]: finite(task) for task in cli["tasks"]}  # JSON has no Infinity: the site says it
    for name in tasks:
        assert site_tasks[name]["score_a"] is not None
        assert site_tasks[name] == cli_tasks[name]  # every number: both units, intervals, p, Holm, verdict


def test_site_compare_equals_harness_compare(built_site, fixture_store):
    table = _table(built_site)
    untrained = _pair(built_site, table, "be", "be:pooling=cls")
    first, second = (table["rows"][untrained[side]]["label"] for side in ("a", "b"))
    _same_numbers(untrained, _cli_compare(fixture_store, first, second, "--seeds", "42"), ["stsb"])
    assert untrained["tasks"][1]["unit"] == "examples"
    trained = _pair(built_site, table, "nm [train: bws-cross-topic]", "simcse [train: bws-cross-topic]")
    first, second = (table["rows"][trained[side]]["label"].split(" [")[0] for side in ("a", "b"))
    cli = _cli_compare(fixture_store, first, second, "--seeds", "42,43", "--train-on", "bws-cross-topic")
    _same_numbers(trained, cli, ["sts12", "stsb"])
    assert all(task["unit"] == "across runs" for task in trained["tasks"])
    assert trained["command"].startswith(f"harness compare {first} {second} ")


def test_site_says_what_is_not_comparable(built_site, fixture_store):
    table = _table(built_site)
    pair = _pair(built_site, table, "tsdae [train: bws-cross-topic]", "nm [train: bws-cross-topic]")
    sts12 = next(task for task in pair["tasks"] if task["task"] == "sts12")
    assert sts12["result"] is None and "tsdae [train: bws-cross-topic] seed 43 has no record" in sts12["reason"]
    stsb = next(task for task in pair["tasks"] if task["task"] == "stsb")
    assert stsb["p_holm"] == stsb["p_value"]  # Holm over the tested tasks only
    # different training sources: one `harness compare` line with a source per side, and the same numbers
    mixed = _pair(built_site, table, "be", "nm [train: bws-cross-topic]")
    rows = [table["rows"][mixed[side]] for side in ("a", "b")]
    sources = [row["train_on"] or "none" for row in rows]
    assert mixed["command"].endswith(f"--train-on-a {sources[0]} --train-on-b {sources[1]}")
    seeds = ",".join(map(str, mixed["seeds"]))
    cli = _cli_compare(
        fixture_store,
        *(row["label"].split(" [")[0] for row in rows),
        *("--seeds", seeds, "--train-on-a", sources[0], "--train-on-b", sources[1]),
    )
    _same_numbers(mixed, cli, ["stsb"])


def test_texts_of_a_task_whose_licence_forbids_redistribution_are_withheld(tmp_path):
    class Metadata:
        license = "not redistributable (the corpus' own terms)"

    class Plugin:
        metadata = Metadata()

    class Registry:
        def task(self, name):
            return Plugin()

    record = tmp_path / "r.json"
    record.write_text(
        json.dumps({"task": {"name": "private", "options": {}}, "model": {"profile": "quick"}, "seed": 1})
    )
    payload = texts_payload(str(record), 3, Registry())
    assert "pairs" not in payload and "forbids redistributing" in payload["withheld"]
    assert NOT_REDISTRIBUTABLE.search("C-STS terms: no public redistribution of the decrypted data")
    assert not NOT_REDISTRIBUTABLE.search("scores CC BY-SA 4.0; sentences under their sources' licenses")


def test_site_refuses_a_port_without_serve(tmp_path):
    result = ht.run_harness("site", "--to", tmp_path / "s", "--results", tmp_path, "--port", "9000")
    assert result.exit_code != 0 and "--port is the port of --serve" in result.stderr


def test_site_without_plugins_shows_positions_not_texts(fixture_store, tmp_path):
    report = build_site(Store(fixture_store), tmp_path / "site", resamples=50)  # no registry: no task's texts
    assert report.files > 10 and not report.problems
    assert "need its plugin" in json.loads((tmp_path / "site" / "data" / "texts" / "stsb.json").read_text())["withheld"]


# ----------------------------------------------------------------------------------------------------- browser
def _browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[site]')")
    if CHROMIUM is None:
        pytest.skip("no chromium binary (Debian: apt-get install -y chromium)")
    return sync_playwright


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output to the test's own lines
        pass


@pytest.fixture()
def served(built_site):
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def _open_index(playwright, served: str):
    """Chromium at 1366x768 on the site's index, collecting the page's script errors."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(served + "#/")
    page.wait_for_selector("body[data-view='index']")
    return browser, page, errors


def _expected_top_position(site: Path, table: dict, a: int, b: int, column: int) -> int:
    """The examples view's first pair, computed here from the same cell files: the largest gap between the two
    models' rank errors against the gold (ranks 1 = highest, ties in example order)."""

    def mean(cell: dict, name: str) -> list[float]:
        arrays = [values[name] for values in cell["seeds"].values()]
        return [sum(column) / len(arrays) for column in zip(*arrays)]

    def ranks(values: list[float]) -> list[int]:
        order = sorted(range(len(values)), key=lambda i: (-values[i], i))
        rank = [0] * len(values)
        for r, position in enumerate(order):
            rank[position] = r + 1
        return rank

    cells = [json.loads((site / table["cell_files"][f"{row}-{column}"]).read_text()) for row in (a, b)]
    gold = json.loads((site / "data" / "examples" / f"{cells[0]['examples']}.json").read_text())["gold"]
    rank_a, rank_b, rank_gold = ranks(mean(cells[0], "predicted")), ranks(mean(cells[1], "predicted")), ranks(gold)
    gaps = [abs(abs(rank_a[i] - rank_gold[i]) - abs(rank_b[i] - rank_gold[i])) for i in range(len(gold))]
    return max(range(len(gold)), key=lambda i: (gaps[i], -i))


@pytest.mark.slow
def test_site_in_a_real_browser(built_site, served, fixture_store, tmp_path):
    sync_playwright = _browser_or_skip()
    table = _table(built_site)
    with sync_playwright() as playwright:
        browser, page, errors = _open_index(playwright, served)
        page.click(f"a[href='#/table/{table['id']}']")
        page.wait_for_selector("#board")
        # sort by stsb, descending, with the keyboard: the header is a button
        page.focus("button.sort[data-column='1']")
        page.keyboard.press("Enter")
        labels = page.eval_on_selector_all("#board tbody td.model", "cells => cells.map(c => c.firstChild.textContent)")
        scores = {row["label"]: row["cells"][1]["sort"] for row in table["rows"]}
        assert labels == sorted(scores, key=lambda label: -scores[label])
        # filter: rows trained on bws-cross-topic only
        page.select_option("#filter-train", "bws-cross-topic")
        assert page.inner_text("#row-count").startswith("3 of 6 rows shown")
        page.select_option("#filter-train", "")
        page.select_option("#filter-complete", "complete")
        assert page.inner_text("#row-count").startswith("5 of 6 rows shown")
        page.select_option("#filter-complete", "")
        # choose two rows, compare
        nm, simcse = (_row(table, f"{name} [train: bws-cross-topic]")["index"] for name in ("nm", "simcse"))
        page.check(f"#a-{nm}")
        page.check(f"#b-{simcse}")
        page.click("#compare-button")
        page.wait_for_selector("body[data-view='compare']")
        first, second = (table["rows"][i]["label"].split(" [")[0] for i in sorted((nm, simcse)))
        cli = _cli_compare(fixture_store, first, second, "--seeds", "42,43", "--train-on", "bws-cross-topic")
        for task in cli["tasks"]:
            row = f"#compare-table tr[data-task='{task['task']}']"
            shown = page.get_attribute(f"{row} td[data-value]", "data-value")
            assert float(shown) == task["difference"]
            assert page.inner_text(f"{row} td:nth-child(7)") == f"{task['p_value']:.4f}"
            assert page.inner_text(f"{row} td:nth-child(9)") == task["verdict"]
            # the difference the test could have detected, next to its verdict
            detectable = task["detectable_difference"]
            assert page.inner_text(f"{row} td:nth-child(10)") == ("" if detectable is None else f"±{detectable:.2f}")
            low, high = task["over_examples"]["interval"]
            assert page.inner_text(f"{row} td:nth-child(11)").startswith(f"[{low:+.2f}, {high:+.2f}], p=")
        # the examples behind the stsb difference
        page.click("#compare-table tr[data-task='stsb'] a.action")
        page.wait_for_selector("body[data-view='examples']")
        a, b = sorted((nm, simcse))
        expected = _expected_top_position(built_site, table, a, b, table["columns"].index("stsb"))
        assert page.get_attribute("#examples-table tbody tr:first-child", "data-position") == str(expected)
        pair = json.loads((built_site / "data" / "texts" / "stsb.json").read_text())["pairs"][expected]
        assert page.inner_text("#examples-table tbody tr:first-child td:nth-child(2)") == pair[0].strip()
        # one screenshot at 1366x768: nothing wider than the window
        page.goto(served + f"#/table/{table['id']}")
        page.wait_for_selector("body[data-view='table']")
        page.screenshot(path=str(tmp_path / "table.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= 1366
        assert (tmp_path / "table.png").stat().st_size > 0
        # opened as a file: the classic scripts run (ES modules would not) and the router reached its view; the
        # data files need a server (the page says it could not load them)
        page.goto((built_site / "index.html").as_uri() + "#/")
        page.wait_for_selector("body[data-view='index']")
        views = page.evaluate("Object.keys(window.harnessSite)")
        assert {"viewIndex", "viewTable", "viewCurves", "viewCompare", "viewExamples", "route"} <= set(views)
        assert not errors, errors
        browser.close()


def test_site_cost_columns_and_quality_against_cost(tmp_path):
    """Records that measured their cost (a tiny run): the cost columns and `harness plot cost`'s Pareto front."""
    from harness.leaderboard.cost_plot import pareto_front

    store = tmp_path / "store"
    run = ht.run_harness(
        "run",
        *("--models", "testing-trainable,testing-trainable:dim=8", "--train-on", "stsb", "--tasks", "stsb"),
        *("--seeds", "42", "--profile", "smoke", "--results", store, "--no-progress"),
        plugins=["harness.testing"],
    )
    assert run.exit_code == 0, run.stderr
    site = tmp_path / "site"
    built = ht.run_harness("site", "--to", site, "--results", store, "--include-samples", plugins=["harness.testing"])
    assert built.exit_code == 0, built.stderr
    table = _table(site)
    assert table["has_cost"] and all(row["cost"][-1] for row in table["rows"])  # measured on: the machine
    evaluation = next(panel for panel in table["cost_view"] if panel["panel"] == "evaluation time")
    points = [(point["cost"], point["quality"]) for point in evaluation["points"]]
    front = {(point["cost"], point["quality"]) for point in evaluation["points"] if point["front"]}
    assert front == {points[i] for i in pareto_front(points)} and len(points) == 2
    assert all(row["training-curves"] is None for row in table["rows"])  # its trainer records no steps


def test_site_links_a_trained_row_to_its_training_curves(tiny_bert, tmp_path):
    """A row trained through the harness' training loop: its curves file holds each seed's per-step loss, the same
    steps and values as its checkpoint's training.json."""
    store = tmp_path / "store"
    run = ht.run_harness(
        "run",
        *("--models", "be", "--backbone", tiny_bert, "--train-on", "stsb", "--tasks", "stsb"),
        *("--seeds", "42,43", "--profile", "smoke", "--results", store, "--no-progress"),
    )
    assert run.exit_code == 0, run.stderr
    site = tmp_path / "site"
    built = ht.run_harness("site", "--to", site, "--results", store, "--include-samples")
    assert built.exit_code == 0, built.stderr
    (row,) = _table(site)["rows"]
    fits = json.loads((site / row["training-curves"]).read_text())
    assert sorted(fit["seed"] for fit in fits) == [42, 43]
    for fit in fits:
        (checkpoint,) = (store / "checkpoints").glob(f"be-*/seed-{fit['seed']}/training.json")
        kept = json.loads(checkpoint.read_text())["curves"]["fits"][0]["loss"]["loss"]
        assert fit["series"]["loss: loss"] == {"step": kept["step"], "value": kept["value"]} and kept["step"]


def test_site_paper_table_is_the_leaderboard_matrix_page(fixture_store, tmp_path):
    matrix = Path(__file__).resolve().parent.parent / "matrices" / "nugget-paser-quick.yaml"
    site = tmp_path / "site"
    built = ht.run_harness("site", "--to", site, "--results", fixture_store, "--matrix", matrix)
    assert built.exit_code == 0, built.stderr
    board = ht.run_harness(
        "leaderboard", "--matrix", matrix, "--formats", "html", "--results", fixture_store, "--output", tmp_path / "b"
    )
    assert board.exit_code == 0, board.stderr
    (entry,) = json.loads((site / "data" / "index.json").read_text())["matrices"]
    assert entry["name"] == "nugget-paser-quick" and entry["seeds"] == [42, 43] and "stsb" in entry["columns"]
    expected = (tmp_path / "b" / "matrices" / "nugget-paser-quick.html").read_text()
    assert (site / entry["page"]).read_text() == expected
    missing = ht.run_harness("site", "--to", site, "--results", fixture_store, "--matrix", tmp_path / "none.yaml")
    assert missing.exit_code != 0 and "no such matrix file" in missing.stderr


# ----------------------------------------------------------------------------------------------- paper tables
SMALL_MATRIX = """\
description: A small paper table over the fixture's records. Its rows are matrix entries.
profile: quick
seeds: [42, 43]
tasks: [sts12, stsb]
models:
  - {model: be, name: backbone}
  - {model: "be:pooling=cls", name: backbone CLS}
  - {model: nm, train_on: bws-cross-topic, name: NM}
  - {model: simcse, train_on: bws-cross-topic, name: SimCSE}
  - {model: tsdae, train_on: bws-cross-topic, name: TSDAE}
paper:
  source: a made-up paper
  rows:
    NM: {stsb: 70.0}
    SimCSE: {stsb: 76.25}
"""


@pytest.fixture(scope="module")
def matrix_site(fixture_store, tmp_path_factory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("matrix-site")
    matrix = folder / "small-table.yaml"
    matrix.write_text(SMALL_MATRIX)
    site = folder / "site"
    result = ht.run_harness("site", "--to", site, "--results", fixture_store, "--matrix", matrix)
    assert result.exit_code == 0, result.stderr
    (entry,) = json.loads((site / "data" / "index.json").read_text())["matrices"]
    return site, json.loads((site / "data" / "tables" / f"{entry['id']}.json").read_text())


def test_site_paper_table_is_a_table_with_compare(matrix_site, fixture_store):
    site, table = matrix_site
    assert table["kind"] == "matrix" and table["columns"] == ["sts12", "stsb"]
    assert [row["label"] for row in table["rows"]] == ["backbone", "backbone CLS", "NM", "SimCSE", "TSDAE"]
    paper = next(column for column in table["extra_columns"] if column["header"] == "stsb (paper)")
    assert paper["cells"] == ["", "", "70.00", "76.25", ""] and paper["after"] == 1
    assert table["agreement"]["lines"][0][1:3] == ["SimCSE", "NM"]  # the paper's order, judged on our records
    pair = _pair(site, table, "NM", "SimCSE")
    cli = _cli_compare(fixture_store, "nm", "simcse", "--seeds", "42,43", "--train-on", "bws-cross-topic")
    _same_numbers(pair, cli, ["sts12", "stsb"])
    untrained = _pair(site, table, "backbone", "backbone CLS")  # seed 43 not run: the seeds both have
    assert untrained["seeds"] == [42]
    _same_numbers(untrained, _cli_compare(fixture_store, "be", "be:pooling=cls", "--seeds", "42"), ["stsb"])


@pytest.mark.slow
def test_site_paper_table_in_a_real_browser(matrix_site, fixture_store):
    sync_playwright = _browser_or_skip()
    site, table = matrix_site
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    served = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_playwright() as playwright:
            browser, page, errors = _open_index(playwright, served)
            page.click(f"#matrix-table a[href='#/table/{table['id']}']")
            page.wait_for_selector("#board")
            assert "stsb (paper)" in page.inner_text("#board thead")
            page.focus("button.sort[data-column='1']")  # sort by stsb, with the keyboard
            page.keyboard.press("Enter")
            labels = page.eval_on_selector_all(
                "#board tbody td.model", "cells => cells.map(c => c.firstChild.textContent)"
            )
            scores = {row["label"]: row["cells"][1]["sort"] for row in table["rows"]}
            assert labels == sorted(scores, key=lambda label: -scores[label])
            page.select_option("#filter-train", "bws-cross-topic")
            assert page.inner_text("#row-count").startswith("3 of 5 rows shown")
            nm, simcse = (_row(table, name)["index"] for name in ("NM", "SimCSE"))
            page.check(f"#a-{nm}")
            page.check(f"#b-{simcse}")
            page.click("#compare-button")
            page.wait_for_selector("body[data-view='compare']")
            cli = _cli_compare(fixture_store, "nm", "simcse", "--seeds", "42,43", "--train-on", "bws-cross-topic")
            for task in cli["tasks"]:
                row = f"#compare-table tr[data-task='{task['task']}']"
                assert float(page.get_attribute(f"{row} td[data-value]", "data-value")) == task["difference"]
                assert page.inner_text(f"{row} td:nth-child(7)") == f"{task['p_value']:.4f}"
            page.click("#compare-table tr[data-task='stsb'] a.action")
            page.wait_for_selector("body[data-view='examples']")
            expected = _expected_top_position(site, table, nm, simcse, table["columns"].index("stsb"))
            assert page.get_attribute("#examples-table tbody tr:first-child", "data-position") == str(expected)
            assert not errors, errors
            browser.close()
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------------------------- retrieval: top hits
@pytest.fixture(scope="module")
def retrieval_site(tiny_bert, tiny_roberta, tmp_path_factory) -> tuple[Path, Path]:
    """Two tiny backbones' PropSegment records (smoke profile, the bundled data): each query's top hits stored."""
    folder = tmp_path_factory.mktemp("retrieval-site")
    store = folder / "store"
    for backbone in (tiny_bert, tiny_roberta):
        run = ht.run_harness(
            *("run", "--models", "be", "--backbone", backbone, "--tasks", "propsegment"),
            *("--seeds", "42", "--profile", "smoke", "--results", store, "--no-progress"),
        )
        assert run.exit_code == 0, run.stderr
    site = folder / "site"
    built = ht.run_harness("site", "--to", site, "--results", store, "--include-samples")
    assert built.exit_code == 0, built.stderr
    return store, site


def _rank_differences(hits_a: dict, hits_b: dict) -> list[int]:
    """The examples view's order of queries, computed here: the largest gap between the two models' gold ranks
    (a gold not within the ranked depth counts as depth + 1), ties in query order."""

    def rank(hits: dict, i: int) -> int:
        return hits["gold_rank"][i] or hits["depth"] + 1

    count = len(hits_a["gold_rank"])
    return sorted(range(count), key=lambda i: (-abs(rank(hits_a, i) - rank(hits_b, i)), i))


@pytest.mark.slow
def test_site_retrieval_examples_show_each_models_top_hits(retrieval_site):
    store, site = retrieval_site
    table = _table(site)
    column = table["columns"].index("propsegment-facts")
    cells = [json.loads((site / table["cell_files"][f"{row}-{column}"]).read_text()) for row in (0, 1)]
    assert all(cell["ranking"] for cell in cells)
    for row, cell in zip(table["rows"], cells):
        (side,) = (store / row["model_key"] / "seed-42").glob("propsegment-facts.examples.npz")
        with np.load(side, allow_pickle=False) as stored:
            assert cell["seeds"]["42"]["hits"]["top"][0] == [str(i) for i in stored["hits.top"][0] if i >= 0]
            assert cell["seeds"]["42"]["hits"]["gold_rank"] == stored["hits.gold_rank"].tolist()
    hits_a, hits_b = (cell["seeds"]["42"]["hits"] for cell in cells)
    expected = _rank_differences(hits_a, hits_b)[0]
    assert hits_a["gold_rank"][expected] != hits_b["gold_rank"][expected]  # two backbones rank differently
    sync_playwright = _browser_or_skip()
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/#/examples/{table['id']}/0/1/{column}")
            page.wait_for_selector("body[data-view='examples']")
            assert page.get_attribute("#examples-table tbody tr:first-child", "data-position") == str(expected)
            shown = page.eval_on_selector_all(
                "#examples-table tbody tr:first-child td:nth-child(6) li > *", "nodes => nodes.map(n => n.title)"
            )
            assert shown == [f"id {document}" for document in hits_a["top"][expected]]
            written = (site / "data" / "texts" / f"{table['task_keys']['propsegment-facts']}.json").read_text()
            texts = json.loads(written)["examples"][cells[0]["examples"]]
            ids = json.loads((site / "data" / "examples" / f"{cells[0]['examples']}.json").read_text())["ids"]
            query = page.inner_text("#examples-table tbody tr:first-child td:nth-child(2)")
            assert query == texts["queries"][ids[expected]] and len(query) > 10  # the query's text, not its id
            first_hit = page.inner_text("#examples-table tbody tr:first-child td:nth-child(6) li:first-child")
            assert first_hit.startswith(texts["documents"][hits_a["top"][expected][0]][:40])
            # every query, gold document and hit of the 25 rows is shown by its text: none falls back to its id
            texts_shown = page.locator("#examples-table tbody .hit-text").count()
            assert (
                texts_shown == page.locator("#examples-table tbody td.query > *, #examples-table tbody li > *").count()
            )
            assert texts_shown > 25 * 10 and page.locator("#texts-withheld").count() == 0
            assert page.locator("#hits-note").count() == 1 and page.locator("#no-hits").count() == 0
            browser.close()
    finally:
        server.shutdown()
        server.server_close()


def test_site_ranking_texts_are_those_of_the_ids_the_examples_view_shows(retrieval_site, registry):
    """Each ranking column's texts file holds the texts of exactly the queries and documents the examples view of
    its one pair of rows shows (the 25 queries whose gold rank differs most, their gold and both top hits), as the
    task gives them, under PropSegment's licence."""
    _, site = retrieval_site
    table = _table(site)
    for column, name in enumerate(table["columns"]):
        cells = [json.loads((site / table["cell_files"][f"{row}-{column}"]).read_text()) for row in (0, 1)]
        ids = json.loads((site / "data" / "examples" / f"{cells[0]['examples']}.json").read_text())["ids"]
        hits_a, hits_b = (cell["seeds"]["42"]["hits"] for cell in cells)
        shown = _rank_differences(hits_a, hits_b)[:25]  # the view lists 25 queries
        queries = {ids[i] for i in shown}
        documents = {doc for i in shown for doc in (*hits_a["gold"][i], *hits_a["top"][i], *hits_b["top"][i])}
        written = json.loads((site / "data" / "texts" / f"{table['task_keys'][name]}.json").read_text())
        assert list(written["examples"]) == [cells[0]["examples"]]  # texts per set of test examples
        texts = written["examples"][cells[0]["examples"]]
        assert set(texts["queries"]) == queries and set(texts["documents"]) == documents, name
        assert len(texts["documents"]) < len(ids) * 10  # the shown ids only, not the corpus
        assert texts["license"].startswith("Wikipedia clusters: CC BY-SA 3.0")
        task = registry.task(name).factory({}, None)
        context = ht.eval_context("smoke")
        given = task.ranked_texts(context, sorted(queries), sorted(documents))
        assert texts["queries"] == dict(given.queries)
        assert all(
            texts["documents"][d] == text or text.startswith(texts["documents"][d][:-1])
            for d, text in given.documents.items()
        )


def test_ranking_texts_of_a_task_without_the_hook_are_ids_with_the_reason(tmp_path):
    from harness.leaderboard.site_examples import ranked_texts_payload

    class Plugin:
        class metadata:  # noqa: N801 - a stand-in for a TaskMetadata
            license = "CC BY 4.0"

        @staticmethod
        def factory(options, data_dir):
            return OldTask(options)

    class OldTask(harness.Task):
        def check_data(self):
            return "c" * 64  # the data the record was computed on

    class Registry:
        def task(self, name):
            return Plugin()

    record = tmp_path / "r.json"
    content = {"task": {"name": "old", "options": {}}, "model": {"profile": "quick"}, "seed": 1}
    record.write_text(json.dumps({**content, "dataset_checksum": "c" * 64}))
    payload = ranked_texts_payload(str(record), {"q1"}, {"d1"}, Registry())
    assert payload == {"withheld": "the task does not provide its queries' and documents' texts (Task.ranked_texts)"}
    record.write_text(json.dumps({**content, "dataset_checksum": "d" * 64}))  # computed on other data
    assert (
        "not the data the record was computed on"
        in ranked_texts_payload(str(record), set(), set(), Registry())["withheld"]
    )
    record.write_text(json.dumps({**content, "dataset_checksum": "c" * 64}))
    Plugin.metadata.license = "research only; may not be redistributed"
    assert "forbids redistributing" in ranked_texts_payload(str(record), {"q1"}, {"d1"}, Registry())["withheld"]


def test_site_compare_says_other_task_versions_are_not_comparable(fixture_store):
    from harness.leaderboard.site import CellData, compare_pair
    from harness.leaderboard.tables import collect_tables

    (table,) = collect_tables(Store(fixture_store))
    nm, simcse = (next(row for row in table.rows if row.label.startswith(name)) for name in ("nm ", "simcse "))
    cells = CellData(resamples=50)
    for path in nm.cells["stsb"].records.values():
        cells.tasks[path] = ("stsb", "0.1-older")  # as a record of an earlier task version reads
    by_task = {c.task: c for c in compare_pair(table, nm, simcse, cells, [42, 43])}
    assert by_task["stsb"].result is None and "different task versions" in by_task["stsb"].reason
    assert "stsb version 0.1-older" in by_task["stsb"].reason and by_task["sts12"].result is not None


# ------------------------------------------------------------------ seeds, contamination, serving (no browser)
THESIS_MATRIX = Path(__file__).resolve().parent.parent / "matrices" / "thesis-tables-6-7-6-8.yaml"
THESIS_ENTRIES = ("be-517412c46488", "augsbert-17737d92e02d", "augsbert-6ce3e6a14045")  # its three rows' records


@pytest.fixture(scope="module")
def thesis_site(tmp_path_factory) -> tuple[Path, Path]:
    """The thesis tables' paper table from its rows' published records: the matrix declares seeds 42-44, only seed 42
    has run."""
    folder = tmp_path_factory.mktemp("thesis-site")
    store = folder / "store"
    for key in THESIS_ENTRIES:
        shutil.copytree(PUBLISHED / key, store / key)
    site = folder / "site"
    built = ht.run_harness("site", "--to", site, "--results", store, "--matrix", THESIS_MATRIX)
    assert built.exit_code == 0, built.stderr
    return store, site


def test_site_paper_table_seeds_are_the_records_seeds(thesis_site):
    """Each row's seeds are those its records have (not the matrix's declared 42-44), every row is ranked on them,
    and the legend lists each entry once."""
    store, site = thesis_site
    (entry,) = json.loads((site / "data" / "index.json").read_text())["matrices"]
    table = json.loads((site / "data" / "tables" / f"{entry['id']}.json").read_text())
    assert entry["declared_seeds"] == [42, 43, 44]
    for row in table["rows"]:
        recorded = sorted(
            {json.loads(path.read_text())["seed"] for path in (store / row["model_key"]).glob("*/*.json")}
        )
        assert row["seeds"] == recorded == [42], row["label"]
        assert all(cell["seeds"] == recorded for cell in row["cells"] if cell["kind"] == "value")
    assert entry["seeds"] == [42]
    assert sorted(row["rank"] for row in table["rows"]) == [1, 2, 3]
    ranked = sorted(table["rows"], key=lambda row: -row["average"])
    assert [row["rank"] for row in ranked] == [1, 2, 3] and all(row["average_text"] for row in ranked)
    assert all(row["average_text"].split(" ")[0].endswith("*") for row in ranked)  # fewer seeds than declared
    labels = [label for label, _ in table["legend"]]
    assert len(labels) == len(set(labels)) == 3


def test_site_data_names_no_absolute_path(built_site, fixture_store):
    index = json.loads((built_site / "data" / "index.json").read_text())
    assert index["store"] == fixture_store.name
    for path in built_site.rglob("*.json"):
        assert str(fixture_store) not in path.read_text(), path  # nothing of the machine it was built on


def test_site_build_logs_its_progress(fixture_store, tmp_path):
    built = ht.run_harness("site", "--to", tmp_path / "site", "--results", fixture_store)
    assert built.exit_code == 0, built.stderr
    # the CLI's info lines (stdout; a progress bar over a table's pairs of rows on a terminal's stderr)
    assert "family senteval: intervals and marks of 6 rows" in built.stdout
    assert "table 1/1 senteval-0: 6 rows, 2 columns" in built.stdout
    assert f"harness site --serve {tmp_path / 'site'}" in built.stdout  # serving it builds nothing again


def test_site_serve_serves_a_built_site_without_building(built_site, tmp_path, monkeypatch):
    import harness.leaderboard.site as site_module

    served: list[tuple[Path, int]] = []
    monkeypatch.setattr(site_module, "serve", lambda folder, port: served.append((folder, port)))
    result = ht.run_harness("site", "--serve", built_site, "--port", "8123")
    assert result.exit_code == 0, result.stderr
    assert served == [(built_site, 8123)]
    (tmp_path / "other").mkdir()
    refused = ht.run_harness("site", "--serve", tmp_path / "other")
    assert refused.exit_code != 0 and "is not a harness site" in refused.stderr and not served[1:]
    both = ht.run_harness("site", "--serve", built_site, "--to", tmp_path / "new")
    assert both.exit_code != 0 and "--serve DIR alone" in both.stderr
    neither = ht.run_harness("site")
    assert neither.exit_code != 0 and "give --to DIR" in neither.stderr


def test_site_compare_states_what_each_row_saw_in_training(built_site, fixture_store):
    """The pair file says what `harness compare --json` says under seen_in_training (the same lines), and the cell
    of a row that trained on test pairs marks which, as many as its record counts; an untrained row's marks none."""
    table = _table(built_site)
    pair = _pair(built_site, table, "cbe [train: stsb]", "be")
    rows = [table["rows"][pair[side]] for side in ("a", "b")]
    sources = [row["train_on"] or "none" for row in rows]
    cli = _cli_compare(
        fixture_store,
        *(row["label"].split(" [")[0] for row in rows),
        *("--seeds", ",".join(map(str, pair["seeds"])), "--train-on-a", sources[0], "--train-on-b", sources[1]),
    )
    assert sorted(pair["seen_in_training"]) == sorted(cli["seen_in_training"]) and pair["seen_in_training"]
    cbe = _row(table, "cbe [train: stsb]")
    side = "A" if pair["a"] == cbe["index"] else "B"
    assert f"{side} on sts12: 32% of test pairs seen in training (seed 42)" in pair["seen_in_training"]
    column = table["columns"].index("sts12")
    cell = json.loads((built_site / table["cell_files"][f"{cbe['index']}-{column}"]).read_text())
    for seed, arrays in cell["seeds"].items():
        seen = arrays["seen_in_training"]
        record = json.loads((fixture_store / cbe["model_key"] / f"seed-{seed}" / "sts12.json").read_text())
        assert len(seen["positions"]) == seen["recorded"] == record["contamination"]["test_pairs_seen"] > 0
        assert len(set(seen["positions"])) == len(seen["positions"]) and max(seen["positions"]) < 3108
    clean = _row(table, "be")
    untrained = json.loads((built_site / table["cell_files"][f"{clean['index']}-{column}"]).read_text())
    assert all("seen_in_training" not in arrays for arrays in untrained["seeds"].values())


@pytest.mark.slow
def test_site_table_header_and_model_column_stay_while_scrolling(built_site, served):
    """At a phone's width the board scrolls in its box under a sticky header and sticky rank and model columns;
    sorting keeps the scroll position; compare and examples views say what the rows saw in training and mark the
    pairs; opened as a file, the page keeps its hint on serving it."""
    sync_playwright = _browser_or_skip()
    table = _table(built_site)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 390, "height": 844})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(served + f"#/table/{table['id']}")
        page.wait_for_selector("body[data-view='table']")
        page.set_viewport_size({"width": 390, "height": 360})  # a box lower than its six rows: it scrolls down too
        box = page.locator(".board-scroll")
        box.evaluate("node => { node.scrollLeft = 250; node.scrollTop = 50; }")
        page.wait_for_timeout(100)
        assert box.evaluate("node => [node.scrollLeft, node.scrollTop]") == [250, 50]
        frame = box.bounding_box()
        header = page.locator("#board thead th.sticky-model").bounding_box()
        rank = page.locator("#board thead th.sticky-rank").bounding_box()
        first = page.locator("#board tbody td.sticky-model").first.bounding_box()
        assert abs(header["y"] - frame["y"]) < 2 and abs(rank["x"] - frame["x"]) < 2  # stuck to the box
        assert abs(first["x"] - (rank["x"] + rank["width"])) < 2  # the model column right of the rank
        assert box.evaluate("node => node.scrollLeft") == 250
        # sort by stsb (clicked as a script clicks: playwright's own click would first scroll the button into view)
        page.eval_on_selector("button.sort[data-column='1']", "button => button.click()")
        assert page.get_attribute("#board th[aria-sort]", "aria-sort") == "descending"  # the table stays where it was
        assert page.locator(".board-scroll").evaluate("node => [node.scrollLeft, node.scrollTop]") == [250, 50]
        # compare a row trained on STS-B (it saw test pairs of sts12) with an untrained one
        pair = _pair(built_site, table, "cbe [train: stsb]", "be")
        page.goto(served + f"#/compare/{table['id']}/{pair['a']}/{pair['b']}")
        page.wait_for_selector("body[data-view='compare']")
        lines = page.eval_on_selector_all("#seen-in-training li", "items => items.map(i => i.textContent)")
        assert lines == pair["seen_in_training"] and lines
        cbe_side = "A" if table["rows"][pair["a"]]["label"].startswith("cbe") else "B"
        score = page.inner_text(f"#compare-table tr[data-task='sts12'] td:nth-child({2 if cbe_side == 'A' else 3})")
        assert score.endswith(" †")
        column = table["columns"].index("sts12")
        page.goto(served + f"#/examples/{table['id']}/{pair['a']}/{pair['b']}/{column}")
        page.wait_for_selector("body[data-view='examples']")
        assert page.locator("#seen-in-training li").count() >= 1
        cbe = _row(table, "cbe [train: stsb]")
        cell = json.loads((built_site / table["cell_files"][f"{cbe['index']}-{column}"]).read_text())
        seen = {p for arrays in cell["seeds"].values() for p in arrays["seen_in_training"]["positions"]}
        shown = page.eval_on_selector_all(
            "#examples-table tbody tr", "rows => rows.map(r => [Number(r.dataset.position), r.dataset.seen || ''])"
        )
        assert len(shown) == 25 and any(mark for _, mark in shown)
        assert all((mark == cbe_side) == (position in seen) for position, mark in shown)
        page.goto((built_site / "index.html").as_uri() + "#/")  # as a file: the hint stays, no "Failed to fetch"
        page.wait_for_selector("#server-hint")
        assert "harness site --serve" in page.inner_text("#server-hint")
        assert "Failed to fetch" not in page.inner_text("main")
        assert not errors, errors
        browser.close()
