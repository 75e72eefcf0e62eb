"""A command whose optional dependency is missing prints one line naming the extra (exit 2)."""

import sys

import pytest

from elmo_keras.cli import main, missing_extra_message


@pytest.mark.parametrize(
    "module, extra",
    [
        ("tensorflow", "tensorflow"),
        ("tensorflow_text", "tensorflow"),
        ("keras", "tensorflow"),
        ("jax", "jax"),
        ("apache_beam", "beam"),
    ],
)
def test_each_optional_module_names_its_extra(module, extra):
    error = ModuleNotFoundError(f"No module named {module!r}", name=module)
    assert missing_extra_message(error) == (
        f'{module} is not installed: pip install "elmo-keras[{extra}]"'
    )


@pytest.mark.parametrize("fmt, extra", [("all", "onnx"), ("savedmodel", "tensorflow")])
def test_export_without_tensorflow_is_one_line(tmp_path, capsys, monkeypatch, fmt, extra):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as if it were not installed
    output = tmp_path / "out"
    args = ["export", "--preset", "tiny", "--format", fmt, "--output", str(output)]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        f"elmo-keras export: error: --format {fmt} needs tensorflow, which is not installed: "
        f'pip install "elmo-keras[{extra}]"\n'
    )
    assert not output.exists()


@pytest.mark.parametrize("command", ["embed", "train"])
@pytest.mark.parametrize("backend", ["jax", "tensorflow"])
def test_a_backend_flag_whose_backend_is_missing_names_it(
    tmp_path, capsys, monkeypatch, command, backend
):
    """`--backend jax` where JAX is not installed: one line naming the flag and the extra,
    not KERAS_BACKEND or keras.json (which the user did not set)."""
    monkeypatch.setitem(sys.modules, backend, None)  # as if it were not installed
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    (tmp_path / "in.txt").write_text("a b c\n", encoding="utf-8")
    inputs = {
        "embed": ["--preset", "tiny", "--input", str(tmp_path / "in.txt")],
        "train": ["--train", str(tmp_path / "in.txt"), "--steps", "1"],
    }[command]
    args = [command, "--backend", backend, *inputs, "--output", str(tmp_path / "out")]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        f"elmo-keras {command}: error: --backend {backend}: {backend} is not installed: "
        f'pip install "elmo-keras[{backend}]"\n'
    )
    assert not (tmp_path / "out").exists()


def test_keras_backend_torch_without_torch_is_one_line(monkeypatch):
    from elmo_keras.installs import require_keras_backend

    monkeypatch.delitem(sys.modules, "keras")  # as before Keras' first import (restored after)
    monkeypatch.setitem(sys.modules, "torch", None)  # as if it were not installed
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    with pytest.raises(ModuleNotFoundError) as error:
        require_keras_backend()
    assert str(error.value) == (
        "Keras is set to the 'torch' backend (KERAS_BACKEND or keras.json), which is not "
        'installed: pip install "elmo-keras[torch]"'
    )
    assert missing_extra_message(ModuleNotFoundError("x", name="torch")) == (
        'torch is not installed: pip install "elmo-keras[torch]"'
    )


def test_train_and_export_under_torch_name_what_works(tmp_path, capsys, monkeypatch):
    """Both need TensorFlow or JAX: one line before any work (no vocabulary, no folder)."""
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    data = tmp_path / "data.txt"
    data.write_text("the bank closed .\n", encoding="utf-8")
    out = tmp_path / "run"
    assert main(["train", "--train", str(data), "--output", str(out), "--steps", "1"]) == 2
    assert capsys.readouterr().err == (
        "elmo-keras train: error: train runs on tensorflow or jax, not on Keras' 'torch' "
        "backend (KERAS_BACKEND): use --backend jax (or tensorflow)\n"
    )
    assert not out.exists()
    args = ["export", "--preset", "tiny", "--format", "onnx", "--output", str(out)]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "elmo-keras export: error: export runs on tensorflow, not on Keras' 'torch' backend "
        "(KERAS_BACKEND): it traces the model there; set KERAS_BACKEND=tensorflow\n"
    )
    assert not out.exists()
