"""The embedding cache (harness.embedding_cache): hit rates, time saved and disk size, with the real MiniLM and data.

Two fresh stores, each running ``harness run --models be`` (all-MiniLM-L6-v2, quick profile, seed 42) as a user
would, one command after another:

1. ``--tasks stsb``: the cache starts empty and is filled with STS-B's sentences;
2. ``--tasks senteval``: the other SentEval STS tasks (STS-B's cell comes from the store); STS-B is built from
   STS12-16 sentences, so part of their vectors are served from the cache;
3. ``--tasks senteval --overwrite``: every cell evaluated again (nothing to train for ``be``): every vector served.

Store A runs with the cache (the default), store B with ``--no-embedding-cache``; the steps alternate between the
stores (A1 B1 A2 B2 A3 B3) so that both see the same load. Prints per step and store the texts served / computed
(the records' ``timings.embedding_cache``), the summed ``eval_seconds`` of the cells computed, the command's wall
time, the time saved (B - A) and the ratio, the cache's size on disk and per million sentences (the vectors' width
and dtype as stored), and the load average at start and end.

Usage: nice -n 10 python benchmarks/embedding_cache.py [--tasks senteval] [--first stsb] [--models be]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(store: Path, models: str, tasks: str, *extra: str) -> float:
    command = [sys.executable, "-m", "harness", "run", "--models", models, "--tasks", tasks, "--profile", "quick"]
    command += ["--seeds", "42", "--results", str(store), "--no-progress", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return seconds


def cells(store: Path, since: float) -> list[dict]:
    """The records written after ``since`` (the cells a step computed)."""
    found = []
    for path in sorted(store.glob("*/seed-*/*.json")):
        if path.stat().st_mtime >= since:
            found.append(json.loads(path.read_text()))
    return found


def summary(records: list[dict]) -> tuple[int, int, float]:
    hits = misses = 0
    seconds = 0.0
    for record in records:
        counts = record["timings"].get("embedding_cache")
        if isinstance(counts, dict):
            hits, misses = hits + counts["hits"], misses + counts["misses"]
        seconds += record["timings"]["eval_seconds"]
    return hits, misses, seconds


def cache_size(store: Path) -> tuple[int, int, str]:
    """Bytes of the cache's shards, the texts they hold, and the vectors' shape per text and dtype."""
    from safetensors import safe_open

    total = texts = 0
    described = ""
    for shard in (store / "cache" / "embeddings").rglob("*.safetensors"):
        total += shard.stat().st_size
        with safe_open(str(shard), "np") as opened:
            vectors = opened.get_tensor("vectors")
        texts += len(vectors)
        described = f"{vectors.shape[1]}-d {vectors.dtype}"
    return total, texts, described


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="be")
    parser.add_argument("--first", default="stsb", help="the task evaluated first (default stsb)")
    parser.add_argument("--tasks", default="senteval", help="the tasks evaluated next and again (default senteval)")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"harness run --models {args.models} --profile quick --seeds 42: {args.first}, then {args.tasks}, then")
    print(f"{args.tasks} --overwrite; store A with the embedding cache, B with --no-embedding-cache")
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    steps = [
        (f"1. {args.first} (cold cache)", args.first, ()),
        (f"2. {args.tasks} after {args.first}", args.tasks, ()),
        (f"3. {args.tasks} --overwrite", args.tasks, ("--overwrite",)),
    ]
    with tempfile.TemporaryDirectory(prefix="embedding-cache-") as folder:
        stores = {"A": Path(folder) / "cached", "B": Path(folder) / "uncached"}
        flags = {"A": (), "B": ("--no-embedding-cache",)}
        for label, tasks, extra in steps:
            measured = {}
            for side, store in stores.items():
                since = time.time() - 1e-3
                wall = run(store, args.models, tasks, *extra, *flags[side])
                measured[side] = (wall, *summary(cells(store, since)))
            wall_a, hits, misses, eval_a = measured["A"]
            wall_b, _, _, eval_b = measured["B"]
            rate = hits / (hits + misses) if hits + misses else 0.0
            print(
                f"{label}: served {hits}, computed {misses} (hit rate {rate:.1%}); eval_seconds A {eval_a:.1f} s, "
                f"B {eval_b:.1f} s, saved {eval_b - eval_a:.1f} s ({eval_b / max(eval_a, 1e-9):.2f}x); command wall "
                f"A {wall_a:.1f} s, B {wall_b:.1f} s ({wall_b / wall_a:.2f}x)",
                flush=True,
            )
        size, texts, described = cache_size(stores["A"])
        print(
            f"cache on disk: {size / 2**20:.2f} MiB for {texts} texts ({described}): {size / max(texts, 1):.0f} "
            f"bytes per text, {size / max(texts, 1) * 1e6 / 2**20:.0f} MiB per million sentences"
        )
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
