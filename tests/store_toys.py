"""Toy plugins and run helpers shared by the store's tests (tests/test_store_*.py and others): a third-party style
task reading pairs from a CSV under a data dir, deterministic toy embedders (and misbehaving ones), and a runner
around them; the module is also a plugin for the CLI (HARNESS_EXTRA_PLUGINS=store_toys).

Most store tests run the runner on the toy task with toy embedders, which takes milliseconds; the tests that need
real training use the tiny BERT fixture and the smoke profile."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

import harness
from conftest import REPO
from harness.executors.local import LocalExecutor
from harness.matrix import ModelEntry
from harness.record import seal_record
from harness.registry import build_registry
from harness.run.config import RunConfig
from harness.run.driver import Run
from harness.store import read_record

SMOKE = ("--profile", "smoke", "--no-progress")


TOY_ROWS = [
    ("a man plays a guitar", "a man is playing guitar", 4.8),
    ("a woman slices an onion", "a person cuts an onion", 4.0),
    ("the cat sits on the mat", "a dog runs in a field", 0.4),
    ("stocks fell sharply today", "the market dropped today", 3.6),
    ("a child rides a horse", "a kid is on a horse", 4.2),
    ("the weather is sunny", "scientists found a frog", 0.0),
]


class ToyPairs(harness.Task):
    """A third-party style task: ``<data dir>/toy/pairs.csv`` with ``first<TAB>second<TAB>score`` lines."""

    metadata = harness.TaskMetadata(
        name="toy-pairs",
        family="toy",
        description="toy pair similarity",
        main_score="spearman",
        metric="Spearman x100",
        reference="tests",
        dataset="toy",
        dataset_source="tests",
        license="none",
    )

    def path(self) -> Path:
        return harness.resolve_dataset_dir("toy", None, data_dir=self.data_dir) / "pairs.csv"

    def load(self):
        first, second, gold = [], [], []
        for number, line in enumerate(harness.read_text_lines(self.path()), start=1):
            fields = line.split("\t")
            if len(fields) != 3:
                raise harness.data_error(self.path(), number, "expected first<TAB>second<TAB>score.")
            first.append(fields[0])
            second.append(fields[1])
            gold.append(float(fields[2]))
        return first, second, gold

    def check_data(self) -> str:
        self.load()
        return harness.files_checksum([self.path()])

    def evaluate(self, model, ctx):
        first, second, gold = self.load()
        predicted = harness.as_pair_scorer(model).score(first, second)
        return harness.EvalResult(
            {"spearman": 100 * harness.spearman(predicted, gold)}, harness.files_checksum([self.path()])
        )


class NaNTask(ToyPairs):
    metadata = harness.TaskMetadata(
        name="toy-nan",
        family="toy",
        description="returns a NaN score",
        main_score="spearman",
        metric="Spearman x100",
        reference="tests",
        dataset="toy",
        dataset_source="tests",
        license="none",
    )

    def evaluate(self, model, ctx):
        return harness.EvalResult({"spearman": float("nan")}, harness.files_checksum([self.path()]))


class IncompatibleAtEvaluationTask(ToyPairs):
    metadata = harness.TaskMetadata(
        name="toy-incompatible",
        family="toy",
        description="finds out at evaluation that the model cannot run it",
        main_score="spearman",
        metric="Spearman x100",
        reference="tests",
        dataset="toy",
        dataset_source="tests",
        license="none",
    )

    def evaluate(self, model, ctx):
        raise harness.IncompatibleError("toy-incompatible needs a first-stage retriever this model lacks.")


class WordHashEmbedder:
    """A deterministic bag-of-hashed-words embedder."""

    def __init__(self, ctx=None):
        self.ctx = ctx

    def encode(self, texts):
        vectors = np.zeros((len(texts), 64), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.split():
                vectors[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        return vectors


class ConstantEmbedder(WordHashEmbedder):
    def encode(self, texts):
        return np.ones((len(texts), 8), dtype=np.float32)


SEEN_CONTEXTS: list = []


class ToyPlugin:
    @harness.hookimpl
    def register_models(self, register):
        def remember(ctx):
            SEEN_CONTEXTS.append(ctx)
            return WordHashEmbedder(ctx)

        register(harness.ModelPlugin("toy-embedder", "hashed words", remember, ("embedder",)))
        register(harness.ModelPlugin("toy-constant", "one vector for every text", ConstantEmbedder, ("embedder",)))

    @harness.hookimpl
    def register_tasks(self, register):
        register(ToyPairs)
        register(NaNTask)
        register(IncompatibleAtEvaluationTask)


# The same plugin as a module, for the CLI (HARNESS_EXTRA_PLUGINS=store_toys).
@harness.hookimpl
def register_models(register):
    ToyPlugin().register_models(register)


@harness.hookimpl
def register_tasks(register):
    ToyPlugin().register_tasks(register)


def write_toy_data(data_dir: Path, rows=TOY_ROWS) -> Path:
    path = data_dir / "toy" / "pairs.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{a}\t{b}\t{s}\n" for a, b, s in rows))
    return path


def toy_run(tmp_path: Path, models=("toy-embedder",), tasks=("toy-pairs",), **config):
    registry = build_registry(extra_plugins=[ToyPlugin()])
    config.setdefault("results_dir", tmp_path / "results")
    config.setdefault("data_dir", tmp_path / "data")
    config.setdefault("profile", "smoke")
    run_config = RunConfig(
        models=[ModelEntry(m) for m in models], tasks=list(tasks), progress=False, device="cpu", **config
    )
    messages: list[str] = []
    runner = Run(registry, run_config, log=messages.append)
    return runner.run(LocalExecutor()), messages


def only_record(results: Path) -> dict:
    (path,) = sorted(results.glob("*/seed-*/*.json"))
    return json.loads(path.read_text())


def sts_data(tmp_path: Path) -> Path:
    data_dir = tmp_path / "data"
    for name in ("stsb", "sts12"):
        shutil.copytree(REPO / "tasks" / "data" / name, data_dir / name)
    return data_dir


def trained_be(run_cli, tmp_path, tiny_bert, *extra):
    results = tmp_path / "results"
    common = (
        "run",
        "--models",
        "be",
        "--train-on",
        "stsb",
        "--tasks",
        "stsb",
        *SMOKE,
        "--backbone",
        tiny_bert,
        "--results",
        results,
    )
    code, out, err = run_cli(*common, *extra)
    assert code == 0, err
    return results, common


class NaNRowEmbedder(WordHashEmbedder):
    """Hashed words, but NaN for every text that mentions an onion (not a batch-probe text: the probe passes)."""

    def encode(self, texts):
        vectors = super().encode(texts)
        vectors[[row for row, text in enumerate(texts) if "onion" in text]] = np.nan
        return vectors


class NaNEmbedder(WordHashEmbedder):
    def encode(self, texts):
        return np.full((len(texts), 8), np.nan, dtype=np.float32)


class NaNPlugin:
    @harness.hookimpl
    def register_models(self, register):
        register(harness.ModelPlugin("toy-nan-row", "NaN for onions", NaNRowEmbedder, ("embedder",)))
        register(harness.ModelPlugin("toy-all-nan", "NaN for everything", NaNEmbedder, ("embedder",)))


def nan_run(tmp_path: Path, model: str):
    registry = build_registry(extra_plugins=[ToyPlugin(), NaNPlugin()])
    config = RunConfig(
        models=[ModelEntry(model)],
        tasks=["toy-pairs"],
        progress=False,
        device="cpu",
        results_dir=tmp_path / "results",
        data_dir=tmp_path / "data",
        profile="smoke",
    )
    return Run(registry, config, log=lambda _: None).run(LocalExecutor())


def finishes(function, seconds: float = 30.0):
    """``function()``'s result; fails (instead of hanging the suite) when it blocks, as reading a FIFO does."""
    import threading

    outcome: dict = {}

    def target():
        try:
            outcome["value"] = function()
        except BaseException as exc:  # noqa: BLE001  re-raised below, in the test's thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still blocked after {seconds:g} s (a FIFO opened for reading?)"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


class PerExampleToy(ToyPairs):
    """toy-pairs that keeps per-example data (a side file beside its record)."""

    metadata = harness.TaskMetadata(
        name="toy-examples",
        family="toy",
        description="toy pairs with per-example data",
        main_score="spearman",
        metric="Spearman x100",
        reference="tests",
        dataset="toy",
        dataset_source="tests",
        license="none",
    )

    def evaluate(self, model, ctx):
        from harness.blocks import ExampleScores

        first, second, gold = self.load()
        predicted = harness.as_pair_scorer(model).score(first, second)
        return harness.EvalResult(
            {"spearman": 100 * harness.spearman(predicted, gold)},
            harness.files_checksum([self.path()]),
            examples=ExampleScores("spearman", {"predicted": np.asarray(predicted), "gold": np.asarray(gold)}),
        )


class FewRowsEmbedder(WordHashEmbedder):
    def encode(self, texts):  # the batch probe (4 texts) passes; an evaluation gets one row too few
        return super().encode(texts)[:-1] if len(texts) > 8 else super().encode(texts)


class RaisingEmbedder(WordHashEmbedder):
    def encode(self, texts):
        if len(texts) > 8:
            raise RuntimeError("the plugin's server went away")
        return super().encode(texts)


class ObjectEmbedder(WordHashEmbedder):
    def encode(self, texts):
        vectors = super().encode(texts)
        return np.array([[*row, "x"] for row in vectors], dtype=object) if len(texts) > 8 else vectors


class OffsetEmbedder(WordHashEmbedder):
    def encode(self, texts):
        return super().encode(texts) + 0.5


class FileToyPlugin:
    @harness.hookimpl
    def register_models(self, register):
        register(harness.ModelPlugin("toy-offset", "hashed words plus a constant", OffsetEmbedder, ("embedder",)))
        register(harness.ModelPlugin("toy-few-rows", "one row too few", FewRowsEmbedder, ("embedder",)))
        register(harness.ModelPlugin("toy-raises", "raises in encode", RaisingEmbedder, ("embedder",)))
        register(harness.ModelPlugin("toy-objects", "object arrays", ObjectEmbedder, ("embedder",)))

    @harness.hookimpl
    def register_tasks(self, register):
        register(PerExampleToy)


def file_toy_run(tmp_path: Path, models=("toy-embedder",), tasks=("toy-examples",), **config):
    registry = build_registry(extra_plugins=[ToyPlugin(), FileToyPlugin()])
    config.setdefault("results_dir", tmp_path / "results")
    config.setdefault("data_dir", tmp_path / "data")
    config.setdefault("profile", "smoke")
    run_config = RunConfig(
        models=[ModelEntry(m) for m in models], tasks=list(tasks), progress=False, device="cpu", **config
    )
    messages: list[str] = []
    return Run(registry, run_config, log=messages.append).run(LocalExecutor()), messages


def mteb_result(task_name: str) -> dict:
    return {
        "task_name": task_name,
        "dataset_revision": "x",
        "mteb_version": "2.0.0",
        "evaluation_time": 1.0,
        "scores": {"test": [{"main_score": 0.5, "hf_subset": "default", "languages": ["eng-Latn"]}]},
    }


def store_with_mteb_record(tmp_path: Path, task_name: str) -> Path:
    """A store whose one (toy) record carries an mteb task result named ``task_name``; returns the store."""
    write_toy_data(tmp_path / "data")
    toy_run(tmp_path)
    (path,) = (tmp_path / "results").glob("*/seed-*/*.json")
    record = read_record(path)
    record["details"] = {"mteb_task_result": mteb_result(task_name)}
    path.write_text(json.dumps(seal_record(record)))
    return tmp_path / "results"
