"""Wall time of one matrix under the local executor and under Ray with 1 and 2 workers (issue 12).

The matrix: the built-in models that can run SentEval (each trained on its default source where it needs training)
x the SentEval STS family, smoke profile, one seed; by default on a tiny random BERT (2 layers, 32 wide) so that the
executors' own costs are visible rather than drowned in model compute. Each configuration starts from an empty store.
Ray runs start their own local cluster (``--ray-address local`` with ``num_cpus`` = workers); its start-up is
reported apart from the matrix's time.

    python benchmarks/executor_scaling.py                    # tiny BERT, all three configurations
    python benchmarks/executor_scaling.py --backbone sentence-transformers/all-MiniLM-L6-v2 --modes local,ray2

Prints, per configuration, the wall time (with and without the cluster's start-up), the ratio to local, and the
overhead Ray adds per cell: (Ray with 1 worker - local) / cells, i.e. scheduling, a worker's first imports, and
each cell loading its model from the checkpoint instead of reusing the one in memory.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def runnable_models(registry, tasks: list[str], profile: str, backbone: str, store: Path) -> tuple[list[str], dict]:
    """The built-in models (and recipes) whose default spec can run these tasks, and why the others cannot."""
    from harness.errors import HarnessError
    from harness.runner import ModelEntry, RunConfig, Runner

    names = sorted(set(registry.models) | set(registry.recipes))
    usable, skipped = [], {}
    for name in names:
        config = RunConfig(models=[ModelEntry(name)], tasks=tasks, profile=profile, backbone=backbone,
                           device="cpu", results_dir=store, progress=False)
        try:
            Runner(registry, config).plan()
            usable.append(name)
        except HarnessError as exc:
            skipped[name] = str(exc).splitlines()[0][:110]
    return usable, skipped


def run_once(mode: str, models: list[str], tasks: list[str], profile: str, backbone: str,
             store: Path) -> tuple[float, float, int]:
    """(wall seconds of the run, of which cluster start-up, cells computed)."""
    from harness.registry import build_registry
    from harness.runner import ModelEntry, RunConfig, Runner

    executor = None
    options: dict = {}
    if mode.startswith("ray"):
        from harness.executors.ray_cluster import RayExecutor

        workers = int(mode[3:])
        executor = RayExecutor(address="local", num_cpus=workers)
        options = {"executor": "ray"}
    config = RunConfig(models=[ModelEntry(m) for m in models], tasks=tasks, profile=profile, backbone=backbone,
                       device="cpu", results_dir=store, progress=False, **options)
    runner = Runner(build_registry(), config, log=lambda message: None)
    plan = runner.plan()
    started = time.perf_counter()
    if executor is not None:
        executor.start(runner, plan)
        startup = time.perf_counter() - started
        outcomes = runner.run(plan, _Started(executor))
    else:
        startup = 0.0
        outcomes = runner.run(plan)
    wall = time.perf_counter() - started
    computed = sum(outcome.status in ("ok", "failed", "missing") for outcome in outcomes)
    return wall, startup, computed


class _Started:
    """The executor once started: runner.run calls start again, which must not reconnect."""

    def __init__(self, executor):
        self.executor = executor

    def start(self, runner, plan) -> None:
        pass

    def run(self, *args):
        return self.executor.run(*args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbone", default=None, help="default: a tiny random BERT written to a temp folder")
    parser.add_argument("--models", default=None, help="comma-separated (default: every built-in that fits)")
    parser.add_argument("--tasks", default="senteval")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--modes", default="local,ray1,ray2", help="local, rayN (N workers)")
    args = parser.parse_args()

    import torch

    from harness.registry import build_registry
    from harness.testing import tiny_bert

    work = Path(tempfile.mkdtemp(prefix="executor-scaling-"))
    backbone = args.backbone or str(tiny_bert(work / "tiny-bert"))
    tasks = [args.tasks]
    if args.models:
        models, skipped = args.models.split(","), {}
    else:
        models, skipped = runnable_models(build_registry(), tasks, args.profile, backbone, work / "probe")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; local executor "
          f"uses {torch.get_num_threads()} PyTorch threads, each Ray task 1")
    print(f"matrix: {', '.join(models)} x {args.tasks}, profile {args.profile}, backbone "
          f"{'tiny BERT' if not args.backbone else backbone}")
    for name, why in skipped.items():
        print(f"  left out {name}: {why}")
    results: dict[str, tuple[float, float, int]] = {}
    for mode in args.modes.split(","):
        results[mode] = run_once(mode, models, tasks, args.profile, backbone, work / mode)
        wall, startup, cells = results[mode]
        print(f"  {mode:<6} {wall:7.1f} s wall ({startup:5.1f} s cluster start-up), {cells} cells, "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
    if "local" in results:
        local_wall, _, cells = results["local"]
        print("ratios to local (matrix time without the cluster's start-up):")
        for mode, (wall, startup, _) in results.items():
            print(f"  {mode:<6} {(wall - startup) / local_wall:5.2f}x")
        if "ray1" in results:
            wall, startup, _ = results["ray1"]
            print(f"Ray overhead per cell (1 worker vs local): {(wall - startup - local_wall) / max(1, cells):+.2f} s")


if __name__ == "__main__":
    main()
