import keras
from keras import ops

from elmo_keras.layers.projected_lstm_cell import (
    ProjectedLSTMCell,
    _from_0_1_0_config,
    _optional_clip,
)
from elmo_keras.validation import check_int, check_number, renamed_argument, renamed_attribute


def fast_path():
    """The running backend's fast inference path, or `None` where it has none: the one seam
    between the `keras.ops` core and backend code, imported only on its backend.

    `elmo_keras.layers.tf_fast_path` on TensorFlow, `elmo_keras.layers.torch_fast_path` on
    PyTorch, `elmo_keras.layers.jax_fast_path` on JAX. All three offer the same functions:
    `applies(layer, training, length_aware)`, `packed_bilstm(bilstm, inputs, backward_inputs,
    lengths, state_h, state_c)` (a built `ProjectedBiLSTM`, both directions' inputs `[B, T, F]` in
    natural order, int lengths `[B]`, states `[B, 2, n_layers, P]` and `[B, 2, n_layers, U]` ->
    `(outputs [B, n_layers, T, 2P], state_h, state_c)` as the core path's), `distinct_tokens`,
    `embed_distinct_tokens` (as `CharCNN.embed_distinct`, for int token rows) and `scan` (the
    core path's recurrence on that backend). TensorFlow's supplies only what differs from the
    core (the packing plan and the packed recurrence, the chunked char CNN, `scan`) and hands
    them to the core's `ProjectedBiLSTM.run_directions` and `CharCNN.embed_distinct`; PyTorch's
    packs both directions in place, under `torch.inference_mode`.
    """
    backend = keras.config.backend()
    if backend == "tensorflow":
        from elmo_keras.layers import tf_fast_path  # noqa: PLC0415

        return tf_fast_path
    if backend == "torch":
        from elmo_keras.layers import torch_fast_path  # noqa: PLC0415

        return torch_fast_path
    if backend == "jax":
        from elmo_keras.layers import jax_fast_path  # noqa: PLC0415

        return jax_fast_path
    return None


def reverse_by_length(x, lengths):
    """Reverses each row of `x` `[B, T, ...]` over its first `lengths[b]` positions; padding
    stays where it is (TensorFlow's `reverse_sequence`, in `keras.ops`)."""
    steps = ops.shape(x)[1]
    positions = ops.arange(steps, dtype="int32")[None, :]
    lengths = ops.cast(lengths, "int32")[:, None]
    index = ops.where(positions < lengths, lengths - 1 - positions, positions)
    index = ops.reshape(index, (*ops.shape(index), *([1] * (len(x.shape) - 2))))
    return ops.take_along_axis(x, index, axis=1)


@keras.saving.register_keras_serializable(package="elmo_keras")
class ProjectedBiLSTM(keras.layers.Layer):
    """ELMo's stacked bidirectional LSTM with projections, residual connections and clipping.

    `n_layers` forward and `n_layers` backward `ProjectedLSTMCell`s with separate weights.
    The forward stack reads each sentence left to right; the backward stack reads it right to
    left: every sentence is reversed by its own length (padding stays at the end), run, and
    reversed back, so position `t` of every output is token `t`. From the second layer up, a
    layer's output is `lstm_output + layer_input` when `use_skip_connections` is set; the
    carried state keeps the LSTM's own `h`.

    The layer is stateless: each call starts from zero state unless `initial_state` is given,
    and with `return_state=True` it also returns the final state of every layer and direction
    (the state after each sentence's last real token), so a caller can carry state across
    batches explicitly. Padded positions output zeros and do not change the state, so a
    sentence gives the same vectors alone or inside any right-padded batch.

    Written with `keras.ops` (the recurrence is a `keras.ops.scan`; on TensorFlow the same
    contract as a bounded `tf.while_loop`), so it runs on every Keras 3 backend (TensorFlow
    and JAX are tested). On TensorFlow, at inference with `length_aware`,
    the layer runs `elmo_keras.layers.tf_fast_path.packed_bilstm` instead: the same numbers,
    less work on uneven batches.

    Args:
        lstm_units: int. Memory cell size of every LSTM. ELMo: `4096`. Called `units` before
            0.2 (still accepted, with a `DeprecationWarning`).
        projection_dim: int. Output size of every LSTM. ELMo: `512`.
        n_layers: int. Layers per direction. Defaults to `2`.
        cell_clip: float or None. Defaults to `3.0`.
        proj_clip: float or None. Defaults to `3.0`.
        use_skip_connections: bool. Residual connections from the second layer up.
            Defaults to `True`.
        dropout: float in `[0, 1)`. Dropout on each layer's input during training.
            Defaults to `0.0`.
        cell_forget_bias: float. Forget-gate bias added at run time. Defaults to `1.0`.
        return_state: bool. Also return the final states. Defaults to `False`.
        length_aware: bool. On TensorFlow at inference (`training` falsy), run the recurrence
            packed by length: rows sorted by length inside the graph, step `t` computing only
            the rows still running, the input projection only over real positions (in windows of
            steps, so a very long input needs bounded memory). The same numbers as the plain
            path (to float round-off); training always takes the plain path. Defaults to
            `True`.
        unroll: int >= 1. Steps of the recurrence per iteration of the compiled loop
            (`keras.ops.scan`'s `unroll`; on JAX `lax.scan`'s): larger compiles more code
            and lets the compiler overlap steps, faster on GPUs. TensorFlow's bounded loop
            does not unroll. The same numbers. Defaults to `1`.
        stack_directions: bool. On the plain path, run layer `l` of both directions in one
            loop with their weights stacked: one batched product a step instead of two, and
            one loop instead of two. The same numbers (to float round-off; dropout draws its
            masks differently). Defaults to `False`.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: float tensor `[batch, tokens, features]`, right-padded.
        mask: optional bool tensor `[batch, tokens]`, True for real tokens (a prefix of each
            row). Defaults to all True.
        initial_state: optional list `[state_h, state_c]` with `state_h`
            `[batch, 2, n_layers, projection_dim]` and `state_c` `[batch, 2, n_layers, lstm_units]`
            (axis 1: 0 forward, 1 backward). Defaults to zeros.
        training: bool. Whether dropout is active.
        backward_inputs: optional tensor shaped like `inputs` for the backward stack (in
            natural order), for trainers that feed the two directions different windows.
        length_aware: optional bool. Overrides the layer's `length_aware` for this call
            (`False` under XLA, which needs the plain path's static shapes).

    Returns:
        `outputs` `[batch, n_layers, tokens, 2 * projection_dim]` (forward in the first half
        of the last axis, backward in the second); with `return_state=True`, the tuple
        `(outputs, state_h, state_c)`.

    Example:
    >>> layer = ProjectedBiLSTM(lstm_units=32, projection_dim=8, n_layers=2)
    >>> x = np.random.rand(3, 6, 8).astype("float32")
    >>> mask = np.array([[1] * 6, [1] * 4 + [0] * 2, [1] * 1 + [0] * 5], bool)
    >>> tuple(layer(x, mask=mask).shape)
    (3, 2, 6, 16)

    Reference:
        [Peters et al., 2018](https://arxiv.org/abs/1802.05365)
    """

    def __init__(
        self,
        lstm_units=None,
        projection_dim=None,
        n_layers=2,
        cell_clip=3.0,
        proj_clip=3.0,
        use_skip_connections=True,
        dropout=0.0,
        cell_forget_bias=1.0,
        return_state=False,
        length_aware=True,
        unroll=1,
        stack_directions=False,
        **kwargs,
    ):
        lstm_units = renamed_argument(
            kwargs, "units", "lstm_units", lstm_units, None, "ProjectedBiLSTM"
        )
        super().__init__(**kwargs)
        self.lstm_units = check_int("lstm_units", lstm_units)
        self.projection_dim = check_int("projection_dim", projection_dim)
        self.n_layers = check_int("n_layers", n_layers)
        self.cell_clip = _optional_clip("cell_clip", cell_clip)
        self.proj_clip = _optional_clip("proj_clip", proj_clip)
        self.use_skip_connections = bool(use_skip_connections)
        self.dropout = check_number("dropout", dropout, 0.0, 1.0, include_maximum=False)
        self.cell_forget_bias = check_number("cell_forget_bias", cell_forget_bias)
        self.return_state = bool(return_state)
        self.length_aware = bool(length_aware)
        self.unroll = check_int("unroll", unroll)
        self.stack_directions = bool(stack_directions)
        self.supports_masking = True
        # Set while the layer is built for weights assigned right after (a loaded model:
        # `elmo_keras.weights.build_for_weights`): the cells then start from zeros, not from their
        # initializers (the orthogonal one is a QR decomposition of each recurrent kernel).
        self._restoring = False

    def build(self, input_shape, *args, **kwargs):
        features = input_shape[-1]
        if features is None:
            raise ValueError(
                "`ProjectedBiLSTM` needs a known feature size. "
                f"Received: input_shape={tuple(input_shape)}"
            )
        self.forward_cells = []
        self.backward_cells = []
        directions = (("forward", self.forward_cells), ("backward", self.backward_cells))
        names = ("kernel_initializer", "recurrent_initializer", "projection_initializer")
        initial = dict.fromkeys(names, "zeros") if self._restoring else {}
        for direction, cells in directions:
            for layer in range(self.n_layers):
                cell = ProjectedLSTMCell(
                    self.lstm_units,
                    self.projection_dim,
                    cell_clip=self.cell_clip,
                    proj_clip=self.proj_clip,
                    forget_bias=self.cell_forget_bias,
                    dtype=self.dtype_policy,
                    name=f"{direction}_{layer}",
                    **initial,
                )
                cell.build((None, features if layer == 0 else self.projection_dim))
                cells.append(cell)
        self.input_dropout = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="input_dropout"
        )
        self.built = True

    def _recurrence(self, cell, kernels, z_steps, running, h, c):
        """Runs `cell` over time: `z_steps` `[T, ..., 4U]` (time-major gate inputs) ->
        `(outputs [T, ..., P], h, c)`; `kernels`: `cell.step_kernels` (cast once, not at every
        step), or two directions' stacked on a leading axis as `h`, `c` and `z_steps` are.

        A scan with the step number in the carry: a row runs while the step is below its length
        (`running`: the lengths shaped to broadcast against `h`; a mask is a prefix), then keeps
        its state and outputs zeros. The scan is `keras.ops.scan` with `unroll`, except on
        TensorFlow, where `tf_fast_path.scan` gives the same contract with a bounded
        `tf.while_loop` (Keras' TensorFlow `scan` sets no `maximum_iterations`, which XLA needs
        to differentiate the loop).
        """

        def step(carry, z_step):
            h, c, t = carry
            h_new, c_new = cell.recurrent_step(z_step, h, c, kernels)
            keep = t < running
            output = ops.where(keep, h_new, ops.zeros_like(h_new))
            return (ops.where(keep, h_new, h), ops.where(keep, c_new, c), t + 1), output

        path = fast_path()
        scan = path.scan if path else ops.scan
        start = ops.zeros((), "int32")
        (h, c, _), outputs = scan(step, (h, c, start), z_steps, unroll=self.unroll)
        return outputs, h, c

    def _stacked_directions(
        self, inputs, backward_inputs, mask, lengths, state_h, state_c, training
    ):
        """`run_directions` with each layer's two directions in one loop (`stack_directions`):
        inputs, kernels and states stacked on a leading direction axis `[2, ...]`."""
        x = ops.stack([inputs, reverse_by_length(backward_inputs, lengths)])
        float_mask = ops.cast(mask, x.dtype)[None, :, :, None]
        dtype, outputs, final_h, final_c = self.compute_dtype, [], [], []
        for layer in range(self.n_layers):
            cells = (self.forward_cells[layer], self.backward_cells[layer])
            kernel = ops.stack([ops.cast(cell.kernel, dtype) for cell in cells])
            bias = ops.stack([ops.cast(cell.bias, dtype) for cell in cells])
            fw_kernels, bw_kernels = (cell.step_kernels(dtype) for cell in cells)
            kernels = [ops.stack(k) for k in zip(fw_kernels, bw_kernels, strict=True)]
            layer_input = self.input_dropout(x, training=training) if self.dropout else x
            z = ops.einsum("dbtf,dfg->tdbg", layer_input, kernel) + bias[None, :, None, :]
            h, c = (ops.moveaxis(s[:, :, layer], 1, 0) for s in (state_h, state_c))
            out, h, c = self._recurrence(cells[0], kernels, z, lengths[None, :, None], h, c)
            out = ops.transpose(out, (1, 2, 0, 3))  # [2, B, T, P]
            if layer > 0 and self.use_skip_connections:
                out = out + layer_input * float_mask
            outputs.append(ops.concatenate([out[0], reverse_by_length(out[1], lengths)], -1))
            final_h.append(ops.moveaxis(h, 0, 1))
            final_c.append(ops.moveaxis(c, 0, 1))
            x = out
        return ops.stack(outputs, axis=1), ops.stack(final_h, axis=2), ops.stack(final_c, axis=2)

    def run_directions(
        self, inputs, backward_inputs, mask, lengths, state_h, state_c, *, training, recurrence=None
    ):
        """Both directions' stacks -> `(outputs [B, n_layers, T, 2P], state_h, state_c)`.

        The one copy of the stacking (reversal, skip connections, the merge of the
        directions), for the core path and a fast path alike: `recurrence(cell, x, h, c) ->
        (outputs, h, c)` runs one layer over `x` `[B, T, F]` in natural order (outputs zero
        at padding) and defaults to the core's scan; `tf_fast_path.packed_bilstm` passes its
        packed one. `training` drives the dropout.
        """
        if recurrence is None and self.stack_directions:
            return self._stacked_directions(
                inputs, backward_inputs, mask, lengths, state_h, state_c, training
            )
        if recurrence is None:

            def recurrence(cell, x, h, c):
                z = ops.transpose(cell.input_projection(x), (1, 0, 2))
                kernels = cell.step_kernels(h.dtype)
                out, h, c = self._recurrence(cell, kernels, z, lengths[:, None], h, c)
                return ops.transpose(out, (1, 0, 2)), h, c

        float_mask = ops.cast(mask, inputs.dtype)[:, :, None]
        directions = []
        for index, x in enumerate((inputs, backward_inputs)):
            reverse = index == 1
            x = reverse_by_length(x, lengths) if reverse else x
            outputs, final_h, final_c = [], [], []
            for layer, cell in enumerate(self.backward_cells if reverse else self.forward_cells):
                layer_input = self.input_dropout(x, training=training) if self.dropout else x
                out, h, c = recurrence(
                    cell, layer_input, state_h[:, index, layer], state_c[:, index, layer]
                )
                if layer > 0 and self.use_skip_connections:
                    out = out + layer_input * float_mask
                outputs.append(out)
                final_h.append(h)
                final_c.append(c)
                x = out
            if reverse:
                outputs = [reverse_by_length(out, lengths) for out in outputs]
            directions.append((outputs, ops.stack(final_h, axis=1), ops.stack(final_c, axis=1)))
        (forward, fw_h, fw_c), (backward, bw_h, bw_c) = directions
        outputs = ops.stack(
            [ops.concatenate([fw, bw], axis=-1) for fw, bw in zip(forward, backward, strict=True)],
            axis=1,
        )
        return outputs, ops.stack([fw_h, bw_h], axis=1), ops.stack([fw_c, bw_c], axis=1)

    def call(
        self,
        inputs,
        mask=None,
        initial_state=None,
        training=None,
        backward_inputs=None,
        length_aware=None,
    ):
        dtype = self.compute_dtype
        inputs = ops.cast(inputs, dtype)
        batch, steps = ops.shape(inputs)[0], ops.shape(inputs)[1]
        if mask is None:
            mask = ops.ones((batch, steps), "bool")
        mask = ops.cast(mask, "bool")
        lengths = ops.sum(ops.cast(mask, "int32"), axis=1)
        if initial_state is None:
            state_h = ops.zeros((batch, 2, self.n_layers, self.projection_dim), dtype)
            state_c = ops.zeros((batch, 2, self.n_layers, self.lstm_units), dtype)
        else:
            if len(initial_state) != 2:
                raise ValueError(
                    "`initial_state` must be a list [state_h, state_c]. "
                    f"Received: {len(initial_state)} tensors"
                )
            state_h = ops.cast(initial_state[0], dtype)
            state_c = ops.cast(initial_state[1], dtype)
        backward_inputs = inputs if backward_inputs is None else ops.cast(backward_inputs, dtype)
        length_aware = self.length_aware if length_aware is None else length_aware
        path = fast_path()
        if path and path.applies(self, training, length_aware):
            outputs, state_h, state_c = path.packed_bilstm(
                self, inputs, backward_inputs, lengths, state_h, state_c
            )
            return (outputs, state_h, state_c) if self.return_state else outputs
        outputs, state_h, state_c = self.run_directions(
            inputs, backward_inputs, mask, lengths, state_h, state_c, training=training
        )
        return (outputs, state_h, state_c) if self.return_state else outputs

    def compute_mask(self, inputs, mask=None, *args, **kwargs):
        if self.return_state:
            return [mask, None, None]
        return mask

    def compute_output_shape(self, input_shape, *args, **kwargs):
        batch, steps = input_shape[0], input_shape[1]
        outputs = (batch, self.n_layers, steps, 2 * self.projection_dim)
        if not self.return_state:
            return outputs
        return (
            outputs,
            (batch, 2, self.n_layers, self.projection_dim),
            (batch, 2, self.n_layers, self.lstm_units),
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "lstm_units": self.lstm_units,
                "projection_dim": self.projection_dim,
                "n_layers": self.n_layers,
                "cell_clip": self.cell_clip,
                "proj_clip": self.proj_clip,
                "use_skip_connections": self.use_skip_connections,
                "dropout": self.dropout,
                "cell_forget_bias": self.cell_forget_bias,
                "return_state": self.return_state,
                "length_aware": self.length_aware,
                "unroll": self.unroll,
                "stack_directions": self.stack_directions,
            }
        )
        return config

    units = renamed_attribute("units", "lstm_units")

    @classmethod
    def from_config(cls, config):
        return cls(**_from_0_1_0_config(config))
