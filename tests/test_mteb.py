"""MTEB in and out: mteb:NAME tasks run mteb's own evaluators; export-results writes what mteb's loader reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import harness.testing as ht
from harness import HarnessError, IncompatibleError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "mteb"
PLUGINS = ["harness.testing", "mteb_local_tasks"]  # tiny models; two custom mteb tasks on local data


@pytest.fixture(autouse=True)
def local_tasks_importable(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # mteb's hub datasets are unreachable here; fail at once


def run(*argv, **kwargs):
    return ht.run_harness(*argv, "--profile", "smoke", "--no-progress", plugins=PLUGINS, **kwargs)


def test_task_namespace_resolves_mteb_names(registry):
    assert registry.split_task_text("mteb:STS22") == ("mteb:STS22", {})
    assert registry.expand_task(registry.resolve_task("mteb:STS22")) == ["mteb.sts22"]
    metadata = registry.task("mteb:STS22").metadata
    assert (metadata.family, metadata.main_score, metadata.requires) == ("mteb", "cosine_spearman", ("embedder",))
    assert registry.task(registry.resolve_task("mteb:AskUbuntuDupQuestions")).metadata.requires == ("pair_scorer",)
    fresh = ht.plugin_registry("harness.tasks.mteb")  # a stored record's name resolves in a new process too
    assert fresh.expand_task(fresh.resolve_task("mteb.sick-r")) == ["mteb.sick-r"]
    assert fresh.task("mteb.sick-r").metadata.details["mteb_task"] == "SICK-R"


def test_unknown_mteb_task_lists_close_matches_in_one_line(registry):
    with pytest.raises(HarnessError) as error:
        registry.resolve_task("mteb:STS2")
    message = str(error.value)
    assert "mteb has no task 'STS2'" in message and "mteb:STS22" in message and "\n" not in message
    result = run("run", "--models", "testing-embedder", "--tasks", "mteb:SciFakt")
    assert result.exit_code == 2 and "mteb:SciFact" in result.stderr


def test_custom_mteb_task_scores_are_mtebs_own(tmp_path, minilm_path):
    import mteb
    from mteb_local_tasks import HarnessLocalSTS
    from sentence_transformers import SentenceTransformer

    result = run(
        "run", "--models", "st", "--backbone", minilm_path, "--tasks", "mteb:HarnessLocalSTS", "--results", tmp_path
    )
    assert result.exit_code == 0, result.stderr
    (record_path,) = tmp_path.glob("st-*/seed-42/mteb.harnesslocalsts.json")
    record = json.loads(record_path.read_text())
    reference = mteb.evaluate(
        SentenceTransformer(minilm_path, device="cpu"),
        HarnessLocalSTS(),
        cache=None,
        co2_tracker=False,
        show_progress_bar=False,
        encode_kwargs={"batch_size": 32},
    )
    assert record["main_score"] == pytest.approx(100 * reference.task_results[0].get_score(), abs=1e-6)
    assert record["details"]["mteb_task_result"]["task_name"] == "HarnessLocalSTS"


def test_reranking_runs_embedders_and_pair_scorers_other_tasks_refuse_pair_scorers(tmp_path):
    result = run(
        "run",
        "--models",
        "testing-embedder,testing-pair-scorer",
        "--tasks",
        "mteb:HarnessLocalRerank",
        "--results",
        tmp_path,
    )
    assert result.exit_code == 0, result.stderr
    records = [json.loads(p.read_text()) for p in tmp_path.glob("*/seed-42/mteb.harnesslocalrerank.json")]
    assert sorted(r["details"]["adapter"] for r in records) == ["HarnessCrossEncoder", "HarnessEncoder"]
    assert all(0 <= r["main_score"] <= 100 for r in records)
    refused = run("run", "--models", "testing-pair-scorer", "--tasks", "mteb:HarnessLocalSTS", "--results", tmp_path)
    assert refused.exit_code == 2 and "needs embedder" in refused.stderr


def test_unreachable_mteb_data_is_a_missing_cell_with_mtebs_reason(tmp_path):
    result = run("run", "--models", "testing-embedder", "--tasks", "mteb:STS12", "--results", tmp_path)
    assert result.exit_code == 1 and "error: no cell has its data" in result.stderr  # nothing ran
    (record_path,) = tmp_path.glob("*/seed-42/mteb.sts12.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "missing"
    assert "mteb could not load the data of STS12 (mteb/sts12-sts" in record["message"]


def test_export_results_are_read_back_by_mtebs_result_loader(tmp_path, caplog):
    import mteb

    store = tmp_path / "results"
    result = run(
        "run",
        "--models",
        "testing-embedder",
        "--tasks",
        "mteb:HarnessLocalSTS,stsb:text=raw,sickr,bws-cross-topic,twitterpara",
        "--results",
        store,
        "--seeds",
        "42,43",
    )
    assert result.exit_code == 0, result.stderr
    target = tmp_path / "mteb-results"
    # Smoke records are computed on a 200-pair sample: refused in one line naming the override.
    refused = ht.run_harness("export-results", "--format", "mteb", "--to", target, "--results", store, plugins=PLUGINS)
    assert refused.exit_code == 2 and "max_eval_examples=200" in refused.stderr
    assert "--include-samples" in refused.stderr and not target.exists()
    exported = ht.run_harness(
        "export-results", "--format", "mteb", "--to", target, "--results", store, "--include-samples", plugins=PLUGINS
    )
    assert exported.exit_code == 0, exported.stderr
    # One clear line per record without a counterpart.
    assert "skipped" in exported.stderr and "task 'bws-cross-topic' has no MTEB counterpart" in exported.stderr
    assert "needs sickr:split=all" in exported.stderr
    loaded = mteb.ResultCache(target).load_results(include_remote=False)
    # Every seed is a model of its own with a readable name (mteb's tables keep one revision per name); the
    # revision is the spec hash (seeds as revisions showed seed 42 only, under a hash name).
    assert sorted(r.model_name for r in loaded.model_results) == [
        "harness/testing-embedder-seed-42",
        "harness/testing-embedder-seed-43",
    ]
    frame = loaded.to_dataframe()
    assert {"harness/testing-embedder-seed-42", "harness/testing-embedder-seed-43"} <= set(frame.columns)
    model_result = next(r for r in loaded.model_results if r.model_name.endswith("seed-42"))
    assert (
        model_result.model_revision
        == json.loads(next(store.glob("*/seed-42/*.json")).read_text())["model"]["hash"][:12]
    )
    by_task = {r.task_name: r for r in model_result.task_results}
    assert set(by_task) == {"HarnessLocalSTS", "STSBenchmark", "TwitterSemEval2015", "TwitterURLCorpus"}
    records = {
        json.loads(p.read_text())["task"]["name"]: json.loads(p.read_text()) for p in store.glob("*/seed-42/*.json")
    }
    assert by_task["STSBenchmark"].get_score() == pytest.approx(records["stsb"]["scores"]["spearman_all"] / 100)
    assert by_task["HarnessLocalSTS"].get_score() == pytest.approx(records["mteb.harnesslocalsts"]["main_score"] / 100)
    manifest = json.loads((target / "harness_export.json").read_text())
    by_mteb_task = {m["mteb_task"]: m for m in manifest}
    assert by_mteb_task["STSBenchmark"]["exact"] is False and by_mteb_task["STSBenchmark"]["sample"] == 200
    assert "same test pairs" not in by_mteb_task["STSBenchmark"]["fidelity"]  # a sample is never "the same pairs"


def test_pair_scorer_on_an_embedding_task_is_refused_before_running(registry):
    from harness.matrix import ModelEntry
    from harness.run.config import RunConfig
    from harness.run.driver import Run

    with pytest.raises(IncompatibleError):
        Run(
            ht.plugin_registry("harness.testing", "harness.tasks.mteb"),
            RunConfig([ModelEntry("testing-pair-scorer")], ["mteb:STS22"], device="cpu"),
        ).plan()


def test_compare_on_an_mteb_task_says_it_cannot_be_tested_instead_of_advising_rescore(tmp_path):
    """mteb's evaluators return only means (``MtebTask.keeps_examples`` False): rescoring would add nothing."""
    result = run(
        "run",
        "--models",
        "testing-embedder,testing-embedder:dim=64",
        "--tasks",
        "mteb:HarnessLocalSTS",
        "--results",
        tmp_path,
    )
    assert result.exit_code == 0, result.stderr
    compared = ht.run_harness(
        "compare",
        "testing-embedder",
        "testing-embedder:dim=64",
        "--tasks",
        "mteb:HarnessLocalSTS",
        "--profile",
        "smoke",
        "--results",
        tmp_path,
        plugins=PLUGINS,
    )
    assert compared.exit_code == 0, compared.stderr
    assert "keeps no per-example data" in compared.stdout and "rescore` would not add any" in compared.stdout
