"""The checks every layer test runs (in the spirit of keras-hub's `TestCase.run_layer_test`).

`run_layer_test` is the one entry point. `check_keras_file_round_trip` is also used on its
own, for models with real weights (`BiLM` read from the fixtures).

The helpers run on the Keras backend the process started with (`KERAS_BACKEND`; tests/conftest.py
defaults it to TensorFlow) and only use `keras.ops`, so the backend-neutral layers (`Highway`,
`ScalarMix`, `CharCNN`) go through the same checks under JAX (`make test` runs tests/layers
that way too). Checks that only mean something on one backend say so and are skipped elsewhere.
"""

import copy
import pathlib
import tempfile

import keras
import numpy as np

# `expected_output_mask` default: the layer passes the `mask` it was given on unchanged.
SAME_AS_MASK = object()

# Keyword arguments of `keras.layers.Layer` itself, not stored under their own name.
_BASE_LAYER_ARGUMENTS = ("name", "dtype", "trainable", "autocast")
_PLAIN = (bool, int, float, str, type(None), list, tuple)


def as_numpy(x, dtype=None):
    """`x` (a tensor of any backend, a variable, an array or a list) as a NumPy array.

    `np.asarray` alone fails on a PyTorch tensor that requires grad (the layers' outputs, as
    their weights are trainable); `keras.ops.convert_to_numpy` detaches it first.
    """
    return np.asarray(keras.ops.convert_to_numpy(x), dtype)


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    expected_output_shape,
    *,
    mask=None,
    expected_output_mask=SAME_AS_MASK,
    expected_num_trainable_weights=None,
    expected_num_non_trainable_weights=0,
    run_training_check=True,
    run_mixed_precision_check=True,
    run_keras_round_trip=True,
    run_jit_check=True,
):
    """Checks one layer class end to end; each failing check says which one it is.

    In order:
    - every constructor argument is a public attribute of the same name and a `get_config()`
      entry, and `from_config(get_config())` gives the same config;
    - `build()` makes exactly the expected number of weights, and the first call makes none;
    - the eager call gives `expected_output_shape`; a symbolic call (`keras.Input` -> layer)
      gives KerasTensors of that shape (None where dynamic) and of the same dtypes;
    - the mask on the (first) output, eager and symbolic, is `expected_output_mask`;
    - a Functional model around the layer, saved as `.keras` and loaded, gives identical
      outputs;
    - one `train_on_batch` of the layer with `Dense` heads (SGD) gives a finite loss, moves
      every trainable weight of the layer and lowers the loss;
    - under the `"mixed_bfloat16"` policy the outputs are bfloat16 and finite, and the
      variables float32;
    - JAX backend only: `jax.jit(layer.stateless_call)` gives the eager outputs (TensorFlow's
      graph path is covered by the Functional model and the training step above).

    On every backend the eager outputs are tensors of that backend (`keras.ops.is_tensor`):
    a layer that computes with TensorFlow under JAX fails here.

    Args:
        layer_cls: the layer class (or `keras.layers.RNN` with a `cell` in `init_kwargs`).
        init_kwargs: dict. The constructor arguments. A `keras.layers.Layer` among them (a
            cell, a biLM) is copied through its config where a second layer is made.
        input_data: an array or tensor (or a list of them) with a batch axis first.
        expected_output_shape: a shape tuple, or a list or dict of them for several outputs.
        mask: optional bool array `[batch, tokens]` passed as the call's `mask` argument.
        expected_output_mask: the mask expected on the (first) output: an array, None, or
            `SAME_AS_MASK` (the default).
        expected_num_trainable_weights: int or None (not checked).
        expected_num_non_trainable_weights: int or None (not checked). Defaults to `0`.
        run_training_check: bool. Skipped anyway when the layer has no trainable weight.
        run_mixed_precision_check: bool.
        run_keras_round_trip: bool.
        run_jit_check: bool. The JAX `jax.jit(stateless_call)` check; ignored on other backends.
    """
    input_data = keras.tree.map_structure(keras.ops.convert_to_tensor, input_data)
    if expected_output_mask is SAME_AS_MASK:
        expected_output_mask = mask
    name = layer_cls.__name__

    layer = layer_cls(**init_kwargs)
    _check_arguments_are_attributes(layer, init_kwargs)
    config = layer.get_config()
    clone = layer_cls.from_config(copy.deepcopy(config))  # RNN.from_config pops entries
    assert clone.get_config() == config, f"`{name}.from_config(get_config())` changed the config"

    layer.build(keras.tree.map_structure(lambda x: tuple(x.shape), input_data))
    counts = _check_weight_counts(
        layer, expected_num_trainable_weights, expected_num_non_trainable_weights
    )

    call_kwargs = {} if mask is None else {"mask": mask}
    outputs = layer(input_data, **call_kwargs)
    assert (len(layer.trainable_weights), len(layer.non_trainable_weights)) == counts, (
        f"`{name}` made new weights in its first call, after `build()`"
    )
    _check_backend_tensors(name, outputs)
    got_shapes = [tuple(x.shape) for x in keras.tree.flatten(outputs)]
    want_shapes = _flat_shapes(expected_output_shape)
    assert got_shapes == want_shapes, f"`{name}` eager output shapes {got_shapes} != {want_shapes}"
    if layer.supports_masking:
        _check_output_mask(name, keras.tree.flatten(outputs)[0], expected_output_mask)
    if run_jit_check and keras.config.backend() == "jax":
        _check_jax_jit_stateless_call(layer, input_data, call_kwargs, outputs)

    symbolic_inputs, model_inputs = _symbolic_inputs(input_data, mask)
    symbolic_kwargs = {} if mask is None else {"mask": model_inputs[-1]}
    symbolic = layer(symbolic_inputs, **symbolic_kwargs)
    _check_symbolic_outputs(name, symbolic, outputs, expected_output_mask, layer.supports_masking)

    if run_keras_round_trip:
        data = keras.tree.flatten(input_data) + (
            [] if mask is None else [keras.ops.convert_to_tensor(mask)]
        )
        check_keras_file_round_trip(keras.Model(model_inputs, symbolic), data)
    if run_training_check and layer.trainable_weights:
        _check_one_fit_step(layer, input_data)
    if run_mixed_precision_check:
        _check_mixed_precision(layer_cls, init_kwargs, input_data, call_kwargs)


def keras_mask(tensor):
    """The mask Keras attached to `tensor`, or None.

    An attribute on TensorFlow tensors and KerasTensors; JAX arrays take no attributes, so Keras
    keeps theirs in a side table. Keras 3 has no public accessor for both.
    """
    from keras.src.backend.common.masking import get_keras_mask

    return get_keras_mask(tensor)


def _check_backend_tensors(name, outputs):
    backend = keras.config.backend()
    for output in keras.tree.flatten(outputs):
        assert keras.ops.is_tensor(output), (
            f"`{name}` returned a {type(output).__name__}, not a tensor of the {backend} backend"
        )


def _check_jax_jit_stateless_call(layer, input_data, call_kwargs, eager_outputs):
    import jax

    name = type(layer).__name__
    trainable = [v.value for v in layer.trainable_variables]
    non_trainable = [v.value for v in layer.non_trainable_variables]
    jitted, _ = jax.jit(layer.stateless_call)(trainable, non_trainable, input_data, **call_kwargs)
    pairs = zip(keras.tree.flatten(jitted), keras.tree.flatten(eager_outputs), strict=True)
    for got, want in pairs:
        assert isinstance(got, jax.Array), f"`{name}` under jax.jit returned {type(got)}"
        np.testing.assert_allclose(
            as_numpy(got),
            as_numpy(want),
            rtol=1e-5,
            atol=1e-6,
            err_msg=f"`{name}`: jax.jit(stateless_call) differs from the eager call",
        )


def _check_arguments_are_attributes(layer, init_kwargs):
    name = type(layer).__name__
    config = layer.get_config()
    for argument, value in init_kwargs.items():
        if argument in _BASE_LAYER_ARGUMENTS:
            continue
        assert argument in config, f"`{name}.get_config()` lacks the argument `{argument}`"
        assert hasattr(layer, argument), f"`{name}` does not store `{argument}` as an attribute"
        stored = getattr(layer, argument)
        if not isinstance(value, _PLAIN):  # an object (a sublayer): kept as given
            assert stored is value, f"`{name}.{argument}` is not the object passed in"
        elif isinstance(stored, _PLAIN):  # strings may be stored resolved (initializers)
            assert _as_lists(stored) == _as_lists(value), (
                f"`{name}.{argument}` is {stored!r}, but {value!r} was passed"
            )


def _as_lists(value):
    """Tuples as lists, recursively: `((1, 4),)` equals `[[1, 4]]`."""
    if isinstance(value, list | tuple):
        return [_as_lists(v) for v in value]
    return value


def _check_weight_counts(layer, trainable, non_trainable):
    name = type(layer).__name__
    counts = len(layer.trainable_weights), len(layer.non_trainable_weights)
    if trainable is not None:
        assert counts[0] == trainable, (
            f"`{name}` has {counts[0]} trainable weights after build(), expected {trainable}"
        )
    if non_trainable is not None:
        assert counts[1] == non_trainable, (
            f"`{name}` has {counts[1]} non-trainable weights after build(), "
            f"expected {non_trainable}"
        )
    return counts


def _flat_shapes(structure):
    """A shape tuple, or a list/tuple/dict of them, as a flat list (dicts in key order)."""
    if isinstance(structure, dict):
        return [s for key in sorted(structure) for s in _flat_shapes(structure[key])]
    if all(d is None or isinstance(d, int) for d in structure):
        return [tuple(structure)]
    return [s for item in structure for s in _flat_shapes(item)]


def _check_output_mask(name, output, expected):
    got = keras_mask(output)
    if expected is None:
        assert got is None, f"`{name}` put a mask on its output where none was expected"
        return
    assert got is not None, f"`{name}` put no mask on its output"
    np.testing.assert_array_equal(
        as_numpy(got), as_numpy(expected), err_msg=f"`{name}` output mask"
    )


def _symbolic_inputs(input_data, mask):
    """`keras.Input`s like `input_data` (batch axis None), and the flat list of model inputs
    (with an input for `mask` last, when there is a mask)."""
    inputs = keras.tree.map_structure(
        lambda x: keras.Input(tuple(x.shape[1:]), dtype=keras.backend.standardize_dtype(x.dtype)),
        input_data,
    )
    flat = keras.tree.flatten(inputs)
    if mask is not None:
        flat.append(keras.Input(np.shape(mask)[1:], dtype="bool", name="mask"))
    return inputs, flat


def _check_symbolic_outputs(name, symbolic, eager, expected_mask, supports_masking):
    for sym, real in zip(keras.tree.flatten(symbolic), keras.tree.flatten(eager), strict=True):
        assert isinstance(sym, keras.KerasTensor), f"`{name}` symbolic call gave {type(sym)}"
        assert _matches(sym.shape, real.shape), (
            f"`{name}` symbolic output shape {sym.shape} does not fit the eager {real.shape}"
        )
        assert sym.dtype == keras.backend.standardize_dtype(real.dtype), (
            f"`{name}` symbolic output dtype {sym.dtype} != eager {real.dtype}"
        )
    if not supports_masking:
        return
    sym_mask = keras_mask(keras.tree.flatten(symbolic)[0])
    if expected_mask is None:
        assert sym_mask is None, f"`{name}` symbolic output has a mask where none was expected"
    else:
        assert sym_mask is not None, f"`{name}` symbolic output carries no mask"
        assert _matches(sym_mask.shape, np.shape(expected_mask)), (
            f"`{name}` symbolic mask shape {sym_mask.shape} != {np.shape(expected_mask)}"
        )


def _matches(symbolic_shape, shape):
    """The batch axis is None and every other axis is None (dynamic) or equal."""
    return (
        len(symbolic_shape) == len(shape)
        and symbolic_shape[0] is None
        and all(s is None or s == d for s, d in zip(symbolic_shape[1:], shape[1:], strict=True))
    )


def check_keras_file_round_trip(model, inputs, tmp_path=None, atol=0.0):
    """Saves `model` as `.keras`, loads it, and checks that the outputs are identical.

    Returns the loaded model. `tmp_path` defaults to a temporary folder removed afterwards.
    """
    with tempfile.TemporaryDirectory() as scratch:
        path = pathlib.Path(tmp_path or scratch) / "model.keras"
        model.save(path)
        loaded = keras.saving.load_model(path)
    before = keras.tree.flatten(model(inputs))
    after = keras.tree.flatten(loaded(inputs))
    assert len(before) == len(after), "the loaded model has another number of outputs"
    for a, b in zip(before, after, strict=True):
        np.testing.assert_allclose(
            as_numpy(a),
            as_numpy(b),
            rtol=0,
            atol=atol,
            err_msg=f"outputs of {type(model).__name__} changed through a .keras file",
        )
    return loaded


def _check_one_fit_step(layer, input_data, learning_rate=0.01):
    """Layer + a `Dense(1)` head on each float output, compiled with SGD: one `train_on_batch`
    moves every trainable weight of the layer, and a step on the inference-mode loss lowers it.

    The layer runs without a `mask` argument here (masks are checked by the calls above): a
    Keras loss applies the mask of its prediction, which must then fit the prediction's shape.
    """
    name = type(layer).__name__
    inputs, model_inputs = _symbolic_inputs(input_data, None)
    features = [x for x in keras.tree.flatten(layer(inputs)) if "float" in x.dtype]
    heads = [keras.layers.Dense(1)(x) for x in features]
    model = keras.Model(model_inputs, heads if len(heads) > 1 else heads[0])
    loss_fn = keras.losses.MeanSquaredError()
    data = keras.tree.flatten(input_data)
    targets = keras.tree.map_structure(lambda y: np.ones(y.shape, "float32"), model(data))

    def one_step(m):
        # A clipped step (length <= learning_rate) along the exact negative gradient of a loss
        # lowers that loss whatever the gradient's scale.
        optimizer = keras.optimizers.SGD(learning_rate, global_clipnorm=1.0)
        m.compile(optimizer=optimizer, loss=loss_fn if len(heads) == 1 else [loss_fn] * len(heads))
        return m.train_on_batch(data, targets)

    def inference_loss():
        pairs = zip(keras.tree.flatten(targets), keras.tree.flatten(model(data)), strict=True)
        return sum(float(loss_fn(t, y)) for t, y in pairs)

    # 1. A training-mode step (dropout on, where the layer has any) moves every weight.
    initial = model.get_weights()
    before = [np.array(w) for w in layer.trainable_weights]
    loss = one_step(model)
    assert np.all(np.isfinite(loss)), f"`{name}` gave a non-finite loss in one step: {loss}"
    for value, weight in zip(before, layer.trainable_weights, strict=True):
        assert not np.array_equal(value, as_numpy(weight)), (
            f"one training step of `{name}` left {weight.path} unchanged"
        )

    # 2. From the same start, a step on the inference-mode loss lowers it. The training-mode
    # gradient follows one dropout mask and need not descend the inference loss, so step 1's
    # loss is not the one checked.
    model.set_weights(initial)
    loss_before = inference_loss()
    one_step(_InferenceMode(model))
    loss_after = inference_loss()
    assert loss_after < loss_before, (
        f"one step on the inference loss of `{name}` did not lower it: "
        f"{loss_before} -> {loss_after}"
    )


class _InferenceMode(keras.Model):
    """Runs `model` with `training=False` inside `fit`: its gradient is the inference loss's.

    (A functional `keras.Model(x, model(x, training=False))` does not fix the flag: dropout still
    runs when it is called with `training=True`.)
    """

    def __init__(self, model):
        super().__init__(name="inference_mode")
        self.model = model

    def call(self, inputs):
        return self.model(inputs, training=False)


def _check_mixed_precision(layer_cls, init_kwargs, input_data, call_kwargs):
    name = layer_cls.__name__
    policy = keras.DTypePolicy("mixed_bfloat16")
    kwargs = {k: _copy_layer(v, policy) for k, v in init_kwargs.items()}
    layer = layer_cls(**kwargs, dtype=policy)
    outputs = keras.tree.flatten(layer(input_data, **call_kwargs))
    for output in outputs:
        dtype = keras.backend.standardize_dtype(output.dtype)
        if "float" in dtype:
            assert dtype == "bfloat16", f"`{name}` under mixed_bfloat16 gave a {dtype} output"
            assert np.all(np.isfinite(as_numpy(keras.ops.cast(output, "float32")))), (
                f"`{name}` under mixed_bfloat16 gave non-finite outputs"
            )
    for variable in layer.weights:
        assert variable.dtype == "float32", (
            f"`{name}` under mixed_bfloat16 made the {variable.dtype} variable {variable.path}"
        )


def _copy_layer(value, policy):
    """A sublayer argument rebuilt from its config under `policy`; other values as they are."""
    if not isinstance(value, keras.layers.Layer):
        return value
    return type(value).from_config({**value.get_config(), "dtype": policy})
