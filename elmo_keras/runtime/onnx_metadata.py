"""What an exported ONNX model's metadata says, checked against its graph.

`export_onnx` writes the model's sizes (`n_layers`, `projection_dim`, `lstm_units`,
`max_characters_per_token`) and, for a model with its own dictionaries (ELMoForManyLangs), its
`char_vocabulary` and `word_vocabulary` into `metadata_props`. `model_sizes` reads the sizes,
each within the options' limits and equal to what the graph fixes; `model_dictionary` builds
the model's `TokenDictionary`. Pure Python: no TensorFlow, no Keras, no ONNX Runtime import
(the session's inputs and outputs are passed in).
"""

import json
import re

from elmo_keras.options import LIMITS
from elmo_keras.text.char_ids import MAX_CHARACTERS_PER_TOKEN
from elmo_keras.text.token_dictionary import TokenDictionary

# The smallest and largest value of each size in the metadata: the options' limits.
SIZE_LIMITS = {
    "n_layers": (1, LIMITS["lstm.n_layers"]),
    "projection_dim": (1, LIMITS["lstm.projection_dim"]),
    "lstm_units": (1, LIMITS["lstm.dim"]),
    "max_characters_per_token": (3, LIMITS["char_cnn.max_characters_per_token"]),
}


def read_metadata(session):
    """The `metadata_props` (str -> str) of an `onnxruntime.InferenceSession`'s model."""
    return dict(session.get_modelmeta().custom_metadata_map)


def model_sizes(model_path, metadata, inputs, outputs):
    """The model's sizes from its metadata, each checked within the options' limits and
    against the graph (the number of `lstm_outputs{k}` outputs, the static sizes of
    `word_emb`, `state_c` and the character input): a disagreement is one `ValueError` line
    naming the file, the key and both values. Without metadata, the graph's.

    Args:
        model_path: str. The model's file, for the messages.
        metadata: dict. The model's `metadata_props` (`read_metadata`).
        inputs: dict. The session's inputs by name (`NodeArg`s, with `shape`).
        outputs: dict. The session's outputs by name.

    Returns:
        A dict with `n_layers`, `projection_dim`, `lstm_units`, `max_characters_per_token`
        and `id_width` (the columns of a token's id row: the characters, and the word id of a
        model with a word vocabulary).
    """
    characters = inputs.get("char_ids") or inputs.get("token_char_ids")
    # A model with a word vocabulary (ELMoForManyLangs) ends each id row with the word id.
    word_column = int("word_vocabulary" in metadata)
    width = _static(characters)
    layers = [n for n in outputs if re.fullmatch(r"lstm_outputs[1-9]\d*", n)]
    graph = {  # key: (the graph's value or None, where the graph says it)
        "n_layers": (len(layers), "its lstm_outputs{k} outputs"),
        "projection_dim": (_static(outputs.get("word_emb")), "word_emb's last axis"),
        "lstm_units": (_static(inputs.get("state_c")), "state_c's last axis"),
        "max_characters_per_token": (
            None if width is None else width - word_column,
            "the character input's last axis" + (" less the word id" if word_column else ""),
        ),
    }
    sizes = {}
    for key, (found, where) in graph.items():
        raw = metadata.get(key)
        if raw is None:
            default = MAX_CHARACTERS_PER_TOKEN if key == "max_characters_per_token" else None
            sizes[key] = found or default
            continue
        minimum, limit = SIZE_LIMITS[key]
        value = int(raw) if re.fullmatch(r"\d{1,9}", raw.strip()) else None
        if value is None or not minimum <= value <= limit:
            raise ValueError(
                f"ONNX model {model_path}: metadata `{key}` must be an integer in "
                f"[{minimum}, {limit:,}]. Received: {raw!r}"
            )
        if found is not None and value != found:
            raise ValueError(
                f"ONNX model {model_path}: metadata `{key}` is {value}, but the graph "
                f"has {found} ({where}); the metadata does not describe this graph"
            )
        sizes[key] = value
    sizes["id_width"] = sizes["max_characters_per_token"] + word_column
    return sizes


def model_dictionary(metadata, max_characters_per_token):
    """The `TokenDictionary` of a model with its own dictionaries (ELMoForManyLangs: the
    metadata's `char_vocabulary`, and `word_vocabulary` when it has one), else None."""
    if "char_vocabulary" not in metadata:
        return None
    words = metadata.get("word_vocabulary")
    return TokenDictionary(
        json.loads(metadata["char_vocabulary"]),
        None if words is None else json.loads(words),
        max_characters_per_token,
    )


def _static(value, axis=-1):
    """The size of `value`'s (a graph input or output) axis when the graph fixes it, else
    None (a named dynamic axis, or no such input or output)."""
    shape = getattr(value, "shape", None)
    if not shape or len(shape) <= (axis if axis >= 0 else -axis - 1):
        return None
    size = shape[axis]
    return size if isinstance(size, int) and size > 0 else None
