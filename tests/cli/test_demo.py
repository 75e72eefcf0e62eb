"""`elmo-keras demo`: the sense table of a packaged model, and its errors."""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from elmo_keras.cli import main
from elmo_keras.corpus.demo_senses import SENSES, sense_statistics

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _table(out):
    """`{word: [(within, across, nn or None), ...]}` parsed from the demo's table."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] in SENSES:
            cells = re.findall(r"([\d.]+) / ([\d.]+)\s+(n/a|\d+%)", line)
            rows[parts[0]] = [
                (float(w), float(a), None if nn == "n/a" else float(nn[:-1]) / 100)
                for w, a, nn in cells
            ]
    return rows


def test_demo_prints_the_sense_table_of_a_preset(capsys):
    assert main(["demo", "--model", "tiny"]) == 0
    rows = _table(capsys.readouterr().out)
    assert sorted(rows) == sorted(SENSES)
    for cells in rows.values():
        assert len(cells) == 3  # layer 0 and two LSTM layers (the tiny model)
        assert cells[0] == (1.0, 1.0, None)  # layer 0: one vector whatever the context


def test_demo_runs_where_tensorflow_cannot_load(tmp_path, capsys):
    """In a `[jax]` install (TensorFlow absent) the demo embeds on JAX and
    prints the table this process prints (it asked for TensorFlow before)."""
    assert main(["demo", "--model", "tiny"]) == 0
    expected = _table(capsys.readouterr().out)
    (tmp_path / "job.json").write_text(json.dumps({"argv": ["demo", "--model", "tiny"]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.jax_training_child", "cli", str(tmp_path)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["code"] == 0 and not report["tensorflow_imported"], report["stderr"]
    got = _table(report["stdout"])
    assert sorted(got) == sorted(expected)
    for word, cells in expected.items():
        for mine, theirs in zip(cells, got[word], strict=True):
            assert mine[:2] == pytest.approx(theirs[:2], abs=0.011), word  # printed to 0.01


def test_demo_table_equals_a_numpy_computation(capsys):
    """The printed numbers are the cosines of the vectors `embed` gives (NumPy float64 here)."""
    from elmo_keras.models import BiLM
    from elmo_keras.models.bilm_embedder import BiLMEmbedder
    from elmo_keras.presets import resolve_preset

    assert main(["demo", "--model", "tiny"]) == 0
    rows = _table(capsys.readouterr().out)
    bilm = BiLM.from_bilm_tf(*resolve_preset("tiny"))
    senses = SENSES["bank"]
    sentences = [s.split() for group in senses.values() for s in group]
    labels = np.array([sense for sense, group in senses.items() for _ in group])
    vectors = np.stack(
        [
            v[:, s.index("bank")]
            for s, v in zip(sentences, BiLMEmbedder(bilm).embed(sentences), strict=True)
        ]
    ).astype(np.float64)
    for layer in (1, 2):
        x = vectors[:, layer] / np.linalg.norm(vectors[:, layer], axis=-1, keepdims=True)
        cos = x @ x.T
        same = labels[:, None] == labels[None, :]
        within = cos[same & ~np.eye(len(labels), dtype=bool)].mean()
        across = cos[~same].mean()
        assert rows["bank"][layer][0] == pytest.approx(within, abs=0.005)
        assert rows["bank"][layer][1] == pytest.approx(across, abs=0.005)


def test_sense_statistics_nearest_neighbour():
    # Two tight clusters far apart: 1-NN is perfect; identical vectors: no neighbour (None).
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=4), rng.normal(size=4)
    vectors = np.stack([a + 0.01 * rng.normal(size=4) for _ in range(3)] + [b] * 3)[:, None]
    labels = ["x"] * 3 + ["y"] * 3
    (stats,) = sense_statistics(vectors, labels)
    assert stats["nn_accuracy"] == 1.0 and stats["within"] > stats["across"]
    (same,) = sense_statistics(np.ones((4, 1, 3)), ["x", "x", "y", "y"])
    assert same["nn_accuracy"] is None


def test_unknown_model_is_one_line(capsys):
    assert main(["demo", "--model", "no-such-model"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("elmo-keras demo: error: --model:") and "\n" not in err
