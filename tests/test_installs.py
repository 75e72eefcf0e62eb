"""`elmo_keras.installs`: what each part needs installed, named as the extra that brings it.

A module counts as missing when `sys.modules` holds `None` for it (`importlib.util.find_spec`
then finds nothing, and `import` fails), so these run in the full development environment.
The fresh environments with `[runtime]` and `[jax]` alone are tests/test_install.py's.
"""

import json
import sys

import elmo_keras.export
import pytest

import elmo_keras.beam
import elmo_keras.text
from elmo_keras import installs


@pytest.fixture
def no_backend_set(monkeypatch, tmp_path):
    """Keras not imported yet, no `KERAS_BACKEND`, an empty `KERAS_HOME` (no keras.json)."""
    monkeypatch.delitem(sys.modules, "keras")
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    return tmp_path


def test_a_jax_only_install_starts_keras_on_jax(no_backend_set, monkeypatch):
    import os

    monkeypatch.setitem(sys.modules, "tensorflow", None)
    assert installs.configured_backend() == "tensorflow"  # Keras' own default
    assert installs.fall_back_to_installed_backend() == "jax"
    assert os.environ["KERAS_BACKEND"] == "jax"
    installs.require_keras_backend()  # Keras and JAX are there: nothing to say


def test_a_module_an_import_hook_refuses_counts_as_missing(no_backend_set, monkeypatch):
    """A finder that raises for TensorFlow (as tests/jax_child.py's does, or a site's policy
    hook) makes it missing, not a traceback at `import elmo_keras`."""
    import importlib.abc

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == "tensorflow":
                raise ModuleNotFoundError(f"{name} is blocked")
            return None

    monkeypatch.delitem(sys.modules, "tensorflow")
    monkeypatch.setattr(sys, "meta_path", [Refuse(), *sys.meta_path])
    assert installs.is_installed("tensorflow") is False
    assert installs.is_installed("jax") is True
    assert installs.fall_back_to_installed_backend() == "jax"


def test_no_fallback_where_a_choice_was_made_or_tensorflow_is_there(no_backend_set, monkeypatch):
    assert installs.fall_back_to_installed_backend() is None  # TensorFlow is installed
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    (no_backend_set / "keras.json").write_text(json.dumps({"backend": "torch"}))
    assert installs.configured_backend() == "torch"
    assert installs.fall_back_to_installed_backend() is None
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    assert installs.fall_back_to_installed_backend() is None
    import os

    assert os.environ["KERAS_BACKEND"] == "tensorflow"


def test_no_keras_or_no_backend_is_one_line_naming_the_extras(no_backend_set, monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)
    monkeypatch.setitem(sys.modules, "tensorflow", None)
    with pytest.raises(ModuleNotFoundError) as error:
        installs.require_keras_backend()  # Keras would start on TensorFlow, not installed
    assert error.value.name == "tensorflow"
    assert str(error.value) == (
        "Keras is set to the 'tensorflow' backend (KERAS_BACKEND or keras.json), which is not "
        'installed: pip install "elmo-keras[tensorflow]"'
    )
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    with pytest.raises(ModuleNotFoundError, match=r'pip install "elmo-keras\[jax\]"$'):
        installs.require_keras_backend()
    monkeypatch.setitem(sys.modules, "keras", None)  # the `[runtime]` install: no Keras at all
    with pytest.raises(ModuleNotFoundError) as error:
        installs.require_keras_backend()
    assert str(error.value) == (
        "elmo-keras's layers and models need Keras and a backend: "
        'pip install "elmo-keras[tensorflow]" (or "elmo-keras[jax]")'
    )


@pytest.mark.parametrize(
    "package, name, module, extra",
    [
        (elmo_keras.export, "export_onnx", "tensorflow", "onnx"),
        (elmo_keras.export, "export_savedmodel", "tensorflow", "tensorflow"),
        (elmo_keras.beam, "EmbedLines", "apache_beam", "beam"),
        (elmo_keras.beam, "read_embeddings", "tensorflow", "tensorflow"),
        (elmo_keras.text, "tf_tokenization", "tensorflow", "tensorflow"),
    ],
)
def test_public_names_name_the_extra_they_need(monkeypatch, package, name, module, extra):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ModuleNotFoundError) as error:
        package.__getattr__(name)
    assert error.value.name == module
    assert str(error.value) == (
        f"{package.__name__}.{name} needs {module}, which is not installed: "
        f'pip install "elmo-keras[{extra}]"'
    )
