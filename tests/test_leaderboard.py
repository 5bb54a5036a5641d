"""Leaderboards from the store alone: mean ± std, incomplete cells, missing data, ranks."""

from __future__ import annotations

from harness.leaderboard import collect_tables, render_csv, render_markdown, write_leaderboards
from harness.store import Store


def _record(model, seed, task, score, status="ok", family="fam"):
    record = {
        "status": status,
        "model": {
            "name": model,
            "label": model,
            "train_on": None,
            "backbone": "tiny",
            "profile": "smoke",
            "hash": f"{model}-hash",
        },
        "model_key": f"{model}-key",
        "seed": seed,
        "task": {"name": task, "key": task, "label": task, "family": family, "version": "1"},
        "hardware": "cpu (2 cores)",
    }
    if status == "ok":
        record.update(main_score=score, scores={"spearman": score}, dataset_checksum="0" * 64)
    else:
        record["message"] = f"{status} for the test"
    return record


def _store(tmp_path):
    store = Store(tmp_path)
    for seed, (a, b) in {1: (80.0, 70.0), 2: (82.0, 72.0)}.items():
        store.write("good-key", seed, "t1", _record("good", seed, "t1", a))
        store.write("good-key", seed, "t2", _record("good", seed, "t2", b))
    store.write("half-key", 1, "t1", _record("half", 1, "t1", 90.0))
    store.write("half-key", 2, "t1", _record("half", 2, "t1", 91.0))
    store.write("half-key", 1, "t2", _record("half", 1, "t2", 50.0))
    store.write("gone-key", 1, "t1", _record("gone", 1, "t1", 60.0))
    store.write("gone-key", 1, "t2", _record("gone", 1, "t2", None, status="missing"))
    return store


def test_cells_ranks_and_incomplete(tmp_path):
    (table,) = collect_tables(_store(tmp_path))
    assert table.columns == ["t1", "t2"]
    ranked = {row.label: (rank, average) for rank, row, average in table.ranked()}
    assert ranked["good"] == (1, 76.0)
    assert ranked["half"] == (None, None)  # t2 has one seed of two
    assert ranked["gone"] == (None, None)
    rows = {row.label: row for row in table.rows}
    assert table.cell_text(rows["good"], "t1") == "81.00 ± 1.41"
    assert table.cell_text(rows["half"], "t2").endswith("*")
    assert table.cell_text(rows["gone"], "t2") == "missing"
    markdown = render_markdown(table)
    assert "Hardware: cpu (2 cores)" in markdown and "| 1 " in markdown and "incomplete" in markdown
    assert "good,good-key" in render_csv(table).replace('"', "")


def test_write_is_reproducible_from_store(tmp_path):
    store = _store(tmp_path / "store")
    first = write_leaderboards(store, tmp_path / "out", ("md", "csv", "tex", "html"))
    contents = [p.read_text() for p in first]
    second = write_leaderboards(store, tmp_path / "out", ("md", "csv", "tex", "html"))
    assert [p.read_text() for p in second] == contents
    assert {p.suffix for p in first} == {".md", ".csv", ".tex", ".html"}


# -- labels, sections, samples, the paper table of a matrix ------------------------------------------------
def _spec_record(key, label, seed, task, score, budget=None, profile="quick", sample=None, family="fam", name="m"):
    record = _record(name, seed, task, score, family=family)
    record["model"].update(label=label, profile=profile, hash=f"{key}-hash", **({"budget": budget} if budget else {}))
    record["model_key"] = key
    record["profile"] = {"name": profile, "max_eval_examples": sample}
    return record


def test_rows_that_differ_never_share_a_label_and_long_specs_get_a_legend(tmp_path):
    store = Store(tmp_path)
    long = "augsbert:max_sentences=200,max_silver=400,mode=domain-transfer,sampler=semantic-search+random"
    store.write("ce-a", 42, "t1", _spec_record("ce-a", "ce", 42, "t1", 80.0, name="ce"))
    store.write("ce-b", 42, "t1", _spec_record("ce-b", "ce", 42, "t1", 81.0, {"max_steps": 100}, name="ce"))
    store.write("aug-a", 42, "t1", _spec_record("aug-a", long, 42, "t1", 70.0, name="augsbert"))
    store.write("aug-b", 42, "t1", _spec_record("aug-b", long + ",topics=hidden", 42, "t1", 71.0, name="augsbert"))
    (table,) = collect_tables(store)
    labels = sorted(row.label for row in table.rows)
    assert len(set(labels)) == 4
    assert "ce {max_steps=100}" in labels and "ce {max_steps=default}" in labels
    assert "augsbert[A]" in labels and "augsbert[A]:topics=hidden" in labels
    markdown = render_markdown(table)
    # the full spec of every short label, in a list under the table
    assert "## Short labels" in markdown and f"- `augsbert[A]`: `{long}`" in markdown
    assert f"{long},topics=hidden" in render_csv(table)


def test_profiles_and_task_sets_are_ranked_apart_and_samples_left_out(tmp_path):
    store = Store(tmp_path)
    store.write("q-key", 42, "t1", _spec_record("q-key", "q", 42, "t1", 60.0))
    store.write("q-key", 42, "t2", _spec_record("q-key", "q", 42, "t2", 60.0))
    store.write("one-key", 42, "t1", _spec_record("one-key", "one", 42, "t1", 90.0))
    store.write("p-key", 42, "t1", _spec_record("p-key", "p", 42, "t1", 99.0, profile="paper"))
    store.write("s-key", 42, "t1", _spec_record("s-key", "s", 42, "t1", 99.9, profile="smoke", sample=200))
    tables = collect_tables(store)
    assert [(t.title.split(":")[0], [r.label for r in t.rows]) for t in tables] == [
        ("profile paper", ["p"]),
        ("profile quick", ["q"]),
        ("profile quick", ["one"]),
    ]
    assert all(rank == 1 for table in tables for rank, _, _ in table.ranked())  # each ranked within its section
    assert store.sample_records and "s-key" in store.sample_records[0]
    with_samples = collect_tables(store, include_samples=True)
    assert any("sample of 200" in t.title and [r.label for r in t.rows] == ["s"] for t in with_samples)


def test_a_matrix_renders_as_its_paper_table(tmp_path, registry):
    from harness.leaderboard.matrix_board import build_board
    from harness.leaderboard.matrix_board import render_markdown as render_board
    from harness.profiles import get_profile
    from harness.spec import resolve_model_spec

    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "profile: smoke\nseeds: [42, 43]\ntasks: [stsb]\nmodels:\n"
        "  - {model: be, name: Base}\n  - {model: 'be:pooling=cls', name: CLS}\n"
        "paper:\n  source: a table\n  comparable: false\n  caveat: another backbone\n"
        "  rows:\n    Base: {stsb: 80.0}\n"
    )
    key = resolve_model_spec(registry, "be", get_profile("smoke")).key
    store = Store(tmp_path / "store")
    for seed, score in ((42, 81.0), (43, 83.0)):
        record = _record("be", seed, "stsb", score, family="senteval")
        record["model_key"] = key
        store.write(key, seed, "stsb", record)
    board = build_board(matrix, store, registry)
    assert [row.label for row in board.rows] == ["Base", "CLS"]
    markdown = render_board(board)
    assert "| Base " in markdown and "82.00 ± 1.41" in markdown and "80.00" in markdown and "+2.00" in markdown
    assert "**Not comparable to the paper:** another backbone" in markdown
    assert "| CLS " in markdown and "| -  " in markdown  # not run


def test_a_paper_row_that_names_no_entry_is_one_clear_error(tmp_path, registry):
    import pytest

    from harness.errors import HarnessError
    from harness.leaderboard.matrix_board import build_board

    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "profile: smoke\ntasks: [stsb]\nmodels:\n  - {model: be, name: Base}\npaper:\n  rows:\n    Bsae: {stsb: 80.0}\n"
    )
    with pytest.raises(HarnessError, match=r"paper.rows names \['Bsae'\], which are not entries"):
        build_board(matrix, Store(tmp_path / "store"), registry)


def test_a_declared_baseline_names_the_trained_rows_it_beats(tmp_path):
    from harness.leaderboard import Baseline
    from harness.registry import default_registry

    store = Store(tmp_path)
    for seed in (1, 2):
        store.write("base-key", seed, "t1", _record("base", seed, "t1", 30.0))
        for model, score in (("weak", 20.0 + seed), ("strong", 40.0)):
            record = _record(model, seed, "t1", score)
            record["model"]["train_on"] = "src"
            store.write(f"{model}-key", seed, "t1", record)
    (table,) = collect_tables(store, family_baselines={"fam": Baseline("base", "t1", "the paper's input")})
    markdown = render_markdown(table)
    assert "Baseline: `base`, untrained, t1 main score 30.00 (the paper's input)." in markdown
    assert "beats or ties these trained rows on t1 (main score): `weak [train: src]` (21.50)" in markdown
    assert "above the baseline on t1 (main score): `strong [train: src]` (40.00)" in markdown
    (plain,) = collect_tables(store)
    assert "Baseline" not in render_markdown(plain)
    assert default_registry().family_baselines()["propsegment"].model == "be:span_input=full-mask"


def test_a_matrix_tests_the_papers_ordering_on_per_example_data(tmp_path, registry):
    """The paper-table view says whether our difference between two rows has the paper's sign and is
    significant (paired bootstrap on the records' per-example data), and 'no data' where records have none."""
    import numpy as np

    from harness.evaluation.bootstrap import ExampleScores, example_side_file
    from harness.leaderboard.matrix_board import build_board, paper_agreement_rows
    from harness.profiles import get_profile
    from harness.spec import resolve_model_spec

    generator = np.random.default_rng(0)
    gold = generator.normal(size=400)
    store = Store(tmp_path / "store")
    keys = {}
    for spec, noise in (("be", 0.3), ("be:pooling=cls", 3.0)):  # be follows the gold scores far more closely
        keys[spec] = key = resolve_model_spec(registry, spec, get_profile("smoke")).key
        for seed in (42, 43):
            data = ExampleScores("spearman", {"predicted": gold + noise * generator.normal(size=400), "gold": gold})
            record = _record(spec, seed, "stsb", data.value(), family="senteval")
            record["model_key"] = key
            record["examples"], side_file = example_side_file(data, data.value(), "test")
            store.write(key, seed, "stsb", record, examples=side_file)
    # the reproduction page's rule: equal paper numbers are a claimed tie; a size far from ours is
    # "same direction"
    for paper, verdict in (
        ("{Base: {stsb: 75.0}, CLS: {stsb: 75.0}}", "not reproduced (significant difference)"),
        ("{Base: {stsb: 80.0}, CLS: {stsb: 70.0}}", "same direction"),
        ("{Base: {stsb: 70.0}, CLS: {stsb: 80.0}}", "not reproduced (significantly opposite)"),
    ):
        matrix = tmp_path / "m.yaml"
        matrix.write_text(
            "profile: smoke\nseeds: [42, 43]\ntasks: [stsb]\nmodels:\n"
            "  - {model: be, name: Base}\n  - {model: 'be:pooling=cls', name: CLS}\n"
            f"paper:\n  source: a table\n  rows: {paper}\n"
        )
        (line,) = paper_agreement_rows(build_board(matrix, store, registry))
        assert line[-1] == verdict and "p=0.00" in line[-2], line
    for path in (tmp_path / "store").rglob("*.examples.npz"):  # records stored before per-example data
        path.unlink()
    (line,) = paper_agreement_rows(build_board(matrix, Store(tmp_path / "store"), registry))
    assert line[-1] == "untested (records without per-example data)", line


def test_table_first_with_one_caption_line_and_notes_as_a_list(tmp_path):
    """Title, one caption line (the backbone and profile every row shares, the marks that occur), the table, then
    the notes as a list with blank lines between items (a renderer would join adjacent lines into one paragraph)."""
    markdown = render_markdown(collect_tables(_store(tmp_path))[0])
    lines = markdown.splitlines()
    assert lines[0] == "# Leaderboard: fam" and lines[1] == "" and lines[3] == ""
    caption = lines[2]
    assert caption.startswith("Cells: main score x100") and "all 3 rows: backbone tiny, profile smoke" in caption
    assert "* = not every seed of the row has this cell" in caption  # `half` has one t2 seed of two
    assert "≈" not in caption and "†" not in caption  # marks that do not occur are not explained above the table
    assert lines[4].startswith("| rank ") and "backbone" not in lines[4] and "profile" not in lines[4]
    notes = lines[lines.index("## Notes") + 2 :]
    assert notes[0].startswith("- Generated by") and notes[1] == "" and notes[2].startswith("- ")
    assert lines.index("## Notes") > max(i for i, line in enumerate(lines) if line.startswith("| "))
    assert markdown.count("Cells:") == 1 and notes[-1] == "- Hardware: cpu (2 cores)."


def test_missing_cells_say_why_and_how_to_get_the_data_in_one_line(tmp_path):
    store = Store(tmp_path)
    for model in ("a", "b"):
        store.write(f"{model}-key", 1, "t1", _record(model, 1, "t1", 70.0))
        missing = _record(model, 1, "t2", None, status="missing")
        missing["message"] = (
            "T2: not bundled with harness (a licence question); download it with `harness data download t2` "
            "(it goes to /home/me/.cache/t2). Looked in /data/t2."
        )
        store.write(f"{model}-key", 1, "t2", missing)
    markdown = render_markdown(collect_tables(store)[0])
    (line,) = [line for line in markdown.splitlines() if line.startswith("`missing` in")]
    assert line.startswith("`missing` in t2 (2 cells):") and "not bundled with harness (a licence question)" in line
    assert "`harness data download t2`" in line and "/home/me" not in line  # paths differ by machine
    assert markdown.index(line) < markdown.index("## Notes")  # under the table, not among the notes


def test_superseded_rows_are_left_out_unless_asked_and_never_ranked(tmp_path):
    store = _store(tmp_path / "store")
    store.write("old-good-key", 1, "t1", _record("good", 1, "t1", 99.0) | {"model_key": "old-good-key"})
    store.write("old-good-key", 1, "t2", _record("good", 1, "t2", 99.0) | {"model_key": "old-good-key"})
    stale = {"old-good-key": "good-key"}
    (path,) = write_leaderboards(store, tmp_path / "hidden", ("md",), stale=stale)
    text = path.read_text()
    assert "99.00" not in text and "| good " in text  # no `{...}` suffix: only the hidden row shared the label
    assert "1 superseded model(s) left out" in text and "--show-superseded" in text
    (path,) = write_leaderboards(store, tmp_path / "shown", ("md",), stale=stale, show_superseded=True)
    text = path.read_text()
    (old,) = [line for line in text.splitlines() if "99.00" in line]
    assert old.startswith("|        | good {key=old-good-key} §")  # shown, marked, no rank though the best average
    assert "| 1      | good {key=good-key}" in text and "§ = superseded" in text.splitlines()[2]
    (table,) = collect_tables(store, hidden=("old-good-key",))
    assert "old-good-key" not in {row.model_key for row in table.rows}
