"""PyTorch's fast inference path on a GPU: every row at every step, one CUDA graph per shape.

`torch_fast_path` is built for the CPU: each step computes only the rows still running, from a
packing plan read back to the host (`.tolist()`), each step a dozen small operators. On a GPU
that design is bound by the host, not by the device: each operator costs the host microseconds
to launch, however few rows it computes. On an H200 (benchmarks/results/accelerator.md)
`BiLMEmbedder` on it ran at 0.47x (64 x 20) and 0.26x (512 x 20) the tokens/s of an
AllenNLP-style PyTorch loop. So on any device but the CPU, `torch_fast_path.packed_bilstm`
comes here instead:

- `masked_bilstm`: every row at every step of the batch, a row's state kept past its length
  (`torch.where`), the backward direction reading each sentence reversed through one gather, a
  layer's input products over windows of steps (`WINDOW_ELEMENTS` gate inputs) in one product
  each. Nothing is read back to the host, so the whole biLSTM can be captured.
- `packed_bilstm`: on CUDA, `masked_bilstm` captured in a CUDA graph per shape (rows, steps
  rounded up to a multiple of `STEP_BUCKET`, dtype, device, weights) at the `CAPTURE_AT`-th
  call of that shape (the second: a shape seen once never pays for a capture), then replayed:
  the call's inputs copied into the graph's own tensors, its outputs copied out. At most
  `GRAPHS` graphs are kept (the least recently used dropped), sharing one memory pool; a
  replay and its copies hold a lock. Elsewhere, under `torch.autocast`, with weights cast at
  each call (a mixed policy), or with `USE_GRAPHS = False`, `masked_bilstm` runs as it is.

Computing finished rows costs device work that packing saves, but a GPU takes about as long for
a step's products over 64 rows as over fewer. The numbers are the core path's to float
round-off (1e-6 in tests/layers/test_torch_gpu_path.py, which runs `masked_bilstm` and the
graph bookkeeping on the CPU). benchmarks/accelerator_torch.py measures the speed and the
exactness on a GPU, graphed and eager.
"""

import collections
import contextlib
import threading
import warnings

import keras
import torch

from elmo_keras.layers.torch_products import cell_products

# Steps are rounded up to a multiple of this for a graph (the added steps are padding: masked).
STEP_BUCKET = 8
# A shape is captured at its `CAPTURE_AT`-th call; `GRAPHS` graphs are kept (least recently
# used dropped), and the calls of `SEEN` shapes not captured yet counted.
CAPTURE_AT = 2
GRAPHS = 8
SEEN = 64
# A layer's input products are made at most this many gate inputs (256 MB in float32) at a time.
WINDOW_ELEMENTS = 1 << 26
USE_GRAPHS = True
GRAPH_DEVICES = ("cuda",)

_GRAPHS = collections.OrderedDict()  # key -> _Graph
_SEEN = collections.OrderedDict()  # key -> calls so far
_STATE = {"pool": None, "failed": None}
_LOCK = threading.Lock()


def masked_bilstm(bilstm, inputs, backward_inputs, lengths, state_h, state_c):
    """`ProjectedBiLSTM`'s two directions, every row at every step (`torch_fast_path.
    packed_bilstm`'s arguments and results): positions past a row's length give zeros and leave
    its state as it was after its last token."""
    with torch.inference_mode():
        batch, steps = inputs.shape[0], inputs.shape[1]
        lengths = lengths.to(device=inputs.device, dtype=torch.int64)
        position = torch.arange(steps, device=inputs.device)
        running = position[:, None] < lengths[None, :]  # [T, B]
        # The backward direction's step `t` reads position `length - 1 - t` (padding: `t`); the
        # same gather puts its outputs back in natural order.
        reverse = torch.where(running.T, lengths[:, None] - 1 - position, position)
        p = bilstm.projection_dim
        outputs = inputs.new_empty((batch, bilstm.n_layers, steps, 2 * p))
        final_h, final_c = state_h.clone(), state_c.clone()
        keep = running[:, :, None]
        for direction, cells in enumerate((bilstm.forward_cells, bilstm.backward_cells)):
            x = _gather_steps(backward_inputs, reverse) if direction else inputs
            layer_input = x.transpose(0, 1).contiguous()  # [T, B, F], time-major
            for layer, cell in enumerate(cells):
                h, c = state_h[:, direction, layer], state_c[:, direction, layer]
                out, h, c = _masked_recurrence(cell, layer_input, keep, h, c)
                out = torch.where(keep, out, 0.0)  # (not a product: padding may hold a NaN)
                if layer > 0 and bilstm.use_skip_connections:
                    out += layer_input
                final_h[:, direction, layer] = h
                final_c[:, direction, layer] = c
                natural = out.transpose(0, 1)
                if direction:
                    natural = _gather_steps(natural, reverse)
                outputs[:, layer, :, direction * p : (direction + 1) * p] = natural
                layer_input = out
    return outputs, final_h, final_c


def _gather_steps(x, index):
    """`x[b, index[b, t]]` for `x` `[B, T, F]`."""
    return x.gather(1, index[:, :, None].expand(-1, -1, x.shape[-1]))


def _masked_recurrence(cell, x, keep, h, c):
    """`cell` over time-major `x` `[T, B, F]` from `h`, `c`, every row at every step, a row's
    state kept where `keep` `[T, B, 1]` is false. Returns `(outputs [T, B, P], h, c)`."""
    _, input_product, recurrent, projection = cell_products(cell, x.dtype)
    steps, batch = x.shape[0], x.shape[1]
    units = cell.lstm_units
    window = max(1, WINDOW_ELEMENTS // max(1, batch * 4 * units))
    outputs = x.new_empty((steps, batch, cell.projection_dim))
    for t in range(steps):
        if t % window == 0:
            z = input_product(x[t : t + window].reshape(-1, x.shape[-1]))
            z = z.view(-1, batch, 4 * units)
        gates = recurrent.plus(h, z[t % window])
        ifo = torch.sigmoid(gates[:, : 3 * units])
        g = torch.tanh(gates[:, 3 * units :])
        c_new = torch.addcmul(ifo[:, units : 2 * units] * c, ifo[:, :units], g)
        if cell.cell_clip is not None:
            c_new.clamp_(-cell.cell_clip, cell.cell_clip)
        h_new = projection(ifo[:, 2 * units :] * torch.tanh(c_new))
        if cell.proj_clip is not None:
            h_new.clamp_(-cell.proj_clip, cell.proj_clip)
        outputs[t] = h_new
        h = torch.where(keep[t], h_new, h)
        c = torch.where(keep[t], c_new, c)
    return outputs, h, c


class _Graph:
    """A captured `masked_bilstm`: its input tensors, its outputs, and what it read (the cells'
    products, kept alive so that their ids in the key are not reused)."""

    def __init__(self, replay, inputs, outputs, products):
        self.replay, self.inputs, self.outputs, self.products = replay, inputs, outputs, products


def packed_bilstm(bilstm, inputs, backward_inputs, lengths, state_h, state_c):
    """`masked_bilstm`, through a CUDA graph of the call's shape where one applies (above)."""
    args = (inputs, backward_inputs, lengths, state_h, state_c)
    if not _graphs_apply(bilstm, inputs):
        return masked_bilstm(bilstm, *args)
    steps = inputs.shape[1]
    bucket = -(-steps // STEP_BUCKET) * STEP_BUCKET
    cells = [*bilstm.forward_cells, *bilstm.backward_cells]
    products = tuple(cell_products(cell, inputs.dtype) for cell in cells)
    key = (
        id(bilstm),
        tuple(id(p) for p in products),
        (inputs.shape[0], bucket, inputs.shape[2], backward_inputs.shape[2]),
        (tuple(state_h.shape), tuple(state_c.shape), inputs.dtype, str(inputs.device)),
    )
    # The graph's tensors are made, filled and copied out in inference mode whatever the
    # caller's mode (`BiLMEmbedder` calls in inference mode, `Elmo` under `torch.no_grad`): an
    # inference tensor cannot be written outside it.
    with _LOCK, torch.inference_mode():
        graph = _GRAPHS.get(key)
        if graph is None:
            calls = _SEEN.pop(key, 0) + 1
            if calls >= CAPTURE_AT:
                graph = _new_graph(bilstm, key, args, bucket, products)
            else:
                _SEEN[key] = calls
                while len(_SEEN) > SEEN:
                    _SEEN.popitem(last=False)
        if graph is not None:
            _GRAPHS.move_to_end(key)
            for static, value in zip(graph.inputs, args, strict=True):
                # (steps after the call's, left from an earlier one, are masked by the lengths)
                (static if static.shape == value.shape else static[:, :steps]).copy_(value)
            with _on(inputs.device):
                graph.replay()
            outputs, final_h, final_c = graph.outputs
            return outputs[:, :, :steps].clone(), final_h.clone(), final_c.clone()
    return masked_bilstm(bilstm, *args)


def _graphs_apply(bilstm, inputs):
    """CUDA, `USE_GRAPHS`, no capture failed, no autocast (its cache of cast weights cannot be
    captured), and weights used as stored (no cast per call)."""
    device = inputs.device.type
    if not USE_GRAPHS or device not in GRAPH_DEVICES or _STATE["failed"]:
        return False
    if torch.is_autocast_enabled(device):
        return False
    dtype = keras.backend.standardize_dtype(inputs.dtype)
    return all(w.dtype == dtype for w in bilstm.weights)


def _new_graph(bilstm, key, args, bucket, products):
    """Captures `masked_bilstm` on static copies of `args` (steps padded to `bucket`) and keeps
    it (None, and graphs off for the process, if the capture failed)."""
    inputs, backward_inputs, lengths, state_h, state_c = args
    static = [
        _padded(inputs, bucket),
        _padded(backward_inputs, bucket),
        lengths.to(torch.int64).clone(),
        state_h.clone(),
        state_c.clone(),
    ]
    try:
        with _on(inputs.device):
            replay, outputs = _capture(lambda *a: masked_bilstm(bilstm, *a), static)
    except RuntimeError as error:  # an operator the capture refuses: run eagerly from now on
        _STATE["failed"] = str(error)
        warnings.warn(
            f"elmo_keras: the CUDA graph of the biLSTM failed ({error}); running it eagerly",
            RuntimeWarning,
            stacklevel=4,
        )
        return None
    _GRAPHS[key] = _Graph(replay, static, outputs, products)
    while len(_GRAPHS) > GRAPHS:
        _GRAPHS.popitem(last=False)
    return _GRAPHS[key]


def _on(device):
    """`device` made the current CUDA device (its streams and graphs are the device's own)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def _padded(x, steps):
    """A copy of `x` `[B, T, F]` with zeros after its `T` steps, up to `steps`."""
    padded = x.new_zeros((x.shape[0], steps, *x.shape[2:]))
    padded[:, : x.shape[1]] = x
    return padded


def _capture(function, static):
    """`(replay, outputs)`: `function(*static)` run once on a side stream (cuBLAS makes its
    handles and workspaces outside the capture), then captured into a CUDA graph in the shared
    pool. The pool is safe to share: graphs never run at once (the lock), and each replay's
    outputs are copied out before another graph runs."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        function(*static)
    torch.cuda.current_stream().wait_stream(stream)
    if _STATE["pool"] is None:
        _STATE["pool"] = torch.cuda.graph_pool_handle()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=_STATE["pool"]):
        outputs = function(*static)
    return graph.replay, outputs
