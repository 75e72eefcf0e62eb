"""Keras backends: every layer and model under JAX, and the one error of the TensorFlow-only parts.

Every layer also goes through `run_layer_test` (which checks that its outputs are tensors of the
running backend, and on JAX that `jax.jit(layer.stateless_call)` gives the eager outputs) and
its NumPy reference tests under JAX: `make test` runs tests/layers and tests/models a second time
with `KERAS_BACKEND=jax`. The tests marked `jax_only` here need that run; the others run on
every backend. tests/test_no_tensorflow.py runs the JAX path where TensorFlow cannot be imported.
"""

import ast
import pathlib
import re

import keras
import numpy as np
import pytest

from elmo_keras.layers import CharCNN, ProjectedBiLSTM, ScalarMix
from tests import numpy_reference as ref
from tests.layers.test_char_cnn import SMALL, layer_weights64, random_ids
from tests.layers.test_scalar_mix import layers_and_mask
from tests.test_case import as_numpy

BACKEND = keras.config.backend()
jax_only = pytest.mark.skipif(
    BACKEND != "jax", reason="needs KERAS_BACKEND=jax (the second command of `make test`)"
)
PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "elmo_keras"
LAYERS = PACKAGE / "layers"
# The backend-neutral core: no TensorFlow import at module level (a TensorFlow-only branch may
# import it inside a function, run only when TensorFlow is the backend).
NEUTRAL = [
    "layers/__init__.py",
    "layers/highway.py",
    "layers/scalar_mix.py",
    "layers/char_cnn.py",
    "layers/projected_lstm_cell.py",
    "layers/projected_bilstm.py",
    "models/__init__.py",
    "models/bilm.py",
    "models/bilm_weights.py",
    "models/bilm_embedder.py",
    "models/elmo_embedding.py",
    "weights.py",
    "backend.py",
]


def _module_level_imports(path):
    imported = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    return imported


@pytest.mark.parametrize("module", NEUTRAL)
def test_the_core_does_not_import_tensorflow_or_torch(module):
    imported = _module_level_imports(PACKAGE / module)
    assert not {"tensorflow", "torch"} & imported, (
        f"{module} imports a backend; use keras.ops (backend code goes to "
        "elmo_keras/layers/tf_fast_path.py or torch_fast_path.py)"
    )


@pytest.mark.parametrize(
    "engine, modules",
    [
        ("tensorflow", ["tf_fast_path.py"]),
        ("torch", ["torch_fast_path.py", "torch_gpu_path.py", "torch_products.py"]),
    ],
)
def test_each_fast_path_is_the_one_module_of_the_layers_importing_its_backend(engine, modules):
    importing = sorted(p.name for p in LAYERS.glob("*.py") if engine in _module_level_imports(p))
    assert importing == modules


def test_the_torch_gpu_path_is_reached_through_the_torch_fast_path_only():
    def imports_it(path):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{alias.name}" for alias in node.names]
                if "elmo_keras.layers.torch_gpu_path" in [node.module, *names]:
                    return True
            if isinstance(node, ast.Import):
                if any(a.name == "elmo_keras.layers.torch_gpu_path" for a in node.names):
                    return True
        return False

    assert [p.name for p in PACKAGE.rglob("*.py") if imports_it(p)] == ["torch_fast_path.py"]


def _message(owner, backend):
    # Where TensorFlow is not installed (the PyTorch pass blocks it) the line also names the
    # extra that installs it.
    return (
        re.escape(f"`{owner}` needs the TensorFlow backend (KERAS_BACKEND=tensorflow)")
        + r"( \(pip install \"elmo-keras\[tensorflow\]\"\))?"
        + re.escape(f"; received backend '{backend}'")
    )


@pytest.mark.parametrize("input_type", ["tokens", "sentences"])
def test_string_inputs_name_themselves_and_the_backend(monkeypatch, input_type):
    # Runs on every backend: Keras is made to report another one while the constructor runs.
    from elmo_keras.models import BiLM, ElmoEmbedding

    bilm = BiLM(lstm_units=8, projection_dim=4, filters=[(1, 4)], n_highway=0)
    monkeypatch.setattr(keras.config, "backend", lambda: "torch")
    owner = f"ElmoEmbedding(input_type={input_type!r})"
    with pytest.raises(RuntimeError, match=_message(owner, "torch")):
        ElmoEmbedding(bilm, input_type=input_type)
    ElmoEmbedding(bilm, input_type="char_ids")  # character ids run everywhere


def test_require_tensorflow_backend_accepts_tensorflow(monkeypatch):
    from elmo_keras.backend import require_tensorflow_backend

    monkeypatch.setattr(keras.config, "backend", lambda: "tensorflow")
    assert require_tensorflow_backend("LanguageModel") is None


@jax_only
def test_bilstm_jit_gradient_matches_finite_differences():
    """The training path under `jax.grad`: the scan's gradient against central differences."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    layer = ProjectedBiLSTM(6, 3, n_layers=2, cell_clip=3.0, proj_clip=3.0)
    layer.build((None, None, 3))
    x = rng.normal(size=(2, 4, 3)).astype("float32")
    mask = np.array([[True] * 4, [True, True, False, False]])
    probe = rng.normal(size=(2, 2, 4, 6)).astype("float32")

    def loss(trainable):
        out, _ = layer.stateless_call(trainable, [], x, mask=mask, training=True)
        return jnp.sum(out * probe)

    trainable = [v.value for v in layer.trainable_variables]
    grads = jax.jit(jax.grad(loss))(trainable)
    # The first forward cell's kernel, a few entries, in float64 differences of float32 losses.
    k, eps = 0, 1e-2
    for index in [(0, 0), (1, 5), (2, 23)]:
        plus = [w for w in trainable]
        minus = [w for w in trainable]
        plus[k] = trainable[k].at[index].add(eps)
        minus[k] = trainable[k].at[index].add(-eps)
        numeric = (float(loss(plus)) - float(loss(minus))) / (2 * eps)
        np.testing.assert_allclose(float(grads[k][index]), numeric, rtol=2e-2, atol=2e-3)


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
        np.testing.assert_allclose(as_numpy(got), expected, atol=1e-5, rtol=1e-5)


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
    assert np.all(as_numpy(grads[0]) != 0), "no gradient reached the mixing weights"
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
    got = as_numpy(got)
    np.testing.assert_allclose(got[real], expected[real], atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(got[~real], 0.0)


@jax_only
def test_the_example_of_docs_backends_runs(capsys):
    page = (LAYERS.parents[1] / "docs" / "backends.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert len(blocks) == 1, "docs/backends.md should hold one Python example"
    exec(compile(blocks[0], "docs/backends.md", "exec"), {"__name__": "docs_backends"})
    assert capsys.readouterr().out == "True (2, 3, 4, 32) True [(3, 4, 32), (3, 0, 32)]\n"
