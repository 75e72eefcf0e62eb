"""Keras backends: the `keras.ops` layers under JAX, and the one error of the TensorFlow-only parts.

`Highway`, `ScalarMix` and `CharCNN` also go through `run_layer_test` (which checks that their
outputs are tensors of the running backend, and on JAX that `jax.jit(layer.stateless_call)`
gives the eager outputs) and their NumPy reference tests under JAX: `make test` runs tests/layers
a second time with `KERAS_BACKEND=jax`. The tests marked `jax_only` here need that run; the
others run on every backend.
"""

import ast
import pathlib
import re

import keras
import numpy as np
import pytest

from elmo_keras.layers import (
    CharCNN,
    ProjectedBiLSTM,
    ProjectedLSTMCell,
    ScalarMix,
    require_tensorflow_backend,
)
from tests import numpy_reference as ref
from tests.layers.test_char_cnn import SMALL, layer_weights64, random_ids
from tests.layers.test_scalar_mix import layers_and_mask

BACKEND = keras.config.backend()
jax_only = pytest.mark.skipif(
    BACKEND != "jax", reason="needs KERAS_BACKEND=jax (the second command of `make test`)"
)
LAYERS = pathlib.Path(__file__).resolve().parents[2] / "elmo_keras" / "layers"


def _message(owner, backend):
    return re.escape(
        f"`{owner}` needs the TensorFlow backend (KERAS_BACKEND=tensorflow); "
        f"received backend '{backend}'"
    )


@pytest.mark.parametrize("module", ["highway.py", "scalar_mix.py", "char_cnn.py"])
def test_backend_neutral_layers_do_not_import_tensorflow(module):
    tree = ast.parse((LAYERS / module).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert "tensorflow" not in imported, f"{module} imports TensorFlow; use keras.ops"


@pytest.mark.parametrize(
    "make, owner",
    [
        (lambda: ProjectedBiLSTM(8, 4), "ProjectedBiLSTM"),
        (lambda: ProjectedLSTMCell(8, 4), "ProjectedLSTMCell"),
    ],
    ids=["ProjectedBiLSTM", "ProjectedLSTMCell"],
)
def test_tensorflow_only_layers_name_themselves_and_the_backend(monkeypatch, make, owner):
    # Runs on every backend: Keras is made to report another one while the constructor runs.
    monkeypatch.setattr(keras.config, "backend", lambda: "torch")
    with pytest.raises(RuntimeError, match=_message(owner, "torch")):
        make()


def test_require_tensorflow_backend_accepts_tensorflow(monkeypatch):
    monkeypatch.setattr(keras.config, "backend", lambda: "tensorflow")
    assert require_tensorflow_backend("BiLM") is None


@jax_only
@pytest.mark.parametrize(
    "make, owner",
    [
        (lambda: ProjectedBiLSTM(8, 4), "ProjectedBiLSTM"),
        (lambda: ProjectedLSTMCell(8, 4), "ProjectedLSTMCell"),
        (
            lambda: ProjectedBiLSTM.from_config({"lstm_units": 8, "projection_dim": 4}),
            "ProjectedBiLSTM",
        ),
    ],
    ids=["ProjectedBiLSTM", "ProjectedLSTMCell", "from_config"],
)
def test_tensorflow_only_layers_raise_under_jax(make, owner):
    with pytest.raises(RuntimeError, match=_message(owner, "jax")):
        make()


@jax_only
def test_bilm_raises_under_jax():
    from elmo_keras.models import BiLM

    with pytest.raises(
        RuntimeError, match="needs the TensorFlow backend .* received backend 'jax'"
    ):
        BiLM(lstm_units=8, projection_dim=4, filters=[(1, 4)], n_highway=0)


@jax_only
def test_elmo_embedding_raises_under_jax():
    from elmo_keras.models import ElmoEmbedding

    with pytest.raises(RuntimeError, match=_message("ElmoEmbedding", "jax")):
        ElmoEmbedding(bilm=None)


@jax_only
@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_scalar_mix_jit_stateless_call_matches_numpy_reference(do_layer_norm):
    import jax

    layers, mask = layers_and_mask()
    mix = ScalarMix(3, do_layer_norm=do_layer_norm)
    mix.build(layers.shape)
    mix_fn = jax.jit(mix.stateless_call)
    # Values passed to the stateless call, not the variables' (zeros and 1.0), must be used.
    for weights, gamma in (([0.1, 0.3, 0.5], 1.1), ([2.0, -1.0, 0.0], 0.7)):
        trainable = [np.array(weights, "float32"), np.array(gamma, "float32")]
        got, non_trainable = mix_fn(trainable, [], layers, mask=mask)
        assert isinstance(got, jax.Array) and non_trainable == []
        expected = ref.scalar_mix(
            layers.astype(np.float64), mask, np.array(weights), gamma, do_layer_norm
        )
        np.testing.assert_allclose(np.asarray(got), expected, atol=1e-5, rtol=1e-5)


@jax_only
def test_scalar_mix_jax_gradient_of_gamma_matches_numpy_reference():
    import jax
    import jax.numpy as jnp

    layers, mask = layers_and_mask(3)
    mix = ScalarMix(3, initial_scalar_weights=[0.5, 0.0, -1.0], initial_gamma=0.9)
    mix.build(layers.shape)
    probe = np.arange(6, dtype="float32")

    def loss(trainable):
        out, _ = mix.stateless_call(trainable, [], layers, mask=mask)
        return jnp.sum(out * probe)

    grads = jax.jit(jax.grad(loss))([v.value for v in mix.trainable_variables])
    assert np.all(np.asarray(grads[0]) != 0), "no gradient reached the mixing weights"
    # The loss is linear in gamma: its gradient is the loss at gamma = 1.
    unit = ref.scalar_mix(layers.astype(np.float64), mask, np.array([0.5, 0.0, -1.0]), 1.0)
    np.testing.assert_allclose(float(grads[1]), float((unit * probe).sum()), rtol=1e-5)


@jax_only
@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_char_cnn_jit_stateless_call_matches_numpy_reference(activation):
    import jax

    layer = CharCNN(**SMALL, activation=activation)
    ids = random_ids(np.random.default_rng(0), 3, 4, [4, 2, 0])
    layer.build(ids.shape)
    trainable = [v.value for v in layer.trainable_variables]
    got, _ = jax.jit(layer.stateless_call)(trainable, [], ids)
    assert isinstance(got, jax.Array)
    emb, convs, highways, proj = layer_weights64(layer)
    expected = ref.char_cnn(ids.reshape(-1, 50), emb, convs, highways, proj, activation)
    expected = expected.reshape(3, 4, 7)
    real = ids[..., 0] != 0
    got = np.asarray(got)
    np.testing.assert_allclose(got[real], expected[real], atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(got[~real], 0.0)


@jax_only
def test_the_example_of_docs_backends_runs(capsys):
    page = (LAYERS.parents[1] / "docs" / "backends.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert len(blocks) == 1, "docs/backends.md should hold one Python example"
    exec(compile(blocks[0], "docs/backends.md", "exec"), {"__name__": "docs_backends"})
    assert capsys.readouterr().out == "True (2, 4, 64) [(3,), ()]\n"
