"""PyTorch's fast inference path for the biLM: `tf_fast_path`'s twin behind the same seam.

The core (`ProjectedBiLSTM`, `BiLM`, in `keras.ops`) runs its recurrence as `keras.ops.scan`,
on PyTorch a Python loop of small operators over every padded position, with autograd at each.
At inference, with `length_aware`, and when no gradient can be asked for (`applies`), the
layers call this module instead (`projected_bilstm.fast_path()`), as they call `tf_fast_path`:

- `distinct_tokens` and `embed_distinct_tokens`: the char CNN once per distinct token of the
  batch, in chunks of `CHAR_CNN_CHUNK`, gathered back to the positions with `<S>` and `</S>`
  around each sentence; its sums run here (`_char_cnn`, 1.7 times as fast on one core as
  through the layer's MKL products);
- `packed_bilstm`: rows sorted by length, the real positions packed time-major, step `t`
  computing only the rows still running (`_packed_recurrence`), into preallocated outputs. The
  two directions run at once, each in a thread with half of PyTorch's intra-op threads
  (`_direction_pool`), as TensorFlow runs the two loops of its graph. On any other device than
  the CPU, `torch_gpu_path` runs the biLSTM instead (every row at every step, CUDA graphs).

The products go through oneDNN, the weights packed once for it (`torch_products`). All runs
under `torch.inference_mode`, with the core path's numbers to float round-off (1e-6 in
tests/layers/test_packed_bilstm.py and tests/models/test_length_aware.py, on every backend).
Imported only when PyTorch is the Keras backend: on another backend nothing imports torch.
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import keras
import numpy as np
import torch

from elmo_keras.layers import torch_gpu_path
from elmo_keras.layers.torch_products import cell_products, char_cnn_products

# The char CNN runs over the distinct tokens at most this many at a time (as on TensorFlow).
CHAR_CNN_CHUNK = 256
# and each convolution over at most this many tokens at a time (its output stays in cache).
CONVOLUTION_CHUNK = 32

# A recurrence step of this many rows or more multiplies `[x_t, h_{t-1}]` at once; the input
# products of fewer rows are made ahead, at most this many gate inputs (32 MB) at a time.
STACKED_ROWS = 32
WINDOW_ELEMENTS = 1 << 23


def applies(layer, training, length_aware):
    """Whether a call takes this path: `length_aware`, `training` falsy, and no gradient to
    track (autograd off, or none of `layer`'s trainable weights requires one)."""
    if not length_aware or training:
        return False
    if not torch.is_grad_enabled():
        return True
    return not any(v.value.requires_grad for v in layer.trainable_weights)


def scan(step, init, xs, unroll=1):
    """The core path's recurrence (training, autograd): `keras.ops.scan` as Keras runs it."""
    return keras.ops.scan(step, init, xs, unroll=unroll)


def distinct_tokens(char_ids):
    """`[B, T, C]` -> `(token_char_ids, token_index)`, exact deduplication (`-1`: padding)."""
    char_ids = torch.as_tensor(char_ids).to(torch.int32)
    flat = char_ids.reshape(-1, char_ids.shape[-1])
    distinct, index = torch.unique(flat, dim=0, return_inverse=True)
    index = index.reshape(char_ids.shape[:2]).to(torch.int32)
    return distinct, torch.where(char_ids[:, :, 0] != 0, index, -1)


def embed_distinct_tokens(char_cnn, token_char_ids, token_index, boundaries):
    """Token vectors `[B, T + 2, P]` with `<S>` and `</S>` around each sentence, the char CNN
    run once per row of `token_char_ids` (and once per boundary), and the lengths `[B]`.

    `token_index` `[B, T]` holds each position's row of `token_char_ids`, `-1` for padding;
    `boundaries` `[2, width]` are the id rows of `<S>` and `</S>`.
    """
    token_char_ids = torch.as_tensor(token_char_ids).to(torch.int32)
    token_index = torch.as_tensor(token_index).to(torch.int64)
    device = token_char_ids.device
    batch, steps = token_index.shape
    lengths = (token_index >= 0).sum(dim=1)
    boundaries = torch.as_tensor(np.asarray(boundaries), device=device)
    with torch.inference_mode():
        ids = torch.cat([token_char_ids, boundaries.to(torch.int32)])
        vectors = _chunked_char_cnn(char_cnn, ids)
        bos_row = token_char_ids.shape[0]
        index = torch.full((batch, steps + 2), -1, dtype=torch.int64, device=device)
        index[:, 0] = bos_row
        index[:, 1 : steps + 1] = token_index
        index[torch.arange(batch, device=device), lengths + 1] = bos_row + 1
        embedded = vectors[index.clamp(min=0)] * (index >= 0)[:, :, None].to(vectors.dtype)
    return embedded, lengths.to(torch.int32)


def _chunked_char_cnn(char_cnn, ids):
    """The char CNN over `ids` `[n, C]`, in balanced chunks of at most `CHAR_CNN_CHUNK` rows;
    on the CPU an even number of them, shared by the two threads of `_direction_pool`."""
    n = ids.shape[0]
    n_chunks = max(1, -(-n // CHAR_CNN_CHUNK))
    pool = _direction_pool(ids.device)
    if pool is not None and n > 1:
        n_chunks += n_chunks % 2
    size = max(1, -(-n // n_chunks))
    products = char_cnn_products(char_cnn, char_cnn.compute_dtype)
    chunks = [(char_cnn, products, ids[start : start + size]) for start in range(0, n, size)]
    if pool is None:
        return torch.cat([_char_cnn(*chunk) for chunk in chunks])
    return torch.cat([future.result() for future in [pool.submit(_char_cnn, *c) for c in chunks]])


@torch.inference_mode()  # thread-local: again in a pool thread
def _char_cnn(char_cnn, products, ids):
    """`char_cnn(ids)` for `ids` `[n, width]` with `products` (`char_cnn_products`): each
    convolution one product over the unfolded windows (`CharCNN._convolve`'s sums), on the CPU
    in chunks of `CONVOLUTION_CHUNK` tokens (the output stays in cache), its bias added after
    the max-pooling (the same float: adding a constant is monotonic); the highways and the
    projection with their biases fused."""
    tables, convolutions, highways, projection = products
    characters, chunk = char_cnn.max_characters_per_token, CONVOLUTION_CHUNK
    chunk = chunk if ids.device.type == "cpu" else max(1, ids.shape[0])  # a GPU: all at once
    embedded = tables[0][ids[:, :characters]]  # [n, C, E]
    n, depth = ids.shape[0], embedded.shape[-1]
    pooled = []
    for width, product, bias in convolutions:
        chunks = []
        for start in range(0, n, chunk):
            windows = embedded[start : start + chunk].unfold(1, width, 1)
            windows = windows.transpose(2, 3).reshape(-1, width * depth)  # position-major
            chunks.append(product(windows).unflatten(0, (-1, characters - width + 1)).amax(1))
        pooled.append(torch.cat(chunks).add_(bias))
    x = torch.cat(pooled, dim=1)
    x = torch.relu_(x) if char_cnn.activation == "relu" else torch.tanh_(x)
    for (carry, transform), highway in zip(highways, char_cnn.highways, strict=True):
        gate = highway.carry.activation(carry(x))
        x = gate * highway.transform.activation(transform(x)) + (1.0 - gate) * x
    if char_cnn.word_embedding_dim:
        x = torch.cat([tables[1][ids[:, characters]].to(x.dtype), x], dim=1)
    x = projection(x)
    return x * (ids[:, 0] != 0).to(x.dtype)[:, None]


def packed_bilstm(bilstm, inputs, backward_inputs, lengths, state_h, state_c):
    """`ProjectedBiLSTM`'s two directions, packed by length.

    Args:
        bilstm: a built `ProjectedBiLSTM`.
        inputs, backward_inputs: `[B, T, F]` in the compute dtype (natural order).
        lengths: int `[B]`.
        state_h, state_c: `[B, 2, n_layers, P]` and `[B, 2, n_layers, U]`.

    Returns:
        `(outputs [B, n_layers, T, 2P], state_h, state_c)` as the core path's.
    """
    if inputs.device.type != "cpu":
        return torch_gpu_path.packed_bilstm(
            bilstm, inputs, backward_inputs, lengths, state_h, state_c
        )
    with torch.inference_mode():
        plan = _packing_plan(torch.as_tensor(lengths).to(torch.int64))
        batch, steps = inputs.shape[0], inputs.shape[1]
        outputs = inputs.new_zeros((batch, bilstm.n_layers, steps, 2 * bilstm.projection_dim))
        final = (state_h.clone(), state_c.clone())  # rows without tokens keep theirs
        run = (bilstm, plan, (inputs, backward_inputs), (state_h, state_c), outputs, final)
        pool = _direction_pool(inputs.device)
        if pool is None:
            for direction in (0, 1):
                _packed_direction(*run, direction)
        else:  # each direction writes its own slices of `outputs` and `final`
            for future in [pool.submit(_packed_direction, *run, d) for d in (0, 1)]:
                future.result()
    return outputs, final[0], final[1]


@torch.inference_mode()  # thread-local: again in a pool thread
def _packed_direction(bilstm, plan, inputs, state, outputs, final, direction):
    """One direction's layers, into its half of `outputs` and its rows of `final` (h, c)."""
    p, order, rows = bilstm.projection_dim, plan["order"], plan["rows"]
    cells = bilstm.backward_cells if direction else bilstm.forward_cells
    positions = plan["backward_positions" if direction else "positions"]
    layer_input = inputs[direction][rows, positions]  # [N, F], packed time-major
    for layer, cell in enumerate(cells):
        h = state[0][order, direction, layer].contiguous()
        c = state[1][order, direction, layer].contiguous()
        out = _packed_recurrence(cell, layer_input, plan, h, c)
        if layer > 0 and bilstm.use_skip_connections:
            out += layer_input
        outputs[rows, layer, positions, direction * p : (direction + 1) * p] = out
        final[0][order, direction, layer] = h
        final[1][order, direction, layer] = c
        layer_input = out


# The pool of `_direction_pool`, with the intra-op thread count it was made for.
_POOL = {"threads": None, "pool": None}
_POOL_LOCK = threading.Lock()


def _direction_pool(device):
    """Two threads for the two directions, each with half of PyTorch's intra-op threads (made
    again when `torch.set_num_threads` changed them), or None: one thread, or not the CPU."""
    threads = torch.get_num_threads()
    if device.type != "cpu" or threads < 2:
        return None
    with _POOL_LOCK:
        if _POOL["threads"] != threads:
            if _POOL["pool"] is not None:
                _POOL["pool"].shutdown(wait=True)
            ready = threading.Barrier(2)

            def start():
                torch.get_num_threads()  # the thread's OpenMP setting made first, then halved
                torch.set_num_threads(threads // 2)
                ready.wait()  # each of the two threads runs this once

            pool = ThreadPoolExecutor(2, thread_name_prefix="elmo-direction", initializer=start)
            for future in [pool.submit(int) for _ in range(2)]:
                future.result()
            torch.set_num_threads(threads)  # PyTorch's default for new threads, as it was
            _POOL.update(threads=threads, pool=pool)
        return _POOL["pool"]


def _packing_plan(lengths):
    """The batch laid out packed: rows sorted by length (longest first), time-major.

    Returns a dict: `order` (the sort), `counts` and `offsets` (host ints: step `t`'s rows are
    `offsets[t]:offsets[t] + counts[t]` of a packed `[N, ...]` tensor, the first `counts[t]`
    sorted rows), and for each packed row its batch row `rows` and its position in natural
    order (`positions`) and in each sentence's reversed order (`backward_positions`).
    """
    order = torch.argsort(lengths, descending=True, stable=True)
    sorted_lengths = lengths[order]
    longest = int(sorted_lengths[0]) if len(sorted_lengths) else 0
    running = sorted_lengths[None, :] > torch.arange(longest, device=lengths.device)[:, None]
    counts = running.sum(dim=1).tolist()
    step, rank = torch.nonzero(running, as_tuple=True)  # time-major, running rows first
    rows = order[rank]
    return {
        "order": order,
        "counts": counts,
        "offsets": np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).tolist(),
        "rows": rows,
        "positions": step,
        "backward_positions": lengths[rows] - 1 - step,
    }


def _packed_recurrence(cell, packed, plan, h, c):
    """Runs `cell` over packed inputs `[N, F]` from sorted states `h`, `c` (updated in place:
    after the loop each row holds its state after its last token). Returns `[N, P]`.

    A step of `STACKED_ROWS` running rows or more is one product of `[x_t, h_{t-1}]` per gate
    activation, the sigmoid fused in (`cell_products`' `stacked`); a step of fewer rows adds the
    recurrent product of `h_{t-1}` to input products made ahead for a window of steps (at most
    `WINDOW_ELEMENTS` gate inputs). A published-size step, each direction on a core, took 8%
    less time stacked at 64 rows (25.5 against 27.8 ms), 9% less at 32, 15% more at 16: one
    product of depth F + P runs faster than two of depth P, but reads twice the weights, which
    bounds a step of few rows. The small steps come last (the rows only decrease)."""
    stacked, input_product, recurrent, projection = cell_products(cell, packed.dtype)
    units, features = cell.lstm_units, packed.shape[1]
    counts, offsets = plan["counts"], plan["offsets"]
    outputs = packed.new_empty((packed.shape[0], cell.projection_dim))
    step_input = packed.new_empty((counts[0] if counts else 0, features + h.shape[1]))
    first = end = 0  # the packed rows `first:end` whose gate inputs `z` are made
    for t, n in enumerate(counts):
        rows = slice(offsets[t], offsets[t] + n)
        if n >= STACKED_ROWS:
            step_input[:n, :features] = packed[rows]
            step_input[:n, features:] = h[:n]
            ifo = stacked[0](step_input[:n], sigmoid=True)
            g = torch.tanh_(stacked[1](step_input[:n]))
        else:
            if offsets[t] >= end:
                first, end, z = _window(input_product, packed, offsets, t, units)
            gates = recurrent.plus(h[:n], z[rows.start - first : rows.stop - first])
            ifo = torch.sigmoid_(gates[:, : 3 * units])
            g = torch.tanh_(gates[:, 3 * units :])
        c_run = c[:n]
        c_run.mul_(ifo[:, units : 2 * units]).addcmul_(ifo[:, :units], g)
        if cell.cell_clip is not None:
            c_run.clamp_(-cell.cell_clip, cell.cell_clip)
        h_new = projection(ifo[:, 2 * units :] * torch.tanh(c_run))
        if cell.proj_clip is not None:
            h_new.clamp_(-cell.proj_clip, cell.proj_clip)
        h[:n] = h_new
        outputs[rows] = h_new
    return outputs


def _window(input_product, packed, offsets, t, units):
    """`(first, end, z)`: the gate inputs `z` of the packed rows `first:end` of steps `t`,
    `t + 1`, ... that fit `WINDOW_ELEMENTS` gate inputs (at least step `t`'s)."""
    end, budget = t + 1, max(1, WINDOW_ELEMENTS // (4 * units))
    while end + 1 < len(offsets) and offsets[end + 1] - offsets[t] <= budget:
        end += 1
    return offsets[t], offsets[end], input_product(packed[offsets[t] : offsets[end]])
