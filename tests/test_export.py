"""``harness export``: trained be / ce load in sentence-transformers and compute what the harness computes."""

from __future__ import annotations

import json

import numpy as np
import pytest

import harness.testing as ht

TEXTS = [
    "a man is playing a guitar .",
    "the cat sits on the mat .",
    "stocks fell sharply today .",
    "a woman is slicing an onion . " * 30,
]  # the last one is longer than the smoke profile's 64 tokens


@pytest.fixture(scope="module")
def trained_store(tmp_path_factory, tiny_bert):
    """be and ce:activation=tanh trained on STS-B (smoke profile, tiny BERT), with stored STS-B scores."""
    results = tmp_path_factory.mktemp("store") / "results"
    run = ht.run_harness(
        "run",
        "--models",
        "be,ce:activation=tanh",
        "--backbone",
        tiny_bert,
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        results,
        "--no-progress",
    )
    assert run.exit_code == 0, run.stderr
    return results


def export(store, tiny_bert, spec, target, *extra):
    return ht.run_harness(
        "export",
        "--models",
        spec,
        "--backbone",
        tiny_bert,
        "--train-on",
        "stsb",
        "--profile",
        "smoke",
        "--seeds",
        "42",
        "--results",
        store,
        "--to",
        target,
        *extra,
    )


def harness_model(store, tiny_bert, spec):
    from harness.matrix import ModelEntry
    from harness.profiles import get_profile
    from harness.registry import build_registry
    from harness.run.config import RunConfig
    from harness.run.driver import Run
    from harness.spec import resolve_model_spec

    registry = build_registry()
    profile = get_profile("smoke")
    runner = Run(registry, RunConfig([ModelEntry(spec)], [], [42], "smoke", tiny_bert, "stsb", "cpu", store))
    return runner.models.checkpoints.trained_model(
        resolve_model_spec(registry, spec, profile, tiny_bert, "stsb"), profile, "cpu", 42
    )


def test_exported_be_loads_in_sentence_transformers_with_the_same_embeddings(trained_store, tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    target = tmp_path / "be-export"
    run = export(trained_store, tiny_bert, "be", target)
    assert run.exit_code == 0, run.stderr
    ours = harness_model(trained_store, tiny_bert, "be").encode(TEXTS)
    theirs = SentenceTransformer(str(target), device="cpu").encode(TEXTS)
    assert np.abs(ours - theirs).max() < 1e-5
    card = (target / "README.md").read_text()
    for fact in (
        "`be`",
        "stsb",
        "`smoke`",
        "| seed | 42 |",
        "| senteval | stsb | spearman |",
        "| a sample of 200 |",
    ):  # a smoke score says it is a sample
        assert fact in card, fact
    dev = next(line for line in card.splitlines() if "best dev score" in line)  # one scale (x100)
    assert "x100" in dev and abs(float(dev.strip("|").split("|")[1])) <= 100.0


def test_exported_ce_loads_as_a_cross_encoder_with_the_same_scores(trained_store, tiny_bert, tmp_path):
    from sentence_transformers import CrossEncoder

    target = tmp_path / "ce-export"
    run = export(trained_store, tiny_bert, "ce:activation=tanh", target)
    assert run.exit_code == 0, run.stderr
    first, second = TEXTS, TEXTS[1:] + TEXTS[:1]
    ours = harness_model(trained_store, tiny_bert, "ce:activation=tanh").score(first, second)
    reference = CrossEncoder(str(target), device="cpu")
    theirs = reference.predict(list(zip(first, second)))
    assert np.abs(ours - theirs).max() < 1e-5
    assert type(reference.activation_fn).__name__ == "Tanh"
    assert json.loads((target / "config_sentence_transformers.json").read_text())["model_type"] == "CrossEncoder"
    assert "ce:activation=tanh" in (target / "README.md").read_text()


def test_export_without_a_checkpoint_says_how_to_train_it(trained_store, tiny_bert, tmp_path):
    run = export(trained_store, tiny_bert, "be:pooling=cls", tmp_path / "out")
    assert run.exit_code == 2
    assert "no usable checkpoint" in run.stderr and "harness run --models be:pooling=cls" in run.stderr
    assert not (tmp_path / "out").exists()


def test_cbe_and_occupied_folders_are_refused_in_one_line(trained_store, tiny_bert, tmp_path):
    run = export(trained_store, tiny_bert, "cbe", tmp_path / "cbe")
    assert run.exit_code == 2 and "cannot be exported" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "file.txt").write_text("x")
    run = export(trained_store, tiny_bert, "be", occupied)
    assert run.exit_code == 2 and "is not an empty folder" in run.stderr
    run = export(trained_store, tiny_bert, "be", tmp_path / "two-seeds", "--seeds", "42,43")
    assert run.exit_code == 2 and "one seed" in run.stderr


def test_a_recipes_embedder_student_exports_as_a_sentence_transformer(trained_store, tiny_bert, tmp_path):
    from sentence_transformers import SentenceTransformer

    spec = "augsbert:teacher=ce,sampler=random,top_k=1"
    run = ht.run_harness(
        "run",
        "--models",
        spec,
        "--backbone",
        tiny_bert,
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--results",
        trained_store,
        "--no-progress",
    )
    assert run.exit_code == 0, run.stderr
    target = tmp_path / "student"
    run = export(trained_store, tiny_bert, spec, target)
    assert run.exit_code == 0, run.stderr
    ours = harness_model(trained_store, tiny_bert, spec).encode(TEXTS)
    assert np.abs(ours - SentenceTransformer(str(target), device="cpu").encode(TEXTS)).max() < 1e-5
    assert spec.split(":")[0] in (target / "README.md").read_text()
