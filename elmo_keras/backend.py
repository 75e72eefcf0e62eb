"""Which Keras backend runs, and the one check of the parts that need TensorFlow.

The layers and models are written with `keras.ops` and run on every Keras 3 backend. A few
parts are TensorFlow by nature: string inputs (`ElmoEmbedding(input_type="tokens" or
"sentences")`), the `LanguageModel` trainer, SavedModel and ONNX export. They call
`require_tensorflow_backend` first, so that another backend gets one clear line instead of a
TensorFlow tensor in a JAX program. Keras is imported inside the functions: this module is on
the package's lowest floor (docs/architecture.md).

On the command line, `embed`, `dump-token-embeddings`, `evaluate`, `snapshot`, `demo` and `train`
(its own JAX trainer) run on JAX too (`--backend jax`, or a `[jax]` install, where Keras starts
on JAX); `export` traces the model on TensorFlow; `embed --backend onnx` needs ONNX Runtime only.

What must be installed for each part, and the extras that install it, is `installs.py`.
"""

from elmo_keras.installs import install_hint, is_installed


def keras_backend():
    """The name of the running Keras backend (`"tensorflow"`, `"jax"`, ...)."""
    import keras  # noqa: PLC0415

    return keras.config.backend()


def require_tensorflow_backend(owner):
    """Raises a `RuntimeError` unless Keras runs on the TensorFlow backend.

    Args:
        owner: str. What needs TensorFlow, for the message (a class, or a class and the argument
            that asked for it).

    Example:
    >>> require_tensorflow_backend("LanguageModel")  # nothing happens on TensorFlow
    """
    backend = keras_backend()
    if backend != "tensorflow":
        installed = "" if is_installed("tensorflow") else f" ({install_hint('tensorflow')})"
        raise RuntimeError(
            f"`{owner}` needs the TensorFlow backend (KERAS_BACKEND=tensorflow){installed}; "
            f"received backend {backend!r}. The layers, `BiLM`, `ElmoEmbedding` on character "
            "ids and `BiLMEmbedder` run on every backend (`python -m pydoc elmo_keras.backend`)."
        )
