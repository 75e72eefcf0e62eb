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

This module supplies only what differs from the core: the packing plan and the packed
recurrence (one layer, natural order in and out), the chunked char CNN, `scan`. The stacking of
layers and directions is the core's `ProjectedBiLSTM.run_directions`, the placing of token
vectors around `<S>` and `</S>` the core's `CharCNN.embed_distinct`.

What must stay here, in TensorFlow ops: every size and every loop that depends on the batch's
contents. Under `tf.function` with dynamic shapes (the exports' signatures, Keras' symbolic
calls), the number of distinct tokens, the lengths, the step counts and the windows are tensors
when the graph is traced, even for a batch of static shape (`UniqueV2`'s output has none).
`torch_fast_path` computes its plan and its chunks as Python ints (`.tolist()`, `range`), which
is right eagerly; written that way once for both, the chunked char CNN or the plan fails to
trace (`OperatorNotAllowedInGraphError`: a symbolic tensor used as a Python int; reproduced
with `torch_fast_path`'s chunking, and the likely cause of an earlier try's 30 failures under
`tf.function`). So the counts here are tensors and the loops `tf.while_loop`s bounded by
`maximum_iterations`.

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

import functools

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
    sorted, `positions` `[N, 2]` (the real positions as (batch row, step) of the natural
    layout, time-major and sorted, so that step `t`'s rows are the slice `offsets[t]:offsets[t]
    + counts[t]` of the packed `[N, ...]` tensor `gather_nd(x, positions)`), `counts` and
    `offsets` per step over `n_windows * window` steps (>= the longest row), and `mask`
    `[batch, steps]` (true at real positions, natural order). For `packed_recurrence`'s
    steps, tables with one row per step: `z_begin` and `z_size` (where the step's rows sit in
    its window's gate inputs `[rows, gate_width]`) and `state_split` (running and finished
    rows, int64 as ONNX's `Split` takes them). Every layer and direction shares them.
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
    step_rank = tf.where(mask)  # time-major: (step, sorted row), int64 as ONNX's GatherND
    return {
        "order": order,
        "inverse": inverse,
        "lengths": lengths,
        # (batch row, step) in the natural layout, time-major: read straight from [B, T, F]
        "positions": tf.stack(
            [tf.gather(tf.cast(order, tf.int64), step_rank[:, 1]), step_rank[:, 0]], axis=1
        ),
        "counts": counts,
        "offsets": offsets,
        # an explicit width rather than -1: a size of -1 costs five operators a step in ONNX
        "z_begin": tf.stack([offsets[:-1] - window_start, tf.zeros_like(counts)], axis=1),
        "z_size": tf.stack([counts, tf.fill(tf.shape(counts), gate_width)], axis=1),
        "state_split": tf.cast(tf.stack([counts, batch - counts], axis=1), tf.int64),
        "window": window,
        "n_windows": n_windows,
        "mask": tf.sequence_mask(tf.gather(lengths, inverse), steps),  # [batch, steps]
        "steps": steps,
    }


def packed_recurrence(cell, inputs, plan, h, c):
    """Runs `cell` over `inputs` `[batch, steps, features]` packed by `plan` (`packing_plan`).

    `ProjectedBiLSTM.run_directions`' `recurrence`: natural order in and out, `h` and `c`
    `[batch, ...]`. Returns `(outputs [batch, steps, P], h, c)`, outputs zero where a row has
    ended. The rows are sorted and packed here, each layer reading its real positions straight
    from the natural layout (one `gather_nd`), and put back after the loops. An outer
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
    packed = tf.gather_nd(inputs, plan["positions"])
    h, c = tf.gather(h, plan["order"]), tf.gather(c, plan["order"])

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
    outputs = tf.gather(tf.transpose(outputs, [1, 0, 2]), plan["inverse"])
    outputs = outputs * tf.cast(plan["mask"], outputs.dtype)[:, :, None]
    return outputs, tf.gather(h, plan["inverse"]), tf.gather(c, plan["inverse"])


def _like(tensor, reference):
    """`tensor` with `reference`'s static shape (a loop variable must keep its shape)."""
    tensor.set_shape(reference.shape)
    return tensor


def scan(step, init, xs, unroll=1):
    """`keras.ops.scan(step, init, xs)` for one input tensor and one output tensor of its dtype.

    `step(carry, x) -> (carry, y)`; returns `(final carry, ys stacked on a new first axis)`.
    `unroll` is accepted and not used: the loop runs one step per iteration.
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
    """The seam's `packed_bilstm` (arguments and result as `projected_bilstm.fast_path` says):
    the core's `ProjectedBiLSTM.run_directions` with `packed_recurrence` as each layer's
    recurrence, over one `packing_plan` that every layer and direction shares."""
    plan = packing_plan(lengths, tf.shape(inputs)[1], 4 * bilstm.lstm_units)

    def recurrence(cell, x, h, c):
        return packed_recurrence(cell, x, plan, h, c)

    return bilstm.run_directions(
        inputs,
        backward_inputs,
        plan["mask"],
        lengths,
        state_h,
        state_c,
        training=False,
        recurrence=recurrence,
    )


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
    """Token vectors `[B, T + 2, P]` with `<S>` and `</S>` around each sentence, and the
    lengths `[B]`: the core's `CharCNN.embed_distinct` with the char CNN run in chunks
    (`_chunked_char_cnn`).

    `token_index` `[B, T]` holds each position's row of `token_char_ids`, `-1` for padding;
    `boundaries` `[2, width]` are the id rows of `<S>` and `</S>`.
    """
    chunked = functools.partial(_chunked_char_cnn, char_cnn)
    token_char_ids = tf.cast(token_char_ids, tf.int32)
    return char_cnn.embed_distinct(token_char_ids, token_index, boundaries, run=chunked)
