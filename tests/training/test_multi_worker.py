"""Two worker processes on 127.0.0.1 (MultiWorkerMirroredStrategy) == one process."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from elmo_keras.training.tf.trainer import Trainer

STEPS = 6


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _run_workers(tmp_path, config_path, vocab, data, steps, tag, extra=lambda index: []):
    """Runs two worker processes on 127.0.0.1; returns their saved results."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    job = os.path.join(os.path.dirname(__file__), "multi_worker_job.py")
    processes = []
    for index in range(2):
        env = dict(os.environ)
        env["TF_CONFIG"] = json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        )
        env["CUDA_VISIBLE_DEVICES"] = ""
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    job,
                    str(config_path),
                    vocab,
                    data,
                    str(steps),
                    str(tmp_path / f"{tag}{index}.npz"),
                    *extra(index),
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )
    return processes


def _collect(processes, tmp_path, tag):
    try:
        outputs = [p.communicate(timeout=240)[0].decode(errors="replace") for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for p, output in zip(processes, outputs, strict=True):
        assert p.returncode == 0, output[-3000:]
    return [np.load(tmp_path / f"{tag}{index}.npz") for index in range(2)]


@pytest.mark.slow
def test_two_workers_equal_one_process_through_sigterm_and_resume(
    train_text, train_vocab, tiny_config, bilm_tf_fixture, tmp_path
):
    """SIGTERM to worker 1 alone: both workers stop after the same step and checkpoint it; both
    resume, and the result equals one uninterrupted process (weights within 1e-5)."""
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(tiny_config))
    vocab = str(bilm_tf_fixture / "train" / "vocab.txt")
    run_dir = tmp_path / "run"
    signal_at = 2
    processes = _run_workers(
        tmp_path,
        config_path,
        vocab,
        train_text,
        STEPS,
        "first",
        lambda index: (
            ["--run-dir", str(run_dir)] + (["--signal-at", str(signal_at)] if index == 1 else [])
        ),
    )
    # The single-process reference runs meanwhile.
    reference = Trainer(tiny_config, train_vocab, seed=3)
    reference.fit(train_text, steps=STEPS, log_every=10**6)
    expected = [v.numpy() for v in reference.model.trainable_variables]
    first = _collect(processes, tmp_path, "first")
    # Worker 1's vote rides on the next step's all-reduce: both leave after step signal_at + 1.
    for index, got in enumerate(first):
        assert str(got["stopped"]) == "signal", f"worker {index} stopped by {got['stopped']}"
        assert int(got["steps"]) == signal_at + 1, f"worker {index}: {int(got['steps'])} steps"
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").glob("*.index"))
    assert checkpoints == [f"ckpt-{signal_at + 1}.index"]

    processes = _run_workers(
        tmp_path,
        config_path,
        vocab,
        train_text,
        STEPS,
        "resumed",
        lambda index: ["--run-dir", str(run_dir), "--resume"],
    )
    for index, got in enumerate(_collect(processes, tmp_path, "resumed")):
        assert str(got["restored"]).endswith(f"ckpt-{signal_at + 1}")
        assert int(got["steps"]) == STEPS
        diff = max(float(np.max(np.abs(got[f"w{i}"] - w))) for i, w in enumerate(expected))
        assert diff < 1e-5, f"worker {index}: max weight difference {diff}"


@pytest.mark.parametrize(
    "value, received",
    [
        ("[]", "Received: TF_CONFIG='[]'"),
        ("{cluster", "Received (not JSON): TF_CONFIG='{cluster'"),
        ('{"cluster": ["a:1"]}', """Received: TF_CONFIG='{"cluster": ["a:1"]}'"""),
    ],
)
@pytest.mark.parametrize("strategy", ["auto", "multi-worker"])
def test_a_malformed_tf_config_is_one_line(value, received, strategy, monkeypatch):
    """TF_CONFIG that is not a JSON object with a cluster of address lists: one line naming it
    (`[]` was an `AttributeError` traceback)."""
    from elmo_keras.training.common.distribute import make_strategy

    monkeypatch.setenv("TF_CONFIG", value)
    with pytest.raises(ValueError, match="^TF_CONFIG must be a JSON object") as caught:
        make_strategy(strategy)
    assert str(caught.value).endswith(received) and "\n" not in str(caught.value)
