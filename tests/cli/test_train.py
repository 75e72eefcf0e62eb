"""`elmo-keras train`, `evaluate` and `snapshot` end to end on bilm-tf's tiny corpus."""

import json
import shutil

import h5py
import pytest

from elmo_keras.cli import main
from elmo_keras.training.configs import get_config


@pytest.fixture
def config_file(tmp_path):
    config = get_config("tiny")
    config.update(batch_size=4, unroll_steps=5, n_negative_samples_batch=16)
    config["lstm"].update(dim=16, projection_dim=8)
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(config))
    return path


def test_train_resume_and_evaluate(bilm_tf_fixture, config_file, tmp_path, capsys):
    data = str(bilm_tf_fixture / "train" / "data.txt")
    out = tmp_path / "run"
    argv = [
        "train",
        "--train",
        data,
        "--valid",
        data,
        "--config",
        str(config_file),
        "--output",
        str(out),
        "--steps",
        "3",
        "--strategy",
        "default",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "trained 3 steps" in printed and "valid perplexity: forward" in printed
    for name in (
        "options.json",
        "lm_weights.hdf5",
        "vocab.txt",
        "softmax.hdf5",
        "training_config.json",
    ):
        assert (out / name).is_file(), name
    assert json.loads((out / "options.json").read_text())["char_cnn"]["n_characters"] == 262
    with h5py.File(out / "lm_weights.hdf5") as handle:
        assert "CNN_proj/W_proj" in handle
    # The vocabulary was built from the data: specials first, then by frequency.
    assert (out / "vocab.txt").read_text().split("\n")[:4] == ["<S>", "</S>", "<UNK>", "of"]
    shutil.copy(out / "lm_weights.hdf5", tmp_path / "step3.hdf5")
    # A second run into the same folder must resume explicitly.
    assert main(argv[:-4] + ["--steps", "5"]) == 1
    assert "pass `resume`" in capsys.readouterr().err
    assert main(["train", "--output", str(out), "--steps", "5", "--resume"]) == 0
    assert "trained 5 steps" in capsys.readouterr().out
    assert main(["evaluate", "--model", str(out), "--data", data]) == 0
    printed = capsys.readouterr().out
    for line in ("forward perplexity:", "backward perplexity:", "average perplexity:"):
        assert line in printed

    # `snapshot`: any kept checkpoint, written as training writes its end.
    assert (
        main(
            [
                "snapshot",
                "--run",
                str(out),
                "--checkpoint",
                "ckpt-3",
                "--output",
                str(tmp_path / "snap3"),
            ]
        )
        == 0
    )
    assert "ckpt-3" in capsys.readouterr().out
    assert _datasets(tmp_path / "snap3" / "lm_weights.hdf5") == _datasets(tmp_path / "step3.hdf5")
    assert main(["snapshot", "--run", str(out), "--output", str(tmp_path / "snap5")]) == 0
    assert _datasets(tmp_path / "snap5" / "lm_weights.hdf5") == _datasets(out / "lm_weights.hdf5")
    assert (tmp_path / "snap5" / "vocab.txt").read_text() == (out / "vocab.txt").read_text()
    assert (
        main(
            [
                "snapshot",
                "--run",
                str(out),
                "--checkpoint",
                "ckpt-4",
                "--output",
                str(tmp_path / "snap4"),
            ]
        )
        == 2
    )
    assert "kept: ckpt-3, ckpt-5" in capsys.readouterr().err
    assert main(["snapshot", "--run", str(out), "--output", str(tmp_path / "snap5")]) == 2
    assert "pass --overwrite" in capsys.readouterr().err


def _datasets(path):
    """Every dataset of an hdf5 file, as bytes (an exact comparison)."""
    out = {}
    with h5py.File(path) as handle:
        handle.visititems(
            lambda name, obj: (
                out.__setitem__(name, obj[()].tobytes()) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--output", "x", "--steps", "1"], "--train is required"),
        (
            ["train", "--train", "a.txt", "--output", "x", "--steps", "1", "--config", "huge"],
            "--config must be one of",
        ),
        (
            ["train", "--train", "a.txt", "--output", "x", "--config", "tiny"],
            "give --steps, --epochs or --time-budget",
        ),
        (["train", "--output", "/nonexistent/run", "--steps", "1", "--resume"], "no previous run"),
        (["evaluate", "--model", "/nonexistent", "--data", "a.txt"], "folder not found"),
        (["snapshot", "--run", "/nonexistent", "--output", "x"], "not a training run"),
    ],
)
def test_errors_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_steps_and_epochs_exclusive(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--train", "a", "--output", "x", "--steps", "1", "--epochs", "1"])
