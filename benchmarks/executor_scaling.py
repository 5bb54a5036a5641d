"""Wall time of one matrix under the local executor and under Ray with 1 and 2 long-lived workers.

The matrix: the built-in models that can run SentEval (each trained on its default source where it needs training)
x the SentEval STS family, smoke profile, one seed; by default on a tiny random BERT (2 layers, 32 wide) so that the
executors' own costs are visible rather than drowned in model compute. Each configuration starts from an empty store.
Ray runs start their own local cluster (``--ray-address local`` with ``num_cpus`` = workers); its start-up
(starting the cluster and probing its nodes, while the long-lived workers start) is reported apart from the matrix's
time.

    python benchmarks/executor_scaling.py                    # tiny BERT, all three configurations
    python benchmarks/executor_scaling.py --backbone sentence-transformers/all-MiniLM-L6-v2 --modes local,ray2

Prints the machine's load average at the start and the end, per configuration the wall time (with and without the
cluster's start-up) and the load average after it, the ratio to local, and for each Ray configuration the overhead
it adds per cell against the local executor: (Ray wall - local wall) / cells, and the same without the cluster's
start-up ((Ray wall - start-up - local wall) / cells), i.e. scheduling, what the long-lived workers' start (imports,
registry) adds beyond the start-up, and each call's round trip; and where a Ray run's time went (the first answer,
the workers' time on models and on cells, how many cells loaded a model, the driver's time per activity).
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


# Models that wrap a sentence-transformers folder (not a plain transformer such as the tiny BERT): left out unless
# named with --models and a --backbone that is such a folder.
NEEDS_ST_FOLDER = ("st", "st-ce")
UNLABELED_SOURCE = "bws-cross-topic"  # bundled unlabeled sentences for the models that need a training source


def runnable_models(
    registry, tasks: list[str], profile: str, backbone: str, store: Path
) -> tuple[list[tuple[str, str | None]], dict]:
    """The built-in models and recipes that can run these tasks (planned, and built on this backbone), each with its
    training source (None: its default, else the bundled unlabeled sentences), and why the others cannot."""
    from harness.errors import HarnessError
    from harness.matrix import ModelEntry
    from harness.run.config import RunConfig
    from harness.run.driver import Run

    usable, skipped = [], {}
    for name in sorted(set(registry.models) | set(registry.recipes)):
        if name in NEEDS_ST_FOLDER:
            skipped[name] = "needs a sentence-transformers folder as --backbone"
            continue
        for train_on in (None, UNLABELED_SOURCE):
            config = RunConfig(
                models=[ModelEntry(name, train_on=train_on)],
                tasks=tasks,
                profile=profile,
                backbone=backbone,
                device="cpu",
                results_dir=store,
                progress=False,
            )
            try:
                runner = Run(registry, config)
                plan = runner.plan()
                spec = plan.models[0].spec
                if not spec.recipe:  # options the backbone cannot take (e.g. a layer it lacks) fail only when built
                    runner.models.builder.build(spec, plan.profile, "cpu", 42)
                usable.append((name, train_on))
                break
            except HarnessError as exc:
                skipped[name] = str(exc).splitlines()[0][:110]
        else:
            continue
        skipped.pop(name, None)
    return usable, skipped


def run_once(
    mode: str, models: list[tuple[str, str | None]], tasks: list[str], profile: str, backbone: str, store: Path
) -> tuple[float, float, int, str]:
    """(wall seconds of the run, of which cluster start-up, cells computed, where a Ray run's time went)."""
    from harness.executors.local import LocalExecutor
    from harness.matrix import ModelEntry
    from harness.registry import build_registry
    from harness.run.config import RunConfig
    from harness.run.driver import Run

    executor = None
    options: dict = {}
    if mode.startswith("ray"):
        from harness.executors.ray_cluster import RayExecutor

        workers = int(mode[3:])
        executor = RayExecutor(address="local", num_cpus=workers)
        options = {"executor": "ray"}
    config = RunConfig(
        models=[ModelEntry(m, train_on=t) for m, t in models],
        tasks=tasks,
        profile=profile,
        backbone=backbone,
        device="cpu",
        results_dir=store,
        progress=False,
        **options,
    )
    runner = Run(build_registry(), config, log=lambda message: None)
    plan = runner.plan()
    started = time.perf_counter()
    outcomes = runner.run(executor or LocalExecutor(), plan)
    wall = time.perf_counter() - started
    startup = executor.startup_seconds if executor is not None else 0.0
    computed = sum(outcome.status in ("ok", "failed", "missing") for outcome in outcomes)
    return wall, startup, computed, breakdown(executor) if executor is not None else ""


def breakdown(executor) -> str:
    """Where a Ray run's time went: on the workers (start-up once each, then the calls that computed cells, and how
    many cells had to load a model) and in the driver (claiming and sending, waiting, fetching results, writing
    records)."""
    served = [cell for _, _, cell in executor.served]
    starts = {cell.where: cell.worker_start_seconds for cell in served}
    driver = ", ".join(f"{name} {seconds:.2f} s" for name, seconds in executor.driver_seconds.items())
    return (
        f"first answer after {executor.first_answer_seconds:.1f} s ({len(starts)} worker(s), the slowest built its "
        f"registry and plan in {max(starts.values(), default=0):.1f} s); on the workers: models trained, loaded or "
        f"built {executor.prepare_seconds:.1f} s, cell calls {sum(cell.seconds for cell in served):.1f} s, "
        f"{sum(c.loaded_model for c in served)} of {len(served)} cells loaded a model; driver: {driver}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbone", default=None, help="default: a tiny random BERT written to a temp folder")
    parser.add_argument("--models", default=None, help="comma-separated (default: every built-in that fits)")
    parser.add_argument("--tasks", default="senteval")
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--modes", default="local,ray1,ray2", help="local, rayN (N workers)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="PyTorch threads of the local executor (default 1, as each 1-CPU Ray task has: with more, "
        "a tiny model on a loaded machine mostly waits on thread synchronisation)",
    )
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)

    from harness.registry import build_registry
    from harness.testing import tiny_bert

    work = Path(tempfile.mkdtemp(prefix="executor-scaling-"))
    backbone = args.backbone or str(tiny_bert(work / "tiny-bert"))
    tasks = [args.tasks]
    if args.models:
        models, skipped = [(name, None) for name in args.models.split(",")], {}
    else:
        models, skipped = runnable_models(build_registry(), tasks, args.profile, backbone, work / "probe")
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} "
        f"(5 min) at the start; the local executor uses {torch.get_num_threads()} PyTorch threads, each Ray worker 1"
    )
    shown = [name + (f" (trained on {train_on})" if train_on else "") for name, train_on in models]
    print(
        f"matrix: {', '.join(shown)} x {args.tasks}, profile {args.profile}, backbone "
        f"{'tiny BERT' if not args.backbone else backbone}"
    )
    for name, why in skipped.items():
        print(f"  left out {name}: {why}")
    results: dict[str, tuple[float, float, int, str]] = {}
    for mode in args.modes.split(","):
        results[mode] = run_once(mode, models, tasks, args.profile, backbone, work / mode)
        wall, startup, cells, where = results[mode]
        print(
            f"  {mode:<6} {wall:7.1f} s wall ({startup:5.1f} s cluster start-up), {cells} cells, "
            f"load average {os.getloadavg()[0]:.1f} after it",
            flush=True,
        )
        if where:
            print(f"         {where}", flush=True)
    if "local" in results:
        local_wall, _, cells, _ = results["local"]
        print("ratios to local (matrix time without the cluster's start-up):")
        for mode, (wall, startup, _, _) in results.items():
            print(f"  {mode:<6} {(wall - startup) / local_wall:5.2f}x")
        print("Ray overhead per cell against local ((Ray wall - local wall) / cells):")
        for mode, (wall, startup, _, _) in results.items():
            if mode.startswith("ray"):
                print(
                    f"  {mode:<6} {(wall - local_wall) / max(1, cells):+.3f} s per cell with the cluster's start-up, "
                    f"{(wall - startup - local_wall) / max(1, cells):+.3f} s without it"
                )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min), {os.getloadavg()[1]:.1f} (5 min)")


if __name__ == "__main__":
    main()
