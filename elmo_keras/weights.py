"""Published ELMo weight files: bilm-tf's hdf5 layout read and written as arrays by name.

This module knows the file (datasets, checksums, damage) and nothing of the model: a `BiLM`
says which names and shapes it has and takes or gives the arrays
(`elmo_keras.models.bilm_weights` holds that mapping, beside the model). `read_weight_arrays`
and `write_weight_arrays` are the file side; `load_weights` and `save_weights` join the two for
any object with the model's three methods (`weight_shapes`, `get_weight_arrays`,
`set_weight_arrays`). The options file is `elmo_keras.options`'s (re-exported here). Loading a
biLM by name or files: `elmo_keras.models.BiLM.from_preset` / `BiLM.from_bilm_tf`.
"""

import pathlib

import numpy as np

from elmo_keras.files import CHECKSUM, crc32, write_datasets
from elmo_keras.options import (  # noqa: F401  (public in this module since 0.1.0)
    options_to_bilm_kwargs,
    read_options,
    write_options,
)
from elmo_keras.validation import check_regular_file

SOFTMAX = ("softmax/W", "softmax/b")  # the datasets of `softmax.hdf5`


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


def _check_finite(array, name, path, what="weight file"):
    """A NaN or infinite value is a `ValueError` naming the file, the dataset and the count."""
    if not np.all(np.isfinite(array)):
        bad = int(array.size - np.count_nonzero(np.isfinite(array)))
        raise ValueError(
            f"{what} {path}: dataset '{name}' holds {bad} NaN or infinite values (a corrupted "
            "or diverged file)"
        )


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


def read_weight_arrays(weights_path, shapes, check_finite=True):
    """Reads the datasets `shapes` names from a bilm-tf hdf5 weight file.

    Every dataset is checked before anything is returned: a missing, unused or unreadable
    dataset, a wrong shape or type or (with `check_finite`) a NaN or infinite value raises a
    `ValueError` naming the file, the dataset, the expected and the received value. A file
    written by `write_weight_arrays` holds a CRC-32 of each dataset, checked here, so a flipped
    bit in it is found too; the published files have none (hdf5 checks nothing in its classic
    format), and a flip there that gives another finite number cannot be told from a real
    weight.

    Args:
        weights_path: str or path-like. The hdf5 file.
        shapes: dict {dataset name: shape}: every dataset the model needs, in reading order.
        check_finite: bool. Scan every value for NaN and infinity. Defaults to `True`.

    Returns:
        A dict {dataset name: NumPy array}.
    """
    import h5py

    weights_path = pathlib.Path(weights_path)
    check_regular_file(weights_path, "weight file", "an hdf5 file")
    try:
        handle = h5py.File(weights_path, "r")
    except (OSError, RuntimeError, ValueError) as error:
        reason = " ".join(str(error).split())
        raise ValueError(
            f"weight file {weights_path} is not a readable hdf5 file: {reason}"
        ) from None
    with handle:
        arrays = {}
        for name, shape in shapes.items():
            shape = tuple(shape)
            array = _read(handle, name, weights_path, shape)
            if array.shape != shape:
                hint = ""
                if name == "char_embed" and array.shape[0] == shape[0] + 1:
                    hint = " (this file already holds the padding row; bilm-tf files hold 261)"
                raise ValueError(
                    f"weight file {weights_path}: dataset '{name}' has shape {array.shape}, "
                    f"but the options need {shape}{hint}"
                )
            if check_finite:
                _check_finite(array, name, weights_path)
            arrays[name] = array
        _check_all_used(handle, arrays, weights_path)
    return arrays


def write_weight_arrays(weights_path, arrays):
    """Writes {dataset name: array} as a bilm-tf hdf5 file (float32), atomically, each dataset
    with a CRC-32 attribute (ignored by other readers; `read_weight_arrays` checks it). A failed
    write (a full disk) is one `OSError` naming the file, and nothing is left behind."""
    datasets = ((name, np.asarray(array, np.float32)) for name, array in arrays.items())
    write_datasets(weights_path, datasets, checksum=True)


def load_weights(bilm, weights_path, check_finite=True):
    """Loads a bilm-tf hdf5 weight file into a `BiLM` (built if it is not): every dataset is
    checked (`read_weight_arrays`) before any weight is assigned.

    Args:
        bilm: a `BiLM`.
        weights_path: str or path-like. The hdf5 file.
        check_finite: bool. Scan every value for NaN and infinity. Defaults to `True`.

    Returns:
        `bilm`.
    """
    if not bilm.built:
        bilm.build()
    bilm.set_weight_arrays(read_weight_arrays(weights_path, bilm.weight_shapes(), check_finite))
    return bilm


def save_weights(bilm, weights_path):
    """Writes a `BiLM`'s weights as a bilm-tf hdf5 file (`write_weight_arrays`)."""
    write_weight_arrays(weights_path, bilm.get_weight_arrays())


def __getattr__(name):
    if name == "load_bilm":  # served from here before 0.3, through an import of the models
        raise AttributeError(
            "`elmo_keras.weights.load_bilm` was removed in 0.3 (the weights module no longer "
            "imports the models): use `elmo_keras.models.BiLM.from_bilm_tf(options, weights)` "
            "or `BiLM.from_preset(name_or_folder)`"
        )
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


def load_softmax(path, check_finite=True):
    """Reads what `save_softmax` wrote: returns `(kernel, bias)` as NumPy arrays.

    Checked as `read_weight_arrays` checks a weight file: a missing or damaged dataset, a
    failed checksum or (with `check_finite`) a NaN or infinite value is a `ValueError` naming
    the file and the dataset, so `elmo-keras evaluate` never reports a perplexity of `nan`.
    """
    import h5py

    path = pathlib.Path(path)
    check_regular_file(path, "softmax file", "an hdf5 file")
    try:
        handle = h5py.File(path, "r")
    except (OSError, RuntimeError, ValueError) as error:
        reason = " ".join(str(error).split())
        raise ValueError(f"softmax file {path} is not a readable hdf5 file: {reason}") from None
    with handle:
        arrays = tuple(_read(handle, name, path, what="softmax file") for name in SOFTMAX)
    if check_finite:
        for name, array in zip(SOFTMAX, arrays, strict=True):
            _check_finite(array, name, path, what="softmax file")
    return arrays
