"""What is installed, and the extra that installs what is missing (pyproject.toml's extras).

Installs go by backend, as Keras 3's do: the base install (NumPy, h5py) has neither Keras nor a
backend, `[tensorflow]` and `[jax]` bring Keras with one, `[runtime]` only ONNX Runtime for the
client, `[onnx]` TensorFlow and the converter for export, `[beam]` Apache Beam. `require_module`
and `require_keras_backend` turn a missing one into one `ModuleNotFoundError` line naming the
extra (the command line prints it as is), and `fall_back_to_installed_backend` lets a JAX-only
install run without setting `KERAS_BACKEND` (Keras' own default, TensorFlow, is not there).
Nothing here imports Keras or a backend: modules are found with `importlib.util.find_spec`.
"""

import importlib.util
import json
import os
import sys

# The extra (pyproject.toml) that installs each Keras backend, with Keras.
BACKEND_EXTRAS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}


def install_hint(extra):
    """`pip install "elmo-keras[extra]"`, the line that installs an extra."""
    return f'pip install "elmo-keras[{extra}]"'


def is_installed(module):
    """Whether a top-level module can be imported, found without importing it (an import
    hook that refuses the module, as a test's does, counts as not installed)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def require_module(module, owner, extra):
    """Raises a `ModuleNotFoundError` naming `extra` unless `module` is installed.

    Args:
        module: str. A top-level module, e.g. `"tensorflow"`.
        owner: str. What needs it, for the message (a function, a class, a command's flag).
        extra: str. The extra of pyproject.toml that installs it, e.g. `"tensorflow"`.

    Example:
    >>> require_module("numpy", "elmo_keras.text", "runtime")  # installed: nothing happens
    """
    if not is_installed(module):
        raise ModuleNotFoundError(
            f"{owner} needs {module}, which is not installed: {install_hint(extra)}",
            name=module,
        )


def configured_backend():
    """The backend Keras will start on: `KERAS_BACKEND`, else `keras.json`'s (in `KERAS_HOME`,
    else `~/.keras`), else Keras' default `"tensorflow"`."""
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as handle:
            return str(json.load(handle).get("backend") or "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


def fall_back_to_installed_backend():
    """Sets `KERAS_BACKEND=jax` when Keras would start on TensorFlow, TensorFlow is not
    installed and JAX is (`pip install "elmo-keras[jax]"`).

    Does nothing once Keras is imported, when `KERAS_BACKEND` is set, or when the configured
    backend is installed.

    Returns:
        `"jax"` when it set the backend, else `None`.
    """
    if sys.modules.get("keras") is not None or os.environ.get("KERAS_BACKEND"):
        return None
    if configured_backend() != "tensorflow" or is_installed("tensorflow"):
        return None
    if not is_installed("jax"):
        return None
    os.environ["KERAS_BACKEND"] = "jax"
    return "jax"


def require_keras_backend():
    """Raises one `ModuleNotFoundError` line naming the extras unless Keras and the backend
    it will start on are installed (run before this package first imports Keras).

    Example:
    >>> require_keras_backend()  # Keras and its backend are installed: nothing happens
    """
    if sys.modules.get("keras") is not None:
        return
    fall_back_to_installed_backend()
    if not is_installed("keras"):
        raise ModuleNotFoundError(
            "elmo-keras's layers and models need Keras and a backend: "
            f'{install_hint("tensorflow")} (or "elmo-keras[jax]")',
            name="keras",
        )
    backend = configured_backend()
    if backend in BACKEND_EXTRAS and not is_installed(backend):
        raise ModuleNotFoundError(
            f"Keras is set to the {backend!r} backend (KERAS_BACKEND or keras.json), which is "
            f"not installed: {install_hint(BACKEND_EXTRAS[backend])}",
            name=backend,
        )
