"""A command whose reader goes away (`elmo-keras presets | head -1`) ends quietly: exit 0, no
"Broken pipe" line (issue 29, point 8); a broken pipe that is not standard output's (a socket,
a worker) is a failure like any other."""

import os
import pathlib
import subprocess
import sys

import pytest

from elmo_keras.cli import main, presets

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _into_a_closed_pipe(argv):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes its first line
    code = "import sys; from elmo_keras.cli import main; sys.exit(main(sys.argv[1:]))"
    try:
        return subprocess.run(
            [sys.executable, "-c", code, *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [["presets"], ["embed", "--help"]])
def test_a_closed_pipe_ends_the_command_quietly(argv):
    result = _into_a_closed_pipe(argv)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_a_command_that_writes_after_its_work_ends_quietly_too(tmp_path, onnx_model):
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    output = tmp_path / "out.hdf5"
    argv = ["embed", "--model", str(onnx_model), "--input", str(text), "--output", str(output)]
    result = _into_a_closed_pipe(argv)  # the work is done; its "wrote ..." line has no reader
    assert (result.returncode, result.stderr) == (0, "")
    assert output.is_file()


def test_another_broken_pipe_is_a_failure(monkeypatch, capsys):
    def lost_connection(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(presets, "run", lost_connection)
    assert main(["presets"]) == 1
    assert capsys.readouterr().err == "elmo-keras presets: error: [Errno 32] Broken pipe\n"
