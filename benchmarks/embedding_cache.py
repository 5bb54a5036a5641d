"""The embedding cache (harness.embedding_cache): hit rates, time saved and disk size, with the real MiniLM and data.

``harness run --models be`` (all-MiniLM-L6-v2, quick profile, seed 42), as a user would run it, one command after
another into store A (the cache on, the default):

1. ``--tasks stsb``: the cache starts empty and is filled with STS-B's test sentences;
2. ``--tasks T`` (default: the SentEval STS tasks but STS-B, ``sts12,...,sts16,sickr``): STS-B is built from
   STS12-16 sentences, so part of their vectors are served from the cache;
3. ``--tasks T --overwrite``: every cell evaluated again (nothing to train for ``be``): every vector served.

Store B runs ``--tasks T --no-embedding-cache`` once, between steps 2 and 3: the same cells computed without the
cache, the baseline of both. Prints per step the texts served / computed (the records' ``timings.embedding_cache``),
the summed ``eval_seconds`` of the cells computed, the command's wall time, the time saved against B and the ratio,
the cache's size on disk and per million sentences (the vectors' width and dtype as stored), and the load average at
start and end. ``--count`` first prints, from the data alone (no encoding), each task's distinct test sentences and
how many of them the first task's hold: the hits step 2 should see.

Usage: nice -n 10 python benchmarks/embedding_cache.py [--tasks sts16,sts13] [--first stsb] [--count]
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
            hits, misses = hits + counts.get("hits", 0), misses + counts.get("misses", 0)
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


def count_shared(first: str, tasks: list[str]) -> None:
    """Each task's distinct test sentences and those ``first``'s hold (the data alone)."""
    sys.path.insert(0, str(Path(__file__).parent))
    import runtime_speed

    def sentences(name: str) -> set[str]:
        runtime_speed.TASKS = (name,)
        return set(runtime_speed.task_sentences(None))

    seen = sentences(first)
    total = shared = 0
    for task in tasks:
        texts = sentences(task)
        total, shared = total + len(texts), shared + len(texts & seen)
        print(
            f"  {task}: {len(texts)} distinct sentences, {len(texts & seen)} of them in {first} or the tasks before ({len(texts & seen) / len(texts):.1%})"
        )
        seen |= texts
    print(f"  all: {total} (per task), {shared} in the tasks before ({shared / max(total, 1):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="be")
    parser.add_argument("--first", default="stsb", help="the task evaluated first (default stsb)")
    parser.add_argument(
        "--tasks", default="sts12,sts13,sts14,sts15,sts16,sickr", help="the tasks evaluated next and again"
    )
    parser.add_argument("--count", action="store_true", help="first count the shared sentences from the data")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"harness run --models {args.models} --profile quick --seeds 42: {args.first}, then {args.tasks}, then")
    print(f"{args.tasks} --overwrite (store A, the cache on); {args.tasks} --no-embedding-cache (store B)")
    print(f"load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    if args.count:
        print(f"sentences shared with the tasks before, counted from the data (each task after {args.first}):")
        count_shared(args.first, args.tasks.split(","))
    with tempfile.TemporaryDirectory(prefix="embedding-cache-") as folder:
        cached, uncached = Path(folder) / "cached", Path(folder) / "uncached"

        def step(store: Path, tasks: str, *extra: str) -> tuple[float, int, int, float]:
            since = time.time() - 1e-3
            wall = run(store, args.models, tasks, *extra)
            return (wall, *summary(cells(store, since)))

        def report(label: str, measured: tuple, baseline: tuple | None) -> None:
            wall, hits, misses, seconds = measured
            rate = hits / (hits + misses) if hits + misses else 0.0
            served = f"served {hits}, computed {misses} (hit rate {rate:.1%})" if hits + misses else "cache off"
            line = f"{label}: {served}; eval_seconds {seconds:.1f} s"
            if baseline is not None:
                line += (
                    f", without the cache {baseline[3]:.1f} s: saved {baseline[3] - seconds:.1f} s "
                    f"({baseline[3] / max(seconds, 1e-9):.2f}x); command wall {wall:.1f} s vs {baseline[0]:.1f} s"
                )
            else:
                line += f"; command wall {wall:.1f} s"
            print(line, flush=True)

        report(f"A1. {args.first} (cold cache)", step(cached, args.first), None)
        after_first = step(cached, args.tasks)
        baseline = step(uncached, args.tasks, "--no-embedding-cache")
        report(f"B.  {args.tasks} --no-embedding-cache", baseline, None)
        report(f"A2. {args.tasks} after {args.first}", after_first, baseline)
        report(f"A3. {args.tasks} --overwrite", step(cached, args.tasks, "--overwrite"), baseline)
        size, texts, described = cache_size(cached)
        print(
            f"cache on disk: {size / 2**20:.2f} MiB for {texts} texts ({described}): {size / max(texts, 1):.0f} "
            f"bytes per text, {size / max(texts, 1) * 1e6 / 2**20:.0f} MiB per million sentences"
        )
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
