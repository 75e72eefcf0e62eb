"""TensorFlow's own paths for the biLM (fast inference, the bounded loop): the layers' one
TensorFlow-only module.

The backend-neutral core (`ProjectedBiLSTM`, `BiLM`, written with `keras.ops`) computes every
position of a padded batch. At inference on TensorFlow, with `length_aware`, two calls come here
instead (`applies` decides, once, for both):

- `ProjectedBiLSTM` calls `packed_bilstm`: rows sorted by length inside the graph, step `t`
  computing only the rows still running, the input projection only over real positions, in
  windows of steps (`packing_plan`, `packed_recurrence`).
- `BiLM` calls `embed_distinct_tokens`: the char CNN once per distinct token of the batch (found
  in the graph with `UniqueV2` when the caller sends plain character ids), in chunks of
  `CHAR_CNN_CHUNK`, gathered back to the positions.

Both give the core path's numbers (to float round-off, 1e-6 in the tests) with much less work
on uneven batches, and both export (SavedModel, ONNX). Training, JAX and XLA take the core path.

The core path's recurrence also comes here on TensorFlow, for one reason: `scan` is
`keras.ops.scan`'s contract as a `tf.while_loop` bounded by `maximum_iterations`, which XLA
needs to differentiate a loop (Keras 3.15's TensorFlow `scan` sets none, so training with
`jit_compile=True` failed through it), with TensorFlow's default `parallel_iterations`.

The core reaches this module through `projected_bilstm.fast_path()`, the seam it shares with
`torch_fast_path`, which imports it only when the backend is TensorFlow: on another backend the
layers and models import no TensorFlow.
"""

import keras
import tensorflow as tf

# The char CNN runs over the distinct tokens at most this many at a time, so that a very long
# input never holds every token's convolution activations at once. 256 rather than 1024 keeps
# a chunk's widest activations (~45 MB) nearer the cache: exports with 64, 128, 256 and 1024
# alternating in one process (10 calls each, 64 x 20 tokens) ran 3.0, 2.6 and 4.5% faster than
# 1024 in ONNX Runtime; in TensorFlow 256 ran as fast as 1024.
CHAR_CNN_CHUNK = 256


def applies(layer, training, length_aware):
    """Whether a call of `layer` takes this path: TensorFlow backend, `length_aware`, and
    `training` a falsy Python value (a symbolic `training` tensor takes the core path). The
    path is differentiable, so trainable weights do not matter here (they do on PyTorch)."""
    return (
        bool(length_aware)
        and keras.config.backend() == "tensorflow"
        and not isinstance(training, tf.Tensor | tf.Variable)
        and not training
    )


# The packed path computes its input projection a window of steps at a time, each window at
# most this many gate inputs (32 MB of float32; 512 rows when lstm_units=4096), so that a very
# long input never holds [positions, 4 * lstm_units] at once.
WINDOW_ELEMENTS = 1 << 23


def packing_plan(lengths, steps, gate_width):
    """How the packed path lays a batch out: rows sorted by length (longest first), time-major.

    Returns a dict: `order` and `inverse` (the sort and its inverse permutation), `lengths`
    sorted, `positions` `[N, 2]` (the real positions, time-major, so that step `t`'s rows are
    the slice `offsets[t]:offsets[t] + counts[t]` of a packed `[N, ...]` tensor), `counts` and
    `offsets` per step over `n_windows * window` steps (>= the longest row), and `mask`
    `[steps, batch, 1]` (1.0 at real positions). For `packed_recurrence`'s steps, tables with
    one row per step: `z_begin` and `z_size` (where the step's rows sit in its window's gate
    inputs `[rows, gate_width]`) and `state_split` (running and finished rows, int64 as ONNX's
    `Split` takes them). Every layer and direction shares them.
    """
    batch = tf.shape(lengths)[0]
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    inverse = tf.scatter_nd(order[:, None], tf.range(batch), [batch])
    lengths = tf.gather(lengths, order)
    longest = tf.reduce_max(tf.concat([lengths, [0]], axis=0))
    budget = tf.maximum(1, WINDOW_ELEMENTS // (tf.maximum(batch, 1) * gate_width))
    n_windows = tf.maximum(1, (longest + budget - 1) // budget)
    window = tf.maximum(1, (longest + n_windows - 1) // n_windows)  # balanced windows
    running = lengths[None, :] > tf.range(n_windows * window)[:, None]
    counts = tf.reduce_sum(tf.cast(running, tf.int32), axis=1)
    offsets = tf.concat([[0], tf.cumsum(counts)], axis=0)
    window_start = tf.gather(offsets, (tf.range(n_windows * window) // window) * window)
    mask = tf.transpose(tf.sequence_mask(lengths, steps))
    return {
        "order": order,
        "inverse": inverse,
        "lengths": lengths,
        "positions": tf.where(mask),
        "counts": counts,
        "offsets": offsets,
        # an explicit width rather than -1: a size of -1 costs five operators a step in ONNX
        "z_begin": tf.stack([offsets[:-1] - window_start, tf.zeros_like(counts)], axis=1),
        "z_size": tf.stack([counts, tf.fill(tf.shape(counts), gate_width)], axis=1),
        "state_split": tf.cast(tf.stack([counts, batch - counts], axis=1), tf.int64),
        "window": window,
        "n_windows": n_windows,
        "mask": tf.cast(mask, tf.float32)[:, :, None],
        "steps": steps,
    }


def packed_recurrence(cell, packed, plan, h, c):
    """Runs `cell` over packed inputs `[N, features]` (see `packing_plan`), from sorted states.

    Returns `(outputs [steps, batch, P], h, c)`, outputs zero where a row has ended. An outer
    loop over windows computes the window's input projection, an inner loop its steps; step
    `t` computes only its `counts[t]` running rows (a prefix, rows being sorted).

    A step reads its rows' place and its state split from the plan's tables (one `gather`
    each) and writes its whole new state; the mask zeroes finished rows after the loops. The
    exported step body has 38 ONNX operators (89 when the step sliced with Python indices and
    padded its output).
    """
    offsets, window = plan["offsets"], plan["window"]
    z_begin, z_size, state_split = plan["z_begin"], plan["z_size"], plan["state_split"]
    batch = tf.shape(h)[0]

    kernels = cell.step_kernels(h.dtype)  # cast once, not at every step

    def window_body(w, h, c, windows):
        first = w * window
        z = cell.input_projection(packed[offsets[first] : offsets[first + window]])

        def step_body(i, h, c, outputs):
            step = first + i
            split = tf.gather(state_split, step)
            h_run, h_rest = tf.split(h, split)
            c_run, c_rest = tf.split(c, split)
            z_step = tf.slice(z, tf.gather(z_begin, step), tf.gather(z_size, step))
            h_new, c_new = cell.recurrent_step(z_step, h_run, c_run, kernels)
            h = _like(tf.concat([h_new, h_rest], 0), h)
            # finished rows output their carried state here; the mask zeroes them below
            return i + 1, h, _like(tf.concat([c_new, c_rest], 0), c), outputs.write(i, h)

        _, h, c, outputs = tf.while_loop(
            lambda *_: tf.constant(True),  # `maximum_iterations` ends it: a leaner ONNX loop
            step_body,
            (tf.constant(0), h, c, tf.TensorArray(h.dtype, size=window)),
            maximum_iterations=window,
        )
        return w + 1, h, c, windows.write(w, outputs.stack())

    _, h, c, windows = tf.while_loop(
        lambda w, *_: w < plan["n_windows"],
        window_body,
        (tf.constant(0), h, c, tf.TensorArray(h.dtype, size=plan["n_windows"])),
        maximum_iterations=plan["n_windows"],
    )
    outputs = tf.reshape(windows.stack(), [-1, batch, tf.shape(h)[-1]])
    missing = tf.maximum(0, plan["steps"] - tf.shape(outputs)[0])
    outputs = tf.pad(outputs, [[0, missing], [0, 0], [0, 0]])[: plan["steps"]]
    return outputs * tf.cast(plan["mask"], outputs.dtype), h, c


def _like(tensor, reference):
    """`tensor` with `reference`'s static shape (a loop variable must keep its shape)."""
    tensor.set_shape(reference.shape)
    return tensor


def scan(step, init, xs):
    """`keras.ops.scan(step, init, xs)` for one input tensor and one output tensor of its dtype.

    `step(carry, x) -> (carry, y)`; returns `(final carry, ys stacked on a new first axis)`.
    """
    steps = tf.shape(xs)[0]
    inputs = tf.TensorArray(xs.dtype, size=steps).unstack(xs)
    carry_flat = tf.nest.flatten(init)

    def body(t, carry_flat, outputs):
        carry, y = step(tf.nest.pack_sequence_as(init, carry_flat), inputs.read(t))
        new_flat = [
            _like(new, old) for new, old in zip(tf.nest.flatten(carry), carry_flat, strict=True)
        ]
        return t + 1, new_flat, outputs.write(t, y)

    _, carry_flat, outputs = tf.while_loop(
        lambda t, *_: t < steps,
        body,
        (tf.constant(0), carry_flat, tf.TensorArray(xs.dtype, size=steps)),
        maximum_iterations=steps,
    )
    return tf.nest.pack_sequence_as(init, carry_flat), outputs.stack()


def packed_bilstm(bilstm, inputs, backward_inputs, lengths, state_h, state_c):
    """`ProjectedBiLSTM`'s two directions, packed by length (see `packing_plan`).

    Args:
        bilstm: a built `ProjectedBiLSTM`.
        inputs, backward_inputs: `[B, T, F]` in the compute dtype (natural order).
        lengths: int32 `[B]`.
        state_h, state_c: `[B, 2, n_layers, P]` and `[B, 2, n_layers, U]`.

    Returns:
        `(outputs [B, n_layers, T, 2P], state_h, state_c)` as the core path's.
    """
    steps = tf.shape(inputs)[1]
    plan = packing_plan(lengths, steps, 4 * bilstm.lstm_units)
    directions = []
    for index, (x, cells) in enumerate(
        ((inputs, bilstm.forward_cells), (backward_inputs, bilstm.backward_cells))
    ):
        directions.append(
            _packed_direction(
                bilstm, x, plan, lengths, cells, state_h[:, index], state_c[:, index], index == 1
            )
        )
    (forward, fw_h, fw_c), (backward, bw_h, bw_c) = directions
    outputs = tf.stack(
        [tf.concat([fw, bw], axis=-1) for fw, bw in zip(forward, backward, strict=True)], axis=1
    )
    return outputs, tf.stack([fw_h, bw_h], axis=1), tf.stack([fw_c, bw_c], axis=1)


def _packed_direction(bilstm, inputs, plan, lengths, cells, state_h, state_c, reverse):
    """One direction's stack of layers, packed: -> (outputs per layer, final h, final c)."""
    x = tf.reverse_sequence(inputs, lengths, seq_axis=1, batch_axis=0) if reverse else inputs
    x = tf.transpose(tf.gather(x, plan["order"]), [1, 0, 2])  # [T, B, F], sorted
    mask = tf.cast(plan["mask"], x.dtype)
    h0, c0 = tf.gather(state_h, plan["order"]), tf.gather(state_c, plan["order"])
    outputs, final_h, final_c = [], [], []
    for layer, cell in enumerate(cells):
        packed = tf.gather_nd(x, plan["positions"])
        out, h, c = packed_recurrence(cell, packed, plan, h0[:, layer], c0[:, layer])
        if layer > 0 and bilstm.use_skip_connections:
            out = out + x * mask
        outputs.append(out)
        final_h.append(h)
        final_c.append(c)
        x = out
    outputs = [tf.gather(tf.transpose(out, [1, 0, 2]), plan["inverse"]) for out in outputs]
    if reverse:
        outputs = [tf.reverse_sequence(out, lengths, seq_axis=1, batch_axis=0) for out in outputs]
    final_h = tf.gather(tf.stack(final_h, axis=1), plan["inverse"])
    return outputs, final_h, tf.gather(tf.stack(final_c, axis=1), plan["inverse"])


def distinct_tokens(char_ids):
    """`[B, T, C]` -> `(token_char_ids, token_index)`, exact in-graph deduplication (`-1` marks
    padding)."""
    char_ids = tf.cast(char_ids, tf.int32)
    flat = tf.reshape(char_ids, [-1, tf.shape(char_ids)[-1]])
    distinct, index = tf.raw_ops.UniqueV2(x=flat, axis=tf.constant([0], tf.int64))
    index = tf.reshape(index, tf.shape(char_ids)[:2])
    return distinct, tf.where(char_ids[:, :, 0] != 0, index, -1)


def _chunked_char_cnn(char_cnn, ids):
    """The char CNN over `ids` `[n, C]`, `CHAR_CNN_CHUNK` rows at a time -> `[n, P]`."""
    n = tf.shape(ids)[0]
    n_chunks = tf.maximum(1, (n + CHAR_CNN_CHUNK - 1) // CHAR_CNN_CHUNK)
    size = tf.maximum(1, (n + n_chunks - 1) // n_chunks)  # balanced chunks
    ids = tf.pad(ids, [[0, n_chunks * size - n], [0, 0]])  # padding tokens: zero vectors

    def body(i, chunks):
        return i + 1, chunks.write(i, char_cnn(ids[i * size : (i + 1) * size]))

    _, chunks = tf.while_loop(
        lambda i, _: i < n_chunks,
        body,
        (tf.constant(0), tf.TensorArray(char_cnn.compute_dtype, size=n_chunks)),
        maximum_iterations=n_chunks,
    )
    return tf.reshape(chunks.stack(), [-1, char_cnn.projection_dim])[:n]


def embed_distinct_tokens(char_cnn, token_char_ids, token_index, boundaries):
    """Token vectors `[B, T + 2, P]` with `<S>` and `</S>` around each sentence, the char CNN
    run once per row of `token_char_ids` (and once per boundary), and the lengths `[B]`.

    `token_index` `[B, T]` holds each position's row of `token_char_ids`, `-1` for padding;
    `boundaries` `[2, width]` are the id rows of `<S>` and `</S>`.
    """
    token_char_ids = tf.cast(token_char_ids, tf.int32)
    token_index = tf.cast(token_index, tf.int32)
    batch, steps = tf.shape(token_index)[0], tf.shape(token_index)[1]
    lengths = tf.reduce_sum(tf.cast(token_index >= 0, tf.int32), axis=1)
    boundaries = tf.constant(boundaries, tf.int32)
    vectors = _chunked_char_cnn(char_cnn, tf.concat([token_char_ids, boundaries], axis=0))
    bos_row = tf.shape(token_char_ids)[0]
    index = tf.concat([tf.fill([batch, 1], bos_row), token_index, tf.fill([batch, 1], -1)], axis=1)
    is_eos = tf.equal(tf.range(steps + 2)[None, :], (lengths + 1)[:, None])
    index = tf.where(is_eos, bos_row + 1, index)
    embedded = tf.gather(vectors, tf.maximum(index, 0))
    return embedded * tf.cast(index >= 0, embedded.dtype)[:, :, None], lengths
