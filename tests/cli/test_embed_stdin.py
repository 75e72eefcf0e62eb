"""`elmo-keras embed --input -` reads standard input (issue 29, point 8) and writes what the
same lines in a file give."""

import io
import sys

import h5py
import numpy as np

from elmo_keras.cli import main

TEXT = "The bank of the river .\n\nHi there\n"


def test_embed_reads_standard_input(tmp_path, onnx_model, monkeypatch, capsys):
    text = tmp_path / "in.txt"
    text.write_text(TEXT, encoding="utf-8")
    argv = ["embed", "--model", str(onnx_model)]
    assert main([*argv, "--input", str(text), "--output", str(tmp_path / "file.hdf5")]) == 0
    stdin = io.TextIOWrapper(io.BytesIO(TEXT.encode("utf-8")), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main([*argv, "--input", "-", "--output", str(tmp_path / "stdin.hdf5")]) == 0
    assert capsys.readouterr().out.endswith(
        f"wrote 3 sentences (8 tokens) to {tmp_path / 'stdin.hdf5'}\n"
    )
    with h5py.File(tmp_path / "file.hdf5") as want, h5py.File(tmp_path / "stdin.hdf5") as got:
        assert sorted(got) == sorted(want) == ["0", "1", "2"]
        for name in want:
            np.testing.assert_array_equal(got[name][...], want[name][...])


def test_the_output_is_checked_before_standard_input_is_read(tmp_path, onnx_model, monkeypatch):
    """Issue 39, point 11: an existing output was reported after a whole pass over standard
    input (50 s); now before a byte is read. A device as the input is one line, exit 2."""
    from tests.cli.test_common import _Lines

    output = tmp_path / "out.hdf5"
    output.write_bytes(b"kept")
    source = _Lines(1000)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(source)))
    argv = ["embed", "--model", str(onnx_model), "--output", str(output)]
    assert main([*argv, "--input", "-"]) == 2
    assert source.given == 0 and output.read_bytes() == b"kept"
    output.unlink()
    assert main([*argv, "--input", "/dev/zero"]) == 2  # was a MemoryError traceback
    assert not output.exists()
