"""`elmo-keras train`'s GPU flags on a machine without a GPU (issue 29, point 7): the run goes
on, with one warning line per flag saying what it does on the CPU."""

import pytest

from elmo_keras.cli import main, train
from elmo_keras.training import pipeline

GPU_FLAGS = ["--strategy", "mirrored", "--mixed-precision", "bfloat16", "--xla", "--tf32"]


@pytest.fixture
def argv(tmp_path, monkeypatch):
    """A `train` command line whose training is replaced by a stop (a `ValueError`, exit 1)
    right after the command has said what it has to say."""

    def stop(run):
        raise ValueError("training replaced by the test")

    monkeypatch.setattr(pipeline, "train", stop)
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    return ["train", "--train", str(text), "--output", str(tmp_path / "run"), "--steps", "1"]


def test_gpu_flags_without_a_gpu_are_one_warning_line_each(argv, monkeypatch, capsys):
    monkeypatch.setattr(train, "_has_gpu", lambda: False)
    assert main([*argv, *GPU_FLAGS]) == 1
    err = capsys.readouterr().err.splitlines()
    warnings = [line.removeprefix("elmo-keras train: warning: no GPU found; ") for line in err]
    flags = [w.split(" ")[0] for w in warnings[:-1]]
    assert flags == ["--strategy", "--mixed-precision", "--xla", "--tf32"], err
    assert "on the CPU" in warnings[1] and "for the CPU" in warnings[2], err
    assert err[-1] == "elmo-keras train: error: training replaced by the test"


def test_no_warning_with_a_gpu_or_without_the_flags(argv, monkeypatch, capsys):
    monkeypatch.setattr(train, "_has_gpu", lambda: True)
    assert main([*argv, *GPU_FLAGS]) == 1
    assert capsys.readouterr().err == "elmo-keras train: error: training replaced by the test\n"
    monkeypatch.setattr(train, "_has_gpu", lambda: pytest.fail("looked for a GPU needlessly"))
    assert main(argv) == 1
    assert capsys.readouterr().err == "elmo-keras train: error: training replaced by the test\n"
