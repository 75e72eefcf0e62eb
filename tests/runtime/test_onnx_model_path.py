"""A model path that is not an ONNX model is one clear error (issue 29, point 2): in the client
and on the command line, which also takes `--model M.onnx` without `--backend onnx`."""

import shutil

import h5py
import numpy as np
import pytest

from elmo_keras.cli import main
from elmo_keras.runtime import OnnxEmbedder


def test_missing_file_folder_and_other_files_are_named(tmp_path, onnx_model):
    with pytest.raises(FileNotFoundError, match="ONNX model not found: .*missing.onnx"):
        OnnxEmbedder(tmp_path / "missing.onnx")
    export = tmp_path / "export"
    export.mkdir()
    shutil.copy(onnx_model, export / "model.onnx")
    with pytest.raises(ValueError, match=r"not a folder: .*export; did you mean .*model\.onnx\?"):
        OnnxEmbedder(export)
    saved_model = tmp_path / "saved_model.pb"
    saved_model.write_bytes(b"\x08\x01\x12\x04not an onnx graph")
    with pytest.raises(ValueError, match=r"saved_model\.pb is not an ONNX model ONNX Runtime"):
        OnnxEmbedder(saved_model)


def test_the_command_line_says_it_in_one_line_and_knows_an_onnx_file(tmp_path, onnx_model, capsys):
    text = tmp_path / "in.txt"
    text.write_text("The bank .\nHi\n", encoding="utf-8")
    out = tmp_path / "out.hdf5"
    argv = ["embed", "--input", str(text), "--output", str(out)]
    for model in (tmp_path / "missing.onnx", tmp_path):  # a usage mistake: exit code 2
        assert main([*argv, "--backend", "onnx", "--model", str(model)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("elmo-keras embed: error: "), err
    assert main([*argv, "--model", str(onnx_model)]) == 0  # no --backend: the file says it
    with h5py.File(out, "r") as handle:
        assert sorted(handle) == ["0", "1"] and np.isfinite(handle["0"][...]).all()


def test_a_provider_this_onnxruntime_cannot_use_is_said(onnx_model):
    # ONNX Runtime alone falls back to the CPU with a log line (issue 29, point 7).
    with pytest.raises(ValueError, match=r"`providers` names \['CUDAExecutionProvider'\]"):
        OnnxEmbedder(onnx_model, providers=["CUDAExecutionProvider"])
    with pytest.warns(UserWarning, match="running on CPUExecutionProvider"):
        embedder = OnnxEmbedder(
            onnx_model, providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
        )
    assert embedder.embed([["Hi"]])[0].shape == (3, 1, 32)
