"""DistributedDataParallel on the CPU: two gloo processes launched by torchrun train a built-in model to
the same loss curve and the same outputs as one process at the same global batch, in-batch negatives included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from harness import distributed

# One process trains, or each torchrun rank does its share; rank 0 prints the loss curve and the trained model's
# outputs on probe texts. Dropout is off in the backbone so that the one-process and two-process runs draw no
# random numbers that could differ (the data order is seeded and identical on every rank).
WORKER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import torch
    torch.set_num_threads(1)
    from harness import distributed
    from harness.registry import build_registry
    import harness.testing as ht

    backbone, models = sys.argv[1], sys.argv[2:]
    device = distributed.setup("cpu")
    registry = build_registry()
    texts = list(ht.TINY_SENTENCES[:6])
    results = {}
    for model_name in models:
        plugin = registry.model(model_name)
        # Global batches of 8 for 3 epochs: each rank holds 4 examples of every batch.
        profile = ht.smoke_profile(batch_size=8, epochs=3, max_steps=None, max_train_examples=None)
        ctx = ht.model_context(backbone, plugin=plugin, profile=profile, device=device, registry=registry)
        ht.contexts._seed_everything(ctx.seed)
        model = plugin.factory(ctx)
        untrained = model.encode(texts)
        report = model.fit(ht.tiny_training_splits(plugin.training_kinds[0]), ctx)
        record = report.as_record() if hasattr(report, "as_record") else report
        trained = model.encode(texts)
        results[model_name] = {"losses": record["mean_loss_per_epoch"], "outputs": trained.tolist(),
                               "moved": float(np.abs(trained - untrained).max()), "steps": record["steps"],
                               "budget": record["applied_budget"]}
    if distributed.is_main_process():
        print("RESULT " + json.dumps(results))
""")


@pytest.fixture(scope="module")
def dropout_free_bert(tmp_path_factory) -> str:
    from harness.testing import tiny_bert

    folder = tiny_bert(tmp_path_factory.mktemp("tiny-bert-no-dropout"))
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


def _train(tmp_path: Path, backbone: str, models: tuple[str, ...], processes: int) -> dict:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    command = [sys.executable, str(script), backbone, *models]
    if processes > 1:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            str(processes),
            "--master-port",
            "0",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "localhost:0",
            str(script),
            backbone,
            *models,
        ]
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    environment.pop("WORLD_SIZE", None)
    run = subprocess.run(command, capture_output=True, text=True, timeout=300, env=environment)
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, run.stdout  # rank 0 alone reports
    return json.loads(lines[0][len("RESULT ") :])


def test_two_gloo_processes_train_like_one_at_the_same_global_batch(tmp_path, dropout_free_bert):
    """simcse: InfoNCE over in-batch negatives, each rank's anchors against the positives of both ranks (gathered
    with their gradients); be: MSE on cosine, a per-pair loss (the plain data-parallel case)."""
    models = ("simcse", "be")
    one = _train(tmp_path, dropout_free_bert, models, 1)
    two = _train(tmp_path, dropout_free_bert, models, 2)
    for model in models:
        single, double = one[model], two[model]
        assert single["steps"] == double["steps"] >= 6, model
        assert double["budget"]["processes"] == 2 and "processes" not in single["budget"]
        assert double["losses"] == pytest.approx(single["losses"], rel=1e-4, abs=1e-5), model
        # AdamW turns float rounding in a near-zero gradient (the two runs add the batch's gradients in another
        # order, and pad each share to its own longest text) into a step of up to lr, so weights may differ by a few
        # lr: the embeddings agree to 2e-3 of their size and the cosine scores a task computes to 2e-3.
        first, second = torch.tensor(single["outputs"]), torch.tensor(double["outputs"])
        assert (second - first).abs().max() < 2e-3 * first.abs().max(), model
        assert (_cosines(second) - _cosines(first)).abs().max() < 2e-3, model


def _cosines(vectors: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(vectors[:, None], vectors[None], dim=-1)


def test_shards_cover_the_global_batch_in_order():
    shards = [distributed.shard_of(list(range(7)), rank, 3) for rank in range(3)]
    assert [(s.offset, s.count) for s in shards] == [(0, 3), (3, 2), (5, 2)]
    assert distributed.shard_of([0], 1, 2).count == 0  # a rank without a share computes with weight 0


def test_without_torchrun_nothing_is_distributed(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed.setup("cpu") == "cpu" and not distributed.active()
    assert distributed.gather_with_grad(torch.ones(2, 3))[1] == 0


def test_harness_run_under_torchrun_trains_once_and_rank_0_writes(tmp_path, tiny_bert, run_cli):
    """`torchrun --nproc-per-node 2 -m harness run`: both ranks train the cell's model together, rank 0 alone writes
    the checkpoint and the record, whose score is the one-process score at the same global batch."""
    arguments = (
        "run",
        "--models",
        "ce",
        "--tasks",
        "stsb",
        "--profile",
        "smoke",
        "--backbone",
        tiny_bert,
        "--device",
        "cpu",
        "--no-progress",
    )
    code, _, err = run_cli(*arguments, "--results", tmp_path / "one")
    assert code == 0, err
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "localhost:0",
            "-m",
            "harness",
            *arguments,
            "--results",
            str(tmp_path / "two"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.count("cells computed") == 1  # rank 0 reports
    (one,), (two,) = (list((tmp_path / name).glob("ce-*/seed-42/stsb.json")) for name in ("one", "two"))
    one, two = json.loads(one.read_text()), json.loads(two.read_text())
    assert two["hardware"].endswith("x2 processes)")
    assert two["training"]["applied_budget"]["processes"] == 2
    # Dropout draws other masks on two ranks than on one: the same score within a point on the tiny random BERT.
    assert two["main_score"] == pytest.approx(one["main_score"], abs=1.0)
    assert len(list((tmp_path / "two" / "checkpoints").glob("*/*/training.json"))) == 1
