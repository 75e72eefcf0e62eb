"""`elmo-keras export` and the atomic export folder: layout, overwrite rules, failures."""

import json
import pathlib
import sys

import numpy as np
import pytest
from elmo_keras.export import writer
from export_helpers import leftovers

from elmo_keras.cli import main
from elmo_keras.text.char_ids import batch_to_char_ids


def test_cli_writes_onnx_and_int8_from_a_run_dir(fixture_bilms, tmp_path, capsys, monkeypatch):
    """Paths as typed (relative ones, an output whose folders are missing and made): export.json
    records the source files as absolute paths, valid from any folder."""
    entry = fixture_bilms["bilm_tf"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "options.json").write_bytes(entry["options"].read_bytes())
    (run_dir / "lm_weights.hdf5").write_bytes(entry["weights"].read_bytes())
    output = tmp_path / "exports" / "out"
    monkeypatch.chdir(tmp_path)
    code = main(
        [
            "export",
            "--run-dir",
            "run",
            "--output",
            "exports/out",
            "--format",
            "onnx",
            "--quantize",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in output.iterdir()) == [
        "export.json",
        "model.int8.onnx",
        "model.onnx",
        "options.json",
    ]
    manifest = json.loads((output / "export.json").read_text())
    assert manifest["files"] == {"onnx": "model.onnx", "onnx_int8": "model.int8.onnx"}
    assert manifest["options"] == str((run_dir / "options.json").resolve())
    assert manifest["weights"] == str((run_dir / "lm_weights.hdf5").resolve())
    assert leftovers(output.parent, "out") == []

    from elmo_keras.runtime import OnnxEmbedder

    (layers,) = OnnxEmbedder(output / "model.onnx").embed([["Hello", "world"]])
    expected = entry["bilm"](batch_to_char_ids([["Hello", "world"]]))["activations"]
    np.testing.assert_allclose(layers, np.asarray(expected)[0], atol=1e-5)


# export.json as 0.1.0 wrote it (the same keys since): what marks an earlier export.
OLD_MANIFEST = {
    "producer": "elmo-keras",
    "elmo_keras_version": "0.1.0",
    "options": "options.json",
    "weights": "lm_weights.hdf5",
    "files": {"onnx": "model.onnx"},
    "opset": 17,
}


def test_cli_overwrite_replaces_only_an_earlier_export(
    fixture_bilms, tmp_path, capsys, monkeypatch
):
    """Issue 39, point 1: `--overwrite` replaced whatever folder it was given: `export --run-dir
    R --output R --overwrite` left R holding only the export (checkpoints, training_config.json,
    vocab.txt, logs gone), `--output . --overwrite` deleted the working folder's files. Now only
    an earlier export (export.json of elmo-keras, its files only; 0.1.0's too) is replaced;
    anything else is one line naming the folder and what it holds, exit 1 (as for a file in
    its place), nothing touched."""
    entry = fixture_bilms["bilm_tf"]
    output = tmp_path / "out"
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    source = ["--options", str(entry["options"]), "--weights", str(entry["weights"])]
    args = ["export", *source, "--output", str(output), "--format", "savedmodel"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert str(output) in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert main([*args, "--overwrite"]) == 1
    err = capsys.readouterr().err.strip()
    assert f"{output} is not an export folder (it holds keep.txt)" in err, err
    assert len(err.splitlines()) == 1 and (output / "keep.txt").read_text() == "mine"

    run = tmp_path / "run"  # a training run's folder, exported into itself
    (run / "checkpoints").mkdir(parents=True)
    for name in ("training_config.json", "vocab.txt", ".run.lock"):
        (run / name).write_text(name)
    (run / "options.json").write_bytes(entry["options"].read_bytes())
    (run / "lm_weights.hdf5").write_bytes(entry["weights"].read_bytes())
    before = sorted(p.name for p in run.iterdir())
    assert main(["export", "--run-dir", str(run), "--output", str(run), "--overwrite"]) == 1
    err = capsys.readouterr().err.strip()
    assert f"{run} holds the input {run / 'options.json'}" in err, err
    assert sorted(p.name for p in run.iterdir()) == before
    monkeypatch.chdir(output)  # the working folder
    assert main(["export", *source, "--output", ".", "--overwrite"]) == 1
    assert ". is the working folder; it is never replaced" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    assert main(["export", *source, "--output", "run", "--overwrite"]) == 1
    assert "run is not an export folder (it holds .run.lock, che" in capsys.readouterr().err
    assert sorted(p.name for p in run.iterdir()) == before and (output / "keep.txt").exists()

    (output / "keep.txt").unlink()  # an export of 0.1.0: replaced
    (output / "model.onnx").write_bytes(b"old")
    (output / "export.json").write_text(json.dumps(OLD_MANIFEST))
    assert main([*args, "--overwrite"]) == 0
    assert sorted(p.name for p in output.iterdir()) == ["export.json", "options.json", "savedmodel"]
    assert (output / "savedmodel" / "saved_model.pb").is_file()
    assert leftovers(tmp_path, "out") == []


@pytest.mark.parametrize("existing", [False, True])
def test_failed_export_leaves_nothing_half_written(fixture_bilms, tmp_path, monkeypatch, existing):
    entry = fixture_bilms["bilm_tf"]
    output = tmp_path / "out"
    if existing:
        output.mkdir()
        (output / "export.json").write_text(json.dumps(OLD_MANIFEST))
    written = []

    def fail(bilm, path, **kwargs):
        written.extend(p.name for p in path.parent.iterdir())  # the first steps did run
        raise RuntimeError("injected failure")

    import elmo_keras.export.onnx

    monkeypatch.setattr(elmo_keras.export.onnx, "export_onnx", fail)
    with pytest.raises(RuntimeError, match="injected failure"):
        writer.export_model(
            entry["options"], entry["weights"], output, formats=("onnx",), overwrite=existing
        )
    assert "options.json" in written
    if existing:
        assert sorted(p.name for p in output.iterdir()) == ["export.json"]
        assert json.loads((output / "export.json").read_text()) == OLD_MANIFEST
    else:
        assert not output.exists()
    assert leftovers(tmp_path, "out") == []


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
    assert leftovers(tmp_path, "dir") == []


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
    args = [
        "export",
        "--options",
        str(entry["options"]),
        "--weights",
        str(entry["weights"]),
        "--output",
        str(tmp_path / "out"),
        *extra,
    ]
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
    code = main(
        [
            "export",
            "--options",
            str(tmp_path / "none.json"),
            "--weights",
            str(tmp_path / "none.hdf5"),
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2  # a file named by a flag that is missing: a usage mistake
    assert "--options: file not found" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_progress_reports_each_stage(fixture_bilms, tmp_path, monkeypatch):
    """`progress(stage, None)` when a stage starts, `progress(stage, seconds)` when it ends."""
    import elmo_keras.export.onnx
    import elmo_keras.export.savedmodel

    entry = fixture_bilms["bilm_tf"]

    def fake(bilm_or_source, path, **kwargs):  # the real ones are tested elsewhere
        pathlib.Path(path).write_text("x")

    monkeypatch.setattr(elmo_keras.export.savedmodel, "export_savedmodel", fake)
    monkeypatch.setattr(elmo_keras.export.onnx, "export_onnx", fake)
    monkeypatch.setattr(elmo_keras.export.onnx, "quantize_onnx", fake)
    events = []
    writer.export_model(
        entry["options"],
        entry["weights"],
        tmp_path / "out",
        onnx_state=True,
        quantize=True,
        progress=lambda stage, seconds: events.append((stage, seconds)),
    )
    stages = ["loading weights", "SavedModel", "ONNX", "ONNX stateful", "int8"]
    assert [stage for stage, _ in events] == [s for s in stages for _ in range(2)]
    assert all(seconds is None for _, seconds in events[::2])
    assert all(seconds >= 0.0 for _, seconds in events[1::2])


def test_cli_print_stage(capsys):
    from elmo_keras.cli import print_stage

    print_stage("SavedModel", None)
    print_stage("SavedModel", 12.14)
    assert capsys.readouterr().err == "SavedModel ... 12.1 s\n"


@pytest.mark.parametrize("missing", ["tf2onnx", "onnx", "onnxruntime"])
def test_missing_onnx_extra_is_one_line_before_any_work(
    fixture_bilms, tmp_path, capsys, monkeypatch, missing
):
    entry = fixture_bilms["bilm_tf"]
    monkeypatch.setitem(sys.modules, missing, None)  # as if it were not installed
    output = tmp_path / "out"
    args = ["export", "--options", str(entry["options"]), "--weights", str(entry["weights"])]
    assert main([*args, "--output", str(output)]) == 2  # --format all, the default
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install "elmo-keras[onnx]"' in err[0] and missing in err[0]
    assert not output.exists() and leftovers(tmp_path, "out") == []
    with pytest.raises(ModuleNotFoundError, match=r"elmo-keras\[onnx\]"):
        writer.export_model(entry["options"], entry["weights"], output, formats="onnx")
    assert not output.exists()


def test_missing_extra_message():
    from elmo_keras.cli import missing_extra_message

    error = ModuleNotFoundError("No module named 'onnxruntime'", name="onnxruntime")
    assert missing_extra_message(error) == (
        'onnxruntime is not installed: pip install "elmo-keras[runtime]"'
    )
    assert missing_extra_message(ModuleNotFoundError("x", name="no_such_module")) is None


# Issue 12, D11: the output's problems found before the work (killed exports, stale staging
# folders: test_writer_interrupted.py).


def test_output_problems_are_found_before_the_export(fixture_bilms, tmp_path, capsys):
    # Issue 12, D11: before any model is loaded, one line naming the path.
    entry = fixture_bilms["bilm_tf"]
    (tmp_path / "file").write_text("x")
    args = ["export", "--options", str(entry["options"]), "--weights", str(entry["weights"])]
    for output, message in [
        (tmp_path / "file", f"'{tmp_path}/file' is not a directory; only one is replaced"),
        (tmp_path / "file" / "out", f"cannot create {tmp_path}/file/out: {tmp_path}/file is"),
    ]:
        assert main([*args, "--output", str(output), "--overwrite"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    assert (tmp_path / "file").read_text() == "x"
