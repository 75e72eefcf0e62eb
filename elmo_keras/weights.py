"""Published ELMo weights: bilm-tf's `options.json` + hdf5 layout, read and written.

Plain functions on a built `BiLM` (duck-typed: this module imports no model): `load_weights`,
`save_weights`. `load_bilm` (options + weights -> a new `BiLM`) is in `elmo_keras.models.bilm`
and importable from here too, as are the options functions of `elmo_keras.options`. The
layout (REFERENCE.md section 3):

```
char_embed                                   (n_characters - 1, char_dim)
CNN/W_cnn_{i}, CNN/b_cnn_{i}                 (1, width, char_dim, count), (count,)
CNN_high_{k}/W_carry, W_transform, b_carry, b_transform
CNN_proj/W_proj, CNN_proj/b_proj             (n_filters, projection_dim), (projection_dim,)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0    (input_dim + projection_dim, 4 * units)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/B      (4 * units,)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_P_0  (units, projection_dim)
```

TensorFlow's LSTMCell orders the gate blocks i, j (candidate), f, o; our cells use Keras' i, f,
c, o: loading and saving permute the column blocks (a permutation, so exact both ways). The
forget bias of 1.0 is not stored in `B` and our cells add it at run time too, so biases are
copied unchanged and load -> save -> load is bit-exact.
"""

import importlib
import pathlib

import numpy as np

from elmo_keras.files import atomic_file
from elmo_keras.options import (  # noqa: F401  (public in this module since 0.1.0)
    options_to_bilm_kwargs,
    read_options,
    write_options,
)

# Keras gate block k is TensorFlow block _GATE_PERMUTATION[k]; the permutation is its own inverse.
_GATE_PERMUTATION = (0, 2, 1, 3)


def _reorder_gates(array, axis=-1):
    blocks = np.split(array, 4, axis=axis)
    return np.concatenate([blocks[k] for k in _GATE_PERMUTATION], axis=axis)


def _lstm_prefix(direction, layer):
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def _published_arrays(bilm):
    """The model's weights as a dict {dataset name: array} in the published layout."""
    cnn = bilm.char_cnn
    arrays = {"char_embed": np.asarray(cnn.char_embedding.embeddings)[1:]}
    for i, conv in enumerate(cnn.convolutions):
        arrays[f"CNN/W_cnn_{i}"] = np.asarray(conv.kernel)[None]
        arrays[f"CNN/b_cnn_{i}"] = np.asarray(conv.bias)
    for k, highway in enumerate(cnn.highways):
        arrays[f"CNN_high_{k}/W_carry"] = np.asarray(highway.carry.kernel)
        arrays[f"CNN_high_{k}/b_carry"] = np.asarray(highway.carry.bias)
        arrays[f"CNN_high_{k}/W_transform"] = np.asarray(highway.transform.kernel)
        arrays[f"CNN_high_{k}/b_transform"] = np.asarray(highway.transform.bias)
    arrays["CNN_proj/W_proj"] = np.asarray(cnn.projection.kernel)
    arrays["CNN_proj/b_proj"] = np.asarray(cnn.projection.bias)
    for direction, cells in enumerate((bilm.bilstm.forward_cells, bilm.bilstm.backward_cells)):
        for layer, cell in enumerate(cells):
            prefix = _lstm_prefix(direction, layer)
            w = np.concatenate([np.asarray(cell.kernel), np.asarray(cell.recurrent_kernel)])
            arrays[f"{prefix}/W_0"] = _reorder_gates(w)
            arrays[f"{prefix}/B"] = _reorder_gates(np.asarray(cell.bias))
            arrays[f"{prefix}/W_P_0"] = np.asarray(cell.projection_kernel)
    return arrays


def _assignments(bilm):
    """(dataset name, expected shape, function that assigns the file's array to the model)."""
    cnn = bilm.char_cnn
    plan = []

    def add(name, variable, convert=lambda a: a, shape=None):
        shape = tuple(shape if shape is not None else variable.shape)
        plan.append((name, shape, lambda a: variable.assign(convert(a).astype(variable.dtype))))

    emb = cnn.char_embedding.embeddings
    add(
        "char_embed",
        emb,
        lambda a: np.concatenate([np.zeros((1, a.shape[1]), a.dtype), a]),
        (emb.shape[0] - 1, emb.shape[1]),
    )
    for i, conv in enumerate(cnn.convolutions):
        add(f"CNN/W_cnn_{i}", conv.kernel, lambda a: a[0], (1,) + tuple(conv.kernel.shape))
        add(f"CNN/b_cnn_{i}", conv.bias)
    for k, highway in enumerate(cnn.highways):
        add(f"CNN_high_{k}/W_carry", highway.carry.kernel)
        add(f"CNN_high_{k}/b_carry", highway.carry.bias)
        add(f"CNN_high_{k}/W_transform", highway.transform.kernel)
        add(f"CNN_high_{k}/b_transform", highway.transform.bias)
    add("CNN_proj/W_proj", cnn.projection.kernel)
    add("CNN_proj/b_proj", cnn.projection.bias)
    for direction, cells in enumerate((bilm.bilstm.forward_cells, bilm.bilstm.backward_cells)):
        for layer, cell in enumerate(cells):
            prefix = _lstm_prefix(direction, layer)
            rows = cell.kernel.shape[0]
            w_shape = (rows + cell.recurrent_kernel.shape[0], cell.kernel.shape[1])

            def assign_w(a, cell=cell, rows=rows):
                a = _reorder_gates(a)
                cell.kernel.assign(a[:rows].astype(cell.kernel.dtype))
                cell.recurrent_kernel.assign(a[rows:].astype(cell.recurrent_kernel.dtype))

            plan.append((f"{prefix}/W_0", w_shape, assign_w))
            add(f"{prefix}/B", cell.bias, _reorder_gates)
            add(f"{prefix}/W_P_0", cell.projection_kernel)
    return plan


def load_weights(bilm, weights_path, check_finite=True):
    """Loads a bilm-tf hdf5 weight file into a built `BiLM`.

    Every dataset is checked before anything is assigned: a missing dataset, a wrong shape or
    (with `check_finite`) a NaN or infinite value raises a `ValueError` naming the file, the
    dataset, the expected and the received value.

    Args:
        bilm: a `BiLM`.
        weights_path: str or path-like. The hdf5 file.
        check_finite: bool. Scan every value for NaN and infinity. Defaults to `True`.
    """
    import h5py

    weights_path = pathlib.Path(weights_path)
    if not weights_path.is_file():
        raise FileNotFoundError(f"weight file not found: {weights_path}")
    if not bilm.built:
        bilm.build()
    plan = _assignments(bilm)
    try:
        handle = h5py.File(weights_path, "r")
    except OSError as error:
        raise ValueError(
            f"weight file {weights_path} is not a readable hdf5 file: {error}"
        ) from None
    with handle:
        arrays = {}
        for name, shape, _ in plan:
            if name not in handle:
                raise ValueError(
                    f"weight file {weights_path} has no dataset '{name}' (expected shape "
                    f"{shape} for these options)"
                )
            array = handle[name][...]
            if array.shape != shape:
                hint = ""
                if name == "char_embed" and array.shape[0] == shape[0] + 1:
                    hint = " (this file already holds the padding row; bilm-tf files hold 261)"
                raise ValueError(
                    f"weight file {weights_path}: dataset '{name}' has shape {array.shape}, "
                    f"but the options need {shape}{hint}"
                )
            if check_finite and not np.all(np.isfinite(array)):
                bad = int(array.size - np.count_nonzero(np.isfinite(array)))
                raise ValueError(
                    f"weight file {weights_path}: dataset '{name}' holds {bad} NaN or infinite "
                    "values (a corrupted or diverged file)"
                )
            arrays[name] = array
    for name, _, assign in plan:
        assign(arrays[name])
    return bilm


def save_weights(bilm, weights_path):
    """Writes a `BiLM`'s weights as a bilm-tf hdf5 file (atomically: temp file, then rename)."""
    import h5py

    arrays = _published_arrays(bilm)
    with atomic_file(weights_path) as tmp:
        with h5py.File(tmp, "w") as handle:
            for name, array in arrays.items():
                handle.create_dataset(name, data=np.asarray(array, np.float32))


def __getattr__(name):
    # `load_bilm` builds a `BiLM`, so it lives in `elmo_keras.models.bilm` (this module sits
    # below the models); `from elmo_keras.weights import load_bilm` keeps working.
    if name == "load_bilm":
        return importlib.import_module("elmo_keras.models.bilm").load_bilm
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def save_softmax(path, kernel, bias):
    """Writes a language model's word softmax as `softmax.hdf5` (atomically).

    The file holds `softmax/W` `[vocabulary_size, projection_dim]` and `softmax/b`
    `[vocabulary_size]`, the layout `elmo-keras train` writes next to `lm_weights.hdf5`.

    Args:
        path: str or path-like. The hdf5 file to write.
        kernel: array `[vocabulary_size, projection_dim]`.
        bias: array `[vocabulary_size]`.
    """
    import h5py

    kernel, bias = np.asarray(kernel), np.asarray(bias)
    if kernel.ndim != 2 or bias.shape != kernel.shape[:1]:
        raise ValueError(
            "`kernel` must be [vocabulary_size, projection_dim] and `bias` [vocabulary_size]. "
            f"Received: kernel.shape={kernel.shape}, bias.shape={bias.shape}"
        )
    with atomic_file(path) as tmp:
        with h5py.File(tmp, "w") as handle:
            handle.create_dataset("softmax/W", data=kernel)
            handle.create_dataset("softmax/b", data=bias)


def load_softmax(path):
    """Reads what `save_softmax` wrote: returns `(kernel, bias)` as NumPy arrays."""
    import h5py

    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"softmax file not found: {path}")
    with h5py.File(path, "r") as handle:
        for name in ("softmax/W", "softmax/b"):
            if name not in handle:
                raise ValueError(f"softmax file {path} has no dataset '{name}'")
        return handle["softmax/W"][...], handle["softmax/b"][...]
