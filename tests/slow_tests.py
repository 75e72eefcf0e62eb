"""The tests `make test-fast` leaves out: `tests/conftest.py` marks them `slow`.

`make test` (what CI runs) runs every test, these included; `make test-fast` runs
`-m "not slow"`, the tier for working: no process started (a fresh interpreter, a signal, a
lock held by another process, a worker pool), no install, wheel or notebook, and nothing that
runs for more than ~20 s. A test can also carry `@pytest.mark.slow` itself.

An entry is a test file (all its tests) or a test (`file::name`, all its parameters);
tests/test_slow_tests.py checks that each names a test that exists.
"""

# Processes: fresh interpreters, installs, wheels, notebooks, signals, locks, worker pools.
PROCESSES = (
    "tests/beam/test_cli.py",  # Beam's multi-processing workers
    "tests/beam/test_transforms.py::test_the_worker_path_imports_neither_tensorflow_nor_keras",
    "tests/cli/test_closed_pipe.py",
    "tests/cli/test_demo.py::test_demo_runs_where_tensorflow_cannot_load",
    "tests/cli/test_embed_backends.py",
    "tests/cli/test_quiet.py::test_export_with_int8_prints_no_native_log_lines",
    "tests/cli/test_quiet.py::test_missing_runtime_extra_is_one_line",
    "tests/cli/test_quiet.py::test_native_lines_are_kept_for_a_failure",
    "tests/export/test_savedmodel.py::test_loads_in_fresh_process_without_elmo_keras",
    "tests/export/test_serving.py::test_saved_model_cli_runs_serving_default",
    "tests/export/test_serving.py::test_tensorflow_hub_keras_layer",
    "tests/export/test_writer_interrupted.py",
    "tests/file_io/test_files.py::test_a_signal_while_writing_removes_the_temporary_output",
    "tests/file_io/test_files.py::test_an_unwritable_folder_is_found_before_the_work",
    "tests/file_io/test_output_access.py::test_a_second_writer_of_an_output_is_refused_in_one_line",
    "tests/file_io/test_output_access.py::test_outputs_get_the_usual_permissions",
    "tests/models/test_backends_agree.py",
    "tests/models/test_bilm_options.py",
    "tests/models/test_keras_files_across_backends.py",
    "tests/runtime/test_onnx_embedder.py::test_runtime_never_imports_tensorflow_or_keras",
    "tests/runtime/test_reliability_embed.py",
    "tests/test_accelerator_script.py",
    "tests/test_docs_examples.py",
    "tests/test_install.py",
    "tests/test_notebooks.py",
    "tests/test_presets.py::test_the_preset_modules_import_no_tensorflow",
    "tests/test_registration.py",
    "tests/text/test_vocabulary.py::test_package_import_does_not_import_tensorflow",
    "tests/training/test_faults.py::test_sigkill_at_a_random_step_then_resume_is_bit_exact",
    "tests/training/test_jax_trainer.py",
    "tests/training/test_multi_worker.py",
    "tests/training/test_run_folder.py::test_a_run_folder_is_locked_for_the_life_of_its_run",
    "tests/training/test_run_folder.py::test_two_runs_started_together_on_one_folder_never_both_succeed",
    "tests/training/test_snapshot.py::test_a_kill_between_the_final_renames_never_leaves_a_mix",
    "tests/training/test_windows.py::test_sentences_encoded_in_worker_processes_give_the_same_batches",
    "tests/training/test_windows.py::test_worker_processes_raise_errors_and_end",
    "tests/training/test_jax_steps.py::test_feed_workers_give_the_same_run",
    "tests/training/test_jax_steps.py::test_loop_settings_train_as_the_plain_loop_for_200_steps",
)

# In this process, but more than ~20 s each on a quiet 2-core machine (a full `make test` run's
# `--durations`): training runs, multi-device strategies, ONNX conversions.
LONG = (
    "tests/cli/test_embed.py::test_onnx_backend_writes_the_same_hdf5",
    "tests/cli/test_train.py::test_a_resumed_run_keeps_its_log_every",
    "tests/cli/test_train.py::test_a_second_train_into_the_folder_must_resume",
    "tests/cli/test_train.py::test_evaluate_reports_the_perplexities",
    "tests/cli/test_train.py::test_snapshot_writes_any_kept_checkpoint",
    "tests/cli/test_train.py::test_train_writes_the_run_folder",
    "tests/export/test_onnx.py::test_an_optimizer_pass_that_fails_is_rolled_back_on_the_retry",
    "tests/export/test_onnx.py::test_model_is_valid_with_dynamic_axes_and_metadata",
    "tests/export/test_onnx.py::test_onnx_matches_keras",
    "tests/export/test_onnx.py::test_stateful_onnx_streams_like_keras",
    "tests/export/test_random_configs.py",
    "tests/export/test_writer.py::test_cli_overwrite_replaces_only_an_earlier_export",
    "tests/export/test_writer.py::test_cli_writes_onnx_and_int8_from_a_run_dir",
    "tests/models/test_bilm.py::test_bilm_as_a_layer",
    "tests/models/test_elmo_embedding.py::test_elmo_embedding_layer",
    "tests/models/test_elmo_embedding.py::test_keras_round_trip_keeps_outputs_and_trained_mix",
    "tests/models/test_elmo_embedding.py::test_mirrored_strategy_on_two_cpus_matches_one_device",
    "tests/models/test_elmo_embedding_backends.py::test_elmo_embedding_layer_on_char_ids",
    "tests/text/test_tf_tokenization.py::test_tensorflow_agrees_with_python_on_arbitrary_unicode",
    "tests/training/test_old_run_folders.py",
    "tests/training/test_softmax_update.py",
    "tests/training/test_init_from.py::test_freeze_bilm_steps_trains_only_the_softmax_first_and_survives_resume",
    "tests/training/test_trainer.py::test_bfloat16_mixed_precision",
    "tests/training/test_trainer.py::test_resume_after_signal_is_exact",
    "tests/training/test_trainer.py::test_two_replicas_equal_one",
    "tests/training/test_trainer.py::test_xla_matches_graph",
)

SLOW = PROCESSES + LONG


def is_slow(nodeid):
    """Whether the test `nodeid` (`tests/...py::name[params]`) is in `SLOW`."""
    path, _, name = nodeid.partition("::")
    name = name.split("[")[0]
    return path in SLOW or f"{path}::{name}" in SLOW
