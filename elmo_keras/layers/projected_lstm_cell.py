import keras
from keras import ops

from elmo_keras.validation import (
    check_int,
    check_number,
    renamed_argument,
    renamed_attribute,
)


def _optional_clip(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"`{name}` must be a positive number or None. Received: {name}={value!r}")
    return float(value)


def _from_0_1_0_config(config):
    """A layer config saved by 0.1.0 (`units`) with today's names (`lstm_units`)."""
    config = dict(config)
    if "units" in config:
        config["lstm_units"] = config.pop("units")
    return config


@keras.saving.register_keras_serializable(package="elmo_keras")
class ProjectedLSTMCell(keras.layers.Layer):
    """An LSTM cell with a projection of its output, as in ELMo (Sak et al. 2014).

    One step, with the gate blocks in Keras order (input, forget, candidate, output):
    ```
    z = x @ kernel + h @ recurrent_kernel + bias
    c = clip(sigmoid(z_f + forget_bias) * c + sigmoid(z_i) * tanh(z_c), cell_clip)
    h = clip((sigmoid(z_o) * tanh(c)) @ projection_kernel, proj_clip)
    ```
    No peepholes. As in TensorFlow's `LSTMCell` (and so in the published ELMo weights),
    `forget_bias` is added when the cell runs and is not part of `bias`; a weight file is
    therefore loaded and written back bit for bit.

    The cell works step by step with `keras.layers.RNN` (state `[h, c]`); `ProjectedBiLSTM`
    instead calls `input_projection` once for all positions and `recurrent_step` in its loop.
    Written with `keras.ops` only: it runs on every Keras 3 backend (TensorFlow and JAX are
    tested).

    Args:
        lstm_units: int. Size of the memory cell `c`. Called `units` before 0.2 (still
            accepted, with a `DeprecationWarning`).
        projection_dim: int. Size of the output and of the state `h`.
        cell_clip: float or None. Clip `c` to `[-cell_clip, cell_clip]`. Defaults to `None`.
        proj_clip: float or None. Clip `h` to `[-proj_clip, proj_clip]`. Defaults to `None`.
        forget_bias: float. Added to the forget gate at run time. Defaults to `1.0`.
        kernel_initializer, recurrent_initializer, projection_initializer: initializers of
            the three matrices. Default to `"glorot_uniform"`, `"orthogonal"`,
            `"glorot_uniform"`.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: float tensor `[batch, input_dim]`.
        states: list `[h, c]`, `[batch, projection_dim]` and `[batch, lstm_units]`.

    Returns:
        `(h, [h, c])`.

    Example:
    >>> cell = ProjectedLSTMCell(32, 8, cell_clip=3.0, proj_clip=3.0)
    >>> tuple(keras.layers.RNN(cell)(np.ones((2, 5, 4), "float32")).shape)
    (2, 8)
    """

    def __init__(
        self,
        lstm_units=None,
        projection_dim=None,
        cell_clip=None,
        proj_clip=None,
        forget_bias=1.0,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        projection_initializer="glorot_uniform",
        **kwargs,
    ):
        lstm_units = renamed_argument(
            kwargs, "units", "lstm_units", lstm_units, None, "ProjectedLSTMCell"
        )
        super().__init__(**kwargs)
        self.lstm_units = check_int("lstm_units", lstm_units)
        self.projection_dim = check_int("projection_dim", projection_dim)
        self.cell_clip = _optional_clip("cell_clip", cell_clip)
        self.proj_clip = _optional_clip("proj_clip", proj_clip)
        self.forget_bias = check_number("forget_bias", forget_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.projection_initializer = keras.initializers.get(projection_initializer)
        self.state_size = [self.projection_dim, self.lstm_units]
        self.output_size = self.projection_dim

    def build(self, input_shape):
        input_dim = input_shape[-1]
        self.kernel = self.add_weight(
            name="kernel",
            shape=(input_dim, 4 * self.lstm_units),
            initializer=self.kernel_initializer,
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel",
            shape=(self.projection_dim, 4 * self.lstm_units),
            initializer=self.recurrent_initializer,
        )
        self.bias = self.add_weight(name="bias", shape=(4 * self.lstm_units,), initializer="zeros")
        self.projection_kernel = self.add_weight(
            name="projection_kernel",
            shape=(self.lstm_units, self.projection_dim),
            initializer=self.projection_initializer,
        )
        self.built = True

    def input_projection(self, inputs):
        """`inputs @ kernel + bias` for inputs of any rank >= 2 (one large product)."""
        kernel = ops.cast(self.kernel, self.compute_dtype)
        bias = ops.cast(self.bias, self.compute_dtype)
        shape = ops.shape(inputs)
        flat = ops.reshape(inputs, (-1, shape[-1]))
        z = ops.matmul(flat, kernel) + bias
        return ops.reshape(z, (*shape[:-1], 4 * self.lstm_units))

    def step_kernels(self, dtype, feature_major=False):
        """`(recurrent_kernel, projection_kernel)` cast to `dtype`, for `recurrent_step`
        (transposed with `feature_major=True`).

        A loop reads them once, before it starts: under a mixed policy (`"mixed_bfloat16"`)
        the cast would otherwise copy 40 MB of the published weights at every step.
        """
        kernels = (ops.cast(self.recurrent_kernel, dtype), ops.cast(self.projection_kernel, dtype))
        return tuple(ops.transpose(k) for k in kernels) if feature_major else kernels

    def recurrent_step(self, z_input, h, c, kernels, feature_major=False):
        """One step given the input's share of the gates and `kernels` (`step_kernels`):
        returns the new `(h, c)`.

        With `feature_major=True` every array is transposed: `z_input` `[4U, B]`, `h` `[P, B]`,
        `c` `[U, B]`, and `kernels` are `step_kernels(dtype, feature_major=True)`. The same
        sums; on XLA's CPU backend a product with the weights on the left runs faster for few
        rows (JAX's fast path, `jax_fast_path`). Feature-major arrays may carry leading batch
        axes, the kernels too (`[D, 4U, P]`, `z_input` `[D, 4U, B]`: `D` cells of this
        configuration in one batched product, as the fast path runs a layer's two
        directions)."""
        recurrent_kernel, projection_kernel = kernels
        if feature_major:
            z = z_input + ops.matmul(recurrent_kernel, h)
        else:
            z = z_input + ops.matmul(h, recurrent_kernel)
        i, f, g, o = ops.split(z, 4, axis=-2 if feature_major else -1)
        c = ops.sigmoid(f + self.forget_bias) * c + ops.sigmoid(i) * ops.tanh(g)
        if self.cell_clip is not None:
            c = ops.clip(c, -self.cell_clip, self.cell_clip)
        m = ops.sigmoid(o) * ops.tanh(c)
        h = ops.matmul(projection_kernel, m) if feature_major else ops.matmul(m, projection_kernel)
        if self.proj_clip is not None:
            h = ops.clip(h, -self.proj_clip, self.proj_clip)
        return h, c

    def call(self, inputs, states):
        h, c = states[0], states[1]
        h, c = self.recurrent_step(self.input_projection(inputs), h, c, self.step_kernels(h.dtype))
        return h, [h, c]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "lstm_units": self.lstm_units,
                "projection_dim": self.projection_dim,
                "cell_clip": self.cell_clip,
                "proj_clip": self.proj_clip,
                "forget_bias": self.forget_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
                "projection_initializer": keras.initializers.serialize(self.projection_initializer),
            }
        )
        return config

    units = renamed_attribute("units", "lstm_units")

    @classmethod
    def from_config(cls, config):
        return cls(**_from_0_1_0_config(config))
