"""The JAX trainer against the TensorFlow trainer, data parallel, exact resume after SIGKILL.

The JAX side runs in child processes where TensorFlow cannot be imported
(`tests/jax_training_child.py`); this process is the TensorFlow side and the judge.
"""

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from elmo_keras.text.char_ids import batch_to_char_ids
from elmo_keras.training.model_files import save_language_model
from elmo_keras.training.tf.trainer import Trainer
from tests.fresh_interpreter import run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
SENTENCES = [["The", "bank", "closed", "."], ["A", "river", "bank", "flooded", "today", "."]]
LONG_STEPS = 200


def _tiny():
    """The training tests' tiny configuration (tests/training/conftest.py)."""
    from elmo_keras.training.configs import get_config

    config = get_config("tiny")
    config.update(batch_size=4, unroll_steps=5, n_negative_samples_batch=16, dropout=0.0)
    config["lstm"].update(dim=16, projection_dim=8)
    return config


@pytest.fixture(scope="module", autouse=True)
def compilation_cache(tmp_path_factory):
    """The children share one persistent compilation cache (`$ELMO_KERAS_JAX_CACHE`), as one
    user's runs do: `JaxTrainer` turns it on, so a resumed run loads its step."""
    folder = tmp_path_factory.mktemp("jax_compilation")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ELMO_KERAS_JAX_CACHE", str(folder))
        yield folder


def _child(mode, workdir, job, devices=1, timeout=300, wait=True, env=None):
    (workdir / "job.json").write_text(json.dumps(job))
    env = {**os.environ, **(env or {}), "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    # tests/conftest.py's XLA setting, and the number of devices.
    flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    env["XLA_FLAGS"] = flags.strip()
    command = [sys.executable, "-m", "tests.jax_training_child", mode, str(workdir)]
    if not wait:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
    result = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((workdir / "report.json").read_text())
    assert report["tensorflow_imported"] is False
    return report


@pytest.fixture(scope="module")
def compared(tmp_path_factory, train_text, bilm_tf_fixture):
    """The TensorFlow trainer and the JAX trainer (child), same initial weights and batches."""
    from elmo_keras.text.vocabulary import Vocabulary

    workdir = tmp_path_factory.mktemp("jax_compare")
    vocab_path = bilm_tf_fixture / "train" / "vocab.txt"
    vocabulary = Vocabulary.load(vocab_path)
    config = _tiny()
    config["all_clip_norm_val"] = 1.0  # the clipping is part of what must agree
    trainer = Trainer(config, vocabulary, seed=5)
    save_language_model(trainer.model, vocabulary, workdir / "init")
    first = []
    trainer.fit(train_text, steps=1, log_every=10**6, on_step=lambda s, logs: first.append(logs))
    trainer.fit(train_text, steps=LONG_STEPS, log_every=10**6)
    tensorflow = {"first_step": first[0], "evaluate": trainer.evaluate(train_text, batch_size=2)}
    job = {
        "config": config,
        "vocab": str(vocab_path),
        "data": train_text,
        "seed": 5,
        "init_dir": str(workdir / "init"),
        "steps": LONG_STEPS,
        "sentences": SENTENCES,
    }
    report = _child("compare", workdir, job)
    return workdir, tensorflow, report


def test_same_loss_after_one_step(compared):
    _, tensorflow, jax = compared
    for key in ("loss", "forward_nll", "backward_nll", "tokens", "grad_norm"):
        np.testing.assert_allclose(jax["first_step"][key], tensorflow["first_step"][key], rtol=1e-5)
    assert jax["sparse_softmax"] is True  # Adagrad + sampled softmax: the row updates


def test_same_perplexity_after_200_steps(compared):
    """Within 1% after 200 steps (the two backends round differently; the runs drift apart)."""
    _, tensorflow, jax = compared
    assert jax["steps"] == LONG_STEPS
    for key in ("perplexity_forward", "perplexity_backward", "perplexity"):
        expected = tensorflow["evaluate"][key]
        assert abs(jax["evaluate"][key] - expected) <= 0.01 * expected, (key, jax, tensorflow)
    # and the training did something: the tiny model learns its 139 tokens.
    assert tensorflow["evaluate"]["perplexity"] < 30.0


def test_jax_weights_load_in_tensorflow_and_embed_alike(compared, keras_bilm_class):
    """The JAX run's published files: the TensorFlow `BiLM` reads them and embeds as the JAX
    `BiLM` does (1e-5)."""
    workdir, _, _ = compared
    model = workdir / "model"
    bilm = keras_bilm_class.from_bilm_tf(model / "options.json", model / "lm_weights.hdf5")
    out = bilm(batch_to_char_ids(SENTENCES))["activations"].numpy()
    jax_vectors = np.load(workdir / "embed_jax.npz")
    for i, sentence in enumerate(SENTENCES):
        np.testing.assert_allclose(
            jax_vectors[f"arr_{i}"], out[i, :, : len(sentence)], atol=1e-5, rtol=0
        )
    from elmo_keras.weights import load_softmax

    kernel, bias = load_softmax(model / "softmax.hdf5")
    assert kernel.shape == (len(open(model / "vocab.txt").read().split()), 8)
    assert np.all(np.isfinite(kernel)) and np.all(np.isfinite(bias))


@pytest.fixture
def keras_bilm_class():
    from elmo_keras.models import BiLM

    return BiLM


def test_two_devices_equal_one(tmp_path, train_text, bilm_tf_fixture):
    """Data parallel over 2 JAX CPU devices == 1 device, same global batch, 3 steps (1e-5)."""
    job = {
        "config": _tiny(),
        "vocab": str(bilm_tf_fixture / "train" / "vocab.txt"),
        "data": train_text,
        "seed": 3,
        "steps": 3,
    }
    report = _child("parallel", tmp_path, job, devices=2)
    assert report["devices"] == 2
    assert report["weights_changed"] > 1e-3  # the steps moved the weights
    assert report["weights"] < 1e-5
    assert report["state_h"] < 1e-5 and report["state_c"] < 1e-5


def _run_job(train_text, output, steps):
    config = dict(_tiny(), dropout=0.1)  # dropout's seeds are restored too
    return {
        "run": {
            "train_files": train_text,
            "output_dir": str(output),
            "config": config,
            "steps": steps,
            "seed": 7,
            "checkpoint_every": 1,
            "keep_checkpoints": 2,
            "log_every": 1000,
            "verbose": False,
        }
    }


def _published(folder):
    arrays = {}
    for name in ("lm_weights.hdf5", "softmax.hdf5"):
        with h5py.File(folder / name, "r") as f:
            f.visititems(
                lambda key, item, name=name: (
                    arrays.__setitem__(f"{name}/{key}", item[()])
                    if isinstance(item, h5py.Dataset)
                    else None
                )
            )
    return arrays


def test_sigkill_at_a_random_step_then_resume_is_bit_exact(tmp_path, train_text):
    """A JAX run killed with SIGKILL (no handler runs) after a random checkpoint and resumed
    writes the same weights, bit for bit, as a run that was never interrupted; the resumed
    process does not compile its step again (JAX's persistent compilation cache)."""
    steps = 14
    reference = tmp_path / "reference"
    reference.mkdir()
    _child("train", reference, _run_job(train_text, reference / "run", steps))

    killed = tmp_path / "killed"
    killed.mkdir()
    kill_after = random.Random().randint(3, steps - 3)
    child = _child("train", killed, _run_job(train_text, killed / "run", steps), wait=False)
    checkpoints = killed / "run" / "checkpoints"
    deadline = time.monotonic() + 240
    while not list(checkpoints.glob(f"ckpt-{kill_after}.npz")) and child.poll() is None:
        assert time.monotonic() < deadline, "the child never reached the step"
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, f"finished before the kill (step {kill_after})"
    assert not (killed / "run" / "lm_weights.hdf5").exists()
    job = _run_job(train_text, killed / "run", steps)
    job["run"].update(resume=True, config=None, seed=None)
    report = _child("train", killed, job)
    assert report["train"]["steps"] == steps
    # The resumed process loaded the step the first runs compiled (the persistent cache).
    assert "jit_train_step" in report["cache_hits"], report["cache_hits"]
    expected, got = _published(reference / "run"), _published(killed / "run")
    assert sorted(expected) == sorted(got)
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key], value, err_msg=f"{key} (killed after {kill_after})")


def _free_port():
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_two_processes_equal_one_process_with_two_devices(tmp_path, train_text):
    """`strategy="multi-worker"` on JAX: two processes on 127.0.0.1 (one CPU device each,
    joined by `keras.distribution.initialize`) train as one process with two devices does:
    the chief's published weights within 1e-5 after 4 steps; only the chief writes files."""
    steps = 4
    single = tmp_path / "single"
    single.mkdir()
    job = _run_job(train_text, single / "run", steps)
    job["run"].update(strategy="auto", checkpoint_every=2)
    _child("train", single, job, devices=2)

    port = _free_port()
    workers = []
    for process in range(2):
        workdir = tmp_path / f"worker{process}"
        workdir.mkdir()
        job = _run_job(train_text, tmp_path / "multi", steps)
        job["run"].update(strategy="multi-worker", checkpoint_every=2)
        env = {
            "KERAS_DISTRIBUTION_JOB_ADDRESSES": f"127.0.0.1:{port}",
            "KERAS_DISTRIBUTION_NUM_PROCESSES": "2",
            "KERAS_DISTRIBUTION_PROCESS_ID": str(process),
        }
        workers.append((workdir, _child("train", workdir, job, wait=False, env=env)))
    for workdir, worker in workers:
        try:
            _, stderr = worker.communicate(timeout=240)
        finally:
            if worker.poll() is None:
                worker.kill()
        assert worker.returncode == 0, stderr.decode()[-3000:]
        report = json.loads((workdir / "report.json").read_text())
        assert report["train"]["steps"] == steps and report["tensorflow_imported"] is False
    expected, got = _published(single / "run"), _published(tmp_path / "multi")
    assert sorted(expected) == sorted(got)
    for key, value in expected.items():
        np.testing.assert_allclose(got[key], value, atol=1e-5, rtol=0, err_msg=key)
    checkpoints = sorted(p.name for p in (tmp_path / "multi" / "checkpoints").iterdir())
    assert checkpoints == ["ckpt-2.npz", "ckpt-4.npz"]


def test_snapshot_of_a_jax_checkpoint_on_tensorflow(tmp_path, train_text):
    """`export_checkpoint` (`elmo-keras snapshot`) reads the JAX trainer's `.npz` checkpoints on
    TensorFlow: the last checkpoint's files equal what the run wrote at its end, bit for bit;
    and the command does so without TensorFlow."""
    from elmo_keras.training.pipeline import export_checkpoint

    _child("train", tmp_path, _run_job(train_text, tmp_path / "run", 5))
    written = export_checkpoint(tmp_path / "run", tmp_path / "snapshot", "ckpt-5")
    assert written.endswith("ckpt-5")
    expected, got = _published(tmp_path / "run"), _published(tmp_path / "snapshot")
    assert sorted(expected) == sorted(got)
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)

    # `elmo-keras snapshot` does the same where TensorFlow cannot load (a `[jax]` install),
    # into a folder whose parents it makes.
    output = tmp_path / "new" / "cli_snapshot"
    argv = ["snapshot", "--run", str(tmp_path / "run"), "--checkpoint", "ckpt-5"]
    report = _child("cli", tmp_path, {"argv": [*argv, "--output", str(output)]})
    assert report["code"] == 0, report["stderr"]
    got = _published(output)
    for key, value in expected.items():
        np.testing.assert_array_equal(got[key], value, err_msg=key)


def test_a_diverged_jax_run_stops_with_one_line_and_keeps_finite_checkpoints(tmp_path, train_text):
    """Issue 39, point 5, on JAX: `train --learning-rate 1e30` (was: `loss nan` at every step,
    exit 0, NaN files) stops with one line, exit 1; every checkpoint kept is finite and no
    model file is written."""
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(_tiny()))
    run = tmp_path / "run"
    argv = ["train", "--backend", "jax", "--train", train_text, "--config", str(config)]
    argv += ["--output", str(run), "--steps", "6", "--checkpoint-every", "1"]
    argv += ["--strategy", "default", "--learning-rate", "1e30"]
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}
    result = run_cli(*argv, cwd=ROOT, env=env, returncode=1)
    (line,) = [x for x in result.stderr.splitlines() if x.startswith("elmo-keras train:")]
    assert "(the run diverged)" in line or "training diverged at step " in line, line
    assert not (run / "lm_weights.hdf5").exists()
    for path in (run / "checkpoints").glob("ckpt-*.npz"):
        with np.load(path) as arrays:
            assert all(np.isfinite(arrays[k]).all() for k in arrays.files if k != "__names__")
