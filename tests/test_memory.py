"""Memory estimates: exact parameter counts, and configurations too big for the machine refused
in one line before anything is allocated (issue 30, point 9)."""

import json

import keras
import numpy as np
import pytest

from elmo_keras import memory
from elmo_keras.cli import main
from elmo_keras.memory import NotEnoughMemory, bilm_parameters, check_fits
from elmo_keras.models import BiLM
from elmo_keras.options import options_to_bilm_kwargs, read_options


@pytest.mark.parametrize("folder", ["tiny_allennlp", "mini_en"])
def test_the_parameter_count_is_the_built_models(folder):
    path = f"elmo_keras/assets/{folder}/"
    kwargs = options_to_bilm_kwargs(read_options(path + "options.json"))
    bilm = BiLM.from_bilm_tf(path + "options.json", path + "lm_weights.hdf5")
    assert bilm_parameters(kwargs) == sum(int(np.prod(w.shape)) for w in bilm.weights)


def _huge_options(tmp_path):
    options = read_options("elmo_keras/assets/tiny_allennlp/options.json")
    # Each size within its own bound (options.LIMITS), about 4 TB of weights together.
    options["lstm"].update(dim=65_536, projection_dim=16_384, n_layers=64)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    return path


def test_weights_larger_than_the_machine_are_one_line_before_allocation(tmp_path, monkeypatch):
    path = _huge_options(tmp_path)
    made = []  # refused before the model (let alone its weights) is made: not timed, counted
    monkeypatch.setattr(keras.Model, "__init__", lambda *args, **kwargs: made.append(args))
    with pytest.raises(NotEnoughMemory) as error:
        BiLM.from_options(json.loads(path.read_text()), name="huge")
    assert made == []
    message = str(error.value)
    assert "\n" not in message and "its weights" in message and "TiB" not in message
    assert "GiB" in message and memory.IGNORE_VARIABLE in message


def test_the_command_line_names_the_file_and_exits_1(tmp_path, capsys):
    path = _huge_options(tmp_path)
    (tmp_path / "in.txt").write_text("a b\n")
    code = main(
        [
            "embed",
            "--options",
            str(path),
            "--weights",
            "elmo_keras/assets/tiny_allennlp/lm_weights.hdf5",
            "--input",
            str(tmp_path / "in.txt"),
            "--output",
            str(tmp_path / "out.hdf5"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert str(path) in err[0] and "would need about" in err[0]
    assert not (tmp_path / "out.hdf5").exists()


def test_a_training_step_larger_than_the_machine_is_one_line(tmp_path, capsys):
    (tmp_path / "train.txt").write_text("the cat sat on the mat .\n" * 20)
    code = main(
        [
            "train",
            "--config",
            "original",
            "--batch-size",
            "65536",
            "--train",
            str(tmp_path / "train.txt"),
            "--output",
            str(tmp_path / "run"),
            "--steps",
            "1",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1, err
    assert "a training step would need about" in err[0] and "batch 65536 x 20 per replica" in err[0]


def test_the_check_compares_with_what_is_available_and_can_be_skipped(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**30)
    check_fits(2**29, "its weights", "here")  # fits
    with pytest.raises(NotEnoughMemory, match=r"here: its weights would need about 2\.0 GiB"):
        check_fits(2**31, "its weights", "here")
    monkeypatch.setenv(memory.IGNORE_VARIABLE, "1")
    check_fits(2**31, "its weights", "here")
    monkeypatch.setattr(memory, "available_bytes", lambda: None)
    monkeypatch.delenv(memory.IGNORE_VARIABLE)
    check_fits(2**60, "its weights", "here")  # unknown: no refusal
