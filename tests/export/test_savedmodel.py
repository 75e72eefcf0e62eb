"""SavedModel export: signatures, parity with Keras, padding, state, loading without elmo-keras."""

import os
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import SENTENCES, assert_outputs_close, keras_outputs

from elmo_keras.text.char_ids import batch_to_char_ids
from elmo_keras.text.tokenization import tokenize_python
from tests.fresh_interpreter import run_script

BATCHES = [
    [SENTENCES[1]],  # a batch of one, a sentence of one token
    SENTENCES[:3],
    SENTENCES,
]


@pytest.fixture(scope="module")
def loaded(loaded_savedmodels):
    return loaded_savedmodels


def _numpy(outputs):
    return {name: value.numpy() for name, value in outputs.items()}


def test_signatures_and_outputs(loaded):
    model = loaded["bilm_tf"]
    assert set(model.signatures) == {
        "default",
        "serving_default",
        "tokens",
        "char_ids",
        "char_ids_with_state",
    }
    outputs = set(model.signatures["char_ids"].structured_outputs)
    assert outputs == {
        "word_emb",
        "lstm_outputs1",
        "lstm_outputs2",
        "elmo",
        "default",
        "sequence_len",
    }
    spec = model.signatures["tokens"].structured_input_signature[1]
    assert set(spec) == {"tokens", "sequence_len"}


@pytest.mark.parametrize("name", ["bilm_tf", "allennlp"])
def test_char_ids_signature_matches_keras(exported, loaded, fixture_sentences, name):
    entry = exported[name]
    batches = [*BATCHES, fixture_sentences[:4], fixture_sentences[10:11]]
    for batch in batches:
        char_ids = batch_to_char_ids(batch)
        expected = keras_outputs(entry["bilm"], entry["mix"], char_ids)
        actual = _numpy(loaded[name].signatures["char_ids"](char_ids=tf.constant(char_ids)))
        assert_outputs_close(actual, expected)


def test_tokens_signature_matches_keras_and_ignores_padding(exported, loaded):
    entry = exported["allennlp"]
    batch = SENTENCES[:4]
    lengths = [len(s) for s in batch]
    width = max(lengths) + 2
    # Padding positions hold junk tokens: `sequence_len` alone decides what is real.
    tokens = [s + ["junk"] * (width - len(s)) for s in batch]
    actual = _numpy(
        loaded["allennlp"].signatures["tokens"](
            tokens=tf.constant(tokens), sequence_len=tf.constant(lengths, tf.int32)
        )
    )
    expected = keras_outputs(entry["bilm"], entry["mix"], batch_to_char_ids(batch, width))
    assert_outputs_close(actual, expected)
    # `default` of each sentence equals the sentence run alone (nothing leaks from padding).
    for i, sentence in enumerate(batch):
        alone = keras_outputs(entry["bilm"], entry["mix"], batch_to_char_ids([sentence]))
        np.testing.assert_allclose(actual["default"][i], alone["default"][0], atol=1e-5)
        np.testing.assert_array_equal(actual["elmo"][i, len(sentence) :], 0.0)


def test_default_signature_splits_punctuation_off_by_default(exported, loaded):
    """The package's split, as every entry point's: "The cat sat on the mat." is 7 tokens
    ("mat", "."); TF-Hub's whitespace split is asked for by name (the fresh-process test)."""
    entry = exported["bilm_tf"]
    texts = ["The cat sat on the mat.", "Hi", "Déjà vu:   naïve café?", "Hello, world! It's 3.5°C."]
    tokens = [tokenize_python(text, mode="punctuation") for text in texts]
    for name in ("default", "serving_default"):
        actual = _numpy(loaded["bilm_tf"].signatures[name](sentences=tf.constant(texts)))
        expected = keras_outputs(entry["bilm"], entry["mix"], batch_to_char_ids(tokens))
        assert_outputs_close(actual, expected)
        np.testing.assert_array_equal(actual["sequence_len"], [7, 1, 6, 13])


def test_state_signature_streams_like_keras(exported, loaded, fixture_sentences):
    entry = exported["bilm_tf"]
    windows = [fixture_sentences[0:3], fixture_sentences[3:6]]
    signature = loaded["bilm_tf"].signatures["char_ids_with_state"]
    bilm = entry["bilm"]
    state = (
        np.zeros((3, 2, bilm.n_layers, bilm.projection_dim), np.float32),
        np.zeros((3, 2, bilm.n_layers, bilm.lstm_units), np.float32),
    )
    for window in windows:
        char_ids = batch_to_char_ids(window)
        expected = keras_outputs(bilm, entry["mix"], char_ids, state=state)
        actual = _numpy(
            signature(char_ids=tf.constant(char_ids), state_h=state[0], state_c=state[1])
        )
        assert_outputs_close(actual, expected)
        state = (actual["final_state_h"], actual["final_state_c"])
    assert np.abs(state[0]).max() > 0


def test_loads_in_fresh_process_without_elmo_keras(exported, tmp_path):
    """Plain TensorFlow loads both exports; tensorflow-text is needed only when asked for.
    The second export splits on whitespace only (TF-Hub's module's split, asked by name)."""
    from elmo_keras.export import export_savedmodel

    entry = exported["bilm_tf"]
    text_model = tmp_path / "tf_text_savedmodel"
    export_savedmodel(
        entry["bilm"],
        text_model,
        scalar_mix=entry["mix"],
        tokenization_mode="whitespace",
        use_tensorflow_text=True,
    )
    texts = ["Hello, world!", "Déjà vu ."]
    for mode in ("whitespace", "punctuation"):
        expected = keras_outputs(
            entry["bilm"],
            entry["mix"],
            batch_to_char_ids([tokenize_python(t, mode=mode) for t in texts]),
        )
        np.savez(tmp_path / f"{mode}.npz", **expected)
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np
        import tensorflow as tf

        texts = tf.constant({texts!r})
        whitespace = np.load({str(tmp_path / "whitespace.npz")!r})
        punctuation = np.load({str(tmp_path / "punctuation.npz")!r})

        def check(outputs, expected=punctuation):
            for name in expected.files:
                diff = np.abs(outputs[name].numpy() - expected[name]).max()
                assert diff <= 1e-5, (name, diff)

        model = tf.saved_model.load({str(entry["savedmodel"])!r})
        check(model.signatures["default"](sentences=texts))  # punctuation: the default
        try:
            tf.saved_model.load({str(text_model)!r})
        except Exception as error:  # the tensorflow-text op is not registered yet
            assert "RegexSplitWithOffsets" in str(error), str(error)[:500]
        else:
            raise AssertionError("loaded a tensorflow-text graph without tensorflow_text")
        import tensorflow_text  # noqa: F401  registers the op
        model = tf.saved_model.load({str(text_model)!r})
        check(model.signatures["default"](sentences=texts), whitespace)
        tokens = model.signatures["tokens"](
            tokens=tf.constant([["Hello", ",", "world", "!"], ["Déjà", "vu", ".", ""]]),
            sequence_len=tf.constant([4, 3]),
        )
        check(tokens)
        assert not any(m == "elmo_keras" or m.startswith("elmo_keras.") for m in sys.modules)
        print("ok")
        """
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    assert run_script(script, env=env, cwd=tmp_path).stdout.strip().endswith("ok")


def test_default_mix_is_uniform(exported):
    from elmo_keras.export import ElmoServingModule

    module = ElmoServingModule(exported["bilm_tf"]["bilm"])  # what export_savedmodel saves
    np.testing.assert_allclose(module.scalar_mix.scalar_weights.numpy(), 0.0)
    np.testing.assert_allclose(module.scalar_mix.gamma.numpy(), 1.0)


def test_bad_tokenization_mode_is_rejected(exported, tmp_path):
    from elmo_keras.export import export_savedmodel

    with pytest.raises(ValueError, match="`mode` must be one of"):
        export_savedmodel(exported["bilm_tf"]["bilm"], tmp_path / "x", tokenization_mode="bpe")
    assert not (tmp_path / "x").exists()
