"""What a user sees when something is wrong: one line each, in seconds."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from harness import EMBEDDER, ModelPlugin, hookimpl
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.registry import build_registry
from harness.run.config import RunConfig
from harness.run.driver import Run


def test_describe_an_unknown_name_offers_close_matches(run_cli):
    code, out, err = run_cli("describe", "tsdea")
    assert code != 0 and out == ""
    assert err.strip().splitlines() == [
        "error: unknown model or task 'tsdea'. Did you mean: tsdae? `harness list` shows them all."
    ]


def test_describe_a_trainable_model_lists_its_budget_keys(run_cli):
    code, out, _ = run_cli("describe", "tsdae")
    assert code == 0 and "budget keys: epochs, max_steps, batch_size, learning_rate, max_train_examples" in out


def test_a_typo_in_a_matrix_entry_key_gets_did_you_mean(run_cli, tmp_path):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("tasks: [stsb]\nmodels:\n  - {model: ce, train_on: stsb, epoch: 2}\n")
    code, _, err = run_cli("validate", "--matrix", matrix)
    assert code != 0 and "unknown key 'epoch'. Did you mean: epochs?" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda root: root / "absent", "no such folder"),
        (lambda root: root, "no config.json; no .safetensors weights"),
    ],
)
def test_validate_checks_the_backbone(run_cli, tmp_path, make, message):
    code, out, err = run_cli("validate", "--models", "be", "--tasks", "stsb", "--backbone", make(tmp_path))
    assert code != 0 and "ok:" not in out and message in err and len(err.strip().splitlines()) == 1


def test_validate_checks_that_st_gets_a_sentence_transformers_folder(run_cli, tiny_bert):
    code, _, err = run_cli("validate", "--models", "st", "--tasks", "stsb", "--backbone", tiny_bert)
    assert code != 0 and "is not a sentence-transformers model" in err


def test_an_uncached_hub_id_offline_fails_at_once_naming_the_setting(run_cli, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    code, _, err = run_cli("validate", "--models", "be", "--tasks", "stsb", "--backbone", "no-such-org/no-such-model")
    assert time.perf_counter() - started < 5
    assert code != 0 and "HF_HUB_OFFLINE=1" in err and len(err.strip().splitlines()) == 1


def test_missing_data_is_reported_once_per_task(run_cli, tmp_path):
    code, out, err = run_cli(
        "run",
        "--models",
        "st,be",
        "--tasks",
        "ukp-sentential-topic",
        "--profile",
        "smoke",
        "--results",
        tmp_path,
        "--no-progress",
    )
    assert (out + err).count("is not available") == 1, out + err
    assert "missing data (reason above): ukp-sentential-topic (2 cells)" in out


class _Embedders:
    """Third-party embedders: one whose vectors depend on the rest of the batch, one that does not."""

    class Centred:
        def encode(self, texts):
            vectors = np.array([[len(t), t.count(" "), t.count("a")] for t in texts], dtype=np.float32)
            return vectors - vectors.mean(axis=0)  # batch statistics: a text's vector depends on the others

    class Counts:
        def encode(self, texts):
            return np.array([[len(t), t.count(" "), t.count("a") + 1] for t in texts], dtype=np.float32)

    @staticmethod
    @hookimpl
    def register_models(register):
        register(ModelPlugin("centred", "batch-centred counts", lambda ctx: _Embedders.Centred(), (EMBEDDER,)))
        register(ModelPlugin("counts", "character counts", lambda ctx: _Embedders.Counts(), (EMBEDDER,)))


def _run(tmp_path, models):
    registry = build_registry(extra_plugins=[_Embedders])
    config = RunConfig(
        models=[ModelEntry(m) for m in models],
        tasks=["stsb"],
        profile="smoke",
        device="cpu",
        results_dir=tmp_path,
        progress=False,
    )
    runner = Run(registry, config, log=lambda message: None)
    return runner, runner.run(LocalExecutor(), runner.plan())


def test_a_batch_dependent_third_party_embedder_fails_instead_of_storing_scores(tmp_path, monkeypatch):
    import harness.run.jobs as runner_module

    monkeypatch.setattr(runner_module.importlib_metadata, "version", lambda package: "1.0")
    runner, (centred, counts) = _run(tmp_path, ["centred", "counts"])
    assert centred.status == "failed" and "depend on the other texts of the batch" in centred.message
    assert counts.status == "ok"
    verdicts = {
        json.loads(p.read_text())["model"]: json.loads(p.read_text())["problem"]
        for p in (tmp_path / "cache" / "batch-probe").glob("*.json")
    }
    assert verdicts["counts"] is None and "depend on the other texts" in verdicts["centred"]
    # Once per plugin version: the cached verdict answers the next run without probing.
    monkeypatch.setattr(runner_module, "batch_dependence", lambda model: pytest.fail("probed again"))
    _, (again, _) = _run(tmp_path, ["centred", "counts"])
    assert again.status == "failed"
