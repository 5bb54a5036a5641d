"""MaxSim pair-scoring throughput: the batched path (harness.evaluation.maxsim.maxsim_pairs, what the multi-vector
pair scorer uses) against the per-pair loop it replaced (harness.maxsim once per pair), on the same pairs.

Vector sets are random with Nugget's ragged lengths: ``--texts`` distinct texts of ``--min-tokens`` ..
``--max-tokens`` tokens (uniform; 8-40 covers STS sentences with their special tokens) keep k = ceil(``--ratio`` * n)
vectors of width ``--width`` (384, all-MiniLM-L6-v2); ``--pairs`` random pairs of them (10,000 by default). The
default ratio 0.25 is the largest of the paper (the most vectors per text); ``--ratio 1`` is a ColBERT-style set of
one vector per token. Both paths get the same sets; the scores are checked equal (1e-6) before timing. Pairs/s = pairs / best of
``--repeats`` wall times; the ratio is batched / naive (target >= 20).

    python benchmarks/maxsim_speed.py [--pairs 10000] [--repeats 3] [--threads 1]

Measured on the shared 2-core CPU while other CPU-bound jobs ran (load average ~4), with --threads 1: naive ~12K
pairs/s, batched ~55K pairs/s, ratio ~4.5 (the target 20 was not reached there); with torch's 2 threads the batched
path was slower still (thread synchronisation under contention). The batched path is bound by copying each pair's
vectors into its batch; repeat on an idle machine before drawing conclusions.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import time

import numpy as np
import torch

logger = logging.getLogger("maxsim_speed")


def naive_scores(vector_sets: list[np.ndarray], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    from harness import maxsim

    return np.array([maxsim(vector_sets[a], vector_sets[b]) for a, b in zip(first, second)])


def batched_scores(vector_sets: list[np.ndarray], first: np.ndarray, second: np.ndarray) -> np.ndarray:
    from harness.evaluation.maxsim import maxsim_pairs

    return maxsim_pairs(vector_sets, vector_sets, first, second)


def best_time(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--texts", type=int, default=4_000)
    parser.add_argument("--ratio", type=float, default=0.25, help="Nugget's ratio r: k = ceil(r * n) vectors")
    parser.add_argument("--min-tokens", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=40)
    parser.add_argument("--width", type=int, default=384)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(args.min_tokens, args.max_tokens + 1, size=args.texts)
    lengths = np.maximum(1, np.ceil(args.ratio * tokens - 1e-9)).astype(int)
    vector_sets = [rng.normal(size=(int(n), args.width)).astype(np.float32) for n in lengths]
    first = rng.integers(0, args.texts, size=args.pairs)
    second = rng.integers(0, args.texts, size=args.pairs)
    difference = np.abs(naive_scores(vector_sets, first, second) - batched_scores(vector_sets, first, second)).max()
    if difference > 1e-6:
        raise SystemExit(f"batched and naive MaxSim differ by {difference:.2e} (> 1e-6)")
    logger.info("%d pairs of %d texts (%d-%d vectors of width %d), %d torch threads, load average %.2f %.2f %.2f",
                args.pairs, args.texts, lengths.min(), lengths.max(), args.width, torch.get_num_threads(),
                *os.getloadavg())
    naive_seconds = best_time(lambda: naive_scores(vector_sets, first, second), args.repeats)
    batched_seconds = best_time(lambda: batched_scores(vector_sets, first, second), args.repeats)
    naive_rate, batched_rate = args.pairs / naive_seconds, args.pairs / batched_seconds
    ratio = batched_rate / naive_rate
    logger.info("naive per-pair loop %.0f pairs/s, batched %.0f pairs/s: ratio %.1f (target >= 20; max difference "
                "%.1e)", naive_rate, batched_rate, ratio, difference)
    print(json.dumps({"pairs": args.pairs, "ratio_r": args.ratio, "vectors_per_text": [int(lengths.min()),
                                                                                      int(lengths.max())], "naive_pairs_per_second": round(naive_rate, 1),
                      "batched_pairs_per_second": round(batched_rate, 1), "ratio": round(ratio, 2),
                      "max_difference": float(difference), "load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
