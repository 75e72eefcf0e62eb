"""PyTorch's GPU path (`torch_gpu_path`), run on the CPU: the masked recurrence against the core
path, and the CUDA-graph bookkeeping with the capture replaced by a plain call.

A CUDA graph itself needs a GPU: benchmarks/accelerator_torch.py runs the captured path there
(exactness and speed). Here the capture is `fake_capture`, which runs the function again at each
replay into the same output tensors, as a graph would, so what the bookkeeping must get right is
checked: the call's values copied in, the outputs copied out, one capture per shape, steps in
buckets, weights changed, the least recently used dropped, a failed capture.
"""

import collections
import warnings

import keras
import numpy as np
import pytest

from tests.fast_path_context import fast_path_inference
from tests.layers.test_packed_bilstm import assert_same, make_pair, random_batch
from tests.test_case import as_numpy

pytestmark = pytest.mark.skipif(keras.config.backend() != "torch", reason="PyTorch's path")


@pytest.fixture(autouse=True)
def _inference():
    with fast_path_inference():
        yield


@pytest.fixture
def gpu_path():
    from elmo_keras.layers import torch_gpu_path

    return torch_gpu_path


def call_masked(function, layer, x, mask, backward=None, state=None):
    """`function` (`masked_bilstm` or `packed_bilstm`) on NumPy inputs, as the layer calls it."""
    import torch

    b, n = x.shape[0], layer.n_layers
    if state is None:
        state = [np.zeros((b, 2, n, layer.projection_dim)), np.zeros((b, 2, n, layer.lstm_units))]
    inputs = torch.as_tensor(x)
    backward = inputs if backward is None else torch.as_tensor(backward)
    lengths = torch.as_tensor(mask.sum(1), dtype=torch.int32)
    h, c = (torch.as_tensor(s, dtype=torch.float32) for s in state)
    return function(layer, inputs, backward, lengths, h, c)


@pytest.mark.parametrize(
    "seed, units, proj, features, lengths, skip, clip",
    [
        (0, 12, 5, 5, [7, 5, 1, 3, 0], True, 1.0),
        (1, 8, 4, 6, [0, 2, 9, 9, 4, 1], False, None),
        (2, 16, 3, 3, [1], True, None),
        (4, 6, 2, 2, [0, 0], True, 2.0),
    ],
)
def test_masked_equals_plain(gpu_path, seed, units, proj, features, lengths, skip, clip):
    """Every row at every step, with a carried state and distinct backward inputs: the core
    path's outputs and final states; rows without tokens give zeros and keep their state."""
    rng = np.random.default_rng(seed)
    _, plain = make_pair(
        rng, units, proj, features, use_skip_connections=skip, cell_clip=clip, proj_clip=clip
    )
    x, mask = random_batch(rng, lengths, features)
    backward, _ = random_batch(rng, lengths, features)
    nan_padded = np.where(mask[:, :, None], x, np.nan).astype("float32")
    b, n = len(lengths), plain.n_layers
    state = [
        rng.normal(size=(b, 2, n, proj)).astype("float32"),
        rng.normal(size=(b, 2, n, units)).astype("float32"),
    ]
    got = call_masked(gpu_path.masked_bilstm, plain, x, mask, backward, state)
    want = plain(x, mask=mask, initial_state=state, backward_inputs=backward)
    assert_same(got, want)
    for row in np.flatnonzero(np.array(lengths) == 0):
        np.testing.assert_array_equal(as_numpy(got[0])[row], 0.0)
        np.testing.assert_array_equal(as_numpy(got[1])[row], state[0][row])
    # NaN in the padding stays there: zeros out at padding, the same numbers elsewhere.
    assert_same(call_masked(gpu_path.masked_bilstm, plain, nan_padded, mask, backward, state), got)


def test_windows_of_the_input_products(gpu_path, monkeypatch):
    """Input products made one step at a time, then three at a time: the same numbers."""
    rng = np.random.default_rng(6)
    _, plain = make_pair(rng, 8, 4, 3, cell_clip=0.4, proj_clip=0.3)
    x, mask = random_batch(rng, [11, 3, 7, 0, 4, 11], 3)
    want = plain(x, mask=mask)
    for window in (1, 3):
        monkeypatch.setattr(gpu_path, "WINDOW_ELEMENTS", window * 6 * 4 * 8)
        assert_same(call_masked(gpu_path.masked_bilstm, plain, x, mask)[0], want[0])


def test_graphs_only_on_cuda_with_weights_as_stored(gpu_path, monkeypatch):
    import torch

    _, plain = make_pair(np.random.default_rng(1), 8, 4, 3)
    inputs = torch.zeros((2, 3, 3))
    assert not gpu_path._graphs_apply(plain, inputs)  # the CPU
    monkeypatch.setattr(gpu_path, "GRAPH_DEVICES", ("cpu",))
    assert gpu_path._graphs_apply(plain, inputs)
    assert not gpu_path._graphs_apply(plain, inputs.to(torch.float16))  # cast at each call
    with torch.autocast("cpu"):  # its cache of cast weights cannot be captured
        assert not gpu_path._graphs_apply(plain, inputs)
    monkeypatch.setattr(gpu_path, "USE_GRAPHS", False)
    assert not gpu_path._graphs_apply(plain, inputs)


@pytest.fixture
def fake_graphs(gpu_path, monkeypatch):
    """Graphs on (the CPU), with a capture that runs the function again at each replay; returns
    the list of captured static shapes (steps)."""
    import torch

    captured = []

    def fake_capture(function, static):
        captured.append(static[0].shape[1])
        outputs = function(*static)

        def replay():
            with torch.inference_mode():  # the outputs are inference tensors (made in it)
                for output, value in zip(outputs, function(*static), strict=True):
                    output.copy_(value)

        return replay, outputs

    monkeypatch.setattr(gpu_path, "_capture", fake_capture)
    monkeypatch.setattr(gpu_path, "GRAPH_DEVICES", ("cpu",))
    monkeypatch.setattr(gpu_path, "_GRAPHS", collections.OrderedDict())
    monkeypatch.setattr(gpu_path, "_SEEN", collections.OrderedDict())
    monkeypatch.setattr(gpu_path, "_STATE", {"pool": None, "failed": None})
    return captured


def test_a_shape_is_captured_at_its_second_call_then_replayed(gpu_path, fake_graphs):
    rng = np.random.default_rng(2)
    _, plain = make_pair(rng, 8, 4, 3, cell_clip=0.5)
    calls = []
    for lengths, steps in [([5, 2, 0], 6), ([4, 6, 1], 6), ([7, 3, 2], 7), ([1, 1, 1], 2)]:
        x, mask = random_batch(rng, lengths, 3, steps=steps)
        backward, _ = random_batch(rng, lengths, 3, steps=steps)
        state = [rng.normal(size=(3, 2, 2, 4)), rng.normal(size=(3, 2, 2, 8))]
        got = call_masked(gpu_path.packed_bilstm, plain, x, mask, backward, state)
        want = call_masked(gpu_path.masked_bilstm, plain, x, mask, backward, state)
        assert got[0].shape == want[0].shape == (3, 2, steps, 8)
        assert_same(got, want)
        calls.append([as_numpy(g).copy() for g in got] + [got])
    # 6 and 7 steps share the bucket of 8: captured at the second call, replayed at the third;
    # 2 steps (a bucket of 8 too, same rows and state shapes) replays the same graph.
    assert fake_graphs == [8]
    for values in calls:  # the results handed out are copies: later replays left them alone
        for value, returned in zip(values[:3], values[3], strict=True):
            np.testing.assert_array_equal(as_numpy(returned), value)


def test_new_weights_new_graph_and_the_oldest_dropped(gpu_path, fake_graphs, monkeypatch):
    monkeypatch.setattr(gpu_path, "GRAPHS", 1)
    rng = np.random.default_rng(3)
    _, plain = make_pair(rng, 8, 4, 3)
    x, mask = random_batch(rng, [4, 2], 3, steps=5)
    for _ in range(2):
        call_masked(gpu_path.packed_bilstm, plain, x, mask)
    plain.weights[0].assign(plain.weights[0] * 0.5)  # new products: a new shape key
    first = as_numpy(call_masked(gpu_path.packed_bilstm, plain, x, mask)[0])
    second = as_numpy(call_masked(gpu_path.packed_bilstm, plain, x, mask)[0])
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(second, as_numpy(plain(x, mask=mask)[0]), atol=1e-6, rtol=0)
    assert fake_graphs == [8, 8] and len(gpu_path._GRAPHS) == 1


def test_a_failed_capture_warns_once_and_runs_eagerly(gpu_path, fake_graphs, monkeypatch):
    def refused(function, static):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(gpu_path, "_capture", refused)
    rng = np.random.default_rng(4)
    _, plain = make_pair(rng, 8, 4, 3)
    x, mask = random_batch(rng, [4, 2], 3, steps=5)
    call_masked(gpu_path.packed_bilstm, plain, x, mask)  # seen once: no capture yet
    with pytest.warns(RuntimeWarning, match="CUDA graph of the biLSTM failed .*eagerly"):
        got = call_masked(gpu_path.packed_bilstm, plain, x, mask)
    assert_same(got[:1], plain(x, mask=mask)[:1])
    assert "not permitted" in gpu_path._STATE["failed"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second try, no second warning
        got = call_masked(gpu_path.packed_bilstm, plain, x, mask)
    assert_same(got[:1], plain(x, mask=mask)[:1])


def test_the_fixtures_through_the_masked_path(gpu_path, monkeypatch):
    """A `BiLM` whose biLSTM runs `masked_bilstm` (as on a GPU) over both fixtures' walk
    (`benchmarks/fixture_check.py`: 10 batches of 3 sentences, the state carried): the top
    layer within 1e-5 of the fixtures, as the other paths."""
    from benchmarks import fixture_check
    from elmo_keras.layers import torch_fast_path
    from elmo_keras.models import BiLM

    ran = []
    masked = gpu_path.masked_bilstm
    monkeypatch.setattr(torch_fast_path, "packed_bilstm", lambda *a: ran.append(1) or masked(*a))

    def load(folder):
        bilm = BiLM.from_bilm_tf(folder / "options.json", folder / "lm_weights.hdf5")

        def run(inputs):
            out = bilm(inputs)
            return as_numpy(out["activations"])[:, -1], {
                "state_h": out["state_h"],
                "state_c": out["state_c"],
            }

        return run

    worst = fixture_check.top_layer_diffs(load)
    assert len(ran) == 20
    assert max(worst.values()) <= 1e-5, worst


def test_capture_at_the_first_call(gpu_path, fake_graphs, monkeypatch):
    """`CAPTURE_AT = 1` (the accelerator check's exactness runs): every call's result is a
    replay's, the first capture included."""
    monkeypatch.setattr(gpu_path, "CAPTURE_AT", 1)
    rng = np.random.default_rng(5)
    _, plain = make_pair(rng, 8, 4, 3)
    for steps in (3, 9):
        x, mask = random_batch(rng, [steps, 1], 3, steps=steps)
        assert_same(
            call_masked(gpu_path.packed_bilstm, plain, x, mask)[:1], plain(x, mask=mask)[:1]
        )
    assert fake_graphs == [8, 16]


def test_the_capture_calls_pytorch_as_its_signatures_say(gpu_path, monkeypatch):
    """`_capture` against stand-ins of the CUDA calls it makes (no GPU here), each checking
    its arguments against the real function's signature: the warm-up on a side stream, then
    the capture in the shared pool, the outputs the function's and `replay` the graph's."""
    import contextlib
    import inspect

    import torch

    calls = []
    real = {name: getattr(torch.cuda, name) for name in ("Stream", "stream", "graph")}

    def checked(function, name, result=None):
        signature = inspect.signature(function)

        def stand_in(*args, **kwargs):
            signature.bind(*args, **kwargs)
            calls.append(name)
            return result

        return stand_in

    class Stream:
        wait_stream = checked(real["Stream"].wait_stream, "wait_stream")

        def __init__(self, *args, **kwargs):
            inspect.signature(real["Stream"]).bind(*args, **kwargs)

    class Graph:
        def replay(self):
            calls.append("replay")

    @contextlib.contextmanager
    def graph(*args, **kwargs):
        inspect.signature(real["graph"]).bind(*args, **kwargs)
        calls.append("capture")
        yield

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *a: Stream())
    stream = checked(real["stream"], "stream", contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "stream", stream)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: ("pool", 0))
    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", graph)
    monkeypatch.setattr(gpu_path, "_STATE", {"pool": None, "failed": None})
    ran = []
    replay, outputs = gpu_path._capture(lambda *a: ran.append(a) or ("out",), (1, 2))
    assert outputs == ("out",) and ran == [(1, 2), (1, 2)]
    assert calls == ["wait_stream", "stream", "wait_stream", "capture"]
    replay()
    assert calls[-1] == "replay" and gpu_path._STATE["pool"] == ("pool", 0)


def test_a_graph_captured_in_inference_mode_replays_under_no_grad(gpu_path, fake_graphs):
    """`BiLMEmbedder` calls in `torch.inference_mode`, `Elmo` under `torch.no_grad`: a graph
    made in one mode replays in the other (its tensors are written in inference mode only)."""
    import torch

    _, plain = make_pair(np.random.default_rng(6), 8, 4, 3)
    x, mask = random_batch(np.random.default_rng(7), [4, 2], 3, steps=5)
    for mode in (torch.inference_mode, torch.inference_mode, torch.no_grad, torch.no_grad):
        with mode():
            got = call_masked(gpu_path.packed_bilstm, plain, x, mask)
        assert_same(got[:1], plain(x, mask=mask)[:1])
    assert fake_graphs == [8]
