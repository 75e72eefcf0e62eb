"""benchmarks/accelerator.py, the GPU check, keeps running: its CPU form (`--small`) in CI.

It runs as a user runs it on the GPU machine: a fresh process with `KERAS_BACKEND=jax`, where
the script itself blocks TensorFlow. Its exactness part must hold here too (1e-5 against the
fixtures), and every speed row must be measured.
"""

import importlib.util
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
    script = ROOT / "benchmarks" / "accelerator.py"
    command = [sys.executable, str(script), "--small", "--calls", "1", "--json", str(out)]
    # The short run trains a fixed number of steps: its perplexity must halve whatever the
    # machine's speed (80 tiny steps took WikiText-2 valid from 36,450 to 7,851 here; 10 seconds
    # of a loaded 2-core machine were 26 steps and 26,985, which failed the halving).
    command += ["--steps", "2", "--run-steps", "80", "--loops", "s2", "--fit-steps", "3"]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(out.read_text())
    for precision in ("fp32", "tf32"):
        for fixture, diff in results["exactness"][precision].items():
            assert diff <= 1e-5, (precision, fixture, diff)
    assert len(results["speed"]) == 9
    assert all(row["tokens_per_s"] > 0 for row in results["speed"])
    assert "| bilm-tf |" in result.stdout and "Peak memory" in result.stdout
    # The training section: the real trainer's step in bf16 and fp32, through `fit` when
    # WikiText-2 is there, and a short run whose held-out perplexity falls.
    steps = results["training"]["steps"]
    # Each precision with the loop asked for (both directions stacked, unrolled twice).
    assert [(row["rows"], row["precision"], row["loop"]) for row in steps[:2]] == [
        (4, "bf16", "s2"),
        (4, "fp32", "s2"),
    ]
    assert all(row["tokens_per_s"] > 0 and row["sparse_softmax"] for row in steps[:2])
    assert all(row["waited_tokens_per_s"] > 0 for row in steps[:2])
    run = results["training"].get("run")
    if run is not None:
        assert run["steps"] == 80, run
        assert run["perplexity_after"] < 0.5 * run["perplexity_before"], run
    assert "| training step |" in result.stdout
    # Embedding: end to end (layers averaged, hdf5 written) and the compute alone, each bucketed
    # shape compiled once; the length-aware path and the core path on the natural batch.
    embed = results["embed"]
    assert embed["sentences"] == 48 and embed["shapes"] >= 1
    assert embed["end_to_end_tokens_per_s"] > 0 and embed["compute_tokens_per_s"] > 0
    fast = results["fast_path"]
    assert fast["length_aware_tokens_per_s"] > 0 and fast["core_tokens_per_s"] > 0
    assert "| `embed`, --layers average |" in result.stdout
    # (h) the PyTorch section, in a process of its own: the fixtures, both models' rows, and the
    # reference's AllenNLP-style loop at the same batch sizes where ../shared is there.
    section = results["torch"]
    if importlib.util.find_spec("torch") is None:
        assert section == {"skipped": "torch is not installed"}
        return
    # On the CPU the biLSTM runs the CPU's own path ("cpu"; on CUDA "graphed" and "eager");
    # each comparison within 1e-5, and the fixtures' own float32 round-off as measured from the
    # float64 reference.
    exactness = section["exactness"]
    assert sorted(exactness) == ["cpu vs fixture", "cpu vs float64", "fixture vs float64"]
    for comparison, diffs in exactness.items():
        assert sorted(diffs) == ["allennlp", "bilm-tf"]
        assert all(diff <= 1e-5 for diff in diffs.values()), (comparison, diffs)
    assert 1e-6 < exactness["fixture vs float64"]["allennlp"] < 1.3e-6
    models = ("BiLMEmbedder", "Elmo", "Elmo, ids on the device")
    rows = [(row["workload"], row["model"], row["path"]) for row in section["speed"]]
    assert rows == [(w, m, "cpu") for w in ("4 x 20", "16 x 20") for m in models]
    assert all(row["tokens_per_s"] > 0 for row in section["speed"])
    if (ROOT.parent / "shared" / "gpu" / "reference_elmo_jax.py").is_file():
        assert [row.get("batch") for row in section["reference"]] == [4, 16], section["reference"]
    assert "| top layer, max abs diff (TF32 off) | bilm-tf | allennlp |" in result.stdout
    assert "| fixture vs float64 | 6.93e-07 | 1.14e-06 |" in result.stdout
