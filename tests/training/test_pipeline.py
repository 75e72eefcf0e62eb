"""The pieces around the trainer: `TrainingRun`, the run folder, softmax files, stop requests."""

import dataclasses
import json
import os
import pathlib
import re
import signal

import numpy as np
import pytest

from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.common.stopping import STOP_REASONS, StopRequests, stop_reason
from elmo_keras.training.configs import TrainingConfig
from elmo_keras.training.run.run_folder import CONFIG_FILE, find_checkpoint
from elmo_keras.training.run.run_record import RunRecord
from elmo_keras.training.run.training_run import NEW_RUN_DEFAULTS, TrainingRun


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"steps": 0}, "`steps` must be an integer >= 1. Received: steps=0"),
        ({"steps": None}, "give `steps`, `epochs` or `time_budget_s` (when the run ends)"),
        ({"log_every": 2.5}, "`log_every` must be an integer >= 1. Received: log_every=2.5"),
        ({"time_budget_s": -1}, "`time_budget_s` must be a number >= 0"),
        ({"time_budget_s": 0}, "`time_budget_s` must be a number > 0. Received: time_budget_s=0"),
        ({"config": "huge"}, "`config` must be one of tiny, cpu, small, medium, original or a"),
        ({"tokenization_mode": "bpe"}, "`tokenization_mode` must be one of"),
        ({"strategy": "tpu"}, "`strategy` must be one of ('auto', 'default', 'mirrored'"),
        ({"mixed_precision": "float16"}, "`mixed_precision` must be one of (None, 'bfloat16')"),
        ({"verbose": "yes"}, "`verbose` must be True or False. Received: verbose='yes'"),
        ({"progress": 1}, "`progress` must be True, False or None"),
        ({"train_files": []}, "`train_files` must be a path or glob, or a non-empty list"),
        ({"config": 3}, "`config` must be a configuration name, a JSON file or a dict"),
        ({"n_negative_samples": -1}, "`n_negative_samples` must be an integer >= 0"),
        ({"init_from": 3}, "`init_from` must be a run folder or a preset (small, medium"),
        ({"init_from": "nowhere"}, "`init_from` must be a run folder or a preset (small"),
        ({"init_from": ("o.json", 3)}, "`init_from` as a pair must hold two paths or URLs"),
        ({"freeze_bilm_steps": -1}, "`freeze_bilm_steps` must be an integer >= 0. Received"),
        ({"freeze_bilm_steps": 5}, "`freeze_bilm_steps` needs `init_from` (a biLM to start"),
        ({"new_vocab": True}, "`new_vocab` needs `init_from`"),
        ({"override": True}, "`override` applies to `resume` (settings that differ from a saved"),
        ({"train_files": None}, "`train_files` is required (a glob of text files)"),
        ({"tf32": 1}, "`tf32` must be True or False. Received: tf32=1"),
        ({"shuffle_buffer": -1}, "`shuffle_buffer` must be an integer >= 0. Received"),
    ],
)
def test_training_run_checks_every_field(changes, message):
    settings = {"train_files": "a.txt", "output_dir": "run", "steps": 10, **changes}
    with pytest.raises(ValueError, match=re.escape(message)):
        TrainingRun(**settings)


def test_training_run_defaults():
    run = TrainingRun(["a.txt", "b/*.txt"], "run", epochs=2)
    assert run.strategy == "auto" and run.steps is None and run.init_from is None
    # None: the saved run's value when resuming, else these (`settings.plan_run`).
    assert (run.config, run.seed, run.tokenization_mode, run.carry_state) == (None,) * 4
    assert NEW_RUN_DEFAULTS == {
        "config": "small",
        "seed": 0,
        "tokenization_mode": "whitespace",
        "carry_state": True,
        "min_count": 1,
        "freeze_bilm_steps": 0,
        "shuffle_buffer": 0,
        "log_every": 50,
    }
    # A resumed run may leave the files out (its saved ones).
    assert TrainingRun(None, "run", steps=3, resume=True, override=True).train_files is None


@pytest.mark.parametrize(
    "args, kwargs",
    [
        (("a.txt", "run"), {"config": "tiny", "steps": 3}),  # 0.3's 28-argument form
        ((), {"train": "a.txt", "output_dir": "run", "steps": 3}),
        ((TrainingRun("a.txt", "run", steps=3), "extra"), {}),
    ],
)
def test_train_takes_one_training_run(args, kwargs):
    """The old positional `train(train, output_dir, ...)` is one `TypeError` naming
    `TrainingRun`, before anything is read or written."""
    from elmo_keras.training.pipeline import train

    with pytest.raises(TypeError, match=r"train\(\) takes one `TrainingRun`: train\(TrainingRun"):
        train(*args, **kwargs)


def test_training_run_fields_are_typed():
    """A plain frozen dataclass: every field has a type of its own (not `object`) and its
    setting's metadata; the docstring lists every field."""
    fields = dataclasses.fields(TrainingRun)
    assert len(fields) == 37
    assert all(f.type != "object" and "setting" in f.metadata for f in fields)
    assert {f.name: f.type for f in fields}["steps"] == "int | None"
    assert all(f"    {f.name}: " in TrainingRun.__doc__ for f in fields)
    with pytest.raises(dataclasses.FrozenInstanceError):
        TrainingRun("a.txt", "run", steps=3).steps = 4


def test_run_folder_round_trip(tmp_path):
    vocabulary = Vocabulary(["<S>", "</S>", "<UNK>", "the"])
    written = RunRecord(
        config=TrainingConfig.parse("tiny"),
        seed=7,
        tokenization_mode="punctuation",
        carry_state=False,
        train=["a.txt"],
        min_count=2,
        init_from={"kind": "preset", "source": "tiny"},
        freeze_bilm_steps=3,
        overrides=({"step": 4, "seed": {"saved": 7, "given": 8}},),
        train_fingerprint=[{"path": "/data/a.txt", "size": 10, "sha256": "ab" * 32}],
        vocab_sha256="cd" * 32,
        log_every=5,
    )
    written.write(tmp_path, vocabulary)
    record, loaded = RunRecord.read(tmp_path)
    assert loaded == vocabulary
    assert record == written
    saved = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert (
        saved["version"] == 4 and saved["train"] == ["a.txt"] and saved["overrides"][0]["step"] == 4
    )
    # A folder written by 0.1 holds only the first five keys, and before the rename
    # `tokenization`: the others take the values such a run had.
    old = {key: saved[key] for key in ("config", "seed", "carry_state", "train")}
    old["tokenization"] = "punctuation"
    (tmp_path / CONFIG_FILE).write_text(json.dumps(old))
    record = RunRecord.read(tmp_path)[0]
    assert record.tokenization_mode == "punctuation" and record.init_from is None
    assert (record.freeze_bilm_steps, record.data_start_step) == (0, 0)
    assert record.shuffle_buffer == 10000  # what such a run streamed through
    assert record.log_every == 50  # the default before it was saved
    assert record.min_count is None  # not recorded
    dataclasses.replace(written, train=pathlib.Path("a.txt")).write(tmp_path, vocabulary)
    assert RunRecord.read(tmp_path)[0].train == "a.txt"  # a path too
    with pytest.raises(ValueError, match="must be the folder of an `elmo-keras train` run"):
        RunRecord.read(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="No checkpoint in"):
        find_checkpoint(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "ckpt-2.index").write_bytes(b"")
    assert find_checkpoint(tmp_path, "ckpt-2") == str(tmp_path / "checkpoints" / "ckpt-2")
    with pytest.raises(ValueError, match=r"\(kept: ckpt-2\)"):
        find_checkpoint(tmp_path, "ckpt-3")


def test_softmax_file_round_trip(tmp_path):
    from elmo_keras.weights import load_softmax, save_softmax

    kernel = np.arange(12, dtype=np.float32).reshape(4, 3)
    bias = np.ones(4, np.float32)
    save_softmax(tmp_path / "softmax.hdf5", kernel, bias)
    got_kernel, got_bias = load_softmax(tmp_path / "softmax.hdf5")
    np.testing.assert_array_equal(got_kernel, kernel)
    np.testing.assert_array_equal(got_bias, bias)
    assert [p.name for p in tmp_path.iterdir()] == ["softmax.hdf5"]  # no temporary file left
    with pytest.raises(ValueError, match="`bias` \\[vocabulary_size\\]"):
        save_softmax(tmp_path / "bad.hdf5", kernel, np.ones(3))
    with pytest.raises(FileNotFoundError, match="softmax file not found"):
        load_softmax(tmp_path / "missing.hdf5")


def test_stop_requests_catch_signals_and_time():
    before = signal.getsignal(signal.SIGINT)
    asked = []
    with StopRequests(time_budget_s=None, stop_training=lambda: bool(asked)) as requests:
        assert requests.votes() == [0.0, 0.0, 0.0]
        os.kill(os.getpid(), signal.SIGINT)
        asked.append(True)
        assert requests.votes() == [1.0, 0.0, 1.0]
    assert signal.getsignal(signal.SIGINT) is before
    with StopRequests(time_budget_s=0.0, handle_signals=False) as requests:
        assert stop_reason(requests.votes()) == "time"
    assert STOP_REASONS == ("signal", "time", "callback")
    assert stop_reason([0.0, 2.0, 1.0]) == "time" and stop_reason([0.0, 0.0, 0.0]) is None
