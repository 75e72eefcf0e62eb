"""benchmarks/accelerator.py, the GPU check, keeps running: its CPU form (`--small`) in CI.

It runs as a user runs it on the GPU machine: a fresh process with `KERAS_BACKEND=jax`, where
the script itself blocks TensorFlow. Its exactness part must hold here too (1e-5 against the
fixtures), and every speed row must be measured.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_accelerator_check_runs_on_cpu(tmp_path):
    out = tmp_path / "accelerator.json"
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    env.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
    script = ROOT / "benchmarks" / "accelerator.py"
    command = [sys.executable, str(script), "--small", "--calls", "1", "--json", str(out)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(out.read_text())
    for precision in ("fp32", "tf32"):
        for fixture, diff in results["exactness"][precision].items():
            assert diff <= 1e-5, (precision, fixture, diff)
    assert len(results["speed"]) == 9
    assert all(row["tokens_per_s"] > 0 for row in results["speed"])
    assert "| bilm-tf |" in result.stdout and "Peak memory" in result.stdout
