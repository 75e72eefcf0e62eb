import keras
import numpy as np


def _is_text(value):
    return isinstance(value, (str, bytes))


def _text_leaves(value):
    """True if `value` is a non-empty list/tuple whose leaves (through nested lists and tuples)
    are all `str` or `bytes`: a batch of sentences or of padded token rows."""
    if not isinstance(value, (list, tuple)) or not value:
        return False
    return all(_is_text(item) or _text_leaves(item) for item in value)


def _decoded(array, name):
    """An object array of text with its `bytes` decoded (Keras takes `str` objects only)."""
    flat = array.reshape(-1)
    for i, item in enumerate(flat):
        if isinstance(item, bytes):
            try:
                flat[i] = item.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"`{name}` must hold UTF-8 text; pass other bytes as a tf.constant. "
                    f"Received: {item[:40]!r} ({error.reason} at byte {error.start})"
                ) from None
    return array


def as_keras_text(x, name="x"):
    """Text inputs as the arrays Keras' data adapters take: NumPy object arrays.

    Keras' `fit`, `predict` and `evaluate` refuse NumPy `str` (`<U`) and `bytes` (`S`) arrays
    ("Invalid dtype: str960") and lists of `str` ("Unrecognized data type"), but take object
    arrays of `str`. This converts those forms (UTF-8 `bytes` are decoded), in a dict or a list
    of inputs too, and leaves everything else (numbers, tensors, `tf.data`) as it is.

    Args:
        x: the inputs as given to `fit`, `predict` or `evaluate`.
        name: str. The argument's name, for the error. Defaults to `"x"`.

    Returns:
        `x` with every text array or list of strings as a NumPy object array.

    Example:
    >>> as_keras_text(np.array(["a b", "c"])).dtype
    dtype('O')
    >>> as_keras_text({"text": ["a b", "c"], "n": np.zeros(2)})["text"].dtype
    dtype('O')
    """
    if isinstance(x, np.ndarray) and x.dtype.kind in "USO":
        if x.dtype.kind == "O" and not any(isinstance(item, bytes) for item in x.flat):
            return x  # numbers, or `str` already: Keras takes those
        return _decoded(x.astype(object), name)  # a copy: the caller's array stays
    if _text_leaves(x):
        array = np.array(x, dtype=object)
        if any(not _is_text(item) for item in array.reshape(-1)):
            raise ValueError(
                f"`{name}` must be a list of sentences or of token rows of one length (pad "
                f"them with ''). Received: rows of lengths {sorted({len(r) for r in x})}"
            )
        return _decoded(array, name)
    if isinstance(x, dict):
        return {key: as_keras_text(value, f"{name}[{key!r}]") for key, value in x.items()}
    if isinstance(x, (list, tuple)):  # several inputs
        return type(x)(as_keras_text(value, f"{name}[{i}]") for i, value in enumerate(x))
    return x


def _refuse_text_for_numbers(model, x, name):
    """One line, instead of Keras' failed cast or shape check, when text reaches a Functional
    model whose inputs all take numbers (an `ElmoEmbedding` on character ids)."""
    if not (isinstance(x, np.ndarray) and x.dtype == object and x.size):
        return
    if not _is_text(x.reshape(-1)[0]):
        return
    try:
        inputs = model.inputs  # a Functional model's; a subclass has none
    except AttributeError:
        return
    if not inputs or any(str(getattr(t, "dtype", "")) == "string" for t in inputs):
        return
    specs = ", ".join(f"{t.dtype} {tuple(t.shape)}" for t in inputs)
    raise ValueError(
        f"`{name}` holds text, but this model's inputs take numbers ({specs}): for raw "
        "sentences make its `ElmoEmbedding` with `input_type='sentences'` on a "
        "`keras.Input((), dtype='string')` (`input_type='tokens'` for padded token rows), on "
        "the TensorFlow backend. Received: text of shape " + str(x.shape)
    )


def _text(model, x, name="x"):
    x = as_keras_text(x, name)
    _refuse_text_for_numbers(model, x, name)
    return x


def _validation_text(model, validation_data):
    if isinstance(validation_data, tuple) and validation_data:
        return (_text(model, validation_data[0], "validation_data[0]"), *validation_data[1:])
    return validation_data


@keras.saving.register_keras_serializable(package="elmo_keras")
class TextModel(keras.Model):
    """A `keras.Model` whose `fit`, `predict` and `evaluate` take text as Keras users pass it.

    Keras' data adapters refuse NumPy string arrays and Python lists of `str`, so a model
    around `ElmoEmbedding(input_type="sentences")` (or `"tokens"`) fails on them before the
    layer sees the text. `TextModel` is built like any Functional model,
    `TextModel(inputs, outputs)` (or subclassed), and converts those forms to NumPy object
    arrays first (`as_keras_text`); tensors, object arrays and `tf.data` pass unchanged. The
    `*_on_batch` methods convert too. Text given to a Functional model whose inputs take
    numbers (an `ElmoEmbedding` on character ids) is one `ValueError` naming
    `input_type='sentences'`. It saves and loads as a `.keras` file like its parent.

    Args:
        *args, **kwargs: those of `keras.Model`: `TextModel(inputs, outputs, name=...)`.

    Example:
    >>> import keras
    >>> import numpy as np
    >>> from elmo_keras.models import ElmoEmbedding, TextModel
    >>> elmo = ElmoEmbedding.from_preset("tiny", input_type="sentences", pooling="mean")
    >>> inputs = keras.Input((), dtype="string")
    >>> model = TextModel(inputs, keras.layers.Dense(1)(elmo(inputs)))
    >>> model.compile("sgd", "mse")
    >>> texts = np.array(["The bank closed.", "Rivers flood."])  # a NumPy str array
    >>> model.predict(texts, verbose=0).shape
    (2, 1)
    >>> history = model.fit(["The bank closed.", "Rivers flood."], np.zeros(2))  # doctest: +SKIP
    """

    def fit(self, x=None, y=None, *args, validation_data=None, **kwargs):
        return super().fit(
            _text(self, x),
            y,
            *args,
            validation_data=_validation_text(self, validation_data),
            **kwargs,
        )

    def evaluate(self, x=None, y=None, *args, **kwargs):
        return super().evaluate(_text(self, x), y, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        return super().predict(_text(self, x), *args, **kwargs)

    def train_on_batch(self, x, y=None, *args, **kwargs):
        return super().train_on_batch(_text(self, x), y, *args, **kwargs)

    def test_on_batch(self, x, y=None, *args, **kwargs):
        return super().test_on_batch(_text(self, x), y, *args, **kwargs)

    def predict_on_batch(self, x):
        return super().predict_on_batch(_text(self, x))
