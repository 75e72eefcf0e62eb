"""One exit-code rule for every command (issue 29, point 8): 2 for a usage mistake, a file or
folder named by a flag that is missing or of the wrong kind included; 1 for a failure, such as
a file that is there but cannot be read as what it should be. Each is one line on stderr."""

import pytest

from elmo_keras.cli import main


def _one_line(capsys, command):
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"elmo-keras {command}: error: ") and "\n" not in err, err
    return err


MODEL_FILE_CASES = [  # (flag, what it names, the message)
    ("--options", "missing", "--options: file not found: "),
    ("--weights", "missing", "--weights: file not found: "),
    ("--options", "folder", "--options must be a file, not a folder. Received: "),
]


@pytest.mark.parametrize("command", ["embed", "export"])
def test_a_model_file_named_by_a_flag_is_a_usage_error(command, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    for flag, kind, message in MODEL_FILE_CASES:
        files = {"--options": text, "--weights": text}  # there, never read: the check is first
        files[flag] = tmp_path / "nope" if kind == "missing" else tmp_path
        argv = [command, "--options", str(files["--options"])]
        argv += ["--weights", str(files["--weights"])]
        if command == "embed":
            argv += ["--input", str(text), "--output", str(tmp_path / "out.hdf5")]
        else:
            argv += ["--output", str(tmp_path / "export")]
        assert main(argv) == 2, (flag, kind)
        assert message in _one_line(capsys, command)
        assert not (tmp_path / "out.hdf5").exists() and not (tmp_path / "export").exists()


def test_a_training_file_named_by_a_flag_is_a_usage_error(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    argv = ["train", "--train", str(text), "--output", str(tmp_path / "run"), "--steps", "1"]
    partner = {"--init-options": "--init-weights", "--init-weights": "--init-options"}
    for flag in ("--vocab", "--init-options", "--init-weights"):
        given = [flag, str(tmp_path / "nope")]
        if flag in partner:  # the other file of the pair is there
            given += [partner[flag], str(text)]
        assert main([*argv, *given]) == 2, flag
        assert f"{flag}: file not found: " in _one_line(capsys, "train")
        assert not (tmp_path / "run").exists()


def test_an_onnx_model_path_that_is_missing_or_a_folder_is_a_usage_error(tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    argv = ["embed", "--input", str(text), "--output", str(tmp_path / "out.hdf5")]
    for model, message in [
        (tmp_path / "missing.onnx", "--model: ONNX model not found: "),  # .onnx: no --backend
        (tmp_path, "--model: `model_path` must be an .onnx file, not a folder: "),
    ]:
        assert main([*argv, "--backend", "onnx", "--model", str(model)]) == 2
        assert message in _one_line(capsys, "embed")
    assert main([*argv, "--model", str(tmp_path / "MISSING.ONNX")]) == 2  # any case
    assert "ONNX model not found" in _one_line(capsys, "embed")
    # A file that is there but is no ONNX model is a failure (1), still one line.
    saved_model = tmp_path / "saved_model.pb"
    saved_model.write_bytes(b"\x08\x01\x12\x04not an onnx graph")
    assert main([*argv, "--backend", "onnx", "--model", str(saved_model)]) == 1
    assert "is not an ONNX model ONNX Runtime can load" in _one_line(capsys, "embed")
    assert not (tmp_path / "out.hdf5").exists()


def test_an_export_folder_given_to_the_keras_backend_points_to_its_onnx_model(tmp_path, capsys):
    export = tmp_path / "export"
    export.mkdir()
    (export / "options.json").write_text("{}", encoding="utf-8")
    (export / "model.onnx").write_bytes(b"the check only looks for the file")
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    argv = ["embed", "--model", str(export), "--input", str(text)]
    assert main([*argv, "--output", str(tmp_path / "out.hdf5")]) == 2
    assert f"(for its ONNX model: --model {export / 'model.onnx'})" in _one_line(capsys, "embed")


@pytest.fixture
def fifo(tmp_path):
    """A FIFO nobody writes to. Should a command open it, a helper thread opens its other end
    and closes it at once (an empty file), so that the test fails instead of hanging."""
    import os
    import threading

    path = tmp_path / "fifo"
    os.mkfifo(path)
    done = threading.Event()

    def release_readers():
        while not done.wait(0.2):
            try:  # succeeds only while a reader waits in `open`
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    thread = threading.Thread(target=release_readers, daemon=True)
    thread.start()
    yield path
    done.set()
    thread.join()


def test_a_fifo_or_a_device_named_by_a_file_flag_is_refused_before_it_is_opened(
    tmp_path, fifo, capsys
):
    """Issue 39, point 12: opening a FIFO waits for a writer and a device never ends: every
    file flag refuses both in one line, exit 2, without opening them."""
    text = tmp_path / "in.txt"
    text.write_text("a b\n", encoding="utf-8")
    model = tmp_path / "model"
    model.mkdir()
    out = str(tmp_path / "out.hdf5")
    embed = ["embed", "--input", str(text), "--output", out]
    train = ["train", "--train", str(text), "--output", str(tmp_path / "run"), "--steps", "1"]
    cases = [  # (argv, the flag named)
        ([*embed, "--options", "FILE", "--weights", str(text)], "--options"),
        ([*embed, "--options", str(text), "--weights", "FILE"], "--weights"),
        ([*embed, "--backend", "onnx", "--model", "FILE"], "--model"),
        (["export", "--options", "FILE", "--weights", str(text), "--output", out], "--options"),
        (["dump-token-embeddings", "--vocab", "FILE", "--output", out], "--vocab"),
        ([*train, "--vocab", "FILE"], "--vocab"),
        ([*train, "--init-options", "FILE", "--init-weights", str(text)], "--init-options"),
        ([*train, "--init-options", str(text), "--init-weights", "FILE"], "--init-weights"),
        (
            ["evaluate", "--model", str(model), "--data", str(text), "--basis-vocab", "FILE"],
            "--basis-vocab",
        ),
    ]
    for argv, flag in cases:
        for special, kind in ((fifo, "a FIFO (named pipe)"), ("/dev/zero", "a device")):
            command = [str(special) if a == "FILE" else a for a in argv]
            assert main(command) == 2, command
            message = f"{flag} must be a regular file, not {kind}. Received: {special}"
            assert message in _one_line(capsys, argv[0]), command
    assert not any(p.name.startswith(("out", "run")) for p in tmp_path.iterdir())


def test_the_library_refuses_a_fifo_or_a_device_as_options_or_vocabulary(fifo):
    """Issue 39, point 12: `read_options` and `Vocabulary.load` (which read the files of a
    model folder) refuse a FIFO or a device before opening it."""
    from elmo_keras.options import read_options
    from elmo_keras.text.vocabulary import Vocabulary

    for read, what in ((read_options, "options file"), (Vocabulary.load, "vocabulary file")):
        with pytest.raises(ValueError, match=f"^{what} {fifo} is not a regular file \\(a FIFO"):
            read(fifo)
        with pytest.raises(ValueError, match=f"^{what} /dev/zero is not a regular file \\(a dev"):
            read("/dev/zero")


def test_text_that_is_not_utf8_is_one_rule_for_every_command(tmp_path, capsys):
    """Issue 39, point 18: `train`, `evaluate` and `embed` refuse a file that is not UTF-8 alike:
    one line naming the file, the byte and the line, exit 1, before any work (`train` and
    `evaluate` replaced the bytes silently; `embed` refused them with exit 2)."""
    text = tmp_path / "latin1.txt"
    text.write_bytes("ok\nstill ok\ncaf\xe9 au lait\n".encode("latin-1"))
    where = "is not UTF-8 text (invalid continuation byte at byte 15, line 3); convert it first"
    run = tmp_path / "run"
    commands = {
        "train": (["--train", str(text), "--output", str(run), "--steps", "1"], "training text"),
        "evaluate": (["--model", str(tmp_path), "--data", str(text)], "--data"),
        "embed": (["--preset", "tiny", "--input", str(text), "--output", str(run)], "input"),
    }
    for command, (argv, what) in commands.items():
        assert main([command, *argv]) == 1, command
        assert f"{what} file {text} {where}" in _one_line(capsys, command)
        assert not run.exists()
