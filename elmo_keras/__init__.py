"""elmo-keras: ELMo (Peters et al. 2018) as Keras 3 layers, on TensorFlow and JAX.

Importing this package is cheap and imports neither TensorFlow nor Keras: the layers and models
load on first use (`elmo_keras.layers.CharCNN`, `elmo_keras.models.BiLM`), and
`elmo_keras.runtime` (the ONNX Runtime client) never imports TensorFlow at all.

`.keras` files: Keras finds a custom class by its registered name (`elmo_keras>BiLM`), which exists
only once the module defining the class has run. So that `import elmo_keras` is enough to load a
saved model, the classes are registered as soon as Keras is there (`LanguageModel`, the
trainers' model, included): at once if Keras is already imported, otherwise
right after Keras' own import finishes (a small import hook, `_RegisterWithKeras`). Nothing here
imports Keras or TensorFlow itself.
"""

import importlib
import sys
import warnings

from elmo_keras.installs import fall_back_to_installed_backend

__version__ = "0.3.0"

# The modules defining the classes registered with
# `keras.saving.register_keras_serializable(package="elmo_keras")`.
KERAS_CLASS_MODULES = ("elmo_keras.layers", "elmo_keras.models", "elmo_keras.models.language_model")


def register_keras_classes():
    """Registers every elmo-keras layer and model with Keras (imports Keras, and TensorFlow
    when it is the backend)."""
    for name in KERAS_CLASS_MODULES:  # the layers come first, and import Keras
        importlib.import_module(name)


def _register_if_keras_is_loaded():
    """Registers the classes if Keras has been imported; `True` if it has."""
    if "keras" not in sys.modules:
        return False
    try:
        register_keras_classes()
    except Exception as error:  # noqa: BLE001 (never break the import that brought Keras in)
        warnings.warn(f"elmo-keras could not register its Keras classes: {error!r}", stacklevel=3)
    return True


class _RegisterWithKeras:
    """A `sys.meta_path` finder that registers the classes once `keras` has been imported.

    It finds nothing itself: for `keras` and this package's submodules it asks the other
    finders, and wraps the loader they return. The registration runs when the outermost of
    those imports finishes, because Keras is often first imported from inside one of this
    package's modules (`elmo_keras.layers.char_cnn`), and importing `elmo_keras.models` while
    `elmo_keras.layers` is half-initialised would fail. Then the finder removes itself.
    """

    def __init__(self):
        self.depth = 0  # watched imports under way

    def find_spec(self, name, path=None, target=None):
        if name != "keras" and not name.startswith(f"{__name__}."):
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    if hasattr(spec.loader, "exec_module"):
                        spec.loader = _WatchedLoader(spec.loader, self)
                    return spec
        return None

    def finished(self):
        if self.depth == 0 and "keras" in sys.modules and self in sys.meta_path:
            sys.meta_path.remove(self)
            _register_if_keras_is_loaded()


class _WatchedLoader:
    """Runs a module through its real loader, then tells the finder that it has finished."""

    def __init__(self, loader, finder):
        self.loader, self.finder = loader, finder

    def __getattr__(self, name):  # anything else a loader offers (e.g. get_resource_reader)
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader  # leave no trace behind
        self.finder.depth += 1
        try:
            self.loader.exec_module(module)
        finally:
            self.finder.depth -= 1
        self.finder.finished()


# A JAX-only install (`pip install "elmo-keras[jax]"`) runs without setting KERAS_BACKEND:
# Keras' default backend, TensorFlow, is not there (`elmo_keras.installs`; imports nothing).
fall_back_to_installed_backend()

if not _register_if_keras_is_loaded() and not any(
    type(finder).__name__ == "_RegisterWithKeras" for finder in sys.meta_path
):
    sys.meta_path.insert(0, _RegisterWithKeras())
