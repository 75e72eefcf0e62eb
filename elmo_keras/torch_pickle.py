"""A safe reader of PyTorch state-dict files (`torch.save(module.state_dict(), path)`): no torch.

Reads both of torch's formats into `{name: NumPy array}`:

- the zip format of torch >= 1.6: a zip archive holding `<prefix>/data.pkl` (the pickled dict,
  whose tensors point at storages by key) and `<prefix>/data/<key>` (each storage's raw bytes);
- the legacy format of torch < 1.6 (ELMoForManyLangs' 2018 files): five pickles in a row (a
  magic number, the protocol version, the system info, the dict, the list of storage keys),
  then each storage as an int64 element count and its raw bytes.

A pickle can run any function it names. This reader's unpickler knows only what a state dict
holds (ordered dicts, tensors rebuilt by torch's `_rebuild_tensor_v2`, typed storages) and
refuses any other global before anything runs, in one `ValueError` line naming it: a hostile
file (say one calling `os.system`) is refused, never executed. The storages' device tags
(`cpu`, `cuda:0`) are ignored: every tensor comes back as a NumPy array.
"""

import collections
import io
import pickle
import zipfile

import numpy as np

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001
_STORAGE_DTYPES = {
    "DoubleStorage": np.float64,
    "FloatStorage": np.float32,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _StorageType:
    """The marker a pickle names for a storage's element type (`torch.FloatStorage`)."""

    def __init__(self, name):
        self.name = name
        self.dtype = np.dtype(_STORAGE_DTYPES[name])


def _int_tuple(value, what, path):
    if not (isinstance(value, tuple) and all(type(v) is int and v >= 0 for v in value)):
        raise ValueError(f"{path}: a tensor's {what} must be a tuple of integers, got {value!r}")
    return value


def _tensor(storage, offset, size, stride, path):
    """The array a `_rebuild_tensor(_v2)` call describes, bounds checked: a view of `storage`
    (a legacy file's storages are filled after the dict is read; `read_state_dict` copies)."""
    if not isinstance(storage, np.ndarray) or type(offset) is not int or offset < 0:
        raise ValueError(f"{path}: a tensor must be built from a storage and an offset")
    size, stride = _int_tuple(size, "size", path), _int_tuple(stride, "stride", path)
    if len(size) != len(stride):
        raise ValueError(f"{path}: a tensor's size {size} and stride {stride} differ in length")
    if all(size):
        last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
        if last >= storage.size:
            raise ValueError(f"{path}: a tensor reaches past its storage ({storage.size} values)")
    items = storage.itemsize
    return np.lib.stride_tricks.as_strided(
        storage[offset:], shape=size, strides=tuple(s * items for s in stride), writeable=False
    )


class _StateDictUnpickler(pickle.Unpickler):
    """An unpickler that builds only what a state dict holds; anything else is refused."""

    def __init__(self, file, path, storage):
        super().__init__(file)
        self.path = path
        self.storage = storage  # (storage type, key, numel) -> a flat NumPy array

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return self._rebuild_tensor
        if module == "torch._utils" and name == "_rebuild_parameter":
            return lambda data, requires_grad=False, hooks=None: data
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        raise ValueError(
            f"{self.path} is not a plain state dict: its pickle names `{module}.{name}`, which "
            "a state dict never holds (refused without running it)"
        )

    def _rebuild_tensor(self, storage, offset, size, stride, *_):
        return _tensor(storage, offset, size, stride, self.path)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise ValueError(f"{self.path}: unknown persistent reference {pid!r:.80}")
        storage_type, key, location, numel = pid[1:5]
        if not isinstance(storage_type, _StorageType) or type(numel) is not int or numel < 0:
            raise ValueError(f"{self.path}: bad storage reference {pid!r:.80}")
        if not isinstance(location, str | bytes):
            raise ValueError(f"{self.path}: bad storage location {location!r:.80}")
        array = self.storage(storage_type, str(key), numel)
        if len(pid) > 5 and pid[5] is not None:  # legacy view: (view key, offset, size)
            _, start, count = pid[5]
            array = array[start : start + count]
        return array


def _load_pickle(data, path, storage):
    try:
        return _StateDictUnpickler(data, path, storage).load()
    except ValueError:
        raise
    except Exception as error:  # a truncated or corrupt pickle: one line, no traceback
        raise ValueError(f"{path} is not a readable torch state dict: {error}") from None


def _check_state_dict(state, path):
    if not isinstance(state, dict) or not all(
        isinstance(k, str) and isinstance(v, np.ndarray) for k, v in state.items()
    ):
        raise ValueError(f"{path} must hold a state dict of named tensors")
    return {name: np.array(value) for name, value in state.items()}


def _read_zip(path):
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pickles = [n for n in names if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pickles) != 1:
            raise ValueError(f"{path} is a zip file but not a torch file (no single data.pkl)")
        prefix = pickles[0][: -len("data.pkl")]
        if f"{prefix}byteorder" in names and archive.read(f"{prefix}byteorder") != b"little":
            raise ValueError(f"{path}: only little-endian torch files are read")

        def storage(storage_type, key, numel):
            try:
                raw = archive.read(f"{prefix}data/{key}")
            except KeyError:
                raise ValueError(f"{path}: storage {key!r} is missing from the archive") from None
            if len(raw) < numel * storage_type.dtype.itemsize:
                raise ValueError(f"{path}: storage {key!r} is shorter than its {numel} values")
            return np.frombuffer(raw, storage_type.dtype, count=numel)

        return _load_pickle(io.BytesIO(archive.read(pickles[0])), path, storage)


def _read_legacy(path):
    with open(path, "rb") as data:
        return _read_legacy_stream(data, path)


def _read_legacy_stream(data, path):
    """The legacy format from an open file: its storages are read straight into their arrays
    (`readinto`, no intermediate copy of a file that may be 400 MB)."""

    def no_storage(*_):
        raise ValueError(f"{path}: a storage outside the state dict")

    header = [_load_pickle(data, path, no_storage) for _ in range(3)]
    if header[0] != _LEGACY_MAGIC or header[1] != _LEGACY_PROTOCOL:
        raise ValueError(f"{path} is not a torch file (neither zip nor legacy format)")
    if not (isinstance(header[2], dict) and header[2].get("little_endian", True)):
        raise ValueError(f"{path}: only little-endian torch files are read")
    storages = {}

    def storage(storage_type, key, numel):
        if key not in storages:
            storages[key] = (storage_type, numel, np.zeros(numel, storage_type.dtype))
        return storages[key][2]

    state = _load_pickle(data, path, storage)
    keys = _load_pickle(data, path, no_storage)
    if not isinstance(keys, list) or sorted(map(str, keys)) != sorted(storages):
        raise ValueError(f"{path}: its storage list does not match its tensors")
    for key in keys:
        storage_type, numel, array = storages[str(key)]
        count = np.frombuffer(data.read(8), "<i8")
        nbytes = numel * storage_type.dtype.itemsize
        if (
            count.size != 1
            or int(count[0]) != numel
            or data.readinto(array.view(np.uint8)) != nbytes
        ):
            raise ValueError(f"{path}: storage {key!r} is truncated or mislabelled")
    return state


def read_state_dict(path):
    """Reads a torch state-dict file (zip or legacy format) as `{name: NumPy array}`.

    Args:
        path: str or path-like. A file written by `torch.save(module.state_dict(), path)`.

    Returns:
        A dict of arrays, in the file's order, each with the tensor's dtype and shape.

    Raises:
        ValueError: one line, naming the file: not a torch file, or a pickle naming anything a
            state dict does not hold (refused before it runs), or truncated data.
    """
    path = str(path)
    state = _read_zip(path) if zipfile.is_zipfile(path) else _read_legacy(path)
    return _check_state_dict(state, path)
