"""Export a biLM to ONNX with tf2onnx, and quantize it to int8.

The ONNX graph takes the batch's distinct tokens, `token_char_ids` int32 `[distinct_tokens,
max_characters_per_token]`, and `token_index` int32 `[batch, tokens]` (each position's row of
`token_char_ids`, -1 = padding), or with `input_form="char_ids"` one `char_ids` int32 `[batch,
tokens, max_characters_per_token]` (0 = padding token; the older form); all sizes but the
characters are dynamic. It returns the outputs of the SavedModel's `char_ids` signature:
`word_emb`, `lstm_outputs1..n_layers`, `elmo`, `default`, `sequence_len`. The stateful variant
also takes `state_h` `[B, 2, n_layers, projection_dim]` and `state_c` `[B, 2, n_layers,
lstm_units]` and returns `final_state_h` and `final_state_c`.

The model carries `metadata_props` (`n_layers`, `projection_dim`, `lstm_units`,
`max_characters_per_token`, `elmo_keras_version`, `outputs`, ...) which
`elmo_keras.runtime.OnnxEmbedder` reads.

tf2onnx, onnx and onnxruntime come with the `[onnx]` extra; without them, `require_onnx` and
both functions raise a `ModuleNotFoundError` that says `pip install "elmo-keras[onnx]"` (the
command line prints it as one line).
"""

import contextlib
import importlib
import importlib.util
import json
import logging
import os

DEFAULT_OPSET = 17
MIN_OPSET = 17
ONNX_MODULES = ("tf2onnx", "onnx", "onnxruntime")  # the `[onnx]` extra
INSTALL_HINT = 'pip install "elmo-keras[onnx]"'


def _missing(name):
    return ModuleNotFoundError(
        f"ONNX export needs {name}, which is not installed: {INSTALL_HINT}", name=name
    )


def require_onnx():
    """Checks that the `[onnx]` extra is installed, without importing it (a fast check to run
    before the slow part of an export).

    Raises:
        ModuleNotFoundError: naming the missing module and `pip install "elmo-keras[onnx]"`.
    """
    for name in ONNX_MODULES:
        if importlib.util.find_spec(name) is None:
            raise _missing(name)


def _import_optional(name):
    """Imports a module of the `[onnx]` extra; a missing one raises the install hint."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        top = name.partition(".")[0]
        if (error.name or "").partition(".")[0] != top:
            raise  # the module is there but one of its own dependencies is missing
        raise _missing(top) from None


@contextlib.contextmanager
def _root_logger_errors_only():
    """Drops records below ERROR logged on the root logger, where ONNX Runtime's quantizer warns
    about what is expected here (the model is not shape-preprocessed; the boolean mask tensors
    are not quantized)."""
    root = logging.getLogger()

    def keep(record):
        return record.levelno >= logging.ERROR

    root.addFilter(keep)
    try:
        yield
    finally:
        root.removeFilter(keep)


def _metadata(module, stateful, input_form, extra=None):
    import elmo_keras  # noqa: PLC0415

    layer_outputs = [f"lstm_outputs{k}" for k in range(1, module.n_layers + 1)]
    outputs = ["word_emb", *layer_outputs, "elmo", "default", "sequence_len"]
    if stateful:
        outputs += ["final_state_h", "final_state_c"]
    inputs = ["token_char_ids", "token_index"] if input_form == "token_index" else ["char_ids"]
    metadata = {
        "producer": "elmo-keras",
        "elmo_keras_version": elmo_keras.__version__,
        "n_layers": str(module.n_layers),
        "projection_dim": str(module.projection_dim),
        "lstm_units": str(module.lstm_units),
        "max_characters_per_token": str(module.max_characters_per_token),
        "stateful": "1" if stateful else "0",
        "input_form": input_form,
        "inputs": json.dumps(inputs + ["state_h", "state_c"] if stateful else inputs),
        "outputs": json.dumps(outputs),
        "char_id_convention": "inference: 0 = padding token, byte b -> b + 1, BOW 259, EOW 260",
    }
    for key, value in (extra or {}).items():
        metadata[str(key)] = str(value)
    return metadata


def export_onnx(
    bilm,
    path,
    scalar_mix=None,
    stateful=False,
    opset=DEFAULT_OPSET,
    metadata=None,
    input_form="token_index",
):
    """Converts a biLM to an ONNX model with tf2onnx and writes it to `path`.

    The weights never pass through the converter: it converts a function that takes them as
    inputs (`weights_as_inputs_function`), and they become initializers afterwards, each copied
    once (the published model converts in a few GB instead of 18).

    Args:
        bilm: `elmo_keras.models.BiLM`. A built biLM.
        path: str or path-like. The `.onnx` file to write.
        scalar_mix: `elmo_keras.layers.ScalarMix` or `None`. The mix behind the `elmo` output,
            with its current weights. Defaults to `None`, uniform weights and gamma 1.
        stateful: bool. Adds the `state_h` / `state_c` inputs and outputs, to stream a long
            document window by window. Defaults to `False`.
        opset: int. The ONNX opset, 17 or newer. Defaults to `17`.
        metadata: dict or `None`. Extra `metadata_props` entries (str -> str).
        input_form: str. `"token_index"`: the inputs are `token_char_ids` int32 `[U, C]` (the
            distinct tokens of the batch) and `token_index` int32 `[B, T]` (each position's row
            there, -1 = padding), so the char CNN runs once per distinct token.
            `"char_ids"`: one input `char_ids` int32 `[B, T, C]` (the only form of earlier
            exports). `OnnxEmbedder` reads both. Defaults to `"token_index"`.

    Returns:
        The `onnx.ModelProto` that was written.

    Example:

    >>> export_onnx(bilm, "elmo.onnx")  # doctest: +SKIP
    >>> from elmo_keras.runtime import OnnxEmbedder  # doctest: +SKIP
    >>> OnnxEmbedder("elmo.onnx").embed([["Hello", "world"]])[0].shape  # doctest: +SKIP
    (3, 2, 1024)
    """
    from elmo_keras.export.savedmodel import (  # noqa: PLC0415
        ElmoServingModule,
        weights_as_inputs_function,
    )

    onnx = _import_optional("onnx")
    tf2onnx = _import_optional("tf2onnx")

    if isinstance(opset, bool) or not isinstance(opset, int) or opset < MIN_OPSET:
        raise ValueError(f"`opset` must be an integer >= {MIN_OPSET}. Received: opset={opset!r}")
    module = ElmoServingModule(bilm, scalar_mix=scalar_mix)
    P = module.projection_dim
    function, signature, weights = weights_as_inputs_function(module, input_form, stateful)
    model_proto, _ = tf2onnx.convert.from_function(function, input_signature=signature, opset=opset)
    del function
    _attach_weights(model_proto, weights)
    _fold_weight_transforms(model_proto.graph)
    _name_dynamic_axes(model_proto, feature_dims={"word_emb": P, "default": 2 * P})
    # The LSTM weights reach the loop bodies as loop-carried values, which ONNX Runtime copies
    # at every step; as body initializers they are read in place (1.3-2x faster on CPU).
    _localize_loop_weights(model_proto)
    _fold_weight_transforms(model_proto.graph)  # again: the char CNN's weights are in a loop
    for key, value in _metadata(module, stateful, input_form, metadata).items():
        entry = model_proto.metadata_props.add()
        entry.key, entry.value = key, value
    model_proto.doc_string = (
        f"ELMo biLM exported by elmo-keras ({input_form} form): "
        + (
            "token_char_ids [distinct_tokens, chars], token_index [batch, tokens]"
            if input_form == "token_index"
            else "char_ids [batch, tokens, chars]"
        )
        + " -> word_emb, lstm_outputs{k}, elmo, default, sequence_len."
    )
    onnx.checker.check_model(model_proto)
    onnx.save_model(model_proto, os.fspath(path))
    return model_proto


def _name_dynamic_axes(model_proto, feature_dims):
    """Names the dynamic axes `batch` and `tokens` and fixes the known feature sizes.

    tf2onnx leaves some axes as `unk__N` (e.g. the last axis of `elmo`); `feature_dims` maps an
    output name to its last axis (outputs not named take the size of `default`).
    """
    for value in [*model_proto.graph.input, *model_proto.graph.output]:
        dims = value.type.tensor_type.shape.dim
        is_state = "state_" in value.name
        is_output = value in model_proto.graph.output
        for axis, dim in enumerate(dims):
            if dim.HasField("dim_value"):
                continue
            if axis == 0:
                dim.dim_param = "distinct_tokens" if value.name == "token_char_ids" else "batch"
            elif axis == 1 and not is_state:
                dim.dim_param = "tokens"
            elif axis == 2 and is_output and not is_state:
                dim.dim_value = feature_dims.get(value.name, feature_dims["default"])


def _attach_weights(model_proto, weights):
    """Turns the weight inputs of the converted graph into initializers holding their values.

    `weights` is a list of `(input name, variable)`; each value is read and serialized once.
    """
    from onnx import numpy_helper  # noqa: PLC0415

    graph = model_proto.graph
    inputs = {value.name: value for value in graph.input}
    for name, variable in weights:
        if name in inputs:
            graph.input.remove(inputs[name])
        graph.initializer.append(numpy_helper.from_array(variable.numpy(), name))


# Weight-only ops the converter leaves in front of a weight input (a frozen graph has them
# folded): the Conv kernels' Unsqueeze and Transpose, the biases' Reshape.
_FOLDABLE = {
    "Identity": lambda x: x,
    "Transpose": lambda x, perm=None: x.transpose(perm),
    "Reshape": lambda x, shape: x.reshape([d or x.shape[i] for i, d in enumerate(shape)]),
    "Unsqueeze": lambda x, axes: _unsqueeze(x, axes),
    "Squeeze": lambda x, axes=None: x.squeeze(tuple(axes) if axes is not None else None),
}


def _unsqueeze(x, axes):
    import numpy as np  # noqa: PLC0415

    for axis in sorted(int(a) % (x.ndim + len(axes)) for a in axes):
        x = np.expand_dims(x, axis)
    return x


def _fold_weight_transforms(graph):
    """Replaces each foldable node whose inputs are all initializers (in `graph` and its
    subgraphs) by an initializer holding its output, so that a `MatMul` or `Conv` reads its
    weight directly (the quantizer needs that); returns the number of nodes folded."""
    from onnx import helper, numpy_helper  # noqa: PLC0415

    initializers = {tensor.name: tensor for tensor in graph.initializer}
    folded = []
    for index, node in enumerate(graph.node):
        if node.op_type not in _FOLDABLE or len(node.output) != 1:
            continue
        if not all(name in initializers for name in node.input):
            continue
        args = [numpy_helper.to_array(initializers[name]) for name in node.input]
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if len(args) == 2:  # Reshape's shape, Unsqueeze's and Squeeze's axes
            args[1] = [int(v) for v in args[1]]
        value = _FOLDABLE[node.op_type](*args, **attributes)
        initializers[node.output[0]] = numpy_helper.from_array(value, node.output[0])
        graph.initializer.append(initializers[node.output[0]])
        folded.append(index)
    for index in reversed(folded):
        del graph.node[index]
    count = len(folded) + sum(_fold_weight_transforms(g) for g in _subgraphs(graph))
    _drop_unused_initializers(graph)
    return count


def _subgraphs(graph):
    """The subgraphs (`Loop` bodies, `If` branches) of the nodes of `graph`, one level down."""
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield attribute.g
            yield from attribute.graphs


def _localize_loop_weights(model_proto):
    """Gives each `Loop` body, nested ones too, its own copy of the weights it carries.

    tf2onnx passes the recurrent weights of the LSTM loops in as loop-carried values, which ONNX
    Runtime's quantizer cannot see as weights: it only quantizes a `MatMul` whose weight is an
    initializer of the graph it is in. For every carried value that is an initializer of the
    enclosing graph and is passed through unchanged, the body gets that initializer and its
    nodes read it instead (then the same one level down); the quantizer (with
    `EnableSubgraph`) then quantizes the per-step products, which hold most of the biLM's
    weights. Returns the number of weights copied.
    """
    return _localize_in(model_proto.graph)


def _localize_in(graph):
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    copied = 0
    for node in graph.node:
        if node.op_type != "Loop":
            continue
        body = next(a.g for a in node.attribute if a.name == "body")
        for k, outer in enumerate(node.input[2:]):
            inner = body.input[2 + k].name
            if outer not in initializers or body.output[1 + k].name != inner:
                continue
            if not any(inner in inner_node.input for inner_node in body.node):
                continue  # only passed through (e.g. already localized)
            local = _renamed_copy(initializers[outer], f"{inner}__local")
            body.initializer.append(local)
            for inner_node in body.node:
                for i, name in enumerate(inner_node.input):
                    if name == inner:
                        inner_node.input[i] = local.name
            # The loop still carries a value there, now unused: make it a 1-element dummy so
            # the float weight is not kept (and copied) next to its int8 version.
            dummy = f"{outer}__unused"
            if dummy not in initializers:
                initializers[dummy] = _renamed_copy(_scalar_like(initializers[outer]), dummy)
                graph.initializer.append(initializers[dummy])
            node.input[2 + k] = dummy
            for value in (body.input[2 + k], body.output[1 + k]):
                value.type.tensor_type.ClearField("shape")
            for value in [v for v in graph.value_info if v.name == node.output[k]]:
                graph.value_info.remove(value)
            copied += 1
    copied += sum(_localize_in(subgraph) for subgraph in _subgraphs(graph))
    _drop_unused_initializers(graph)
    return copied


def _drop_unused_initializers(graph):
    """Deletes the initializers no node reads (by position: comparing tensors would be slow)."""
    used = set(_all_node_inputs(graph)) | {value.name for value in graph.output}
    for index in reversed(range(len(graph.initializer))):
        if graph.initializer[index].name not in used:
            del graph.initializer[index]


def _all_node_inputs(graph):
    """Every name read by a node of `graph` or of its subgraphs."""
    for node in graph.node:
        yield from node.input
    for subgraph in _subgraphs(graph):
        yield from _all_node_inputs(subgraph)


def _scalar_like(tensor):
    import numpy as np  # noqa: PLC0415
    from onnx import helper, numpy_helper  # noqa: PLC0415

    dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
    return numpy_helper.from_array(np.zeros([1] * len(tensor.dims), dtype=dtype))


def _renamed_copy(tensor, name):
    """A copy of a `TensorProto` under another name."""
    import onnx  # noqa: PLC0415

    copy = onnx.TensorProto()
    copy.CopyFrom(tensor)
    copy.name = name
    return copy


def quantize_onnx(source, destination):
    """Writes an int8 dynamically quantized copy of an ONNX model.

    The weights of the matrix products (`MatMul`, inside the LSTM loops too) become int8;
    activations are quantized on the fly. The metadata is kept.

    Args:
        source: str or path-like. The float32 `.onnx` model.
        destination: str or path-like. The `.onnx` file to write.

    Returns:
        The destination path as a str.
    """
    import tempfile  # noqa: PLC0415

    onnx = _import_optional("onnx")
    quantization = _import_optional("onnxruntime.quantization")
    source, destination = os.fspath(source), os.fspath(destination)
    original = onnx.load(source)
    metadata = [(entry.key, entry.value) for entry in original.metadata_props]
    _localize_loop_weights(original)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(destination))) as tmp:
        prepared = os.path.join(tmp, "prepared.onnx")
        onnx.save_model(original, prepared)
        del original
        with _root_logger_errors_only():
            quantization.quantize_dynamic(
                prepared,
                destination,
                weight_type=quantization.QuantType.QInt8,
                extra_options={"EnableSubgraph": True},
            )
    quantized = onnx.load(destination)
    del quantized.metadata_props[:]
    for key, value in metadata:
        quantized.metadata_props.add(key=key, value=value)
    quantized.metadata_props.add(key="quantization", value="int8 dynamic (weights QInt8)")
    onnx.save_model(quantized, destination)
    return destination
