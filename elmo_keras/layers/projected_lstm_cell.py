import keras
import tensorflow as tf

from elmo_keras.validation import (
    check_int,
    check_number,
    renamed_argument,
    renamed_attribute,
)


def require_tensorflow_backend(owner):
    """Raises a `RuntimeError` unless Keras runs on the TensorFlow backend.

    The one check of the TensorFlow-only parts. `Highway`, `ScalarMix` and `CharCNN` are written
    with `keras.ops` and run on any Keras 3 backend; the LSTMs (this cell, `ProjectedBiLSTM`),
    the models built on them and the string ops are TensorFlow code, which under another
    backend would quietly compute with TensorFlow and return TensorFlow tensors. So their
    constructors call this first. It lives here, at the bottom of the TensorFlow-only layers,
    so that no layer module imports a sibling that imports another (tests/test_architecture.py).
    See docs/backends.md.

    Args:
        owner: str. The name of the class or function that needs TensorFlow, for the message.

    Example:
    >>> keras.config.backend()
    'tensorflow'
    >>> require_tensorflow_backend("ProjectedBiLSTM")  # nothing happens on TensorFlow
    """
    backend = keras.config.backend()
    if backend != "tensorflow":
        raise RuntimeError(
            f"`{owner}` needs the TensorFlow backend (KERAS_BACKEND=tensorflow); received "
            f"backend {backend!r}. On other backends only `Highway`, `ScalarMix` and `CharCNN` "
            "run (see docs/backends.md)."
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
    TensorFlow backend only: under another Keras backend the constructor raises a
    `RuntimeError`.

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
    >>> keras.layers.RNN(cell)(np.ones((2, 5, 4), "float32")).shape
    TensorShape([2, 8])
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
        require_tensorflow_backend("ProjectedLSTMCell")
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
        kernel = tf.cast(self.kernel, self.compute_dtype)
        bias = tf.cast(self.bias, self.compute_dtype)
        shape = tf.shape(inputs)
        flat = tf.reshape(inputs, [-1, shape[-1]])
        z = tf.matmul(flat, kernel) + bias
        return tf.reshape(z, tf.concat([shape[:-1], [4 * self.lstm_units]], axis=0))

    def step_kernels(self, dtype):
        """`(recurrent_kernel, projection_kernel)` cast to `dtype`, for `recurrent_step`.

        A loop reads them once, before it starts: under a mixed policy (`"mixed_bfloat16"`)
        the cast would otherwise copy 40 MB of the published weights at every step.
        """
        return tf.cast(self.recurrent_kernel, dtype), tf.cast(self.projection_kernel, dtype)

    def recurrent_step(self, z_input, h, c, kernels):
        """One step given the input's share of the gates and `kernels` (`step_kernels`):
        returns the new `(h, c)`."""
        recurrent_kernel, projection_kernel = kernels
        z = z_input + tf.matmul(h, recurrent_kernel)
        i, f, g, o = tf.split(z, 4, axis=-1)
        c = tf.sigmoid(f + self.forget_bias) * c + tf.sigmoid(i) * tf.tanh(g)
        if self.cell_clip is not None:
            c = tf.clip_by_value(c, -self.cell_clip, self.cell_clip)
        h = tf.matmul(tf.sigmoid(o) * tf.tanh(c), projection_kernel)
        if self.proj_clip is not None:
            h = tf.clip_by_value(h, -self.proj_clip, self.proj_clip)
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


def is_inference(training):
    """Whether `training` is a falsy Python value (a tensor takes the plain path)."""
    return not isinstance(training, tf.Tensor | tf.Variable) and not training
