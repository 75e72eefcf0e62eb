"""The published weight names of a `BiLM`: its variables as bilm-tf's datasets, and back.

`elmo_keras.weights` reads and writes the hdf5 file as arrays by name; this module, beside the
model, knows which variable each name is (REFERENCE.md section 3):

```
char_embed                                   (n_characters - 1, char_dim)
word_embed                                   (n_words, word_dim), with word embeddings only
CNN/W_cnn_{i}, CNN/b_cnn_{i}                 (1, width, char_dim, count), (count,)
CNN_high_{k}/W_carry, W_transform, b_carry, b_transform
CNN_proj/W_proj, CNN_proj/b_proj             (n_filters, projection_dim), (projection_dim,)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0    (input_dim + projection_dim, 4 * units)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/B      (4 * units,)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_P_0  (units, projection_dim)
```

TensorFlow's LSTMCell orders the gate blocks i, j (candidate), f, o; our cells use Keras' i, f,
c, o: reading and writing permute the column blocks (a permutation, so exact both ways). The
forget bias of 1.0 is not stored in `B` and our cells add it at run time too, so biases are
copied unchanged and load -> save -> load is bit-exact. The padding row of the character
embedding (id 0) is not stored either: it is zero.
"""

import keras
import numpy as np

# Keras gate block k is TensorFlow block _GATE_PERMUTATION[k]; the permutation is its own inverse.
_GATE_PERMUTATION = (0, 2, 1, 3)


def _reorder_gates(array):
    blocks = np.split(array, 4, axis=-1)
    return np.concatenate([blocks[k] for k in _GATE_PERMUTATION], axis=-1)


def _lstm_prefix(direction, layer):
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def _value(variable):
    return keras.ops.convert_to_numpy(variable)


def _plain_variables(bilm):
    """{published name: variable} for the datasets stored as the variable is."""
    cnn = bilm.char_cnn
    names = {}
    for i, conv in enumerate(cnn.convolutions):
        names[f"CNN/b_cnn_{i}"] = conv.bias
    for k, highway in enumerate(cnn.highways):
        names[f"CNN_high_{k}/W_carry"] = highway.carry.kernel
        names[f"CNN_high_{k}/b_carry"] = highway.carry.bias
        names[f"CNN_high_{k}/W_transform"] = highway.transform.kernel
        names[f"CNN_high_{k}/b_transform"] = highway.transform.bias
    if cnn.word_embedding_dim:  # ELMoForManyLangs' models (`elmo_keras.efml`)
        names["word_embed"] = cnn.word_embedding.embeddings
    names["CNN_proj/W_proj"] = cnn.projection.kernel
    names["CNN_proj/b_proj"] = cnn.projection.bias
    for direction, cell, layer in _cells(bilm):
        names[f"{_lstm_prefix(direction, layer)}/W_P_0"] = cell.projection_kernel
    return names


def _cells(bilm):
    for direction, cells in enumerate((bilm.bilstm.forward_cells, bilm.bilstm.backward_cells)):
        for layer, cell in enumerate(cells):
            yield direction, cell, layer


def weight_shapes(bilm):
    """{published name: shape} of a built `BiLM`, in the file's layout and order."""
    cnn = bilm.char_cnn
    embeddings = cnn.char_embedding.embeddings
    shapes = {"char_embed": (embeddings.shape[0] - 1, embeddings.shape[1])}
    for i, conv in enumerate(cnn.convolutions):
        shapes[f"CNN/W_cnn_{i}"] = (1, *conv.kernel.shape)
        shapes[f"CNN/b_cnn_{i}"] = tuple(conv.bias.shape)
    plain = _plain_variables(bilm)
    for name, variable in plain.items():
        if name.startswith("CNN_") or name == "word_embed":
            shapes[name] = tuple(variable.shape)
    for direction, cell, layer in _cells(bilm):
        prefix = _lstm_prefix(direction, layer)
        rows = cell.kernel.shape[0] + cell.recurrent_kernel.shape[0]
        shapes[f"{prefix}/W_0"] = (rows, cell.kernel.shape[1])
        shapes[f"{prefix}/B"] = tuple(cell.bias.shape)
        shapes[f"{prefix}/W_P_0"] = tuple(cell.projection_kernel.shape)
    return shapes


def get_weight_arrays(bilm):
    """A built `BiLM`'s weights as {published name: NumPy array}, in the file's layout."""
    arrays = {name: _value(v) for name, v in _plain_variables(bilm).items()}
    arrays["char_embed"] = _value(bilm.char_cnn.char_embedding.embeddings)[1:]
    for i, conv in enumerate(bilm.char_cnn.convolutions):
        arrays[f"CNN/W_cnn_{i}"] = _value(conv.kernel)[None]
    for direction, cell, layer in _cells(bilm):
        prefix = _lstm_prefix(direction, layer)
        w = np.concatenate([_value(cell.kernel), _value(cell.recurrent_kernel)])
        arrays[f"{prefix}/W_0"] = _reorder_gates(w)
        arrays[f"{prefix}/B"] = _reorder_gates(_value(cell.bias))
    return arrays


def set_weight_arrays(bilm, arrays):
    """Assigns {published name: array} (every name of `weight_shapes`, shapes checked by the
    caller) to a built `BiLM`."""

    def assign(variable, array):
        variable.assign(np.asarray(array).astype(variable.dtype))

    for name, variable in _plain_variables(bilm).items():
        assign(variable, arrays[name])
    char_embed = arrays["char_embed"]
    padding = np.zeros((1, char_embed.shape[1]), char_embed.dtype)
    assign(bilm.char_cnn.char_embedding.embeddings, np.concatenate([padding, char_embed]))
    for i, conv in enumerate(bilm.char_cnn.convolutions):
        assign(conv.kernel, arrays[f"CNN/W_cnn_{i}"][0])
    for direction, cell, layer in _cells(bilm):
        prefix = _lstm_prefix(direction, layer)
        w = _reorder_gates(arrays[f"{prefix}/W_0"])
        rows = cell.kernel.shape[0]
        assign(cell.kernel, w[:rows])
        assign(cell.recurrent_kernel, w[rows:])
        assign(cell.bias, _reorder_gates(arrays[f"{prefix}/B"]))
