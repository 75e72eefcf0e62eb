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

from elmo_keras.files import CHECKSUM, crc32, write_datasets
from elmo_keras.options import (  # noqa: F401  (public in this module since 0.1.0)
    options_to_bilm_kwargs,
    read_options,
    write_options,
)

SOFTMAX = ("softmax/W", "softmax/b")  # the datasets of `softmax.hdf5`
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


def _read(handle, name, path, shape=None, what="weight file"):
    """The float dataset `name` as an array. A missing dataset or a damaged file (truncated,
    corrupted metadata, a failed checksum) is a `ValueError` naming the file and dataset."""
    import h5py

    try:
        item = handle.get(name)
        array = item[...] if isinstance(item, h5py.Dataset) else item
        stored = item.attrs.get(CHECKSUM) if isinstance(item, h5py.Dataset) else None
    except (OSError, RuntimeError, KeyError, ValueError, TypeError, IndexError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(
            f"{what} {path}: dataset '{name}' cannot be read ({reason}); the file is damaged "
            "or truncated"
        ) from None
    if array is None:
        expected = f" (expected shape {shape} for these options)" if shape else ""
        raise ValueError(f"{what} {path} has no dataset '{name}'{expected}")
    if not isinstance(array, np.ndarray) or array.dtype.kind != "f":
        received = getattr(array, "dtype", type(array).__name__)
        raise ValueError(
            f"{what} {path}: dataset '{name}' must hold floating-point numbers. "
            f"Received: {received}"
        )
    if stored is not None and crc32(array) != stored:
        raise ValueError(
            f"{what} {path}: dataset '{name}' does not match its {CHECKSUM} checksum (the file "
            "is damaged)"
        )
    return array


def _check_all_used(handle, arrays, path):
    """A dataset the options leave unused means options that do not match the weights (fewer
    highway or LSTM layers than trained): refused rather than silently dropped."""
    import h5py

    found = []
    try:
        handle.visititems(
            lambda name, item: found.append(name) if isinstance(item, h5py.Dataset) else None
        )
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as error:
        reason = " ".join(str(error).split())
        raise ValueError(f"weight file {path} cannot be read ({reason}); it is damaged") from None
    unused = sorted(set(found) - set(arrays))
    if unused:
        more = f" and {len(unused) - 3} more" if len(unused) > 3 else ""
        raise ValueError(
            f"weight file {path} holds datasets these options do not use: {unused[:3]}{more} "
            "(do the options belong to these weights?)"
        )


def load_weights(bilm, weights_path, check_finite=True):
    """Loads a bilm-tf hdf5 weight file into a built `BiLM`.

    Every dataset is checked before anything is assigned: a missing, unused or unreadable
    dataset, a wrong shape or type or (with `check_finite`) a NaN or infinite value raises a
    `ValueError` naming the file, the dataset, the expected and the received value. A file
    written by `save_weights` holds a CRC-32 of each dataset, checked here, so a flipped bit in
    it is found too; the published files have none (hdf5 checks nothing in its classic
    format), and a flip there that gives another finite number cannot be told from a real
    weight.

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
    except (OSError, RuntimeError, ValueError) as error:
        reason = " ".join(str(error).split())
        raise ValueError(
            f"weight file {weights_path} is not a readable hdf5 file: {reason}"
        ) from None
    with handle:
        arrays = {}
        for name, shape, _ in plan:
            array = _read(handle, name, weights_path, shape)
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
        _check_all_used(handle, arrays, weights_path)
    for name, _, assign in plan:
        assign(arrays[name])
    return bilm


def save_weights(bilm, weights_path):
    """Writes a `BiLM`'s weights as a bilm-tf hdf5 file, atomically, each dataset with a
    CRC-32 attribute (ignored by other readers; `load_weights` checks it). A failed write (a
    full disk) is one `OSError` naming the file, and nothing is left behind."""
    arrays = _published_arrays(bilm)
    datasets = ((name, np.asarray(array, np.float32)) for name, array in arrays.items())
    write_datasets(weights_path, datasets, checksum=True)


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
    kernel, bias = np.asarray(kernel), np.asarray(bias)
    if kernel.ndim != 2 or bias.shape != kernel.shape[:1]:
        raise ValueError(
            "`kernel` must be [vocabulary_size, projection_dim] and `bias` [vocabulary_size]. "
            f"Received: kernel.shape={kernel.shape}, bias.shape={bias.shape}"
        )
    write_datasets(path, zip(SOFTMAX, (kernel, bias), strict=True), checksum=True)


def load_softmax(path):
    """Reads what `save_softmax` wrote: returns `(kernel, bias)` as NumPy arrays."""
    import h5py

    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"softmax file not found: {path}")
    try:
        handle = h5py.File(path, "r")
    except (OSError, RuntimeError, ValueError) as error:
        reason = " ".join(str(error).split())
        raise ValueError(f"softmax file {path} is not a readable hdf5 file: {reason}") from None
    with handle:
        return tuple(_read(handle, name, path, what="softmax file") for name in SOFTMAX)
