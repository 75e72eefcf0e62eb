"""Graph surgery on a converted biLM: weights as initializers, folded weight transforms, named
dynamic axes, loop weights moved into the loop bodies. Used by `elmo_keras.export.onnx`.

Every function edits an `onnx.ModelProto` or `GraphProto` in place. onnx and NumPy are imported
on first use, like the rest of the `[onnx]` extra.
"""


def name_dynamic_axes(model_proto, feature_dims):
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


def attach_weights(model_proto, weights):
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


def fold_weight_transforms(graph):
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
    count = len(folded) + sum(fold_weight_transforms(g) for g in _subgraphs(graph))
    _drop_unused_initializers(graph)
    return count


def _subgraphs(graph):
    """The subgraphs (`Loop` bodies, `If` branches) of the nodes of `graph`, one level down."""
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("g"):
                yield attribute.g
            yield from attribute.graphs


def localize_loop_weights(model_proto):
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
