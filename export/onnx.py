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
`elmo_keras.runtime.OnnxEmbedder` reads. The graph edits after the conversion (weights as
initializers, loop weights moved into the loop bodies) are in `onnx_graph.py`.

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
import warnings

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


CATCH_ERRORS_VARIABLE = "TF2ONNX_CATCH_ERRORS"  # tf2onnx.constants.ENV_TF2ONNX_CATCH_ERRORS


def _convert(tf2onnx, function, signature, opset):
    """`tf2onnx.convert.from_function` without the optimizer's rollback copies, retried once
    with them if it fails; returns the `ModelProto`. A `TF2ONNX_CATCH_ERRORS` already set (by
    the user) is left alone and the conversion runs once."""

    def convert():
        return tf2onnx.convert.from_function(function, input_signature=signature, opset=opset)[0]

    if CATCH_ERRORS_VARIABLE in os.environ:
        return convert()
    # tf2onnx reads the variable in `_convert_common` and has no argument for it; it is set
    # only for this call (the environment is the process's: exports in threads would share it).
    os.environ[CATCH_ERRORS_VARIABLE] = "FALSE"
    try:
        return convert()
    except MemoryError:
        raise  # the copies would need more
    except Exception as error:  # a failed optimizer pass raises when it cannot be rolled back
        first_line = next(iter(str(error).strip().splitlines()), "")
        reason = f"{type(error).__name__}: {first_line}" if first_line else type(error).__name__
    finally:
        os.environ.pop(CATCH_ERRORS_VARIABLE, None)
    # Retried outside the `except` block, so that the failed graph (held by the traceback's
    # frames) is freed first.
    warnings.warn(
        f"tf2onnx's conversion failed without its rollback copies ({reason}); retrying once "
        f"with them (slower, more memory). Set {CATCH_ERRORS_VARIABLE} to skip this retry.",
        RuntimeWarning,
        stacklevel=3,
    )
    return convert()


def _metadata(module, stateful, input_form, extra=None):
    import elmo_keras  # noqa: PLC0415
    from elmo_keras.text.char_ids import (  # noqa: PLC0415
        BOS_CHAR_ID,
        BOW_CHAR_ID,
        EOS_CHAR_ID,
        EOW_CHAR_ID,
        PAD_CHAR_ID,
    )

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
        "char_id_convention": (
            f"inference: a token is [BOW, byte + 1 for each UTF-8 byte, EOW] filled to "
            f"max_characters_per_token with PAD; a padding token is all 0; BOW {BOW_CHAR_ID}, "
            f"EOW {EOW_CHAR_ID}, PAD {PAD_CHAR_ID}, <S> [BOW, {BOS_CHAR_ID}, EOW, PAD...], "
            f"</S> [BOW, {EOS_CHAR_ID}, EOW, PAD...]"
        ),
        "char_id_bow": str(BOW_CHAR_ID),
        "char_id_eow": str(EOW_CHAR_ID),
        "char_id_pad": str(PAD_CHAR_ID),
        "char_id_bos": str(BOS_CHAR_ID),
        "char_id_eos": str(EOS_CHAR_ID),
    }
    dictionary = module.bilm.token_dictionary
    if dictionary is not None:  # ELMoForManyLangs: OnnxEmbedder makes ids through them
        metadata["max_characters_per_token"] = str(dictionary.max_characters_per_token)
        metadata["char_id_convention"] = "the model's own dictionaries: char_vocabulary, "
        metadata["char_id_convention"] += "word_vocabulary (elmo_keras.text.token_dictionary)"
        metadata["char_vocabulary"] = json.dumps(dictionary.characters, ensure_ascii=False)
        if dictionary.words is not None:
            metadata["word_vocabulary"] = json.dumps(dictionary.words, ensure_ascii=False)
    extra = {str(key): str(value) for key, value in (extra or {}).items()}
    clash = sorted(set(extra) & set(metadata))
    if clash:  # OnnxEmbedder reads these and checks them against the graph
        raise ValueError(
            "`metadata` must not set the keys the model's own metadata holds (they describe "
            f"the graph). Received: {clash}"
        )
    return {**metadata, **extra}


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
    once (the published model converts in a few GB instead of 18). tf2onnx's optimizer runs
    without the deep copy of the graph it takes before each pass to roll back a pass that fails
    (most of a small model's conversion time); if the conversion then fails, it is retried once
    with the copies, with a warning. A `TF2ONNX_CATCH_ERRORS` you set yourself is left as it is
    and the conversion runs once, without a retry (tf2onnx 1.17 turns the copies off for any
    value).

    Args:
        bilm: `elmo_keras.models.BiLM`. A built biLM.
        path: str or path-like. The `.onnx` file to write.
        scalar_mix: `elmo_keras.layers.ScalarMix` or `None`. The mix behind the `elmo` output,
            with its current weights. Defaults to `None`, uniform weights and gamma 1.
        stateful: bool. Adds the `state_h` / `state_c` inputs and outputs, to stream a long
            document window by window. Defaults to `False`.
        opset: int. The ONNX opset, 17 or newer. Defaults to `17`.
        metadata: dict or `None`. Extra `metadata_props` entries (str -> str); the model's
            own keys (`n_layers`, `max_characters_per_token`, ...) cannot be replaced.
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
    from elmo_keras.export import onnx_graph  # noqa: PLC0415
    from elmo_keras.export.savedmodel import (  # noqa: PLC0415
        ElmoServingModule,
        weights_as_inputs_function,
    )

    onnx = _import_optional("onnx")
    tf2onnx = _import_optional("tf2onnx")

    if isinstance(opset, bool) or not isinstance(opset, int) or opset < MIN_OPSET:
        raise ValueError(f"`opset` must be an integer >= {MIN_OPSET}. Received: opset={opset!r}")
    module = ElmoServingModule(bilm, scalar_mix=scalar_mix)
    metadata = _metadata(module, stateful, input_form, metadata)  # checked before converting
    P = module.projection_dim
    function, signature, weights = weights_as_inputs_function(module, input_form, stateful)
    model_proto = _convert(tf2onnx, function, signature, opset)
    del function
    onnx_graph.attach_weights(model_proto, weights)
    onnx_graph.fold_weight_transforms(model_proto.graph)
    onnx_graph.name_dynamic_axes(model_proto, feature_dims={"word_emb": P, "default": 2 * P})
    # The LSTM weights reach the loop bodies as loop-carried values, which ONNX Runtime copies
    # at every step; as body initializers they are read in place (1.3-2x faster on CPU).
    onnx_graph.localize_loop_weights(model_proto)
    # Again: the char CNN's weights are in a loop.
    onnx_graph.fold_weight_transforms(model_proto.graph)
    for key, value in metadata.items():
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

    from elmo_keras.export import onnx_graph  # noqa: PLC0415

    onnx = _import_optional("onnx")
    quantization = _import_optional("onnxruntime.quantization")
    source, destination = os.fspath(source), os.fspath(destination)
    original = onnx.load(source)
    metadata = [(entry.key, entry.value) for entry in original.metadata_props]
    onnx_graph.localize_loop_weights(original)
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
