import keras
import numpy as np
import pytest

from elmo_keras.layers import ProjectedBiLSTM, ProjectedLSTMCell
from tests import numpy_reference as ref
from tests.test_case import as_numpy, run_layer_test

UNITS, PROJ, FEATURES = 12, 5, 5


def tf_layout(cell):
    """Keras-order weights of a cell -> TensorFlow's (W_0, B, W_P_0), written out here."""
    w = np.concatenate([as_numpy(cell.kernel), as_numpy(cell.recurrent_kernel)])
    w = w.astype(np.float64)
    b = as_numpy(cell.bias, np.float64)
    i, f, c, o = np.split(w, 4, axis=1)
    bi, bf, bc, bo = np.split(b, 4)
    return (
        np.concatenate([i, c, f, o], 1),
        np.concatenate([bi, bc, bf, bo]),
        as_numpy(cell.projection_kernel, np.float64),
    )


def make_layer(rng, scale=1.0, **kwargs):
    layer = ProjectedBiLSTM(UNITS, PROJ, n_layers=2, return_state=True, **kwargs)
    layer.build((None, None, FEATURES))
    for w in layer.weights:
        w.assign((scale * rng.normal(size=w.shape) / np.sqrt(w.shape[0])).astype("float32"))
    return layer


def reference_cells(layer):
    return [
        [tf_layout(c) for c in layer.forward_cells],
        [tf_layout(c) for c in layer.backward_cells],
    ]


def run_reference(layer, x, lengths, state=None):
    cells = reference_cells(layer)
    outs, finals = [], []
    for b, n in enumerate(lengths):
        s = None
        if state is not None:
            h, c = state
            s = {
                (d, k): (h[b, d, k].astype(np.float64), c[b, d, k].astype(np.float64))
                for d in (0, 1)
                for k in range(layer.n_layers)
            }
        layers, final = ref.bilstm_sentence(
            x[b, :n].astype(np.float64),
            cells,
            layer.use_skip_connections,
            layer.cell_clip,
            layer.proj_clip,
            s,
        )
        outs.append(layers)
        finals.append(final)
    return outs, finals


# The loop's variants: unrolled, both directions in one loop, both (the plain path).
LOOPS = [{}, {"unroll": 3}, {"stack_directions": True}, {"stack_directions": True, "unroll": 2}]


# Every combination in the plain loop; the loop variants with skip connections and state.
CASES = [(skip, state, {}) for skip in (True, False) for state in (False, True)]
CASES += [(True, True, loop) for loop in LOOPS[1:]]


@pytest.mark.parametrize("use_skip, with_state, loop", CASES, ids=str)
def test_bilstm_matches_numpy_reference(use_skip, with_state, loop):
    rng = np.random.default_rng(0)
    # Large weights and small clips so that both clips are active.
    layer = make_layer(
        rng, scale=3.0, use_skip_connections=use_skip, cell_clip=1.5, proj_clip=0.4, **loop
    )
    lengths = [7, 5, 1, 3, 0]
    x = rng.normal(size=(5, 7, FEATURES)).astype("float32")
    mask = np.arange(7)[None, :] < np.array(lengths)[:, None]
    x[~mask] = 99.0  # garbage in padding must not matter
    state = None
    if with_state:
        state = (
            rng.normal(size=(5, 2, 2, PROJ)).astype("float32") * 0.3,
            rng.normal(size=(5, 2, 2, UNITS)).astype("float32"),
        )
    # A loop variant is the plain path's (a fast path, where one applies, is not).
    out, h, c = layer(x, mask=mask, initial_state=state, length_aware=not loop)
    out, h, c = as_numpy(out), as_numpy(h), as_numpy(c)
    expected, finals = run_reference(layer, x, lengths, state)
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(out[b, :, :n], expected[b], atol=1e-5, rtol=1e-5)
        np.testing.assert_array_equal(out[b, :, n:], 0.0)
        for d in (0, 1):
            for k in range(2):
                if n == 0:  # nothing to read: the state passes through unchanged
                    want_h = state[0][b, d, k] if state else np.zeros(PROJ)
                    want_c = state[1][b, d, k] if state else np.zeros(UNITS)
                else:
                    want_h, want_c = finals[b][(d, k)]
                np.testing.assert_allclose(h[b, d, k], want_h, atol=1e-5, rtol=1e-5)
                np.testing.assert_allclose(c[b, d, k], want_c, atol=1e-5, rtol=1e-5)
    # The clips really acted: without them the reference gives other numbers.
    cells = reference_cells(layer)
    unclipped, _ = ref.bilstm_sentence(x[0].astype(np.float64), cells, use_skip, None, None)
    assert np.abs(unclipped - expected[0]).max() > 1e-2
    assert np.abs(out[:, :, :, :PROJ]).max() <= 0.4 + 1e-6 or use_skip


@pytest.mark.parametrize("loop", LOOPS[1:], ids=["unroll", "stacked", "stacked-unroll"])
def test_loop_variants_give_the_plain_loops_numbers_and_gradients(loop):
    """Unrolled and stacked loops against the plain one, outputs, final states and, on JAX,
    the gradients of every weight, with dropout off (its masks are drawn differently)."""
    rng = np.random.default_rng(1)
    plain = make_layer(rng, scale=2.0)
    variant = make_layer(rng, **loop)
    for mine, theirs in zip(variant.weights, plain.weights, strict=True):
        mine.assign(theirs)
    x = rng.normal(size=(4, 6, FEATURES)).astype("float32")
    mask = np.arange(6)[None, :] < np.array([6, 2, 5, 1])[:, None]
    state = (
        rng.normal(size=(4, 2, 2, PROJ)).astype("float32") * 0.3,
        rng.normal(size=(4, 2, 2, UNITS)).astype("float32"),
    )
    for got, want in zip(
        variant(x, mask=mask, initial_state=state, length_aware=False),
        plain(x, mask=mask, initial_state=state, length_aware=False),
        strict=True,
    ):
        np.testing.assert_allclose(as_numpy(got), as_numpy(want), atol=1e-6, rtol=1e-6)
    if keras.backend.backend() != "jax":
        return
    import jax

    def loss(values, layer):
        with keras.StatelessScope(state_mapping=list(zip(layer.weights, values, strict=True))):
            out, h, c = layer(x, mask=mask, initial_state=state, training=True)
            return (out**2).sum() + (h * c[..., :PROJ]).sum()

    want = jax.grad(loss)([w.value for w in plain.weights], plain)
    got = jax.grad(loss)([w.value for w in variant.weights], variant)
    for weight, g, w in zip(plain.weights, got, want, strict=True):
        assert float(np.abs(w).max()) > 0, weight.path
        np.testing.assert_allclose(g, w, atol=1e-6, rtol=1e-6, err_msg=weight.path)


def test_bilstm_padding_invariance_every_layer_and_direction():
    rng = np.random.default_rng(1)
    layer = make_layer(rng)
    sentence = rng.normal(size=(1, 4, FEATURES)).astype("float32")
    alone = as_numpy(layer(sentence)[0])[0]
    batch = rng.normal(size=(3, 9, FEATURES)).astype("float32")
    batch[1, :4] = sentence[0]
    mask = np.arange(9)[None, :] < np.array([9, 4, 2])[:, None]
    inside = as_numpy(layer(batch, mask=mask)[0])[1, :, :4]
    np.testing.assert_allclose(inside, alone, atol=1e-6, rtol=0)


def test_forward_state_carry_equals_one_long_run():
    rng = np.random.default_rng(2)
    layer = make_layer(rng)
    x = rng.normal(size=(2, 8, FEATURES)).astype("float32")
    whole, h_whole, c_whole = layer(x)
    first, h1, c1 = layer(x[:, :5])
    second, h2, c2 = layer(x[:, 5:], initial_state=[h1, c1])
    forward = np.concatenate([as_numpy(first), as_numpy(second)], axis=2)[..., :PROJ]
    np.testing.assert_allclose(forward, as_numpy(whole)[..., :PROJ], atol=1e-6)
    np.testing.assert_allclose(as_numpy(h2)[:, 0], as_numpy(h_whole)[:, 0], atol=1e-6)


def test_cell_steps_inside_keras_rnn_match_the_reference():
    rng = np.random.default_rng(3)
    cell = ProjectedLSTMCell(UNITS, PROJ, cell_clip=3.0, proj_clip=3.0)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    x = rng.normal(size=(2, 6, FEATURES)).astype("float32")
    got = as_numpy(rnn(x))
    w0, b, wp = tf_layout(cell)
    for i in range(2):
        expected, _, _ = ref.lstm_sentence(
            x[i].astype(np.float64), w0, b, wp, np.zeros(PROJ), np.zeros(UNITS), 3.0, 3.0
        )
        np.testing.assert_allclose(got[i], expected, atol=1e-5)


def lengths_mask(lengths, steps):
    return np.arange(steps)[None, :] < np.array(lengths)[:, None]


def test_bilstm_layer():
    x = np.random.default_rng(4).normal(size=(3, 5, 4)).astype("float32")
    run_layer_test(
        ProjectedBiLSTM,
        {
            "lstm_units": 8,
            "projection_dim": 4,
            "n_layers": 2,
            "cell_clip": 2.0,
            "proj_clip": None,
            "use_skip_connections": False,
            "dropout": 0.1,
            "cell_forget_bias": 0.5,
        },
        x,
        (3, 2, 5, 8),
        mask=lengths_mask([5, 3, 1], 5),
        expected_num_trainable_weights=2 * 2 * 4,  # 2 directions x 2 layers x 4 matrices
    )


def test_bilstm_layer_returning_state():
    x = np.random.default_rng(5).normal(size=(2, 4, 3)).astype("float32")
    mask = lengths_mask([4, 2], 4)
    run_layer_test(
        ProjectedBiLSTM,
        {"lstm_units": 6, "projection_dim": 2, "n_layers": 1, "return_state": True},
        x,
        [(2, 1, 4, 4), (2, 2, 1, 2), (2, 2, 1, 6)],
        mask=mask,
        expected_num_trainable_weights=2 * 4,
        run_keras_round_trip=False,  # the same save path as `test_bilstm_layer`
    )


@pytest.mark.parametrize("feature_major", [False, True])
def test_cell_step_in_either_layout_matches_numpy(feature_major):
    """`recurrent_step` (clips, a forget bias) row-major and feature-major (every array
    transposed, as JAX's fast path runs it) against one step of the NumPy float64 LSTM."""
    rng = np.random.default_rng(8)
    cell = ProjectedLSTMCell(8, 4, cell_clip=0.8, proj_clip=0.5, forget_bias=0.5)
    cell.build((None, 3))
    for w in cell.weights:
        w.assign((1.5 * rng.normal(size=w.shape) / np.sqrt(w.shape[0])).astype("float32"))
    x = rng.normal(size=(5, 3)).astype("float32")
    h = rng.normal(size=(5, 4)).astype("float32")
    c = rng.normal(size=(5, 8)).astype("float32")
    w0, b, wp = tf_layout(cell)
    want = [
        ref.lstm_sentence(x[r : r + 1].astype(np.float64), w0, b, wp, h[r], c[r], 0.8, 0.5, 0.5)
        for r in range(5)
    ]
    z = as_numpy(cell.input_projection(x))
    kernels = cell.step_kernels("float32", feature_major=feature_major)
    if feature_major:
        z, h, c = z.T, h.T, c.T
    z, h, c = (keras.ops.convert_to_tensor(a) for a in (z, h, c))
    h_new, c_new = cell.recurrent_step(z, h, c, kernels, feature_major=feature_major)
    h_new, c_new = as_numpy(h_new), as_numpy(c_new)
    if feature_major:
        h_new, c_new = h_new.T, c_new.T
    np.testing.assert_allclose(as_numpy(h_new), [w[1] for w in want], atol=1e-6, rtol=0)
    np.testing.assert_allclose(as_numpy(c_new), [w[2] for w in want], atol=1e-6, rtol=0)
    assert np.abs(np.array([w[2] for w in want])).max() == pytest.approx(0.8)  # clipped


def test_cells_stepped_together_in_one_batched_product_match_numpy():
    """Two cells of one configuration stepped at once, feature-major, their kernels and arrays
    stacked on a leading axis (as JAX's fast path runs a layer's two directions): each
    against its own NumPy float64 step."""
    rng = np.random.default_rng(9)
    cells = [ProjectedLSTMCell(8, 4, cell_clip=0.8, proj_clip=0.5, forget_bias=0.5) for _ in "ab"]
    for cell in cells:
        cell.build((None, 3))
        for w in cell.weights:
            w.assign((1.5 * rng.normal(size=w.shape) / np.sqrt(w.shape[0])).astype("float32"))
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    h = rng.normal(size=(2, 5, 4)).astype("float32")
    c = rng.normal(size=(2, 5, 8)).astype("float32")
    kernels = [cell.step_kernels("float32", feature_major=True) for cell in cells]
    kernels = [keras.ops.stack([as_numpy(k) for k in each]) for each in zip(*kernels, strict=True)]
    z = np.stack([as_numpy(cell.input_projection(x[d])).T for d, cell in enumerate(cells)])
    arrays = (z, h.transpose(0, 2, 1), c.transpose(0, 2, 1))
    h_new, c_new = cells[0].recurrent_step(
        *(keras.ops.convert_to_tensor(a) for a in arrays), kernels, feature_major=True
    )
    h_new, c_new = as_numpy(h_new).transpose(0, 2, 1), as_numpy(c_new).transpose(0, 2, 1)
    for d, cell in enumerate(cells):
        w0, b, wp = tf_layout(cell)
        want = [
            ref.lstm_sentence(
                x[d, r : r + 1].astype(np.float64), w0, b, wp, h[d, r], c[d, r], 0.8, 0.5, 0.5
            )
            for r in range(5)
        ]
        np.testing.assert_allclose(h_new[d], [w[1] for w in want], atol=1e-6, rtol=0)
        np.testing.assert_allclose(c_new[d], [w[2] for w in want], atol=1e-6, rtol=0)


def test_cell_inside_keras_rnn():
    x = np.random.default_rng(6).normal(size=(2, 5, 3)).astype("float32")
    cell = ProjectedLSTMCell(8, 4, cell_clip=3.0, proj_clip=2.0, forget_bias=0.0)
    run_layer_test(
        keras.layers.RNN,
        {"cell": cell, "return_sequences": True},
        x,
        (2, 5, 4),
        mask=lengths_mask([5, 2], 5),
        expected_num_trainable_weights=4,
    )


def test_bilstm_reads_the_mask_of_a_keras_masking_layer():
    inputs = keras.Input((None, 4))
    outputs = ProjectedBiLSTM(8, 4, n_layers=2)(keras.layers.Masking(0.0)(inputs))
    model = keras.Model(inputs, outputs)
    x = np.random.default_rng(4).normal(size=(3, 5, 4)).astype("float32")
    x[1, 3:] = 0.0
    out = as_numpy(model(x))
    np.testing.assert_array_equal(out[1, :, 3:], 0.0)  # the Keras mask reached the layer
    assert not np.any(out[0] == 0.0)


def test_bilstm_weight_count_of_the_published_configuration():
    layer = ProjectedBiLSTM(4096, 512, n_layers=2)
    layer.build((None, None, 512))
    # REFERENCE.md: the LSTMs hold 75.6M parameters.
    assert layer.count_params() == 4 * ((512 + 512) * 4 * 4096 + 4 * 4096 + 4096 * 512)
    assert round(layer.count_params() / 1e6, 1) == 75.6


def test_bilstm_mixed_precision_and_dropout_in_training():
    layer = ProjectedBiLSTM(8, 4, dropout=0.5, dtype="mixed_float16")
    x = np.ones((2, 3, 4), "float32")
    out = layer(x)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    a, b = as_numpy(layer(x, training=True)), as_numpy(layer(x, training=True))
    assert not np.allclose(a, b)  # dropout active in training
    np.testing.assert_array_equal(as_numpy(layer(x)), as_numpy(layer(x)))  # not at inference


@pytest.mark.tensorflow_only  # reads TensorFlow's graph
@pytest.mark.parametrize("length_aware", [True, False])
def test_bilstm_steps_read_no_weights_under_mixed_bfloat16(length_aware):
    # Under a mixed policy every read of a float32 weight is followed by a cast: a step that
    # read its kernels would copy them at every position (40 MB at the published size). The
    # loops read them once; a step body (a while body with no loop inside) reads none.
    import tensorflow as tf

    layer = ProjectedBiLSTM(UNITS, PROJ, n_layers=2, dtype="mixed_bfloat16")
    run = tf.function(lambda x, m: layer(x, mask=m, training=False, length_aware=length_aware))
    graph = run.get_concrete_function(
        tf.TensorSpec([None, None, FEATURES]), tf.TensorSpec([None, None], tf.bool)
    ).graph
    bodies = [f for f in graph.as_graph_def().library.function if "body" in f.signature.name]
    steps = [f for f in bodies if not {"While", "StatelessWhile"} & {n.op for n in f.node_def}]
    assert len(steps) == 4  # one per layer and direction
    for step in steps:
        reads = [n.name for n in step.node_def if n.op == "ReadVariableOp"]
        assert reads == [], f"{step.signature.name} reads {reads}"
    x = np.random.default_rng(0).normal(size=(2, 3, FEATURES)).astype("float32")
    mask = np.array([[True, True, True], [True, True, False]])
    assert run(x, mask).dtype == tf.bfloat16


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lstm_units": 0, "projection_dim": 4}, "`lstm_units` must be an integer >= 1"),
        ({"lstm_units": 4, "projection_dim": 4, "cell_clip": -1}, "`cell_clip` must be a positive"),
        ({"lstm_units": 4, "projection_dim": 4, "dropout": 1.0}, "`dropout` must be a number in"),
        ({"lstm_units": 4, "projection_dim": 4, "n_layers": 0}, "`n_layers` must be an integer"),
        ({"lstm_units": 4, "projection_dim": 4, "unroll": 0}, "`unroll` must be an integer >= 1"),
    ],
)
def test_bilstm_argument_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")):
        ProjectedBiLSTM(**kwargs)


def test_bilstm_initial_state_must_be_a_pair():
    layer = ProjectedBiLSTM(4, 2)
    with pytest.raises(ValueError, match="initial_state"):
        layer(np.ones((1, 2, 2), "float32"), initial_state=[np.zeros((1, 2, 2, 2), "float32")])


@pytest.mark.parametrize("cls", [ProjectedBiLSTM, ProjectedLSTMCell])
def test_old_name_units_still_works_and_warns(cls):
    with pytest.warns(DeprecationWarning, match="units"):
        old = cls(units=8, projection_dim=4, name="layer")
    new = cls(lstm_units=8, projection_dim=4, name="layer")
    assert old.get_config() == new.get_config()
    with pytest.warns(DeprecationWarning, match="lstm_units"):
        assert old.units == 8
    with pytest.raises(ValueError, match="both `lstm_units` and its old name `units`"):
        cls(lstm_units=8, units=6, projection_dim=4)


def test_a_config_saved_with_units_still_loads():
    config = ProjectedBiLSTM(8, 4, n_layers=1).get_config()
    config["units"] = config.pop("lstm_units")
    layer = ProjectedBiLSTM.from_config(config)
    assert layer.lstm_units == 8 and "units" not in layer.get_config()
