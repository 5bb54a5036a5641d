"""Where a training step's time goes: ``harness run`` of one trained model on STS-B under cProfile, cut to
``--steps`` optimiser steps, and the time of each part of the shared loop (harness.training.fit) per step.

The parts are the loop's own calls: ``collate`` (tokenising and padding the batch), the forward pass (the objective
module), ``backward``, gradient clipping, the AdamW step and the dev evaluation (once per epoch, or at the end of the
cut). The quick profile is the main job's (``--profile quick``); ``--set precision=bf16`` is what `make run` adds on a
CPU with bfloat16 instructions (scripts/main-job-flags.py).

Usage: python benchmarks/train_profile.py [--model cbe] [--steps 20] [--precision bf16] [--top 0]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time

# What the loop's calls are, by the function cProfile sees fit call (file suffix, function name).
PARTS = {
    ("torch/nn/modules/module.py", "_wrapped_call_impl"): "forward (the objective module)",
    ("torch/_tensor.py", "backward"): "backward",
    ("torch/nn/utils/clip_grad.py", "_no_grad_wrapper"): "clip_grad_norm_",
    ("torch/optim/optimizer.py", "wrapper"): "AdamW step",
    ("torch/optim/lr_scheduler.py", "wrapper"): "AdamW step",  # torch 2.13 wraps the optimiser's step there
    ("torch/optim/lr_scheduler.py", "step"): "learning-rate schedule",
    ("", "collate"): "collate (tokenise + pad the batch)",
    ("harness/training.py", "to_device"): "to_device",
    ("harness/training.py", "<lambda>"): "dev evaluation",
    ("harness/training.py", "epoch_batches"): "batch order (length grouping)",
    ("copy.py", "deepcopy"): "copy of the best dev weights",
}


def part_name(file: str, function: str) -> str:
    for (suffix, name), part in PARTS.items():
        if function == name and file.endswith(suffix):
            return part
    return f"{function} ({'/'.join(file.rsplit('/', 2)[-2:])})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="cbe", help="a trained model spec (ce, cbe, be with --train-on stsb)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--top", type=int, default=0, help="also print cProfile's top N functions by own time")
    args = parser.parse_args()

    from harness.cli import main as harness_main

    with tempfile.TemporaryDirectory(prefix="train-profile-") as results:
        argv = ["run", "--models", args.model, "--tasks", "stsb", "--train-on", "stsb", "--profile", args.profile]
        argv += ["--set", f"max_steps={args.steps}", "--set", f"precision={args.precision}"]
        argv += ["--results", results, "--no-progress"]
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.runcall(harness_main, argv)
        wall = time.perf_counter() - started
    stats = pstats.Stats(profiler)
    # stats.stats: (file, line, function) -> (primitive calls, calls, own time, cumulative time, callers), where
    # callers maps a caller's key to (primitive calls, calls, own time, cumulative time) of the calls it made.
    fit_keys = [key for key in stats.stats if key[0].endswith("harness/training.py") and key[2] == "fit"]
    if not fit_keys:
        raise SystemExit("the run trained nothing (a stored checkpoint?): nothing to profile")
    fit_key = fit_keys[0]
    fit_seconds = stats.stats[fit_key][3]
    print(
        f"{args.model}: {args.steps} steps ({args.profile} profile, precision {args.precision}); fit {fit_seconds:.1f} s "
        f"of {wall:.1f} s in all (the rest: start-up, loading, the STS-B test evaluation)"
    )
    parts: dict[str, list[float]] = {}
    for (file, _, function), (_, _, _, _, callers) in stats.stats.items():
        if fit_key in callers:
            _, calls, _, cumulative = callers[fit_key]
            totals = parts.setdefault(part_name(file, function), [0.0, 0])
            totals[0] += cumulative
            totals[1] += calls
    print("| part of fit | seconds | calls | per step | share of fit |\n| --- | --- | --- | --- | --- |")
    for part, (seconds, calls) in sorted(parts.items(), key=lambda item: -item[1][0]):
        if seconds < 0.005 * fit_seconds:
            continue
        print(f"| {part} | {seconds:.2f} | {calls} | {seconds / args.steps:.3f} | {100 * seconds / fit_seconds:.0f}% |")
    if args.top:
        stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
