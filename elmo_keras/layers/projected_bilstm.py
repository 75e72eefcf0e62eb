import functools

import keras
import tensorflow as tf

from elmo_keras.layers.projected_lstm_cell import (
    ProjectedLSTMCell,
    _from_0_1_0_config,
    _optional_clip,
    is_inference,
    packed_recurrence,
    packing_plan,
    require_tensorflow_backend,
)
from elmo_keras.validation import check_int, check_number, renamed_argument, renamed_attribute


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

    TensorFlow backend only (a `tf.while_loop`): under another Keras backend the constructor
    raises a `RuntimeError`.

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
        length_aware: bool. At inference (`training` falsy), run the recurrence packed by
            length: rows sorted by length inside the graph, step `t` computing only the rows
            still running, the input projection only over real positions (in windows of
            steps, so a very long input needs bounded memory). The same numbers as the plain
            path (to float round-off); training always takes the plain path. Defaults to
            `True`.
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
    >>> layer(x, mask=mask).shape
    TensorShape([3, 2, 6, 16])

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
        **kwargs,
    ):
        require_tensorflow_backend("ProjectedBiLSTM")
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
        self.supports_masking = True

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
                )
                cell.build((None, features if layer == 0 else self.projection_dim))
                cells.append(cell)
        self.input_dropout = keras.layers.Dropout(
            self.dropout, dtype=self.dtype_policy, name="input_dropout"
        )
        self.built = True

    def _recurrence(self, cell, z_input, mask, h, c):
        """Runs `cell` over time. z_input [B, T, 4U], mask [B, T] -> (outputs [B, T, P], h, c)."""
        z_time_major = tf.transpose(z_input, [1, 0, 2])
        mask_time_major = tf.transpose(mask)[:, :, None]
        steps = tf.shape(z_time_major)[0]
        z_array = tf.TensorArray(z_input.dtype, size=steps).unstack(z_time_major)
        mask_array = tf.TensorArray(tf.bool, size=steps).unstack(mask_time_major)
        out_array = tf.TensorArray(z_input.dtype, size=steps)

        kernels = cell.step_kernels(h.dtype)  # cast once, not at every step

        def body(t, h, c, out_array):
            h_new, c_new = cell.recurrent_step(z_array.read(t), h, c, kernels)
            keep = mask_array.read(t)
            h = tf.where(keep, h_new, h)
            c = tf.where(keep, c_new, c)
            out_array = out_array.write(t, tf.where(keep, h_new, tf.zeros_like(h_new)))
            return t + 1, h, c, out_array

        _, h, c, out_array = tf.while_loop(
            lambda t, *_: t < steps,
            body,
            (tf.constant(0), h, c, out_array),
            maximum_iterations=steps,
        )
        outputs = tf.transpose(out_array.stack(), [1, 0, 2])
        return outputs, h, c

    def _run_direction(self, inputs, mask, lengths, cells, state_h, state_c, reverse, training):
        x = inputs
        if reverse:
            x = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
        float_mask = tf.cast(mask, x.dtype)[:, :, None]
        outputs, final_h, final_c = [], [], []
        for layer, cell in enumerate(cells):
            layer_input = self.input_dropout(x, training=training) if self.dropout else x
            out, h, c = self._recurrence(
                cell,
                cell.input_projection(layer_input),
                mask,
                state_h[:, layer],
                state_c[:, layer],
            )
            if layer > 0 and self.use_skip_connections:
                out = out + layer_input * float_mask
            outputs.append(out)
            final_h.append(h)
            final_c.append(c)
            x = out
        if reverse:
            outputs = [
                tf.reverse_sequence(out, lengths, seq_axis=1, batch_axis=0) for out in outputs
            ]
        return outputs, tf.stack(final_h, axis=1), tf.stack(final_c, axis=1)

    def _run_packed(self, inputs, plan, lengths, cells, state_h, state_c, reverse):
        """`_run_direction` at inference, packed by length (see `packing_plan`)."""
        x = tf.reverse_sequence(inputs, lengths, seq_axis=1, batch_axis=0) if reverse else inputs
        x = tf.transpose(tf.gather(x, plan["order"]), [1, 0, 2])  # [T, B, F], sorted
        mask = tf.cast(plan["mask"], x.dtype)
        h0, c0 = tf.gather(state_h, plan["order"]), tf.gather(state_c, plan["order"])
        outputs, final_h, final_c = [], [], []
        for layer, cell in enumerate(cells):
            packed = tf.gather_nd(x, plan["positions"])
            out, h, c = packed_recurrence(cell, packed, plan, h0[:, layer], c0[:, layer])
            if layer > 0 and self.use_skip_connections:
                out = out + x * mask
            outputs.append(out)
            final_h.append(h)
            final_c.append(c)
            x = out
        outputs = [tf.gather(tf.transpose(out, [1, 0, 2]), plan["inverse"]) for out in outputs]
        if reverse:
            outputs = [
                tf.reverse_sequence(out, lengths, seq_axis=1, batch_axis=0) for out in outputs
            ]
        final_h = tf.gather(tf.stack(final_h, axis=1), plan["inverse"])
        return outputs, final_h, tf.gather(tf.stack(final_c, axis=1), plan["inverse"])

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
        inputs = tf.cast(inputs, dtype)
        batch = tf.shape(inputs)[0]
        steps = tf.shape(inputs)[1]
        if mask is None:
            mask = tf.ones([batch, steps], tf.bool)
        mask = tf.cast(mask, tf.bool)
        lengths = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
        if initial_state is None:
            state_h = tf.zeros([batch, 2, self.n_layers, self.projection_dim], dtype)
            state_c = tf.zeros([batch, 2, self.n_layers, self.lstm_units], dtype)
        else:
            if len(initial_state) != 2:
                raise ValueError(
                    "`initial_state` must be a list [state_h, state_c]. "
                    f"Received: {len(initial_state)} tensors"
                )
            state_h = tf.cast(initial_state[0], dtype)
            state_c = tf.cast(initial_state[1], dtype)
        backward_inputs = inputs if backward_inputs is None else tf.cast(backward_inputs, dtype)
        length_aware = self.length_aware if length_aware is None else length_aware
        if length_aware and is_inference(training):
            plan = packing_plan(lengths, steps, 4 * self.lstm_units)
            args = (plan, lengths)
            run = self._run_packed
        else:
            args = (mask, lengths)
            run = functools.partial(self._run_direction, training=training)
        forward, fw_h, fw_c = run(
            inputs, *args, self.forward_cells, state_h[:, 0], state_c[:, 0], reverse=False
        )
        backward, bw_h, bw_c = run(
            backward_inputs, *args, self.backward_cells, state_h[:, 1], state_c[:, 1], reverse=True
        )
        outputs = tf.stack(
            [tf.concat([fw, bw], axis=-1) for fw, bw in zip(forward, backward, strict=True)], axis=1
        )
        if not self.return_state:
            return outputs
        return outputs, tf.stack([fw_h, bw_h], axis=1), tf.stack([fw_c, bw_c], axis=1)

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
            }
        )
        return config

    units = renamed_attribute("units", "lstm_units")

    @classmethod
    def from_config(cls, config):
        return cls(**_from_0_1_0_config(config))
