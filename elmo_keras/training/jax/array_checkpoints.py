"""The JAX trainer's checkpoints: one NumPy `.npz` file per checkpoint, written atomically.

`checkpoints/ckpt-N.npz` holds every array of a training state by name (`model/...`,
`optimizer/...`, `softmax_accumulator`, `step`, `state_h`, `state_c`) and `names.json`, the
list of names in order. The file is written under a temporary name and renamed into place
(`files.atomic_file`), so a process killed during a save leaves the previous checkpoints as they
were and no `ckpt-N.npz` that is half written; the leftovers of killed writes are removed when a
manager opens the folder. Older checkpoints beyond `keep` are deleted after each save. Listing,
falling back past unreadable checkpoints and naming where to resume from are `checkpoints`'
(shared with TensorFlow's checkpoints). NumPy only.
"""

import json
import pathlib
import re
import zipfile

import numpy as np

from elmo_keras.file_io.files import atomic_file, remove_stale
from elmo_keras.memory import NotEnoughMemory, check_fits
from elmo_keras.training.common.checkpoints import kept_checkpoints

SUFFIX = ".npz"
_LEFTOVER = re.compile(r"^\.(ckpt-\d+\.npz)\.")  # a temporary name of `files.atomic_file`


def checkpoint_path(prefix):
    """The file of a checkpoint prefix (`.../ckpt-N` -> `.../ckpt-N.npz`)."""
    return pathlib.Path(f"{prefix}{SUFFIX}")


def write_arrays(path, arrays):
    """Writes `arrays` (a dict of NumPy arrays, in order) to `path` atomically."""
    names = list(arrays)
    with atomic_file(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, __names__=np.frombuffer(json.dumps(names).encode(), np.uint8), **arrays)


_NAMES_LIMIT = 2**24  # bytes of `__names__`: a few hundred names take a few KB


def _declaration(archive, name):
    """`(shape, dtype)` as the `.npy` header of member `name` declares it: read without
    decompressing its data."""
    with archive.open(f"{name}.npy") as member:
        version = np.lib.format.read_magic(member)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(member)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(member)
        else:
            raise ValueError(f"{name} has .npy format version {version}, not 1.0 or 2.0")
    if dtype.hasobject:
        raise ValueError(f"{name} holds Python objects")
    return tuple(shape), dtype


class _Misfit(ValueError):
    """A member declared with another shape than the run's."""


def _checked(archive, name, expected, limit=None):
    """Member `name` read after its declared shape is checked against `expected` (None: any)
    and its declared size against `limit` bytes (None: any)."""
    shape, dtype = _declaration(archive, name)
    if expected is not None and shape != tuple(expected):
        raise _Misfit(f"{name} is declared {list(shape)}, expected {list(expected)} (not read)")
    size = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    if limit is not None and size > limit:
        raise ValueError(f"{name} is declared {size:,} bytes, more than {limit:,}; not read")
    with archive.open(f"{name}.npy") as member:
        return np.lib.format.read_array(member, allow_pickle=False)


def read_arrays(path, shapes=None):
    """The arrays of a checkpoint file, a dict in the order they were written.

    Each member's declared shape is read from its header and checked before its data is
    decompressed, so a member that inflates to gigabytes is refused unread.

    Args:
        path: the `.npz` file.
        shapes: dict {name: shape} of the arrays the run needs, or None. Given, only those are
            read (a name the file lacks is left out, for the caller to name) and each must be
            declared with its shape; None reads every array, refusing a file whose declared
            sizes add up to more memory than is available.

    Raises:
        ValueError: the file is damaged or is not a checkpoint (one line naming it).
    """
    path = pathlib.Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            raw = _checked(archive, "__names__", None, _NAMES_LIMIT)
            names = json.loads(bytes(raw).decode())
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ValueError("__names__ is not a list of names")
            members = set(archive.namelist())
            if shapes is None:
                declared = 0
                for name in names:
                    shape, dtype = _declaration(archive, name)
                    declared += int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
                check_fits(declared, "its arrays", f"checkpoint {path}")
                wanted = names
            else:
                wanted = [n for n in names if n in shapes and f"{n}.npy" in members]
            return {
                name: _checked(archive, name, None if shapes is None else shapes[name])
                for name in wanted
            }
    except NotEnoughMemory:
        raise
    except _Misfit as error:
        raise ValueError(f"{path} does not fit this run: {error}") from None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as error:
        raise ValueError(f"{path} is not a readable checkpoint ({error})") from None


def _key(group, index, variable):
    """A variable's name in a checkpoint: its group, its place, and for the model's its own
    name (`kernel`).

    Not its path: Keras numbers the names of a second model built in the same process
    (`language_model_1/...`, and the optimizer's slots after them), and a checkpoint must load
    into any model of the run.
    """
    return f"{group}/{index:04d}" + (f"/{variable.name}" if group == "model" else "")


def variable_shapes(group, variables):
    """`{"<group>/<index>/<name>": shape}` of Keras variables: what `read_arrays` expects."""
    return {_key(group, i, v): tuple(v.shape) for i, v in enumerate(variables)}


def variable_arrays(group, variables, to_numpy):
    """`{"<group>/<index>/<name>": array}` for Keras variables (the checkpoint's names)."""
    return {_key(group, i, v): to_numpy(v.value) for i, v in enumerate(variables)}


def assign_variables(group, variables, saved, path):
    """Assigns the arrays of `group` in a checkpoint's `saved` arrays to `variables`; every
    variable must be there with its shape (else one `ValueError` naming it and the file)."""
    for i, v in enumerate(variables):
        name = _key(group, i, v)
        array = saved.get(name)
        if array is None or tuple(array.shape) != tuple(v.shape):
            got = "is missing" if array is None else f"has shape {list(array.shape)}"
            raise ValueError(
                f"{path} does not fit this run: {name} {got}, expected {list(v.shape)}"
            )
    for i, v in enumerate(variables):
        v.assign(saved[_key(group, i, v)])


class ArrayCheckpointManager:
    """Saves numbered `.npz` checkpoints in `directory`, keeping the newest `keep`.

    Args:
        directory: path. Created if missing.
        keep: int. Checkpoints kept; older ones are deleted after each save.
    """

    def __init__(self, directory, keep):
        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.keep = int(keep)
        for entry in self.directory.iterdir():
            match = _LEFTOVER.match(entry.name)
            if match:
                remove_stale(self.directory / match.group(1))

    @property
    def latest_checkpoint(self):
        """The prefix of the newest checkpoint file, or None."""
        kept = [p for p in kept_checkpoints(self.directory) if checkpoint_path(p).is_file()]
        return kept[0] if kept else None

    def save(self, step, arrays):
        """Writes `ckpt-<step>.npz` and deletes the checkpoints beyond `keep`; returns the
        prefix."""
        prefix = self.directory / f"ckpt-{int(step)}"
        remove_stale(checkpoint_path(prefix))
        write_arrays(checkpoint_path(prefix), arrays)
        kept = [p for p in kept_checkpoints(self.directory) if checkpoint_path(p).is_file()]
        for old in kept[self.keep :]:
            checkpoint_path(old).unlink(missing_ok=True)
        return str(prefix)


def read_model(prefix, config, vocabulary_size, seed):
    """The `LanguageModel` of the checkpoint `prefix` (`ckpt-N.npz`; weights only), on any
    Keras backend."""
    from elmo_keras.training.common.model_setup import make_language_model  # noqa: PLC0415

    model = make_language_model(config, vocabulary_size, seed)
    path = checkpoint_path(prefix)
    arrays = read_arrays(path, variable_shapes("model", model.variables))
    assign_variables("model", model.variables, arrays, path)
    return model
