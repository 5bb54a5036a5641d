"""What a new user meets after `make run`: honest exit codes, progress in logs, publish choosing among
variants, mistakes reported together."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

from harness.testing import run_harness


def _smoke_run(backbone, results, *extra, models="be", tasks="stsb", env=None):
    return run_harness(
        "run",
        "--models",
        models,
        "--backbone",
        backbone,
        "--tasks",
        tasks,
        "--profile",
        "smoke",
        "--results",
        results,
        "--no-progress",
        *extra,
        env=env,
    )


# -- exit codes -----------------------------------------------------------------------------------------------------
def test_a_run_whose_every_cell_misses_its_data_exits_1_with_one_line(tiny_bert, tmp_path):
    # HOME moved: no downloaded USEB copy under ~/.cache/harness/data can answer
    run = _smoke_run(tiny_bert, tmp_path / "store", tasks="askubuntu", env={"HOME": str(tmp_path)})
    assert run.exit_code == 1
    assert run.stderr.strip().splitlines()[-1].startswith("error: no cell has its data")
    assert "1 missing data" in run.stdout
    mixed = _smoke_run(tiny_bert, tmp_path / "store", tasks="askubuntu,stsb", env={"HOME": str(tmp_path)})
    assert mixed.exit_code == 0 and "error" not in mixed.stderr  # some cells computed: the run did its work


def test_an_unreadable_store_folder_is_one_error_line_not_an_empty_store(tiny_bert, tmp_path, monkeypatch):
    assert _smoke_run(tiny_bert, tmp_path / "store").exit_code == 0
    (model_folder,) = [p for p in (tmp_path / "store").iterdir() if p.name.startswith("be-")]
    import harness.store

    listing = harness.store.list_store_folder  # the store lists its folders through harness.files

    def list_store_folder(folder, root):  # the tests run as root, which chmod cannot lock out
        if Path(folder) == model_folder:
            raise PermissionError(errno.EACCES, "Permission denied", str(folder))
        return listing(folder, root)

    monkeypatch.setattr(harness.store, "list_store_folder", list_store_folder)
    for argv in (
        ("leaderboard", "--results", tmp_path / "store"),
        ("export-results", "--format", "mteb", "--to", tmp_path / "out", "--results", tmp_path / "store"),
    ):
        run = run_harness(*argv)
        assert run.exit_code == 2, argv
        assert run.stderr.strip().splitlines() == [
            f"error: cannot read {model_folder} (Permission denied); make it readable, or pass the store you mean "
            "with --results."
        ]


# -- publish picks the spec `harness run` wrote, not every variant of a name ------------------------------------------
def test_publish_models_be_takes_the_quick_record_not_its_smoke_variants(tiny_bert, tmp_path):
    store, published = tmp_path / "store", tmp_path / "published"
    quick = run_harness(
        "run", "--models", "be", "--backbone", tiny_bert, "--tasks", "stsb", "--results", store, "--no-progress"
    )
    assert quick.exit_code == 0, quick.stderr
    assert _smoke_run(tiny_bert, store, models="be:pooling=cls").exit_code == 0  # the Quick start's smoke variant
    assert _smoke_run(tiny_bert, store).exit_code == 0
    common = ("publish", "--results", store, "--to", published, "--backbone", tiny_bert, "--tasks", "stsb")
    done = run_harness(*common, "--models", "be")
    assert done.exit_code == 0 and "published 1 record(s)" in done.stdout, done.stderr
    (record,) = [json.loads(p.read_text()) for p in published.glob("*/seed-*/stsb.json")]
    assert record["model"]["profile"] == "quick" and record["model"]["label"] == "be"
    smoke = run_harness(*common, "--models", "be", "--profile", "smoke")
    assert smoke.exit_code == 2 and "computed on a sample of the evaluation data" in smoke.stderr
    absent = run_harness(*common, "--models", "be", "--train-on", "stsb")
    assert absent.exit_code == 2 and len(absent.stderr.strip().splitlines()) == 1
    assert "Records of other variants: be (profile quick), be (profile smoke), be:pooling=cls (profile smoke)" in (
        absent.stderr
    )


# -- progress in a log ------------------------------------------------------------------------------------------------
def test_a_run_off_a_terminal_logs_steps_and_cells_at_an_interval(tiny_bert, tmp_path):
    run = run_harness(
        "run",
        "--models",
        "ce",
        "--backbone",
        tiny_bert,
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--train-on",
        "stsb",
        "--set",
        "max_steps=2",
        "--results",
        tmp_path,
        env={"HARNESS_PROGRESS_SECONDS": "0"},
    )  # stderr is not a terminal here, as in CI
    assert run.exit_code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "  training ce: 1/2 steps (50%)" in "\n".join(lines) and any(
        line.startswith("  training ce: 2/2 steps (100%)") and "loss=" in line for line in lines
    )
    assert any(line.startswith("  cells: 1/1 cells (100%)") for line in lines)
    quiet = run_harness(
        "run",
        "--models",
        "ce",
        "--backbone",
        tiny_bert,
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--train-on",
        "stsb",
        "--set",
        "max_steps=2",
        "--results",
        tmp_path / "q",
        "--no-progress",
        env={"HARNESS_PROGRESS_SECONDS": "0"},
    )
    assert "steps (" not in quiet.stdout


def test_log_progress_waits_one_interval_before_its_first_line(caplog):
    from harness.progress import LogProgress

    caplog.set_level("INFO", logger="harness.progress")
    slow = LogProgress(10, "encoding", "text", interval=3600)
    slow.update(5)
    assert caplog.records == []  # a short step says nothing
    fast = LogProgress(4, "encoding", "text", interval=0)
    fast.update(1)
    fast.set_postfix(loss="0.5")
    fast.update(1)
    assert [r.getMessage().split(", ")[0] for r in caplog.records] == [
        "  encoding: 1/4 texts (25%)",
        "  encoding: 2/4 texts (50%)",
    ]
    assert caplog.records[-1].getMessage().endswith("left, loss=0.5")


# -- one rule for "best" in every format ------------------------------------------------------------------------------
def _store_of(tmp_path, scores: dict[str, object], tasks=("t1",)):
    from test_bootstrap import _record

    from harness.store import Store

    store = Store(tmp_path)
    for model, data in scores.items():
        for task in tasks:
            record, content = _record(model, 1, task, data)
            store.write(f"{model}-key", 1, task, record, examples=content)
    return store


def _formats(store):
    from harness.leaderboard import collect_tables, render_csv, render_html, render_latex, render_markdown
    from harness.leaderboard.plots import AVERAGE, panel_bars
    from harness.leaderboard.stats import attach_statistics

    (table,) = collect_tables(store)
    attach_statistics(table)
    ordered = [(table, rank, row, average) for rank, row, average in table.ranked()]
    plot = {
        column: [bar[3] for bar in panel_bars([table], ordered, column, tuple(table.averaged_columns))]
        for column in ("t1", AVERAGE)
    }
    csv_rows = render_csv(table).splitlines()
    header = csv_rows[0].split(",")
    marks = {
        row.split(",")[2]: (row.split(",")[header.index("t1_mark")], row.split(",")[header.index("average_mark")])
        for row in csv_rows[1:]
    }
    return table, render_markdown(table), render_latex(table), render_html(table), marks, plot


def test_every_format_bolds_only_the_significantly_best_row(tmp_path):
    import numpy as np

    from harness.evaluation.bootstrap import ExampleScores

    rng = np.random.default_rng(1)
    gold = rng.normal(size=400)
    scores = {
        name: ExampleScores("spearman", {"predicted": gold + level * rng.normal(size=400), "gold": gold})
        for name, level in (("strong", 0.3), ("weak", 2.0))
    }
    table, markdown, latex, page, csv_marks, plot = _formats(_store_of(tmp_path, scores))
    strong_line = next(line for line in markdown.splitlines() if "| strong" in line)
    assert strong_line.count("**") == 4  # its t1 cell and its average, nothing else in the table
    assert sum(line.count("**") for line in markdown.splitlines() if line.startswith("|")) == 4
    assert latex.count("\\textbf{") == 2
    assert page.count('class="best"') == 2 and "<strong>" not in page  # the averages follow the rule too
    assert csv_marks == {"strong": ("best-significant", "best-significant"), "weak": ("", "")}
    assert plot == {"t1": ["best-significant", ""], "average": ["best-significant", ""]}


def test_a_top_row_without_per_example_data_is_marked_untested_in_every_format(tmp_path):
    table, markdown, latex, page, csv_marks, plot = _formats(_store_of(tmp_path, {"old": 80.0, "older": 70.0}))
    assert "**" not in "\n".join(line for line in markdown.splitlines() if line.startswith("|"))
    assert "80.00 ¶" in markdown and "¶: the column's top row, which cannot be told apart from the next one" in (
        markdown
    )
    assert "\\textbf{" not in latex and "80.00 ¶" in latex
    assert 'class="best"' not in page and "<strong>" not in page and "80.00 ¶" in page
    assert csv_marks == {"old": ("best-untested", "best-untested"), "older": ("no-data", "no-data")}
    assert plot == {"t1": ["best-untested", ""], "average": ["best-untested", ""]}


def test_plots_draw_the_tables_intervals_and_one_average_panel_per_task_set(tmp_path):
    import numpy as np

    from harness.evaluation.bootstrap import ExampleScores
    from harness.leaderboard import collect_tables
    from harness.leaderboard.plots import AVERAGE, panel_bars, plot_table
    from harness.leaderboard.stats import attach_statistics

    rng = np.random.default_rng(2)
    gold = rng.normal(size=300)
    data = ExampleScores("spearman", {"predicted": gold + 0.5 * rng.normal(size=300), "gold": gold})
    store = _store_of(tmp_path, {"a": data})
    _store_of(tmp_path, {"b": 60.0}, tasks=("t1", "t2"))  # another task set: a section of its own
    tables = collect_tables(store)
    for table in tables:
        attach_statistics(table)
    ordered = [(table, rank, row, average) for table in tables for rank, row, average in table.ranked()]
    by_label = {row.label: index for index, (_, _, row, _) in enumerate(ordered)}
    t1 = panel_bars(tables, ordered, "t1", None)
    table_a = next(table for table in tables if any(row.label == "a" for row in table.rows))
    low, high = table_a.statistics.cells[("a-key", "t1")].interval
    value, (below, above), _, _ = t1[by_label["a"]]
    assert (value - below, value + above) == pytest.approx((low, high))  # the interval the table prints
    for task_set in (("t1",), ("t1", "t2")):
        bars = panel_bars(tables, ordered, AVERAGE, task_set)
        drawn = {label for label, index in by_label.items() if not np.isnan(bars[index][0])}
        assert drawn == ({"a"} if task_set == ("t1",) else {"b"})
    assert plot_table(tables, tmp_path / "board.png").stat().st_size > 0


def test_plot_values_carry_every_mark_the_tables_carry(tmp_path):
    """A plot's value label carries the tables' marks, the too-few-seeds `?` included (it was dropped),
    and a task column's annotators (`*` not every seed, `†`/`‡` seen in training)."""
    from types import SimpleNamespace

    from harness.leaderboard.plots import value_marks
    from harness.leaderboard.stats import TIED, TIED_WITH_BEST, TOO_FEW, TOO_FEW_SEEDS_MARK

    table = SimpleNamespace(columns=[])
    row = SimpleNamespace(cells={})
    assert value_marks(table, row, "average", TOO_FEW_SEEDS_MARK) == f" {TOO_FEW}"
    assert value_marks(table, row, "average", TIED_WITH_BEST) == f" {TIED}"
    cell = SimpleNamespace(values={1: 80.0}, seen={1: (0.32, 0.5)})
    row = SimpleNamespace(cells={"t1": cell}, complete=lambda column: False)
    assert value_marks(SimpleNamespace(columns=["t1"]), row, "t1", TOO_FEW_SEEDS_MARK) == " ? * †32%"


# -- messages ---------------------------------------------------------------------------------------------------------
def test_a_misspelt_profile_gets_did_you_mean(tmp_path):
    run = run_harness("run", "--models", "be", "--tasks", "stsb", "--profile", "quik", "--results", tmp_path)
    assert run.exit_code == 2 and run.stderr.strip().splitlines() == [
        "error: invalid value 'quik' for --profile; allowed values: smoke, quick, paper. Did you mean: quick?"
    ]


def test_a_matrix_with_several_mistakes_reports_them_all(tmp_path):
    structure = tmp_path / "structure.yaml"
    structure.write_text(
        "tasks: [stsb]\nmodels:\n  - {model: ce, train_on: stsb, epoch: 2}\n  - {model: be, backbone: 3}\nseeds: [-1]\n"
    )
    run = run_harness("validate", "--matrix", structure)
    (line,) = run.stderr.strip().splitlines()
    assert run.exit_code == 2 and line.startswith(f"error: {structure}: 3 mistakes: (1) models entry 1 (ce): ")
    assert "(2) models entry 2: backbone must be a text" in line and "(3) seeds: seed -1 is outside" in line
    names = tmp_path / "names.yaml"
    names.write_text("tasks: [stsb, stsbb]\nmodels: [ce, bee, 'be:pooling=maxx']\n")
    run = run_harness("validate", "--matrix", names)
    (line,) = run.stderr.strip().splitlines()
    assert run.exit_code == 2 and line.startswith("error: 3 mistakes: (1) unknown task 'stsbb'.")
    assert "(2) unknown model 'bee'." in line and "(3) invalid value 'maxx' for option 'pooling'" in line


def test_plot_silver_density_reads_the_working_store_not_the_published_one(tmp_path, monkeypatch):
    from harness.testing import run_harness as run

    monkeypatch.chdir(tmp_path)
    (tmp_path / "published").mkdir()
    (tmp_path / "leaderboards").mkdir()
    drawn = run("plot", "silver-density", env={"HARNESS_RESULTS_DIR": str(tmp_path / "mine")})
    # nothing run yet: the message names the working store (it used to read published/ and write leaderboards/)
    assert drawn.exit_code == 2 and f"no silver-pair artifacts under {tmp_path / 'mine' / 'artifacts'};" in drawn.stderr
