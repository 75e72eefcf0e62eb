"""`elmo-keras export` and the atomic export folder: layout, overwrite rules, failures."""

import json

import numpy as np
import pytest
from elmo_keras.export import writer

from elmo_keras.cli import main
from elmo_keras.text.char_ids import batch_to_char_ids


def _leftovers(parent, name):
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


def test_cli_writes_onnx_and_int8_from_a_run_dir(fixture_bilms, tmp_path, capsys):
    entry = fixture_bilms["bilm_tf"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "options.json").write_bytes(entry["options"].read_bytes())
    (run_dir / "lm_weights.hdf5").write_bytes(entry["weights"].read_bytes())
    output = tmp_path / "out"
    code = main(["export", "--run-dir", str(run_dir), "--output", str(output),
                 "--format", "onnx", "--quantize"])
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in output.iterdir()) == [
        "export.json", "model.int8.onnx", "model.onnx", "options.json"
    ]
    manifest = json.loads((output / "export.json").read_text())
    assert manifest["files"] == {"onnx": "model.onnx", "onnx_int8": "model.int8.onnx"}
    assert _leftovers(tmp_path, "out") == []

    from elmo_keras.runtime import OnnxEmbedder

    (layers,) = OnnxEmbedder(output / "model.onnx").embed([["Hello", "world"]])
    expected = entry["bilm"](batch_to_char_ids([["Hello", "world"]]))["activations"]
    np.testing.assert_allclose(layers, np.asarray(expected)[0], atol=1e-5)


def test_cli_refuses_existing_output_without_overwrite(fixture_bilms, tmp_path, capsys):
    entry = fixture_bilms["bilm_tf"]
    output = tmp_path / "out"
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    args = ["export", "--options", str(entry["options"]), "--weights", str(entry["weights"]),
            "--output", str(output), "--format", "savedmodel"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert str(output) in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert (output / "keep.txt").read_text() == "mine"

    assert main([*args, "--overwrite"]) == 0
    assert not (output / "keep.txt").exists()
    assert (output / "savedmodel" / "saved_model.pb").is_file()
    assert (output / "options.json").is_file()
    assert _leftovers(tmp_path, "out") == []


@pytest.mark.parametrize("existing", [False, True])
def test_failed_export_leaves_nothing_half_written(fixture_bilms, tmp_path, monkeypatch, existing):
    entry = fixture_bilms["bilm_tf"]
    output = tmp_path / "out"
    if existing:
        output.mkdir()
        (output / "keep.txt").write_text("old export")
    written = []

    def fail(bilm, path, **kwargs):
        written.extend(p.name for p in path.parent.iterdir())  # the first steps did run
        raise RuntimeError("injected failure")

    import elmo_keras.export.onnx

    monkeypatch.setattr(elmo_keras.export.onnx, "export_onnx", fail)
    with pytest.raises(RuntimeError, match="injected failure"):
        writer.export_model(entry["options"], entry["weights"], output, formats=("onnx",),
                            overwrite=existing)
    assert "options.json" in written
    if existing:
        assert sorted(p.name for p in output.iterdir()) == ["keep.txt"]
    else:
        assert not output.exists()
    assert _leftovers(tmp_path, "out") == []


def test_atomic_directory_replaces_only_on_success(tmp_path):
    output = tmp_path / "dir"
    with writer.atomic_directory(output) as staging:
        (staging / "a").write_text("1")
        assert not output.exists()
    assert (output / "a").read_text() == "1"
    with pytest.raises(FileExistsError, match="already exists"):
        with writer.atomic_directory(output):
            pass
    with pytest.raises(KeyboardInterrupt):
        with writer.atomic_directory(output, overwrite=True) as staging:
            (staging / "b").write_text("2")
            raise KeyboardInterrupt
    assert sorted(p.name for p in output.iterdir()) == ["a"]
    with writer.atomic_directory(output, overwrite=True) as staging:
        (staging / "b").write_text("2")
    assert sorted(p.name for p in output.iterdir()) == ["b"]
    assert _leftovers(tmp_path, "dir") == []


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--format", "savedmodel", "--quantize"], "need --format onnx or all"),
        (["--opset", "13"], "--opset must be 17 or newer"),
        (["--run-dir", "nowhere"], "not both"),
    ],
)
def test_cli_argument_errors(fixture_bilms, tmp_path, capsys, extra, message):
    entry = fixture_bilms["bilm_tf"]
    args = ["export", "--options", str(entry["options"]), "--weights", str(entry["weights"]),
            "--output", str(tmp_path / "out"), *extra]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_cli_missing_inputs(tmp_path, capsys):
    assert main(["export", "--output", str(tmp_path / "o")]) == 2
    assert "give --options and --weights" in capsys.readouterr().err
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "options.json").write_text("{}")
    run_dir_args = ["export", "--run-dir", str(tmp_path / "run"), "--output", str(tmp_path / "o")]
    assert main(run_dir_args) == 2
    assert "no weights file" in capsys.readouterr().err
    code = main(["export", "--options", str(tmp_path / "none.json"), "--weights",
                 str(tmp_path / "none.hdf5"), "--output", str(tmp_path / "o")])
    assert code == 1
    assert "`options_path` is not a file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
