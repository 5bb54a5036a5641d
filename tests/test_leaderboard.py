"""Leaderboards from the store alone: mean ± std, incomplete cells, missing data, ranks."""
from __future__ import annotations

from harness.leaderboard import collect_tables, render_csv, render_markdown, write_leaderboards
from harness.store import Store


def _record(model, seed, task, score, status="ok", family="fam"):
    record = {
        "status": status,
        "model": {"name": model, "label": model, "train_on": None, "backbone": "tiny", "profile": "smoke",
                  "hash": f"{model}-hash"},
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
