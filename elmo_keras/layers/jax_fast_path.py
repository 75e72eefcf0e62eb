"""JAX's fast inference path for the biLM: `tf_fast_path`'s twin behind the same seam.

The backend-neutral core (`ProjectedBiLSTM`, `BiLM`, written with `keras.ops`) computes every
position of a padded batch: `jax.lax.scan` over every step of the longest (bucketed) row, with
all rows at every step. XLA needs static shapes, so this path cannot shrink a step to the rows
still running as TensorFlow's does; it gets most of that with loops of dynamic length over a
few static row counts:

- `packed_bilstm`: rows sorted by length (longest first). The recurrence runs in phases
  (`phase_sizes`): phase `k` computes the first `sizes[k]` rows, in a `lax.while_loop` whose
  trip count is read from the lengths, for as long as more than `sizes[k + 1]` rows are
  running. A step never computes more than 3/2 of its running rows (and at least 4), and
  steps after the longest row are never run (so padding a batch to a bucketed number of steps
  costs nothing in the recurrence). The input products are taken before the loop over the
  real positions only, packed time-major (step `t`'s rows from `offsets[t]`), in chunks of
  `PROJECTION_CHUNKS` rows in loops that stop after the last real one (`_in_chunks`). A
  layer's two directions step together (they share the lengths, so the phases), each step's
  two products batched over them (`[2, 4U, P] @ [2, P, B]`). The recurrence runs
  feature-major (`h` `[2, P, B]`, `ProjectedLSTMCell.recurrent_step(feature_major=True)`),
  the weights on the left of each product, which XLA's CPU backend runs faster for few rows
  (benchmarks/results/jax_embed.md). Its transposed, stacked kernels come from the caller
  (`inference(kernels=...)`, `feature_major_kernels`: `BiLMEmbedder` makes them once per
  weights), else each call makes them.
- `embed_distinct_tokens`: the char CNN over the distinct tokens, its convolutions in chunks
  of `CHAR_CNN_CHUNKS` rows, then its highways and projection in chunks of `TOKEN_CHUNKS`, in
  loops that stop after the last row referenced: rows padding the distinct tokens to a
  bucketed count cost nothing. With plain character ids every position is
  its own row (`distinct_tokens`).

It runs on CPUs (`PLATFORMS`); on an accelerator JAX takes the core path until measured there.
The numbers are the core path's to float round-off (1e-6 in tests/layers/test_packed_bilstm.py
and tests/models/test_length_aware.py, which run on every backend with a fast path). The loops
have dynamic trip counts, which reverse-mode differentiation cannot go through: the path runs
only inside `inference()` (`BiLMEmbedder` enters it), at inference (`training` falsy); every
other call on JAX, `jax.grad` of an inference call included, takes the core path.

Imported only when JAX is the Keras backend: on another backend nothing imports jax.
"""

import contextlib
import threading

import jax
import jax.numpy as jnp
import keras

# The char CNN's convolutions run over the distinct tokens this many at a time (the largest while
# a whole chunk remains, then the next): the loops stop after the last referenced row, so a
# bucketed (padded) count of distinct tokens costs nothing, and at most the smallest chunk is
# computed past the last row. Then the highways and projection, in chunks of `TOKEN_CHUNKS`.
CHAR_CNN_CHUNKS = (64,)
TOKEN_CHUNKS = (256, 64)

# Where the path runs. Measured on CPUs only: on a GPU the core path (one `lax.scan` per layer and
# direction, a static trip count) ran at 1.06x the plain-JAX reference, while a loop of dynamic
# length may need the host at every step there; benchmarks/accelerator.py times both on a GPU
# (its "fast path" rows add the device's platform here) before the GPU is added.
PLATFORMS = ("cpu",)

# The input products are taken over the real positions only, this many rows at a time.
PROJECTION_CHUNKS = (256, 64)

# The smallest phase of the recurrence (`phase_sizes`): fewer rows gain nothing more.
SMALLEST_PHASE = 4


_INFERENCE = threading.local()


@contextlib.contextmanager
def inference(kernels=None):
    """Calls traced inside take this path (where `applies`): for callers that never take a
    gradient, as `BiLMEmbedder`. Outside, JAX takes the core path, so that `jax.grad` of an
    inference call (`training` falsy) still works: these loops are not reverse-differentiable.

    `kernels`: optional, per layer, the two directions' feature-major step kernels stacked
    (`feature_major_kernels`), made once by the caller; else each call makes them."""
    before = getattr(_INFERENCE, "kernels", {})
    _INFERENCE.depth = getattr(_INFERENCE, "depth", 0) + 1
    _INFERENCE.kernels = kernels or {}
    try:
        yield
    finally:
        _INFERENCE.depth -= 1
        _INFERENCE.kernels = before


def feature_major_kernels(bilstm):
    """`{forward cell.path: (recurrent kernels [2, 4U, P], projection kernels [2, P, U])}` for
    every layer of `bilstm`: its two directions' `step_kernels(dtype, feature_major=True)`
    stacked, as `inference(kernels=...)` takes them (outside a trace: made once, reused)."""
    pairs = zip(bilstm.forward_cells, bilstm.backward_cells, strict=True)
    return {pair[0].path: _stacked_kernels(pair, pair[0].recurrent_kernel.dtype) for pair in pairs}


def _stacked_kernels(pair, dtype):
    """The two cells' feature-major step kernels, stacked: `([2, 4U, P], [2, P, U])`."""
    kernels = [cell.step_kernels(dtype, feature_major=True) for cell in pair]
    return tuple(jnp.stack(each) for each in zip(*kernels, strict=True))


def applies(layer, training, length_aware):
    """Whether a call of `layer` takes this path: inside `inference()`, `length_aware`,
    `training` a falsy value, and JAX's default device one of `PLATFORMS`."""
    return (
        getattr(_INFERENCE, "depth", 0) > 0
        and bool(length_aware)
        and not training
        and keras.config.backend() == "jax"
        and jax.default_backend() in PLATFORMS
    )


def scan(step, init, xs, *args, **kwargs):
    """The core path's recurrence (training, and `length_aware=False`): `keras.ops.scan`."""
    return keras.ops.scan(step, init, xs, *args, **kwargs)


def phase_sizes(batch):
    """The static row counts of the recurrence's phases for `batch` rows, largest first: `batch`,
    then the powers of two and their halfway points (`3 * 2**k`) below it, down to 4.

    >>> phase_sizes(32)
    [32, 24, 16, 12, 8, 6, 4]
    """
    smaller = set()
    size = SMALLEST_PHASE
    while size < batch:
        smaller.update(s for s in (size, size * 3 // 2) if s < batch)
        size *= 2
    return [batch, *sorted(smaller, reverse=True)]


def reverse_by_length(x, lengths):
    """Reverses each row of `x` `[B, T, ...]` over its first `lengths[b]` positions."""
    positions = jnp.arange(x.shape[1])[None, :]
    index = jnp.where(positions < lengths[:, None], lengths[:, None] - 1 - positions, positions)
    return jnp.take_along_axis(x, index.reshape(*index.shape, *([1] * (x.ndim - 2))), axis=1)


def _in_chunks(fn, arrays, used, width, dtype, sizes):
    """`fn(*chunks)` -> `[size, width]` over the first `used` rows of `arrays` (each `[n, ...]`)
    -> `[n, width]`: chunks of `sizes[0]` rows while a whole one remains, then of each next
    size; the last size covers the rest. Large chunks make products of many rows (a product of
    256 rows ran at 1.5x the rate of one of 64 on a CPU), the small ones keep the rows computed
    past `used` fewer than `sizes[-1]` (the later rows stay zero). The first chunk, of the
    smallest size, is computed whatever `used` is: padded, it is the buffer the loops write
    into. Sizes over `n` are skipped; a chunk that would run past row `n` is moved back to end
    there (`dynamic_slice` clamps its start, reading and writing alike), so the inputs are
    never padded."""
    n = arrays[0].shape[0]
    sizes = tuple(size for size in sizes if size <= n) or (n,)
    # The buffer starts as the first (smallest) chunk padded with zeros, not as `zeros((n,
    # width))`: XLA merges equal constants, and copied one zero buffer into every call site's
    # loop at the start of the program, all of them live at once (5 x 142 MB at 64 x 20,
    # allocated and paged in afresh at every call).
    first = fn(*[a[: sizes[-1]] for a in arrays]).astype(dtype)
    out = jnp.pad(first, ((0, n - sizes[-1]), (0, 0)))
    start = jnp.asarray(sizes[-1], "int32")
    for k, size in enumerate(sizes):
        last = k == len(sizes) - 1

        def body(carry, size=size):
            start, out = carry
            chunks = [jax.lax.dynamic_slice_in_dim(a, start, size) for a in arrays]
            done = fn(*chunks).astype(dtype)
            return start + size, jax.lax.dynamic_update_slice_in_dim(out, done, start, 0)

        def more(carry, size=size, last=last):
            return carry[0] < used if last else carry[0] + size <= used

        start, out = jax.lax.while_loop(more, body, (start, out))
    return out


def _packed_projection(cell, x, plan):
    """`cell`'s input product over the real positions of time-major sorted `x` `[T, B, F]`,
    packed (step `t`'s rows from `plan["offsets"][t]`), in chunks (`PROJECTION_CHUNKS`) that
    stop after the last real position -> `[T * B, 4U]`."""
    steps, batch = x.shape[0], x.shape[1]
    packed = x.reshape(steps * batch, x.shape[2])[plan["positions"]]
    return _in_chunks(
        cell.input_projection,
        [packed],
        plan["offsets"][-1],
        4 * cell.lstm_units,
        x.dtype,
        PROJECTION_CHUNKS,
    )


def _run_layer(pair, xs, plan, h, c):
    """One layer, both directions, over time-major sorted inputs `xs` (one `[T, B, F]` per
    direction), from `h` `[2, B, P]` and `c` `[2, B, U]`: -> `(outputs [2, T, B, P], final h,
    final c)`. The two directions step together, each step's products batched over them
    (`[2, 4U, P] @ [2, P, B]`), feature-major (`h` `[2, P, B]`; see
    `ProjectedLSTMCell.recurrent_step`)."""
    cell = pair[0]  # ProjectedBiLSTM builds both with one configuration (clips, forget bias)
    steps, batch = xs[0].shape[0], xs[0].shape[1]
    lengths, offsets = plan["lengths"], plan["offsets"]
    kernels = _feature_major_kernels(pair, h.dtype)
    z = [_packed_projection(each, x, plan) for each, x in zip(pair, xs, strict=True)]
    sizes = phase_sizes(batch)
    # Phase k runs while more than sizes[k + 1] rows are running: until step lengths[sizes[k+1]].
    ends = [lengths[size] for size in sizes[1:]] + [lengths[0] if batch else 0]
    outputs = jnp.zeros((2, steps, batch, cell.projection_dim), h.dtype)
    h, c = jnp.swapaxes(h, 1, 2), jnp.swapaxes(c, 1, 2)
    t = jnp.zeros((), "int32")
    for size, end in zip(sizes, ends, strict=True):
        running = lengths[None, None, :size]

        def body(carry, size=size, running=running):
            t, h, c, outputs = carry
            z_t = jnp.stack([jax.lax.dynamic_slice_in_dim(each, offsets[t], size) for each in z])
            h_new, c_new = cell.recurrent_step(
                jnp.swapaxes(z_t, 1, 2), h, c, kernels, feature_major=True
            )
            keep = t < running
            out = jnp.swapaxes(jnp.where(keep, h_new, jnp.zeros_like(h_new)), 1, 2)
            outputs = jax.lax.dynamic_update_slice_in_dim(outputs, out[:, None], t, 1)
            return t + 1, jnp.where(keep, h_new, h), jnp.where(keep, c_new, c), outputs

        carry = (t, h[:, :, :size], c[:, :, :size], outputs)
        t, h_run, c_run, outputs = jax.lax.while_loop(
            lambda carry, end=end: carry[0] < end, body, carry
        )
        h, c = h.at[:, :, :size].set(h_run), c.at[:, :, :size].set(c_run)
    return outputs, jnp.swapaxes(h, 1, 2), jnp.swapaxes(c, 1, 2)


def _feature_major_kernels(pair, dtype):
    """The layer's stacked feature-major step kernels (`feature_major_kernels`): from
    `inference(kernels=...)` when the caller made them once (`BiLMEmbedder`), else
    transposed and stacked here, at every call."""
    given = getattr(_INFERENCE, "kernels", {}).get(pair[0].path)
    if given is not None:
        return tuple(jnp.asarray(k, dtype) for k in given)
    return jax.lax.optimization_barrier(_stacked_kernels(pair, dtype))


def packed_bilstm(bilstm, inputs, backward_inputs, lengths, state_h, state_c):
    """`ProjectedBiLSTM`'s two directions by length (see the module's docstring).

    Args:
        bilstm: a built `ProjectedBiLSTM`.
        inputs, backward_inputs: `[B, T, F]` in the compute dtype (natural order).
        lengths: int32 `[B]`.
        state_h, state_c: `[B, 2, n_layers, P]` and `[B, 2, n_layers, U]`.

    Returns:
        `(outputs [B, n_layers, T, 2P], state_h, state_c)` as the core path's.
    """
    lengths = jnp.asarray(lengths, "int32")
    order = jnp.argsort(-lengths, stable=True)
    inverse = jnp.argsort(order, stable=True)
    sorted_lengths = lengths[order]
    steps = inputs.shape[1]
    mask = jnp.arange(steps)[:, None] < sorted_lengths[None, :]  # [T, B], time-major
    counts = jnp.sum(mask, axis=1, dtype="int32")
    plan = {
        "lengths": sorted_lengths,
        "offsets": jnp.concatenate([jnp.zeros((1,), "int32"), jnp.cumsum(counts)]),
        "positions": jnp.nonzero(mask.reshape(-1), size=mask.size, fill_value=0)[0],
    }
    mask = mask[:, :, None]
    xs = [
        jnp.transpose(x[order], (1, 0, 2))
        for x in (inputs, reverse_by_length(backward_inputs, lengths))
    ]
    h0, c0 = state_h[order], state_c[order]
    pairs = zip(bilstm.forward_cells, bilstm.backward_cells, strict=True)
    layers, final_h, final_c = [], [], []
    for layer, pair in enumerate(pairs):
        h0_layer = jnp.swapaxes(h0[:, :, layer], 0, 1)  # [2, B, P]
        outs, h, c = _run_layer(pair, xs, plan, h0_layer, jnp.swapaxes(c0[:, :, layer], 0, 1))
        outs = list(outs)  # [forward, backward], each [T, B, P]
        if layer > 0 and bilstm.use_skip_connections:
            outs = [out + x * mask.astype(x.dtype) for out, x in zip(outs, xs, strict=True)]
        layers.append(outs)
        final_h.append(jnp.swapaxes(h, 0, 1))
        final_c.append(jnp.swapaxes(c, 0, 1))
        xs = outs
    outputs = []
    for forward, backward in layers:
        forward = jnp.transpose(forward, (1, 0, 2))[inverse]
        backward = reverse_by_length(jnp.transpose(backward, (1, 0, 2))[inverse], lengths)
        outputs.append(jnp.concatenate([forward, backward], axis=-1))
    state_h = jnp.stack(final_h, axis=2)[inverse]
    return jnp.stack(outputs, axis=1), state_h, jnp.stack(final_c, axis=2)[inverse]


def distinct_tokens(char_ids):
    """`[B, T, C]` -> `(token_char_ids [B * T, C], token_index [B, T])`: every position its own
    row (`-1` marking padding), no deduplication in the graph (`jnp.unique` over rows compiled
    3x slower than the whole core path); callers that want each distinct token once send
    `token_char_ids` and `token_index` (as `BiLMEmbedder` does)."""
    char_ids = jnp.asarray(char_ids, "int32")
    batch, steps = char_ids.shape[0], char_ids.shape[1]
    index = jnp.arange(batch * steps, dtype="int32").reshape(batch, steps)
    return char_ids.reshape(-1, char_ids.shape[-1]), jnp.where(char_ids[:, :, 0] != 0, index, -1)


def _chunked_char_cnn(char_cnn, ids, used):
    """The char CNN over the first `used` rows of `ids` `[n, C]` (later rows stay zero) ->
    `[n, P]`: the convolutions in chunks of `CHAR_CNN_CHUNKS` rows (their unfolded windows are
    44x the rows), then the highways and projection in chunks of `TOKEN_CHUNKS`."""
    features = _in_chunks(
        char_cnn.char_features,
        [ids],
        used,
        char_cnn.n_filters,
        char_cnn.compute_dtype,
        CHAR_CNN_CHUNKS,
    )
    return _in_chunks(
        char_cnn.token_vectors,
        [features, ids],
        used,
        char_cnn.projection_dim,
        char_cnn.compute_dtype,
        TOKEN_CHUNKS,
    )


def embed_distinct_tokens(char_cnn, token_char_ids, token_index, boundaries):
    """Token vectors `[B, T + 2, P]` with `<S>` and `</S>` around each sentence, the char CNN
    run once per referenced row of `token_char_ids` (and once per boundary), and the lengths.

    `token_index` `[B, T]` holds each position's row of `token_char_ids`, `-1` for padding;
    `boundaries` `[2, width]` are the id rows of `<S>` and `</S>`.
    """
    token_char_ids = jnp.asarray(token_char_ids, "int32")
    token_index = jnp.asarray(token_index, "int32")
    batch, steps = token_index.shape
    lengths = jnp.sum(token_index >= 0, axis=1, dtype="int32")
    used = jnp.max(token_index, initial=-1) + 1
    vectors = jnp.concatenate(
        [
            _chunked_char_cnn(char_cnn, token_char_ids, used),
            char_cnn(jnp.asarray(boundaries, "int32")).astype(char_cnn.compute_dtype),
        ],
        axis=0,
    )
    bos_row = token_char_ids.shape[0]
    index = jnp.concatenate(
        [jnp.full((batch, 1), bos_row), token_index, jnp.full((batch, 1), -1)], axis=1
    )
    is_eos = jnp.arange(steps + 2)[None, :] == (lengths + 1)[:, None]
    index = jnp.where(is_eos, bos_row + 1, index)
    embedded = vectors[jnp.maximum(index, 0)]
    return embedded * (index >= 0).astype(embedded.dtype)[:, :, None], lengths
