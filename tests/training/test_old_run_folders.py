"""Run folders written by 0.1, 0.2 and 0.3 (`tests/fixtures/run_folders`) resume here: their
`training_config.json` is read back through `RunRecord`'s upgrades, and a few more steps train
on TensorFlow from their checkpoint."""

import json
import pathlib
import shutil

import pytest

from elmo_keras.training.run.run_record import VERSION, RunRecord

FOLDERS = pathlib.Path(__file__).parents[1] / "fixtures" / "run_folders"


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3"])
def test_an_old_run_folder_resumes(version, tmp_path, monkeypatch):
    from elmo_keras.training.pipeline import train
    from elmo_keras.training.run.training_run import TrainingRun

    shutil.copy(FOLDERS / "train.txt", tmp_path)
    shutil.copytree(FOLDERS / version, tmp_path / version)
    monkeypatch.chdir(tmp_path)  # the folders name their text relatively
    assert "version" not in json.loads((tmp_path / version / "training_config.json").read_text())

    record, vocabulary = RunRecord.read(version)
    assert (record.seed, record.tokenization_mode, record.carry_state) == (0, "whitespace", True)
    assert (record.train, record.version, len(vocabulary)) == ("train.txt", VERSION, 18)
    assert (record.config.batch_size, record.config.n_negative_samples_batch) == (4, 8)
    # What these versions did not record: their behaviour then.
    assert (record.shuffle_buffer, record.log_every, record.data_start_step) == (10_000, 50, 0)
    assert (record.init_from, record.train_fingerprint, record.vocab_sha256) == (None,) * 3
    assert record.min_count == (None if version == "0.1" else 1)

    summary = train(TrainingRun(None, version, steps=6, resume=True, verbose=False))
    trainer = summary.pop("trainer")
    assert (trainer.global_step, summary["train"]["steps"]) == (6, 6)
    assert (trainer.batch_size, trainer.seed, trainer.carry_state) == (4, 0, True)
    assert (tmp_path / version / "checkpoints" / "ckpt-6.index").is_file()
    assert RunRecord.read(version)[0] == record  # nothing to record: the file stays as it was
