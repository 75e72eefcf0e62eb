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

from elmo_keras.file_io.hdf5_writer import CHECKSUM, crc32, write_datasets
from elmo_keras.options import (  # noqa: F401  (public in this module since 0.1.0)
    options_to_bilm_kwargs,
    read_options,
    write_options,
)
from elmo_keras.validation import check_regular_file

SOFTMAX = ("softmax/W", "softmax/b")  # the datasets of `softmax.hdf5`


# A chunk this much larger than its dataset (and than 1 MiB) is refused before it is read: a
# small compressed chunk that inflates to gigabytes to give a few values.
_CHUNK_SLACK = 2**20
_LINK_DEPTH = 16  # soft links followed to reach one dataset (HDF5's own default limit)


def _damaged(what, path, name, error):
    reason = " ".join(str(error).split()) or type(error).__name__
    return ValueError(
        f"{what} {path}: dataset '{name}' cannot be read ({reason}); the file is damaged or "
        "truncated"
    )


def _outside(what, path, name, how):
    return ValueError(
        f"{what} {path}: dataset '{name}' {how}; a model file is read only from itself"
    )


def _check_links(handle, name, path, what, dataset, depth=0):
    """Every link on the way to `name` stays in this file: hard links, and soft links whose
    own targets do. An external link (to another file) or a user-defined one is refused
    before it is followed, as is a chain of more than `_LINK_DEPTH` soft links (a loop)."""
    import h5py

    if depth > _LINK_DEPTH:
        raise _outside(what, path, dataset, f"is reached through more than {_LINK_DEPTH} links")
    current = "/" if name.startswith("/") else ""
    for part in filter(None, name.split("/")):
        parent, current = current, f"{current.rstrip('/')}/{part}" if current else part
        link = handle.get(current, getlink=True)
        if link is None or isinstance(link, h5py.HardLink):
            continue
        if isinstance(link, h5py.ExternalLink):
            how = f"is reached through an external link to {link.filename}:{link.path}"
            raise _outside(what, path, dataset, how)
        if not isinstance(link, h5py.SoftLink):
            raise _outside(what, path, dataset, f"is a {type(link).__name__}")
        target = link.path
        if not target.startswith("/"):
            target = f"{parent.rstrip('/')}/{target}" if parent else target
        _check_links(handle, target, path, what, dataset, depth + 1)


def _dataset(handle, name, path, what):
    """The h5py dataset `name` of `handle`, or None when there is none. Its links, storage and
    declaration are checked before any of its data is read: a dataset whose data lives in
    other files (external raw storage, a virtual dataset, an external link) is refused."""
    import h5py

    _check_links(handle, name, path, what, name)
    item = handle.get(name)
    if item is None or not isinstance(item, h5py.Dataset):
        return item
    if item.is_virtual:
        raise _outside(what, path, name, "is a virtual dataset (its data is in other files)")
    if item.external:
        files = sorted({str(entry[0]) for entry in item.external})
        raise _outside(what, path, name, f"stores its data in external files {files[:3]}")
    return item


def _check_declaration(item, name, path, shape, what, need):
    """The declared dtype, shape and chunking of a dataset, before its data is read: a
    floating-point type of at most 8 bytes, `shape` where given (None: any size there), and
    chunks no larger than the dataset (or 1 MiB)."""
    dtype = item.dtype
    if dtype.kind != "f" or dtype.itemsize > 8:
        raise ValueError(
            f"{what} {path}: dataset '{name}' must hold floating-point numbers (float16, 32 or "
            f"64). Received: {dtype}"
        )
    declared = tuple(item.shape or ())
    if shape is not None and (
        len(declared) != len(shape)
        or any(want is not None and got != want for got, want in zip(declared, shape, strict=True))
    ):
        hint = ""
        if name == "char_embed" and declared[:1] == (shape[0] + 1,):
            hint = " (this file already holds the padding row; bilm-tf files hold 261)"
        raise ValueError(
            f"{what} {path}: dataset '{name}' has shape {declared}, but {need} {tuple(shape)}{hint}"
        )
    if item.chunks is not None:
        chunk = int(np.prod(item.chunks, dtype=np.float64)) * dtype.itemsize
        size = int(np.prod(declared, dtype=np.float64)) * dtype.itemsize
        if chunk > max(size, _CHUNK_SLACK):
            raise ValueError(
                f"{what} {path}: dataset '{name}' is stored in chunks of {chunk:,} bytes, more "
                f"than the {size:,} bytes it holds; refused unread"
            )


def _stored_checksum(item, name, path, what):
    """The dataset's `CHECKSUM` attribute (None without one), checked to be one integer before
    it is read."""
    if CHECKSUM not in item.attrs:
        return None
    attribute = item.attrs.get_id(CHECKSUM)
    if attribute.shape not in ((), (1,)) or attribute.dtype.kind not in "iu":
        raise ValueError(
            f"{what} {path}: dataset '{name}' has a {CHECKSUM} attribute of shape "
            f"{attribute.shape} and type {attribute.dtype}; expected one integer (the file is "
            "damaged)"
        )
    return int(np.asarray(item.attrs[CHECKSUM]).reshape(()))


def _read(handle, name, path, shape=None, what="weight file", need="the options need"):
    """The float dataset `name` as an array, read only after its links, storage, dtype, shape
    and chunking are checked (`_dataset`, `_check_declaration`). A missing dataset or a damaged
    file (truncated, corrupted metadata, a failed checksum) is a `ValueError` naming the file
    and dataset."""
    try:
        item = _dataset(handle, name, path, what)
        if item is not None and hasattr(item, "dtype"):
            _check_declaration(item, name, path, shape, what, need)
            stored = _stored_checksum(item, name, path, what)
            array = item[...]
        else:
            array, stored = item, None
    except (OSError, RuntimeError, KeyError, TypeError, IndexError) as error:
        raise _damaged(what, path, name, error) from None
    except ValueError as error:
        if str(error).startswith(f"{what} {path}"):
            raise
        raise _damaged(what, path, name, error) from None
    if array is None:
        expected = f" (expected shape {tuple(shape)} for these options)" if shape else ""
        raise ValueError(f"{what} {path} has no dataset '{name}'{expected}")
    if not isinstance(array, np.ndarray):
        raise ValueError(
            f"{what} {path}: dataset '{name}' must hold floating-point numbers. "
            f"Received: {type(array).__name__}"
        )
    if stored is not None and crc32(array) != stored:
        raise ValueError(
            f"{what} {path}: dataset '{name}' does not match its {CHECKSUM} checksum (the file "
            "is damaged)"
        )
    return array


def _check_finite(array, name, path, what="weight file"):
    """A NaN or infinite value is a `ValueError` naming the file, the dataset and the count;
    checked in float32, the model's type, so a float64 value beyond float32's range (which
    the cast would make infinite) counts too."""
    if array.dtype.itemsize > 4:
        with np.errstate(over="ignore"):
            array = array.astype(np.float32)
    finite = np.isfinite(array)
    if not np.all(finite):
        bad = int(array.size - np.count_nonzero(finite))
        raise ValueError(
            f"{what} {path}: dataset '{name}' holds {bad} NaN or infinite values as float32 (a "
            "corrupted or diverged file, or float64 values beyond float32's range)"
        )


def _check_all_used(handle, arrays, path, what="weight file"):
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
        raise ValueError(f"{what} {path} cannot be read ({reason}); it is damaged") from None
    unused = sorted(set(found) - set(arrays))
    if unused:
        more = f" and {len(unused) - 3} more" if len(unused) > 3 else ""
        raise ValueError(
            f"{what} {path} holds datasets these options do not use: {unused[:3]}{more} "
            "(do the options belong to these weights?)"
        )


def read_weight_arrays(
    weights_path, shapes, check_finite=True, what="weight file", need="the options need"
):
    """Reads the datasets `shapes` names from a bilm-tf hdf5 weight file.

    Every dataset is checked before anything is returned: a missing, unused or unreadable
    dataset, a wrong shape or type or (with `check_finite`) a NaN or infinite value raises a
    `ValueError` naming the file, the dataset, the expected and the received value. A file
    written by `write_weight_arrays` holds a CRC-32 of each dataset, checked here, so a flipped
    bit in it is found too; the published files have none (hdf5 checks nothing in its classic
    format), and a flip there that gives another finite number cannot be told from a real
    weight.

    A model file is read only from itself, and no more of it than the model needs: external
    links, external raw storage and virtual datasets are refused, and each dataset's declared
    type, shape and chunking are checked before any of its data is read (a file declaring
    64 TiB, or a small compressed chunk that inflates to gigabytes, is one line, unread).

    Args:
        weights_path: str or path-like. The hdf5 file.
        shapes: dict {dataset name: shape}: every dataset the model needs, in reading order.
        check_finite: bool. Scan every value for NaN and infinity. Defaults to `True`.
        what: str. What to call the file in messages. Defaults to `"weight file"`.
        need: str. Who needs `shapes`, in messages. Defaults to `"the options need"`.

    Returns:
        A dict {dataset name: NumPy array}.
    """
    import h5py

    weights_path = pathlib.Path(weights_path)
    check_regular_file(weights_path, what, "an hdf5 file")
    try:
        handle = h5py.File(weights_path, "r")
    except (OSError, RuntimeError, ValueError) as error:
        reason = " ".join(str(error).split())
        raise ValueError(f"{what} {weights_path} is not a readable hdf5 file: {reason}") from None
    with handle:
        arrays = {}
        for name, shape in shapes.items():
            array = _read(handle, name, weights_path, tuple(shape), what, need)
            if check_finite:
                _check_finite(array, name, weights_path, what)
            arrays[name] = array
        _check_all_used(handle, arrays, weights_path, what)
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
    build_for_weights(bilm)
    bilm.set_weight_arrays(read_weight_arrays(weights_path, bilm.weight_shapes(), check_finite))
    return bilm


def build_for_weights(bilm):
    """Builds `bilm`, if it is not built, for weights assigned right after (a model being
    loaded): its LSTM cells start from zeros instead of their initializers, whose values would
    be overwritten anyway. Their orthogonal recurrent initializer is a QR decomposition of each
    `projection_dim x 4 * units` kernel: most of a 4096-cell model's load time. Returns `bilm`."""
    if not bilm.built:
        bilm.bilstm._restoring = True
        try:
            bilm.build()
        finally:
            bilm.bilstm._restoring = False
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


def load_softmax(path, check_finite=True, shape=None, need="the model needs"):
    """Reads what `save_softmax` wrote: returns `(kernel, bias)` as NumPy arrays.

    Checked as `read_weight_arrays` checks a weight file: a missing or damaged dataset, a
    dataset stored outside the file, a wrong declared shape, a failed checksum or (with
    `check_finite`) a NaN or infinite value is a `ValueError` naming the file and the dataset,
    so `elmo-keras evaluate` never reports a perplexity of `nan`.

    Args:
        path: str or path-like. The hdf5 file.
        check_finite: bool. Scan every value for NaN and infinity. Defaults to `True`.
        shape: `(vocabulary_size, projection_dim)` or None (any). Checked against the declared
            shapes before anything is read.
        need: str. Who needs `shape`, in messages.
    """
    shape = (None, None) if shape is None else tuple(shape)
    shapes = dict(zip(SOFTMAX, (shape, shape[:1]), strict=True))
    arrays = read_weight_arrays(path, shapes, check_finite, "softmax file", need)
    kernel, bias = arrays[SOFTMAX[0]], arrays[SOFTMAX[1]]
    if bias.shape != kernel.shape[:1]:
        raise ValueError(
            f"softmax file {path}: '{SOFTMAX[1]}' has shape {bias.shape}; '{SOFTMAX[0]}' "
            f"{kernel.shape} needs ({kernel.shape[0]},)"
        )
    return kernel, bias
