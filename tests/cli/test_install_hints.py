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
