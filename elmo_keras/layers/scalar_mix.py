import keras
from keras import ops

from elmo_keras.validation import (
    check_int,
    check_number,
    renamed_argument,
    renamed_attribute,
)


@keras.saving.register_keras_serializable(package="elmo_keras")
class ScalarMix(keras.layers.Layer):
    """ELMo's task-specific mix of the biLM layers: `gamma * sum_j softmax(w)_j * layer_j`.

    The weights `w` start at 0 (an even mix) and `gamma` at 1, unless set. With
    `do_layer_norm`, every layer is first normalised with one mean and one variance taken over
    all real (unmasked) elements of the batch, as bilm-tf and AllenNLP do. With `use_top_only`,
    the output is `gamma * top_layer` and `w` is unused. Written with `keras.ops` only, so it
    runs on any Keras 3 backend (and under `jax.jit` of `stateless_call`).

    Args:
        n_layers: int. Number of layers mixed (ELMo: the biLM's `n_layers + 1`). Called
            `num_layers` before 0.2 (still accepted, with a `DeprecationWarning`).
        do_layer_norm: bool. Masked layer normalisation of each layer. Defaults to `False`.
        l2_coef: float. L2 penalty `l2_coef * sum(w ** 2)` added to the layer's losses, as
            bilm-tf's `l2_coef`. Defaults to `0.0` (none).
        use_top_only: bool. Use only the top layer. Defaults to `False`.
        initial_scalar_weights: list of `n_layers` floats, or None for zeros.
        initial_gamma: float. Defaults to `1.0`.
        layer_norm_epsilon: float. Defaults to `1e-12` (bilm-tf; AllenNLP uses `1e-13`).
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: float tensor `[batch, n_layers, tokens, dim]`, or a list of `n_layers`
            tensors `[batch, tokens, dim]`.
        mask: optional bool tensor `[batch, tokens]`; only used by the layer norm, and passed on.

    Returns:
        A float tensor `[batch, tokens, dim]`. Padded positions are not zeroed (with layer norm
        they hold `-mean / std` scaled), so use the mask that the layer passes on.

    Example:
    >>> mix = ScalarMix(3, initial_scalar_weights=[0.1, 0.3, 0.5], initial_gamma=1.1)
    >>> tuple(mix(np.ones((2, 3, 4, 8), "float32")).shape)
    (2, 4, 8)

    Reference:
        [Peters et al., 2018](https://arxiv.org/abs/1802.05365), equation 1.
    """

    def __init__(
        self,
        n_layers=None,
        do_layer_norm=False,
        l2_coef=0.0,
        use_top_only=False,
        initial_scalar_weights=None,
        initial_gamma=1.0,
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        n_layers = renamed_argument(kwargs, "num_layers", "n_layers", n_layers, None, "ScalarMix")
        super().__init__(**kwargs)
        self.n_layers = check_int("n_layers", n_layers)
        self.do_layer_norm = bool(do_layer_norm)
        self.l2_coef = check_number("l2_coef", l2_coef, minimum=0.0)
        self.use_top_only = bool(use_top_only)
        if initial_scalar_weights is not None:
            initial_scalar_weights = [float(w) for w in initial_scalar_weights]
            if len(initial_scalar_weights) != self.n_layers:
                raise ValueError(
                    f"`initial_scalar_weights` must have `n_layers` ({self.n_layers}) "
                    f"values. Received: initial_scalar_weights={initial_scalar_weights}"
                )
        self.initial_scalar_weights = initial_scalar_weights
        self.initial_gamma = float(initial_gamma)
        self.layer_norm_epsilon = float(layer_norm_epsilon)
        self.supports_masking = True

    def build(self, inputs_shape=None):
        initial = self.initial_scalar_weights or [0.0] * self.n_layers
        self.scalar_weights = self.add_weight(
            name="scalar_weights",
            shape=(self.n_layers,),
            initializer=keras.initializers.Constant(initial),
            regularizer=keras.regularizers.L2(self.l2_coef) if self.l2_coef else None,
        )
        self.gamma = self.add_weight(
            name="gamma", shape=(), initializer=keras.initializers.Constant(self.initial_gamma)
        )
        self.built = True

    def _stack(self, inputs):
        if isinstance(inputs, (list, tuple)):
            if len(inputs) != self.n_layers:
                raise ValueError(
                    f"`ScalarMix` expects {self.n_layers} layers. Received: {len(inputs)}"
                )
            return [ops.convert_to_tensor(x) for x in inputs]
        inputs = ops.convert_to_tensor(inputs)
        if len(inputs.shape) != 4 or inputs.shape[1] not in (None, self.n_layers):
            raise ValueError(
                f"`ScalarMix` expects inputs [batch, {self.n_layers}, tokens, dim]. "
                f"Received: shape={tuple(inputs.shape)}"
            )
        return ops.unstack(inputs, num=self.n_layers, axis=1)

    def _layer_norm(self, x, float_mask):
        # One mean and variance over every real element of the batch (bilm-tf, AllenNLP).
        broadcast = float_mask[:, :, None]
        count = ops.sum(float_mask) * ops.cast(ops.shape(x)[-1], x.dtype)
        mean = ops.sum(x * broadcast) / count
        variance = ops.sum(ops.square((x - mean) * broadcast)) / count
        return (x - mean) * ops.rsqrt(variance + self.layer_norm_epsilon)

    @staticmethod
    def _one_mask(mask):
        """The mask of the positions: given on a list of layers, Keras passes one entry per
        layer (`None` where a layer has none); the layers share their positions, so the first
        given entry is the mask, and a list of `None`s is no mask."""
        if isinstance(mask, list | tuple):
            return next((m for m in mask if m is not None), None)
        return mask

    def call(self, inputs, mask=None):
        mask = self._one_mask(mask)
        layers = self._stack(inputs)
        dtype = layers[0].dtype
        gamma = ops.cast(self.gamma, dtype)
        if self.use_top_only:
            return gamma * layers[-1]
        if mask is None:
            float_mask = ops.ones_like(layers[0][:, :, 0])
        else:
            float_mask = ops.cast(mask, dtype)
        weights = ops.cast(ops.softmax(self.scalar_weights), dtype)
        total = 0.0
        for j, layer in enumerate(layers):
            if self.do_layer_norm:
                layer = self._layer_norm(layer, float_mask)
            total = total + weights[j] * layer
        return gamma * total

    def compute_mask(self, inputs, mask=None):
        return self._one_mask(mask)

    def compute_output_shape(self, input_shape):
        if isinstance(input_shape, list):
            return tuple(input_shape[0])
        return (input_shape[0],) + tuple(input_shape[2:])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "n_layers": self.n_layers,
                "do_layer_norm": self.do_layer_norm,
                "l2_coef": self.l2_coef,
                "use_top_only": self.use_top_only,
                "initial_scalar_weights": self.initial_scalar_weights,
                "initial_gamma": self.initial_gamma,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config

    num_layers = renamed_attribute("num_layers", "n_layers")

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "num_layers" in config:  # saved by 0.1.0
            config["n_layers"] = config.pop("num_layers")
        return cls(**config)
