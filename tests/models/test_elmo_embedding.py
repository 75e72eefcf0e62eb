"""`ElmoEmbedding`: inputs, masks, mixes, saving, gradients, distribution (tiny fixture models).

TensorFlow: string inputs, `tf.GradientTape`, `MirroredStrategy`, SavedModel. The same layer on
character ids under every backend: test_elmo_embedding_backends.py.
"""

import keras
import numpy as np
import pytest

from elmo_keras.models import BiLM
from elmo_keras.models.elmo_embedding import ElmoEmbedding, masked_mean
from elmo_keras.text import batch_to_char_ids
from tests.models.test_elmo_embedding_backends import check_elmo_layer

# TensorFlow string ops throughout; the PyTorch pass (no TensorFlow) skips the file.
tf = pytest.importorskip("tensorflow")

pytestmark = pytest.mark.tensorflow_only

SENTENCES = [["The", "bank", "of", "the", "river", "."], ["I", "read", "it"], ["Hi"]]
RAW = ["The bank of the river.", "I read it", "Hi"]


def _padded_tokens(sentences):
    width = max(len(s) for s in sentences)
    return tf.constant([s + [""] * (width - len(s)) for s in sentences])


@pytest.fixture
def elmo_factory(allennlp_fixture):
    def make(**kwargs):
        kwargs.setdefault("dropout", 0.0)
        return ElmoEmbedding.from_bilm_tf(
            allennlp_fixture / "options.json", allennlp_fixture / "lm_weights.hdf5", **kwargs
        )

    return make


def test_input_types_agree(elmo_factory):
    from_ids = elmo_factory(input_type="char_ids")(batch_to_char_ids(SENTENCES))
    from_tokens = elmo_factory(input_type="tokens")(_padded_tokens(SENTENCES))
    from_raw = elmo_factory(input_type="sentences")(tf.constant(RAW))
    np.testing.assert_allclose(from_tokens.numpy(), from_ids.numpy(), atol=1e-6)
    np.testing.assert_allclose(from_raw.numpy(), from_ids.numpy(), atol=1e-6)
    for out in (from_tokens, from_raw):
        np.testing.assert_array_equal(out._keras_mask.numpy(), from_ids._keras_mask.numpy())


def test_padding_is_zero_and_a_sentence_alone_equals_it_in_a_batch(elmo_factory):
    elmo = elmo_factory(input_type="tokens", do_layer_norm=False)
    batch = elmo(_padded_tokens(SENTENCES)).numpy()
    alone = elmo(tf.constant([SENTENCES[1]])).numpy()
    np.testing.assert_allclose(batch[1, :3], alone[0], atol=1e-6)
    assert np.all(batch[1, 3:] == 0.0) and np.all(batch[2, 1:] == 0.0)


@pytest.mark.parametrize("input_type", ["char_ids", "tokens", "sentences"])
def test_mask_reaches_a_following_lstm(elmo_factory, input_type):
    elmo = elmo_factory(input_type=input_type)
    spec = {
        "char_ids": keras.Input((None, 50), dtype="int32"),
        "tokens": keras.Input((None,), dtype="string"),
        "sentences": keras.Input((), dtype="string"),
    }[input_type]
    lstm = keras.layers.LSTM(5, go_backwards=True)  # backwards: padding would come first
    model = keras.Model(spec, lstm(elmo(spec)))
    data = {
        "char_ids": lambda s: batch_to_char_ids(s),
        "tokens": _padded_tokens,
        "sentences": lambda s: tf.constant([" ".join(x) for x in s]),
    }[input_type]
    batch = model(data(SENTENCES)).numpy()
    for i, sentence in enumerate(SENTENCES):
        alone = model(data([sentence])).numpy()
        np.testing.assert_allclose(batch[i], alone[0], atol=1e-5)


def test_keras_round_trip_keeps_outputs_and_trained_mix(elmo_factory, tmp_path):
    elmo = elmo_factory(input_type="tokens", num_output_representations=2, do_layer_norm=True)
    inputs = keras.Input((None,), dtype="string")
    first, second = elmo(inputs)
    x = keras.layers.LSTM(4, return_sequences=True)(first)
    x = keras.layers.Concatenate()([x, second])
    outputs = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(x))
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(0.1),
        # From logits: on raw Dense outputs a probability loss clips, and its gradient can be 0.
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    data = _padded_tokens(SENTENCES)
    model.fit(data, np.array([0, 1, 1]), epochs=1, verbose=0)
    weights = elmo.scalar_mix_weights()
    assert not np.allclose(weights[0][0], 1 / 3)  # the task moved the mix
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    np.testing.assert_array_equal(loaded.predict(data, verbose=0), model.predict(data, verbose=0))
    loaded_elmo = loaded.get_layer(elmo.name)
    for (w, g), (w2, g2) in zip(weights, loaded_elmo.scalar_mix_weights(), strict=True):
        np.testing.assert_array_equal(w, w2)
        assert g == g2
    assert loaded_elmo.get_config() == elmo.get_config()
    assert len(loaded.trainable_weights) == len(model.trainable_weights)  # biLM still frozen


def tiny_bilm():
    bilm = BiLM(lstm_units=16, projection_dim=4, filters=[(1, 4), (2, 4)], n_highway=1)
    bilm.build()
    return bilm


TINY_INPUTS = {
    "char_ids": lambda: batch_to_char_ids([["The", "bank", "."], ["Hi"]]),
    "tokens": lambda: tf.constant([["The", "bank", "."], ["Hi", "", ""]]),
    "sentences": lambda: tf.constant(["The bank .", "Hi"]),
}


@pytest.mark.parametrize(
    "input_type, kwargs, output_shape",
    [
        ("tokens", {"pooling": "mean"}, (2, 8)),
        ("sentences", {"trainable_bilm": True, "tokenization_mode": "whitespace"}, (2, 3, 8)),
    ],
)
def test_elmo_embedding_layer(input_type, kwargs, output_shape):
    # char_ids: test_elmo_embedding_backends.py, on every backend
    check_elmo_layer(
        tiny_bilm(), TINY_INPUTS[input_type](), output_shape, input_type=input_type, **kwargs
    )


def test_a_clone_from_config_builds_the_same_weights(elmo_factory):
    elmo = elmo_factory(num_output_representations=3, l2_coef=0.01, pooling="mean")
    elmo.build()
    clone = ElmoEmbedding.from_config(elmo.get_config())
    clone.build()
    assert [w.shape for w in clone.weights] == [w.shape for w in elmo.weights]
    assert [w.trainable for w in clone.weights] == [w.trainable for w in elmo.weights]


def test_the_old_import_path_gives_the_same_class():
    from elmo_keras.layers import ElmoEmbedding as from_layers

    assert from_layers is ElmoEmbedding


def test_sequential_and_subclassed_models(elmo_factory):
    data = _padded_tokens(SENTENCES)
    sequential = keras.Sequential(
        [
            keras.Input((None,), dtype="string"),
            elmo_factory(input_type="tokens"),
            keras.layers.LSTM(3),
        ]
    )
    assert sequential(data).shape == (3, 3)

    class Classifier(keras.Model):
        def __init__(self, elmo, **kwargs):
            super().__init__(**kwargs)
            self.elmo = elmo
            self.lstm = keras.layers.LSTM(3)
            self.head = keras.layers.Dense(2)

        def call(self, inputs, training=None):
            return self.head(self.lstm(self.elmo(inputs, training=training)))

    model = Classifier(elmo_factory(input_type="tokens"))
    model.compile(optimizer="adam", loss="mse")
    model.fit(data, np.zeros((3, 2)), verbose=0)
    alone = model(tf.constant([SENTENCES[2]])).numpy()
    np.testing.assert_allclose(model(data).numpy()[2], alone[0], atol=1e-5)


def test_multiple_representations_are_independent(elmo_factory):
    elmo = elmo_factory(num_output_representations=2)
    ids = batch_to_char_ids(SENTENCES)
    first, second = elmo(ids)
    np.testing.assert_array_equal(first.numpy(), second.numpy())
    elmo.scalar_mixes[1].scalar_weights.assign([5.0, 0.0, 0.0])
    first2, second2 = elmo(ids)
    np.testing.assert_array_equal(first2.numpy(), first.numpy())
    assert not np.allclose(second2.numpy(), first.numpy())


def test_mean_pooling_ignores_padding(elmo_factory):
    tokens = elmo_factory(input_type="tokens")
    pooled = elmo_factory(input_type="tokens", pooling="mean")
    data = _padded_tokens(SENTENCES)
    vectors = tokens(data).numpy()
    sentence_vectors = pooled(data)
    assert sentence_vectors.shape == (3, 32)
    assert getattr(sentence_vectors, "_keras_mask", None) is None
    np.testing.assert_allclose(sentence_vectors[1].numpy(), vectors[1, :3].mean(0), atol=1e-6)
    alone = pooled(tf.constant([SENTENCES[2]])).numpy()
    np.testing.assert_allclose(sentence_vectors[2].numpy(), alone[0], atol=1e-6)
    empty = masked_mean(tf.ones((1, 2, 4)), tf.constant([[False, False]]))
    np.testing.assert_array_equal(empty.numpy(), np.zeros((1, 4)))


def _gradients(elmo, data):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(elmo(data, training=True)))
    variables = elmo.scalar_mixes[0].trainable_weights + elmo.bilm.weights
    return tape.gradient(loss, variables), len(elmo.scalar_mixes[0].trainable_weights)


def test_gradients_reach_the_mix_and_the_bilm_only_when_unfrozen(elmo_factory):
    data = batch_to_char_ids(SENTENCES)
    frozen = elmo_factory()
    assert not frozen.bilm.trainable and frozen.bilm.trainable_weights == []
    grads, n_mix = _gradients(frozen, data)
    assert all(g is not None and np.any(g.numpy() != 0) for g in grads[:n_mix])
    assert len(frozen.trainable_weights) == n_mix

    unfrozen = elmo_factory(trainable_bilm=True)
    unfrozen.build()
    assert len(unfrozen.trainable_weights) == n_mix + len(unfrozen.bilm.weights)
    grads, n_mix = _gradients(unfrozen, data)
    bilm_grads = [g for g in grads[n_mix:] if g is not None]
    assert len(bilm_grads) == len(unfrozen.bilm.weights)
    assert any(np.any(tf.convert_to_tensor(g).numpy() != 0) for g in bilm_grads)


def test_bilm_tf_fixture_without_residual(bilm_tf_fixture):
    model_dir = bilm_tf_fixture / "model"
    elmo = ElmoEmbedding.from_bilm_tf(
        model_dir / "options.json", model_dir / "lm_weights.hdf5", input_type="sentences"
    )
    assert not elmo.bilm.use_skip_connections
    assert elmo(tf.constant(["A short one .", "Two"])).shape == (2, 4, 32)


def test_mirrored_strategy_on_two_cpus_matches_one_device(elmo_factory):
    sentences = SENTENCES + [["Another", "one"]]
    labels = np.array([0, 1, 1, 0])

    def make_model(input_type):
        keras.utils.set_random_seed(1)
        spec = {"tokens": (None,), "char_ids": (None, 50)}[input_type]
        inputs = keras.Input(spec, dtype="string" if input_type == "tokens" else "int32")
        x = elmo_factory(input_type=input_type)(inputs)
        outputs = keras.layers.Dense(2)(keras.layers.LSTM(3)(x))
        model = keras.Model(inputs, outputs)
        model.compile(
            optimizer=keras.optimizers.SGD(0.1),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        return model

    # Reduction without collective ops: collective instance keys restart at the same value for
    # every MirroredStrategy of a process, so a collective strategy here would collide with the
    # trainer's own distribution tests that run later in the same pytest process.
    strategy = tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice()
    )
    assert strategy.num_replicas_in_sync == 2
    # Inference from strings.
    single = make_model("tokens")
    with strategy.scope():
        mirrored = make_model("tokens")
    mirrored.set_weights(single.get_weights())
    tokens = _padded_tokens(sentences)
    np.testing.assert_allclose(
        mirrored.predict(tokens, batch_size=4, verbose=0),
        single.predict(tokens, batch_size=4, verbose=0),
        atol=1e-5,
    )
    # Training from character ids (TensorFlow cannot all-reduce the string inputs' tape).
    single = make_model("char_ids")
    with strategy.scope():
        mirrored = make_model("char_ids")
    mirrored.set_weights(single.get_weights())
    ids = batch_to_char_ids(sentences)
    before = single.layers[-1].get_weights()[0].copy()
    single.fit(ids, labels, batch_size=4, epochs=1, verbose=0, shuffle=False)
    mirrored.fit(ids, labels, batch_size=4, epochs=1, verbose=0, shuffle=False)
    assert not np.allclose(single.layers[-1].get_weights()[0], before)
    for a, b in zip(single.get_weights(), mirrored.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_bad_arguments_say_what_was_received(elmo_factory):
    bilm = elmo_factory().bilm
    cases = [
        (dict(bilm="x"), "`bilm` must be an `elmo_keras.models.BiLM`"),
        (dict(bilm=bilm, input_type="words"), "`input_type` must be one of"),
        (dict(bilm=bilm, pooling="max"), "`pooling` must be one of"),
        (dict(bilm=bilm, dropout=1.0), "`dropout` must be a number in \\[0, 1\\)"),
        (dict(bilm=bilm, l2_coef=-1), "`l2_coef` must be a number >= 0"),
        (dict(bilm=bilm, num_output_representations=0), "num_output_representations"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            ElmoEmbedding(**kwargs)
    with pytest.raises(ValueError, match="expects a string tensor"):
        ElmoEmbedding(bilm, input_type="tokens")(tf.zeros((2, 3), tf.int32))
    with pytest.raises(ValueError, match="expects int inputs"):
        ElmoEmbedding(bilm)(tf.zeros((2, 3), tf.int32))


def test_exports_with_the_rest_of_the_model(elmo_factory, tmp_path):
    inputs = keras.Input((), dtype="string")
    x = elmo_factory(input_type="sentences")(inputs)
    outputs = keras.layers.Dense(2)(keras.layers.LSTM(3)(x))
    model = keras.Model(inputs, outputs)
    model.export(str(tmp_path / "saved"), format="tf_saved_model", verbose=False)
    reloaded = tf.saved_model.load(str(tmp_path / "saved"))
    data = tf.constant(RAW)
    np.testing.assert_allclose(reloaded.serve(data).numpy(), model(data).numpy(), atol=1e-5)
