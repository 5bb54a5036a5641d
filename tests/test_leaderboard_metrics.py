"""A family's average joins only members that share a metric (BWS: Spearman tasks, not the probe's macro-F1)."""

from __future__ import annotations

from harness.leaderboard import collect_tables, render_markdown
from harness.store import Store


def _record(model: str, seed: int, task: str, main_score: str, value: float) -> dict:
    return {
        "status": "ok",
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
        "task": {"name": task, "key": task, "label": task, "family": "bws", "version": "2", "main_score": main_score},
        "hardware": "cpu",
        "main_score": value,
        "scores": {main_score: value},
        "dataset_checksum": "0" * 64,
    }


def test_average_joins_only_members_with_the_majority_metric(tmp_path):
    store = Store(tmp_path)
    for task, metric, value in (
        ("bws-cross-topic", "spearman", 50.0),
        ("bws-in-topic", "spearman", 60.0),
        ("bws-topic", "f1_macro", 95.0),
    ):
        store.write("be-key", 42, task, _record("be", 42, task, metric, value))
    (table,) = collect_tables(store)
    assert table.averaged_metric == "spearman" and table.mixed_metrics
    assert table.averaged_columns == ["bws-cross-topic", "bws-in-topic"]
    ((rank, _, average),) = table.ranked()
    assert rank == 1 and average == 55.0  # not (50 + 60 + 95) / 3
    markdown = render_markdown(table)
    assert "average (spearman)" in markdown and "the average joins only the spearman columns" in markdown


def test_one_metric_keeps_the_plain_average(tmp_path):
    store = Store(tmp_path)
    for task, value in (("a", 50.0), ("b", 70.0)):
        store.write("be-key", 42, task, _record("be", 42, task, "spearman", value))
    (table,) = collect_tables(store)
    assert not table.mixed_metrics and table.average_header == "average"
    assert table.ranked()[0][2] == 60.0
