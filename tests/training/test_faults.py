"""Training under faults (issue 12): SIGKILL at a random step, damaged or missing checkpoints,
flags that disagree with the saved run, orphaned temporary folders, a damaged
training_config.json, and a full disk while checkpointing or writing the model.

One uninterrupted reference run (8 steps, checkpoints at 4, 6 and 8) is shared; every run that
is stopped, damaged and resumed must end with the reference's weight files, byte for byte.
"""

import errno
import json
import os
import pathlib
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf

from elmo_keras.cli import main
from elmo_keras.training.common.checkpoints import kept_checkpoints, remove_orphans
from elmo_keras.training.configs import get_config
from tests.cli.test_train import hdf5_bytes

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = str(ROOT / "tests" / "fixtures" / "bilm_tf" / "train" / "data.txt")
STEPS = 8


def _same_model(run, reference):
    return all(
        hdf5_bytes(run / name) == hdf5_bytes(reference / name)
        for name in ("lm_weights.hdf5", "softmax.hdf5")
    )


def _train_argv(config, out, steps=STEPS, *extra):
    return [
        "train",
        "--train",
        DATA,
        "--config",
        str(config),
        "--output",
        str(out),
        "--steps",
        str(steps),
        "--strategy",
        "default",
        "--checkpoint-every",
        "2",
        "--log-every",
        "1000",
        "--seed",
        "1",
        *extra,
    ]


def _resume_argv(out, steps=STEPS, *extra):
    return ["train", "--output", str(out), "--steps", str(steps), "--resume", *extra]


def _err_lines(capsys):
    return capsys.readouterr().err.strip().splitlines()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run of 8 steps (dropout on: its random state must resume too)."""
    folder = tmp_path_factory.mktemp("reference")
    config = get_config("tiny")  # tests/training/conftest.py's, with dropout
    config.update(batch_size=4, unroll_steps=5, n_negative_samples_batch=16, dropout=0.1)
    config["lstm"].update(dim=16, projection_dim=8)
    (folder / "tiny.json").write_text(json.dumps(config))
    assert main(_train_argv(folder / "tiny.json", folder / "run")) == 0
    names = sorted(p.name for p in (folder / "run" / "checkpoints").glob("*.index"))
    assert names == ["ckpt-4.index", "ckpt-6.index", "ckpt-8.index"]
    return folder


@pytest.fixture
def run_copy(reference, tmp_path):
    shutil.copytree(reference / "run", tmp_path / "run")
    return tmp_path / "run"


def _damage(prefix, how):
    data = f"{prefix}.data-00000-of-00001"
    if how == "corrupt":  # one flipped byte in the middle of the values
        raw = bytearray(open(data, "rb").read())
        raw[len(raw) // 2] ^= 0xFF
        open(data, "wb").write(bytes(raw))
    elif how == "truncated":
        os.truncate(data, os.path.getsize(data) // 2)
    else:  # missing: the state file still names it
        os.remove(data)
        os.remove(f"{prefix}.index")


@pytest.mark.parametrize("how", ["corrupt", "truncated", "missing"])
def test_resume_skips_an_unreadable_latest_checkpoint(how, reference, run_copy, capsys):
    """D8: a damaged, truncated or missing ckpt-8 is skipped (one line saying why); the run
    resumes from ckpt-6 and ends exactly where the uninterrupted run did."""
    _damage(run_copy / "checkpoints" / "ckpt-8", how)
    capsys.readouterr()
    assert main(_resume_argv(run_copy)) == 0
    skipped = [line for line in _err_lines(capsys) if line.startswith("resume:")]
    assert len(skipped) == 1, skipped
    assert skipped[0].startswith("resume: skipped unreadable checkpoint ckpt-8 (")
    assert skipped[0].endswith(f"resuming from {run_copy / 'checkpoints' / 'ckpt-6'}")
    assert _same_model(run_copy, reference / "run")


def test_resume_with_no_readable_checkpoint_lists_each_one(run_copy, capsys):
    for prefix in kept_checkpoints(run_copy / "checkpoints"):
        _damage(prefix, "truncated")
    assert main(_resume_argv(run_copy)) == 1
    (line,) = _err_lines(capsys)[-1:]
    assert "no readable checkpoint in" in line
    assert all(f"ckpt-{n} (IndexError" in line for n in (4, 6, 8)), line


def _read_lines(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def test_sigkill_at_a_random_step_then_resume_is_bit_exact(reference, tmp_path, capsys):
    """A run killed with SIGKILL at a random moment after a random step (possibly while it
    writes a checkpoint) resumes to the uninterrupted run's weight files, byte for byte."""
    draw = random.SystemRandom()  # training seeds Python's `random`
    # After the line of step K (K >= 2), ckpt-(K-1) is complete: there is one to resume from.
    step, delay = draw.randint(2, 5), draw.uniform(0.0, 0.05)
    run = tmp_path / "run"
    argv = _train_argv(reference / "tiny.json", run, STEPS, "--log-every", "1")
    argv[argv.index("--checkpoint-every") + 1] = "1"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; from elmo_keras.cli import main; main(sys.argv[1:])"]
        + argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = queue.Queue()
    threading.Thread(target=_read_lines, args=(child.stdout, lines), daemon=True).start()
    seen, deadline = [], time.monotonic() + 180
    try:
        while not any(line.startswith(f"step {step}:") for line in seen):
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            assert line is not None, "".join(seen)
            seen.append(line)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
    context = f"killed after step {step} + {delay * 1000:.0f} ms"
    assert child.returncode == -signal.SIGKILL, context
    assert not (run / "lm_weights.hdf5").exists(), context
    assert main(_resume_argv(run)) == 0, context
    assert "trained 8 steps" in capsys.readouterr().out, context
    assert _same_model(run, reference / "run"), context
    assert not list((run / "checkpoints").glob("*_temp")), context


def test_resume_refuses_flags_that_differ_from_the_saved_run(reference, run_copy, tmp_path, capsys):
    """D9: --resume with other --batch-size, --train, --seed or --config is an error listing
    every difference; nothing is written. The vocabulary and architecture cannot change."""
    saved = (run_copy / "training_config.json").read_bytes()
    other = tmp_path / "other.txt"
    other.write_text("a different corpus .\n")
    changed = ["--batch-size", "8", "--train", str(other), "--seed", "2"]
    assert main(_resume_argv(run_copy, 10, *changed)) == 2
    (line,) = _err_lines(capsys)
    assert "--resume: these settings differ from" in line and "(pass --override" in line
    assert "--batch-size 8 (saved: 4)" in line and "--seed 2 (saved: 1)" in line
    assert f"--train '{other}' (saved: '{DATA}')" in line
    fixed = ["--config", "tiny", "--min-count", "2", "--init-from", "tiny", "--override"]
    assert main(_resume_argv(run_copy, 10, *fixed)) == 2
    (line,) = _err_lines(capsys)
    assert "the checkpoint fixes those marked [fixed]" in line
    assert "--config lstm " in line and "--min-count 2 (saved: 1) [fixed]" in line
    assert "--init-from 'tiny' (saved: None) [fixed]" in line
    assert (run_copy / "training_config.json").read_bytes() == saved
    assert kept_checkpoints(run_copy / "checkpoints")[0].endswith("ckpt-8")
    # The flags of the first run, given again (as experiments/mini_en/train.sh does): no
    # difference. A spelling of --train that matches the same files is the same.
    same = ["--config", str(reference / "tiny.json"), "--seed", "1"]
    relative = os.path.relpath(DATA)
    assert main(_resume_argv(run_copy, 8, *same, "--train", relative, "--min-count", "1")) == 0


def test_resume_with_override_applies_and_records_the_changes(reference, run_copy, capsys):
    from elmo_keras.training import TrainingRun, train

    run = TrainingRun(
        None,
        run_copy,
        steps=10,
        resume=True,
        override=True,
        batch_size=8,
        learning_rate=0.05,
        strategy="default",
        verbose=False,
    )
    summary = train(run)
    trainer = summary["trainer"]
    assert summary["train"]["steps"] == 10 and trainer.batch_size == 8
    assert float(trainer.optimizer.learning_rate.numpy()) == pytest.approx(0.05)
    assert "resume: applied at step 8: batch_size 4 -> 8; learning_rate 0.2 -> 0.05" in (
        capsys.readouterr().err
    )
    settings = json.loads((run_copy / "training_config.json").read_text())
    assert settings["config"]["batch_size"] == 8 and settings["config"]["learning_rate"] == 0.05
    assert settings["data_start_step"] == 8  # another batch size: the data starts again
    assert settings["overrides"] == [
        {
            "step": 8,
            "batch_size": {"saved": 4, "given": 8},
            "learning_rate": {"saved": 0.2, "given": 0.05},
        }
    ]


def test_orphaned_temporary_checkpoint_folders_are_removed(
    train_text, train_vocab, tiny_config, tmp_path
):
    """D10: `ckpt-N_temp/` folders of killed saves go at the start and after every save;
    other folders stay."""
    from elmo_keras.training.tf.trainer import Trainer

    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "ckpt-7_temp").mkdir(parents=True)
    (checkpoints / "ckpt-7_temp" / "part-00000-of-00001.index").write_bytes(b"partial")
    (checkpoints / "notes_temp").mkdir()
    seen = []

    def during(step, logs):
        seen.append((checkpoints / "ckpt-7_temp").exists())
        (checkpoints / f"ckpt-{step + 10}_temp").mkdir()

    trainer = Trainer(tiny_config, train_vocab)
    trainer.fit(train_text, steps=2, output_dir=tmp_path, log_every=10**6, on_step=during)
    assert seen == [False, False]
    assert sorted(p.name for p in checkpoints.iterdir() if p.is_dir()) == ["notes_temp"]
    assert remove_orphans(tmp_path / "missing") == []


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"config": {"lstm"', "is damaged (not valid JSON"),
        ("[1, 2]", "must hold a JSON object. Received: list"),
        ('{"config": {}, "seed": "one", "train": "a"}', "'seed' must be an integer. Received"),
        ('{"seed": 1, "train": "a"}', "has no key 'config' (expected a JSON object)"),
    ],
)
def test_a_damaged_training_config_is_named(text, message, tmp_path, capsys):
    """D11: the error names training_config.json (and the key), in one line."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "vocab.txt").write_text("<S>\n</S>\n<UNK>\n")
    (run / "training_config.json").write_text(text)
    assert main(_resume_argv(run)) == 1
    (line,) = _err_lines(capsys)
    assert str(run / "training_config.json") in line and message in line, line


def test_a_full_disk_while_training_is_one_line_naming_where_to_resume(
    reference, tmp_path, monkeypatch, capsys
):
    """D12: a checkpoint write that fails (disk full) stops the run with one line naming the
    checkpoint to resume from, and leaves no temporary folder; so does a failed write of the
    model files. Resuming after that ends like the uninterrupted run."""
    real_save = tf.train.CheckpointManager.save

    def save(manager, checkpoint_number=None, **kwargs):
        if checkpoint_number == 6:  # as TensorFlow fails: after it made the temporary folder
            (tmp_path / "run" / "checkpoints" / "ckpt-6_temp").mkdir()
            raise tf.errors.ResourceExhaustedError(None, None, "No space left on device")
        return real_save(manager, checkpoint_number=checkpoint_number, **kwargs)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", save)
    run = tmp_path / "run"
    assert main(_train_argv(reference / "tiny.json", run)) == 1
    (line,) = _err_lines(capsys)
    checkpoints = run / "checkpoints"
    assert f"could not write checkpoint ckpt-6 in {checkpoints} (ResourceExhaustedError: " in line
    assert line.endswith(f"resume from {checkpoints / 'ckpt-4'} (`--resume`, output {run})")
    assert not list(checkpoints.glob("*_temp"))
    monkeypatch.undo()

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("elmo_keras.weights.save_weights", full)
    assert main(_resume_argv(run)) == 1
    (line,) = _err_lines(capsys)
    assert line.startswith(f"elmo-keras train: error: could not write the model files to {run}")
    assert line.endswith(f"resume from {checkpoints / 'ckpt-8'} (`--resume`, output {run})")
    monkeypatch.undo()
    assert main(_resume_argv(run)) == 0
    assert _same_model(run, reference / "run")


def test_a_diverged_run_stops_with_one_line_and_publishes_nothing_nan(
    reference, run_copy, tmp_path, capsys
):
    """Issue 39, point 5: a learning rate of 1e30 makes the loss NaN within two steps. The run
    stops with one line (exit 1) naming the step and the checkpoint to resume from; no NaN
    checkpoint or model file is written (the newest checkpoint stays ckpt-8, the model files
    the reference's). A NaN checkpoint (an older version's) is refused by `snapshot` and NaN
    model files by `export`, each in one line, exit 1, nothing written."""
    argv = _resume_argv(run_copy, 16, "--override", "--learning-rate", "1e30")
    assert main(argv) == 1
    applied, line = _err_lines(capsys)  # the override's line, then the failure's
    assert applied.startswith("resume: applied at step 8: learning_rate")
    checkpoints = run_copy / "checkpoints"
    assert line.startswith("elmo-keras train: error: training diverged at step ")
    assert f"resume from {checkpoints / 'ckpt-8'} (`--resume`, output {run_copy})" in line
    assert kept_checkpoints(checkpoints)[0] == str(checkpoints / "ckpt-8")
    assert _same_model(run_copy, reference / "run")

    from elmo_keras.training.run.run_record import RunRecord
    from elmo_keras.training.tf.trainer import Trainer

    saved, vocabulary = RunRecord.read(run_copy)
    trainer = Trainer(saved.config, vocabulary, seed=1)
    trainer.restore(checkpoints)
    kernel = trainer.model.softmax_kernel
    kernel.assign(tf.tensor_scatter_nd_update(kernel, [[3, 0]], [float("nan")]))
    trainer.step.assign(20)
    trainer.save_checkpoint(trainer._manager(checkpoints, 5))
    snapshot = tmp_path / "snapshot"
    assert main(["snapshot", "--run", str(run_copy), "--output", str(snapshot)]) == 1
    (line,) = _err_lines(capsys)
    assert f"checkpoint {checkpoints / 'ckpt-20'}'s weights hold 1 NaN or infinite values" in line
    assert line.endswith("(the run diverged); nothing was written")
    assert not (snapshot / "lm_weights.hdf5").exists()

    from elmo_keras.weights import save_weights

    variable = trainer.bilm.weights[0]  # an older version's NaN model files, checksums right
    variable.assign(tf.fill(variable.shape, float("inf")))
    save_weights(trainer.bilm, run_copy / "lm_weights.hdf5")
    export = tmp_path / "export"
    argv = ["export", "--run-dir", str(run_copy), "--output", str(export), "--format", "savedmodel"]
    assert main(argv) == 1
    stage, line = _err_lines(capsys)  # "loading weights ...", then the failure
    assert line.startswith("elmo-keras export: error: weight file ")
    assert "NaN or infinite values as float32 (a corrupted or diverged file" in line
    assert not export.exists()


def test_a_full_disk_while_writing_the_tensorboard_log_checkpoints_and_names_the_file(
    reference, tmp_path, monkeypatch, capsys
):
    """Issue 39, point 13: the event file's write at step 3 fails (disk full). The run saves a
    checkpoint of step 3 and stops with one line naming the event file and where to resume
    (was a bare `[Errno 28]`, no checkpoint, the steps since the last one lost); resumed, it
    ends like the uninterrupted run."""
    from elmo_keras.training.common import event_file

    real_event = event_file._event

    def event(wall_time, step=None, **kwargs):
        if step == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_event(wall_time, step=step, **kwargs)

    monkeypatch.setattr(event_file, "_event", event)
    run = tmp_path / "run"
    assert main(_train_argv(reference / "tiny.json", run, STEPS, "--log-every", "1")) == 1
    (line,) = _err_lines(capsys)
    (log,) = (run / "logs").glob("events.out.tfevents.*")
    assert line.startswith(f"elmo-keras train: error: could not write the TensorBoard log {log} ")
    assert "(OSError: [Errno 28] No space left on device); the run stopped at step 3: " in line
    checkpoints = run / "checkpoints"
    assert line.endswith(f"resume from {checkpoints / 'ckpt-3'} (`--resume`, output {run})")
    monkeypatch.undo()
    assert main(_resume_argv(run)) == 0
    assert _same_model(run, reference / "run")
