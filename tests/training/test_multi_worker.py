"""Two worker processes on 127.0.0.1 (MultiWorkerMirroredStrategy) == one process."""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from elmo_keras.training.trainer import Trainer

STEPS = 6


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_two_workers_equal_one_process(train_text, train_vocab, tiny_config, bilm_tf_fixture,
                                       tmp_path):
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(tiny_config))
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    job = os.path.join(os.path.dirname(__file__), "multi_worker_job.py")
    processes = []
    for index in range(2):
        env = dict(os.environ)
        env["TF_CONFIG"] = json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        )
        env["CUDA_VISIBLE_DEVICES"] = ""
        processes.append(subprocess.Popen(
            [sys.executable, job, str(config_path), str(bilm_tf_fixture / "train" / "vocab.txt"),
             train_text, str(STEPS), str(tmp_path / f"worker{index}.npz")],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        ))
    # The single-process reference runs meanwhile.
    reference = Trainer(tiny_config, train_vocab, seed=3)
    reference.fit(train_text, steps=STEPS, log_every=10**6)
    expected = [v.numpy() for v in reference.model.trainable_variables]
    try:
        outputs = [p.communicate(timeout=240)[0].decode(errors="replace") for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for p, output in zip(processes, outputs, strict=True):
        assert p.returncode == 0, output[-3000:]
    for index in range(2):
        got = np.load(tmp_path / f"worker{index}.npz")
        assert int(got["steps"]) == STEPS
        diff = max(
            float(np.max(np.abs(got[f"w{i}"] - w))) for i, w in enumerate(expected)
        )
        assert diff < 1e-5, f"worker {index}: max weight difference {diff}"
