import keras


@keras.saving.register_keras_serializable(package="elmo_keras")
class Highway(keras.layers.Layer):
    """One highway layer (Srivastava et al. 2015) as ELMo uses it.

    `y = g * f(x W_t + b_t) + (1 - g) * x` with the carry gate `g = sigmoid(x W_c + b_c)`.
    bilm-tf calls `W_c` the carry weights and `W_t` the transform weights; `b_c` starts at
    `-2`, so a new layer passes most of its input through. The output has the input's size.
    Written with `keras.ops` only, so it runs on any Keras 3 backend.

    Args:
        activation: string or callable. The transform's nonlinearity. ELMo always uses relu
            here, whatever its convolutions use. Defaults to `"relu"`.
        carry_bias_initializer: initializer of `b_c`. Defaults to `Constant(-2.0)`.
        kernel_initializer: initializer of `W_c` and `W_t`. Defaults to `"glorot_uniform"`.
        **kwargs: other keyword arguments of `keras.layers.Layer` (`name`, `dtype`, ...).

    Call arguments:
        inputs: float tensor `[..., features]`.

    Returns:
        A tensor of the same shape.

    Example:
    >>> layer = Highway()
    >>> tuple(layer(np.ones((2, 5, 8), "float32")).shape)
    (2, 5, 8)

    Reference:
        [Srivastava et al., 2015](https://arxiv.org/abs/1505.00387)
    """

    def __init__(
        self,
        activation="relu",
        carry_bias_initializer=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.activation = keras.activations.get(activation)
        self.carry_bias_initializer = keras.initializers.get(
            carry_bias_initializer or keras.initializers.Constant(-2.0)
        )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        features = input_shape[-1]
        if features is None:
            raise ValueError(
                "`Highway` needs a known last dimension. "
                f"Received: input_shape={tuple(input_shape)}"
            )
        self.carry = keras.layers.Dense(
            features,
            activation="sigmoid",
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.carry_bias_initializer,
            dtype=self.dtype_policy,
            name="carry",
        )
        self.carry.build(input_shape)
        self.transform = keras.layers.Dense(
            features,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="transform",
        )
        self.transform.build(input_shape)
        self.built = True

    def call(self, inputs):
        gate = self.carry(inputs)
        return gate * self.transform(inputs) + (1.0 - gate) * inputs

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    def compute_mask(self, inputs, mask=None):
        return mask

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "activation": keras.activations.serialize(self.activation),
                "carry_bias_initializer": keras.initializers.serialize(self.carry_bias_initializer),
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config


__all__ = ["Highway"]
