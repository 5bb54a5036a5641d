"""Memory of the BEIR tasks' exact search on a corpus too large to hold as one float32 matrix.

The BEIR fixture (tests/fixtures/beir/tiny) scaled up: ``--documents`` synthetic documents (default 1,000,000) of
``--dim``-dimensional vectors (default 384, MiniLM's size) and ``--queries`` queries (default 1,000), searched for
the top 1001 (what beir:* asks for: k 1000 plus one, since a document with the query's id is dropped) with
``harness.tasks.beir.cosine_search``, the function the task runs. The "encoder" makes each chunk's vectors from a
seeded generator, so no model time is measured and the corpus never exists as a whole.

Prints the wall time, the peak of memory allocated while searching (tracemalloc, which numpy reports to) and the peak
resident set size of the process, against what one float32 corpus matrix and one query x corpus score matrix would
take. A second, small run checks the chunked result against one plain matrix product.

Usage: python benchmarks/beir_search_memory.py [--documents 1000000] [--queries 1000] [--dim 384]
           [--corpus-chunk 50000]
"""

from __future__ import annotations

import argparse
import resource
import time
import tracemalloc

import numpy as np

from harness.tasks.beir import DEFAULT_CORPUS_CHUNK, K_VALUES, cosine_search


def synthetic_chunk(start: int, stop: int, dim: int) -> np.ndarray:
    """Vectors of documents start:stop, the same whichever chunking asks for them (one generator per document
    block of 1000)."""
    blocks = []
    for block in range(start // 1000, (stop - 1) // 1000 + 1):
        vectors = np.random.default_rng(block).standard_normal((1000, dim), dtype=np.float32)
        low, high = max(start, block * 1000), min(stop, (block + 1) * 1000)
        blocks.append(vectors[low - block * 1000 : high - block * 1000])
    return np.concatenate(blocks)


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--corpus-chunk", type=int, default=DEFAULT_CORPUS_CHUNK)
    args = parser.parse_args()
    k = max(K_VALUES) + 1

    # Correctness at a size where the whole matrix is cheap.
    small_queries = np.random.default_rng(99).standard_normal((20, args.dim), dtype=np.float32)
    chunked, _ = cosine_search(small_queries, lambda a, b: synthetic_chunk(a, b, args.dim), 5_000, 50, corpus_chunk=777)
    documents = synthetic_chunk(0, 5_000, args.dim)
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    reference = np.argsort(-(unit(small_queries) @ unit(documents).T), axis=1, kind="stable")[:, :50]
    print(f"check: chunked top-50 of 5,000 documents equals one matrix product: {np.array_equal(chunked, reference)}")
    del documents

    # A seed no document block uses (blocks are seeded 0 .. documents/1000), so no query equals a document.
    queries = np.random.default_rng(2**40).standard_normal((args.queries, args.dim), dtype=np.float32)
    rss_before = max_rss_mib()
    tracemalloc.start()
    started = time.perf_counter()
    indices, scores = cosine_search(
        queries, lambda a, b: synthetic_chunk(a, b, args.dim), args.documents, k, corpus_chunk=args.corpus_chunk
    )
    seconds = time.perf_counter() - started
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    corpus_matrix = args.documents * args.dim * 4 / 2**20
    score_matrix = args.queries * args.documents * 4 / 2**20
    print(
        f"{args.documents:,} documents x {args.dim} dims, {args.queries:,} queries, top {k}, corpus chunks of "
        f"{args.corpus_chunk:,}: {seconds:.1f} s"
    )
    print(f"  peak memory allocated while searching (tracemalloc): {traced_peak / 2**20:,.0f} MiB")
    print(
        f"  peak resident set size of the process: {max_rss_mib():,.0f} MiB (before the search: {rss_before:,.0f} MiB)"
    )
    print(
        f"  for comparison: the corpus as one float32 matrix {corpus_matrix:,.0f} MiB; the query x corpus float32 "
        f"score matrix {score_matrix:,.0f} MiB"
    )
    print(f"  result: {indices.shape} indices, best score of query 0 {scores[0, 0]:.4f}")


if __name__ == "__main__":
    main()
