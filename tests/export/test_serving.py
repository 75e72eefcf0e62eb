"""The SavedModel in the loaders that serve it: a TF1 session (what TF Serving's C++ loader
does: restore the variables, run a signature), `saved_model_cli`, and TF-Hub's `KerasLayer`."""

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from export_helpers import SENTENCES, assert_outputs_close, keras_outputs, make_mix

from elmo_keras.text.char_ids import batch_to_char_ids
from elmo_keras.text.tokenization import tokenize_python
from tests.fresh_interpreter import run_script

TEXTS = ["The cat sat on the mat.", "Hi", "Déjà vu,  naïve café!"]


def _session_feeds(name, bilm):
    """Inputs for each signature, and the tokens they stand for."""
    if name in ("default", "serving_default"):
        tokens = [tokenize_python(text) for text in TEXTS]  # the default split, punctuation
        return {"sentences": np.array(TEXTS, dtype=object)}, tokens
    tokens = SENTENCES[:3]
    if name == "tokens":
        width = max(len(s) for s in tokens)
        padded = [s + [""] * (width - len(s)) for s in tokens]
        lengths = np.array([len(s) for s in tokens], np.int32)
        return {"tokens": np.array(padded, dtype=object), "sequence_len": lengths}, tokens
    feeds = {"char_ids": batch_to_char_ids(tokens)}
    if name == "char_ids_with_state":
        rng = np.random.default_rng(0)
        L, P, U = bilm.n_layers, bilm.projection_dim, bilm.lstm_units
        feeds["state_h"] = rng.normal(size=(3, 2, L, P)).astype(np.float32)
        feeds["state_c"] = rng.normal(size=(3, 2, L, U)).astype(np.float32)
    return feeds, tokens


def test_every_signature_runs_in_a_tf1_session(exported):
    """Restoring into a session by the checkpoint's names is TF Serving's way; it used to fail
    with "Could not find variable bi_lm/char_cnn/...": the values went into copies."""
    entry = exported["bilm_tf"]
    bilm, mix = entry["bilm"], entry["mix"]
    path = str(entry["savedmodel"])  # exported (on first use) eagerly, not in the graph below
    names = ["default", "serving_default", "tokens", "char_ids", "char_ids_with_state"]
    cases = {}
    for name in names:  # the Keras side runs eagerly, outside the session's graph
        feeds, tokens = _session_feeds(name, bilm)
        state = (feeds["state_h"], feeds["state_c"]) if "state_h" in feeds else None
        cases[name] = feeds, keras_outputs(bilm, mix, batch_to_char_ids(tokens), state=state)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        signatures = {k: v for k, v in meta_graph.signature_def.items() if not k.startswith("__")}
        assert sorted(signatures) == sorted(names)
        for name, (feeds, expected) in cases.items():
            signature = signatures[name]
            outputs = session.run(
                {key: info.name for key, info in signature.outputs.items()},
                {signature.inputs[key].name: value for key, value in feeds.items()},
            )
            assert_outputs_close(outputs, expected)


def test_saved_model_cli_runs_serving_default(exported):
    """The command of docs/export.md, in a fresh process."""
    cli = pathlib.Path(sys.executable).parent / "saved_model_cli"
    if not cli.exists():
        pytest.skip("saved_model_cli is not installed beside this Python")
    command = [
        str(cli),
        "run",
        "--dir",
        str(exported["bilm_tf"]["savedmodel"]),
        "--tag_set",
        "serve",
        "--signature_def",
        "serving_default",
        "--input_exprs",
        'sentences=["The cat sat ."]',
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Result for output key elmo:" in result.stdout


def test_checkpoint_holds_each_variable_once(exported):
    entry = exported["allennlp"]
    folder = pathlib.Path(entry["savedmodel"]) / "variables"
    stored = sum(path.stat().st_size for path in folder.iterdir())
    weights = sum(np.asarray(v).nbytes for v in [*entry["bilm"].weights, *entry["mix"].weights])
    assert weights < stored < 1.2 * weights  # Keras' own export stores every value twice


@pytest.fixture(scope="module")
def loaded_bilm_tf(exported):
    return tf.saved_model.load(str(exported["bilm_tf"]["savedmodel"]))


def test_reusable_savedmodel_protocol(exported, loaded_bilm_tf):
    """What TF-Hub's `KerasLayer` reads: `variables`, `trainable_variables` (the mix only),
    `regularization_losses` and a `__call__(sentences, training)` that equals `default`."""
    entry, obj = exported["bilm_tf"], loaded_bilm_tf
    assert len(obj.variables) == len(entry["bilm"].variables) + 2
    np.testing.assert_allclose(obj.trainable_variables[0].numpy(), entry["mix"].scalar_weights)
    np.testing.assert_allclose(obj.trainable_variables[1].numpy(), entry["mix"].gamma)
    assert len(obj.trainable_variables) == 2 and list(obj.regularization_losses) == []
    sentences = tf.constant(TEXTS)
    expected = obj.signatures["default"](sentences=sentences)
    for training in (False, True):
        assert_outputs_close(
            {k: v.numpy() for k, v in obj(sentences, training=training).items()},
            {k: v.numpy() for k, v in expected.items()},
        )
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(obj(sentences, training=True)["elmo"] ** 2)
    gradients = tape.gradient(loss, obj.trainable_variables)
    assert all(g is not None and np.abs(g.numpy()).max() > 0 for g in gradients)


def test_mix_l2_penalty_is_a_regularization_loss(exported):
    from elmo_keras.export import ElmoServingModule

    bilm = exported["bilm_tf"]["bilm"]
    mix = make_mix(bilm.n_layers)
    mix.l2_coef = 0.01
    module = ElmoServingModule(bilm, scalar_mix=mix)
    (penalty,) = module.regularization_losses
    expected = 0.01 * float(np.sum(np.square(mix.scalar_weights.numpy())))
    np.testing.assert_allclose(penalty().numpy(), expected, rtol=1e-6)


def test_tensorflow_hub_keras_layer(exported, tmp_path):
    """TF-Hub's `KerasLayer` (Keras 2, tf-keras) runs the `default` signature, and without a
    signature it fine-tunes the mix through `__call__`. `signature=... , trainable=True` is
    refused by tensorflow-hub itself, for every SavedModel."""
    for module in ("tensorflow_hub", "tf_keras"):
        pytest.importorskip(module, reason="the [dev] extra's tensorflow-hub and tf-keras")
    path = tmp_path / "elmo"
    shutil.copytree(exported["bilm_tf"]["savedmodel"], path)
    sentences = tf.constant(TEXTS)
    expected = tf.saved_model.load(str(path)).signatures["default"](sentences=sentences)
    np.save(tmp_path / "elmo.npy", expected["elmo"].numpy())
    script = textwrap.dedent(
        f"""
        import numpy as np
        import tensorflow as tf
        import tensorflow_hub as hub
        import tf_keras

        sentences = tf.constant({TEXTS!r})
        expected = np.load({str(tmp_path / "elmo.npy")!r})
        elmo = hub.load({str(path)!r})  # loaded once, shared by the layers below
        frozen = hub.KerasLayer(elmo, signature="default", output_key="elmo")
        assert np.abs(frozen(sentences).numpy() - expected).max() <= 1e-6
        try:
            hub.KerasLayer(elmo, signature="default", output_key="elmo", trainable=True)(sentences)
        except ValueError as error:
            assert "unsupported when calling a SavedModel signature" in str(error)
        else:
            raise AssertionError("tensorflow-hub trained through a signature")

        layer = hub.KerasLayer(elmo, output_key="elmo", trainable=True)
        assert [tuple(w.shape) for w in layer.trainable_weights] == [(3,), ()]
        inputs = tf_keras.Input((), dtype=tf.string)
        pooled = tf_keras.layers.GlobalAveragePooling1D()(layer(inputs))
        model = tf_keras.Model(inputs, tf_keras.layers.Dense(1)(pooled))
        model.compile(tf_keras.optimizers.SGD(0.5), "mse")
        before = [w.numpy() for w in layer.trainable_weights]
        model.fit(sentences, np.array([1.0, -1.0, 0.5]), epochs=1, verbose=0)
        moved = [np.abs(w.numpy() - b).max() for w, b in zip(layer.trainable_weights, before)]
        assert min(moved) > 0, moved
        print("ok")
        """
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    assert run_script(script, env=env, cwd=tmp_path).stdout.strip().endswith("ok")
