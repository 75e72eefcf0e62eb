"""`ProjectedBiLSTM`'s packed (length-aware) inference path against its plain path.

The plain path (`length_aware=False`, or `training=True`) is checked against the NumPy
reference in test_projected_bilstm.py; here the packed path must give its numbers. The
running backend's fast path (`projected_bilstm.fast_path()`: TensorFlow's, PyTorch's or
JAX's) is the one tested.
"""

import keras
import numpy as np
import pytest

from elmo_keras.layers import ProjectedBiLSTM
from elmo_keras.layers.projected_bilstm import fast_path
from tests.fast_path_context import fast_path_inference
from tests.test_case import as_numpy

FAST_PATH = fast_path()

pytestmark = pytest.mark.skipif(
    FAST_PATH is None, reason=f"no fast path on KERAS_BACKEND={keras.config.backend()}"
)


@pytest.fixture(autouse=True)
def _inference():
    """Every test in the fast path's context (on PyTorch that includes `torch.no_grad`)."""
    with fast_path_inference():
        yield


tensorflow_only = pytest.mark.tensorflow_only
torch_only = pytest.mark.skipif(keras.config.backend() != "torch", reason="PyTorch's autograd")


def make_pair(rng, units, proj, features, n_layers=2, **kwargs):
    """A packed layer and a plain one with the same random weights."""
    layers = []
    for length_aware in (True, False):
        layer = ProjectedBiLSTM(
            units, proj, n_layers=n_layers, return_state=True, length_aware=length_aware, **kwargs
        )
        layer.build((None, None, features))
        layers.append(layer)
    for packed_w, plain_w in zip(layers[0].weights, layers[1].weights, strict=True):
        value = 1.5 * rng.normal(size=packed_w.shape) / np.sqrt(packed_w.shape[0])
        packed_w.assign(value.astype("float32"))
        plain_w.assign(value.astype("float32"))
    return layers


def random_batch(rng, lengths, features, steps=None):
    steps = max(lengths, default=0) + 1 if steps is None else steps
    x = rng.normal(size=(len(lengths), steps, features)).astype("float32")
    mask = np.arange(steps)[None, :] < np.array(lengths, int)[:, None]
    x[~mask] = 99.0  # garbage in padding must not matter
    return x, mask


def assert_same(got, want, atol=1e-6):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(as_numpy(g), as_numpy(w), atol=atol, rtol=0)


@pytest.mark.parametrize(
    "seed, units, proj, features, lengths, skip, clip",
    [
        (0, 12, 5, 5, [7, 5, 1, 3, 0], True, 1.0),
        (1, 8, 4, 6, [0, 2, 9, 9, 4, 1], False, None),
        (2, 16, 3, 3, [1], True, None),
        (3, 10, 6, 4, [3, 8, 2, 8, 5, 0, 0, 6], False, 0.7),
        (4, 6, 2, 2, [0, 0], True, 2.0),
    ],
)
@pytest.mark.parametrize("with_state", [False, True])
def test_packed_equals_plain(seed, units, proj, features, lengths, skip, clip, with_state):
    rng = np.random.default_rng(seed)
    packed, plain = make_pair(
        rng, units, proj, features, use_skip_connections=skip, cell_clip=clip, proj_clip=clip
    )
    x, mask = random_batch(rng, lengths, features)
    state = None
    if with_state:
        b, n = len(lengths), packed.n_layers
        state = [
            rng.normal(size=(b, 2, n, proj)).astype("float32"),
            rng.normal(size=(b, 2, n, units)).astype("float32"),
        ]
    got = packed(x, mask=mask, initial_state=state)
    want = plain(x, mask=mask, initial_state=state)
    assert_same(got, want)
    for row in np.flatnonzero(np.array(lengths) == 0):  # no tokens: initial state, zeros out
        np.testing.assert_array_equal(as_numpy(got[0])[row], 0.0)
        if with_state:
            np.testing.assert_array_equal(as_numpy(got[1])[row], state[0][row])
            np.testing.assert_array_equal(as_numpy(got[2])[row], state[1][row])


@tensorflow_only
def test_packed_in_a_graph_with_dynamic_shapes_and_backward_inputs():
    import tensorflow as tf

    rng = np.random.default_rng(5)
    packed, plain = make_pair(rng, 12, 5, 4)
    spec = [tf.TensorSpec([None, None, 4]), tf.TensorSpec([None, None], tf.bool)] * 2

    def run(layer):
        return tf.function(
            lambda x, m, bx, _: layer(x, mask=m, backward_inputs=bx), input_signature=spec
        )

    run_packed, run_plain = run(packed), run(plain)
    for lengths in ([4, 1, 6], [2], [3, 3, 0, 5, 1]):
        x, mask = random_batch(rng, lengths, 4, steps=7)
        bx, _ = random_batch(rng, lengths, 4, steps=7)
        assert_same(run_packed(x, mask, bx, mask), run_plain(x, mask, bx, mask))


def test_windows_of_the_input_projection(monkeypatch):
    """Tiny windows (a few rows of gate inputs each; on JAX, chunks of 1 and 3 packed rows, and
    of 5 then 2) give the same numbers."""
    rng = np.random.default_rng(6)
    packed, plain = make_pair(rng, 8, 4, 3)
    x, mask = random_batch(rng, [11, 3, 7, 0, 11], 3)
    want = plain(x, mask=mask)
    name, sizes = ("WINDOW_ELEMENTS", (1, 4 * 8 * 5 * 3))  # windows of 1 and 3 steps
    if keras.config.backend() == "jax":
        name, sizes = ("PROJECTION_CHUNKS", ((1,), (3,), (5, 2)))
    if keras.config.backend() == "torch":  # only the steps of fewer than STACKED_ROWS rows
        monkeypatch.setattr(FAST_PATH, "STACKED_ROWS", 100)
    for size in sizes:
        monkeypatch.setattr(FAST_PATH, name, size)
        assert_same(packed(x, mask=mask), want)


@torch_only
@pytest.mark.parametrize("onednn", [True, False])
@pytest.mark.parametrize(
    "stacked_rows, window, starts",
    [
        (1, 1 << 23, []),  # every step stacked
        (3, 1, [7, 8, 9, 10]),  # the steps of 2 rows windowed, a window each
        (3, 4 * 8 * 6, [7, 10]),  # windows of 6 gate-input rows at most: steps 7-9, then 10
        (6, 1, list(range(11))),  # every step windowed
        (6, 4 * 8 * 6, [0, 1, 2, 3, 4, 6, 8]),
    ],
)
def test_torch_steps_stacked_then_windowed(monkeypatch, onednn, stacked_rows, window, starts):
    """PyTorch's steps: `[x_t, h_{t-1}]` in one product while `STACKED_ROWS` rows or more run,
    then the window's input products made ahead; the products packed for oneDNN with the
    sigmoid fused in (float32 on the CPU), or plain `addmm` then the sigmoid (other devices and
    dtypes). Here the rows run 5, 5, 5, 4, 3, 3, 3, 2, 2, 2, 2 a step; `starts` are the
    steps that start a window."""
    from elmo_keras.layers import torch_products

    if onednn and not torch_products.ONEDNN:
        pytest.skip("this PyTorch has no oneDNN linear")
    monkeypatch.setattr(torch_products, "ONEDNN", onednn)
    monkeypatch.setattr(torch_products, "_PRODUCTS", {})
    monkeypatch.setattr(FAST_PATH, "STACKED_ROWS", stacked_rows)
    monkeypatch.setattr(FAST_PATH, "WINDOW_ELEMENTS", window)
    windows = []
    real = FAST_PATH._window
    monkeypatch.setattr(FAST_PATH, "_window", lambda *a: windows.append(a[3]) or real(*a))
    rng = np.random.default_rng(6)
    packed, plain = make_pair(rng, 8, 4, 3, cell_clip=0.4, proj_clip=0.3)
    x, mask = random_batch(rng, [11, 3, 7, 0, 4, 11], 3)
    assert_same(packed(x, mask=mask), plain(x, mask=mask))
    assert sorted(windows) == sorted(starts * 4)  # two layers, two directions (two threads)
    made = [products for _, _, products in torch_products._PRODUCTS.values()]
    assert len(made) == 4
    for stacked, *others in made:
        assert [p.packed is not None for p in (*stacked, *others)] == [onednn] * 5


@tensorflow_only
def test_packing_plan_layout():
    """Sorted longest first, balanced windows, step t's rows at offsets[t]:offsets[t+1]."""
    import tensorflow as tf

    tf_fast_path = FAST_PATH
    plan = tf_fast_path.packing_plan(tf.constant([2, 5, 0, 5, 1]), 6, 4)
    np.testing.assert_array_equal(plan["lengths"], [5, 5, 2, 1, 0])
    np.testing.assert_array_equal(tf.gather(plan["order"], plan["inverse"]), np.arange(5))
    np.testing.assert_array_equal(tf.gather([2, 5, 0, 5, 1], plan["order"]), plan["lengths"])
    assert int(plan["n_windows"]) == 1 and int(plan["window"]) == 5
    np.testing.assert_array_equal(plan["counts"], [4, 3, 2, 2, 2])
    np.testing.assert_array_equal(plan["offsets"], [0, 4, 7, 9, 11, 13])
    # (batch row, step), time-major, longest rows first: step 0 of rows 1, 3, 0, 4, then step 1
    np.testing.assert_array_equal(plan["positions"][:5], [[1, 0], [3, 0], [0, 0], [4, 0], [1, 1]])
    # 4 rows x 4 gate inputs a window at the most: 5 steps of 5 rows -> 5 windows of 1 step.
    old = tf_fast_path.WINDOW_ELEMENTS
    try:
        tf_fast_path.WINDOW_ELEMENTS = 16
        plan = tf_fast_path.packing_plan(tf.constant([2, 5, 0, 5, 1]), 6, 4)
    finally:
        tf_fast_path.WINDOW_ELEMENTS = old
    assert int(plan["n_windows"]) == 5 and int(plan["window"]) == 1


def test_a_sentence_alone_equals_it_inside_a_padded_batch():
    rng = np.random.default_rng(7)
    packed, _ = make_pair(rng, 12, 5, 4)
    x, mask = random_batch(rng, [2, 6, 4, 0], 4, steps=9)
    together = as_numpy(packed(x, mask=mask)[0])
    alone = as_numpy(packed(x[2:3, :4], mask=mask[2:3, :4])[0])
    np.testing.assert_allclose(together[2:3, :, :4], alone, atol=1e-6, rtol=0)


@tensorflow_only
def test_training_takes_the_plain_path(monkeypatch):
    import tensorflow as tf

    rng = np.random.default_rng(8)
    packed, plain = make_pair(rng, 8, 4, 3)
    x, mask = random_batch(rng, [3, 5, 1], 3)

    def not_here(*args, **kwargs):
        raise AssertionError("the packed path ran during training")

    def gradients(layer):
        with tf.GradientTape() as tape:
            outputs, h, c = layer(x, mask=mask, training=True)
            loss = tf.reduce_sum(outputs**2) + tf.reduce_sum(h) + tf.reduce_sum(c)
        return tape.gradient(loss, layer.trainable_weights)

    with monkeypatch.context() as patch:
        patch.setattr(FAST_PATH, "packed_recurrence", not_here)
        got = gradients(packed)
    want = gradients(plain)
    assert all(g is not None for g in got)
    assert_same(got, want, atol=0)


def test_length_aware_in_the_config():
    layer = ProjectedBiLSTM(8, 4, length_aware=False)
    config = layer.get_config()
    assert config["length_aware"] is False
    assert ProjectedBiLSTM.from_config(config).length_aware is False
    del config["length_aware"]  # a config saved before the argument existed
    assert ProjectedBiLSTM.from_config(config).length_aware is True
    assert keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))


@torch_only
def test_on_torch_the_fast_path_runs_only_where_no_gradient_is_tracked(monkeypatch):
    """Trainable weights with autograd on take the core path (its gradients are the plain
    layer's); under `torch.no_grad`, or with the weights frozen, the packed path runs."""
    import torch

    rng = np.random.default_rng(9)
    packed, plain = make_pair(rng, 8, 4, 3)
    x, mask = random_batch(rng, [3, 5, 1], 3)
    runs = []
    real = FAST_PATH.packed_bilstm
    monkeypatch.setattr(FAST_PATH, "packed_bilstm", lambda *a: runs.append(1) or real(*a))

    def gradients(layer):
        outputs, h, c = layer(x, mask=mask)
        loss = (outputs**2).sum() + h.sum() + c.sum()
        return torch.autograd.grad(loss, [w.value for w in layer.trainable_weights])

    with torch.enable_grad():  # the module's fixture turned it off
        got, want = gradients(packed), gradients(plain)
        assert not runs
        assert_same(got, want, atol=0)
        with torch.no_grad():
            assert_same(packed(x, mask=mask), plain(x, mask=mask))
        assert len(runs) == 1
        packed.trainable = False
        assert_same(packed(x, mask=mask), plain(x, mask=mask))
        assert len(runs) == 2


@torch_only
def test_torch_packing_plan_layout():
    """Sorted longest first (stable), time-major: step t's rows at offsets[t]:offsets[t+1],
    each packed row's batch row and its position read forward and backward."""
    import torch

    plan = FAST_PATH._packing_plan(torch.tensor([2, 5, 0, 5, 1]))
    assert plan["counts"] == [4, 3, 2, 2, 2]
    assert plan["offsets"] == [0, 4, 7, 9, 11, 13]
    np.testing.assert_array_equal(as_numpy(plan["order"]), [1, 3, 0, 4, 2])
    np.testing.assert_array_equal(as_numpy(plan["rows"])[:8], [1, 3, 0, 4, 1, 3, 0, 1])
    np.testing.assert_array_equal(as_numpy(plan["positions"])[:8], [0, 0, 0, 0, 1, 1, 1, 2])
    backward = as_numpy(plan["backward_positions"])[:8]
    np.testing.assert_array_equal(backward, [4, 4, 1, 0, 3, 3, 0, 2])


@torch_only
def test_on_torch_the_two_directions_run_side_by_side_with_the_same_numbers(monkeypatch):
    """With two intra-op threads or more on the CPU, the forward and backward recurrences are
    handed to a pool of two threads with one intra-op thread each (`_direction_pool`); the
    numbers are those of the two directions one after the other, bit for bit, and the plain
    path's."""
    import threading

    import torch

    rng = np.random.default_rng(10)
    packed, plain = make_pair(rng, 12, 5, 5, cell_clip=1.0, proj_clip=1.0)
    x, mask = random_batch(rng, [7, 5, 1, 3, 0], 5)
    callers = []
    real = FAST_PATH._packed_recurrence

    def recorded(*args):
        callers.append((threading.current_thread().name, torch.get_num_threads()))
        return real(*args)

    monkeypatch.setattr(FAST_PATH, "_packed_recurrence", recorded)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch.no_grad():
            side_by_side = packed(x, mask=mask)
            in_pool = list(callers)
            pool = FAST_PATH._direction_pool(torch.device("cpu"))
            monkeypatch.setattr(FAST_PATH, "_direction_pool", lambda device: None)
            one_after_the_other = packed(x, mask=mask)
            want = plain(x, mask=mask)
    finally:
        torch.set_num_threads(threads)
    # Each direction's two layers in a pool thread with one intra-op thread; which of the two
    # pool threads takes a direction is the queue's (a fast one may take both).
    assert len(in_pool) == 4 and pool._max_workers == 2
    assert all(name.startswith("elmo-direction") and n == 1 for name, n in in_pool), in_pool
    assert_same(side_by_side, one_after_the_other, atol=0)
    assert_same(side_by_side, want)


@pytest.mark.skipif(keras.config.backend() != "jax", reason="JAX's chunked loops")
@pytest.mark.parametrize("sizes", [(8, 3), (32, 8, 3)])
@pytest.mark.parametrize("used", [0, 1, 2, 5, 8, 9, 16, 17, 22, 23])
def test_rows_in_chunks_of_several_sizes(used, sizes):
    """`_in_chunks` computes the first `used` rows (chunks of 8 while a whole one is left, then
    of 3; a size over the 23 rows skipped; the last chunk moved back to end at row 23), each
    row from its own input row, against NumPy; past `used` it computes fewer rows than the
    smallest chunk, or the first chunk (the smallest) when `used` is below it (the rest stay
    zero)."""
    import jax

    rng = np.random.default_rng(used)
    rows = rng.normal(size=(23, 4)).astype("float32")
    scale = rng.normal(size=(23, 2)).astype("float32")
    kernel = rng.normal(size=(4, 6)).astype("float32")

    def fn(a, b):
        return a @ kernel * b[:, :1] + b[:, 1:]

    run = jax.jit(lambda a, b, n: FAST_PATH._in_chunks(fn, [a, b], n, 6, "float32", sizes))
    got = as_numpy(run(rows, scale, used))
    want = rows[:used].astype(np.float64) @ kernel * scale[:used, :1] + scale[:used, 1:]
    assert got.shape == (23, 6)
    np.testing.assert_allclose(got[:used], want, atol=1e-5, rtol=0)
    smallest = sizes[-1]
    assert np.any(got[smallest - 1]), "the first chunk (the smallest) was not computed"
    past = max(used + smallest - 1, smallest)
    assert not np.any(got[past:]), "computed a whole smallest chunk past `used`"
