"""Text as Keras users pass it (issue 29, point 3): `TextModel`'s `fit`, `predict` and `evaluate`
on NumPy str and bytes arrays, lists of str and `tf.data`; one line when text reaches an
`ElmoEmbedding` that takes character ids. The `tiny` preset keeps it cheap."""

import keras
import numpy as np
import pytest

from elmo_keras.models import ElmoEmbedding, TextModel
from elmo_keras.models.text_model import as_keras_text

# TensorFlow string ops throughout; the PyTorch pass (no TensorFlow) skips the file.
tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.tensorflow_only

TEXTS = ["The bank closed early.", "Rivers flood, often!", "Déjà vu", "Hi"]
TARGETS = np.array([[0.5], [1.0], [-0.5], [0.0]], np.float32)


def _regression_model():
    elmo = ElmoEmbedding.from_preset("tiny", input_type="sentences", pooling="mean", dropout=0.0)
    inputs = keras.Input((), dtype="string")
    model = TextModel(inputs, keras.layers.Dense(1, name="head")(elmo(inputs)))
    model.compile(keras.optimizers.SGD(0.01), "mse")
    return model


def test_fit_predict_evaluate_take_numpy_arrays_lists_and_tf_data():
    model = _regression_model()
    forms = {
        "numpy str": np.array(TEXTS),
        "numpy bytes": np.array([t.encode("utf-8") for t in TEXTS]),
        "list of str": list(TEXTS),
    }
    for name, x in forms.items():
        expected = model(tf.constant(TEXTS)).numpy()  # the weights before this form's step
        np.testing.assert_allclose(model.predict(x, verbose=0), expected, atol=1e-6, err_msg=name)
        mse = float(np.mean((expected.astype(np.float64) - TARGETS) ** 2))
        assert model.evaluate(x, TARGETS, verbose=0) == pytest.approx(mse, rel=1e-5), name
        model.fit(x, TARGETS, batch_size=4, epochs=1, verbose=0, validation_data=(x, TARGETS))
        assert not np.allclose(model(tf.constant(TEXTS)).numpy(), expected), f"{name}: no step"
    # Whole batches: the same input shapes as the arrays' batches, so no second trace (6 s).
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, TARGETS)).batch(4, drop_remainder=True)
    expected = model(tf.constant(TEXTS)).numpy()
    np.testing.assert_allclose(
        model.predict(dataset.map(lambda x, y: x), verbose=0), expected, atol=1e-6
    )
    mse = float(np.mean((expected.astype(np.float64) - TARGETS) ** 2))
    assert model.evaluate(dataset, verbose=0) == pytest.approx(mse, rel=1e-5)
    model.fit(dataset, epochs=1, verbose=0)
    assert not np.allclose(model(tf.constant(TEXTS)).numpy(), expected)


def test_the_caller_s_arrays_stay_as_they_are():
    words = np.array([b"caf\xc3\xa9", b"x"], dtype=object)
    converted = as_keras_text({"text": words, "n": np.zeros(2)})
    assert converted["text"].tolist() == ["café", "x"] and words.tolist() == [b"caf\xc3\xa9", b"x"]
    assert converted["n"].dtype == np.float64
    rows = as_keras_text([["a", "b"], ["c", ""]])
    assert rows.shape == (2, 2) and rows.dtype == object


@pytest.mark.parametrize(
    "x, message",
    [
        ([["a", "b"], ["c"]], r"`x` must be a list of sentences or of token rows of one length"),
        (np.array([b"\xff"]), r"`x` must hold UTF-8 text.*invalid start byte at byte 0"),
    ],
)
def test_text_that_keras_cannot_take_is_one_line(x, message):
    with pytest.raises(ValueError, match=message) as error:
        as_keras_text(x)
    assert "\n" not in str(error.value)


def test_saves_and_loads_as_a_keras_file(tmp_path):
    model = _regression_model()
    model.save(tmp_path / "model.keras")
    loaded = keras.models.load_model(tmp_path / "model.keras")
    assert isinstance(loaded, TextModel)  # so its `fit` and `predict` still take text
    text = tf.constant(TEXTS)
    np.testing.assert_allclose(loaded(text).numpy(), model(text).numpy(), atol=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        tf.constant(TEXTS),
        np.array(TEXTS),
        np.array(TEXTS, dtype=object),
        TEXTS,
        keras.Input((), dtype="string"),
    ],
    ids=["tf.constant", "numpy str", "numpy object", "list", "keras.Input"],
)
def test_text_into_a_char_ids_layer_is_one_line(text):
    """`from_preset` makes a `char_ids` layer by default; text used to fail in a cast."""
    elmo = ElmoEmbedding.from_preset("tiny")
    with pytest.raises(ValueError, match="takes character ids .* input_type='sentences'") as error:
        elmo(text)
    assert "\n" not in str(error.value)


@pytest.fixture(scope="module")
def char_ids_model():
    elmo = ElmoEmbedding.from_preset("tiny", pooling="mean")
    inputs = keras.Input((None, 50), dtype="int32")
    model = TextModel(inputs, keras.layers.Dense(1)(elmo(inputs)))
    model.compile("sgd", "mse")
    return model


@pytest.mark.parametrize(
    ("method", "x"),
    [
        ("fit", TEXTS),
        ("evaluate", np.array(TEXTS)),
        ("predict", np.array(TEXTS)),
        ("train_on_batch", TEXTS),
    ],
)
def test_text_into_a_char_ids_text_model_is_one_line(char_ids_model, method, x):
    """A `TextModel` on character ids given sentences (issue 39): one line naming
    `input_type='sentences'`, as the layer's own (Keras' failed cast or shape check before)."""
    args = (x,) if method == "predict" else (x, TARGETS)
    with pytest.raises(ValueError, match="holds text.*input_type='sentences'") as error:
        getattr(char_ids_model, method)(*args)
    assert "\n" not in str(error.value) and "int32 (None, None, 50)" in str(error.value)
