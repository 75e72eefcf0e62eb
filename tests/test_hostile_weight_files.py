"""Issue 39, points 3, 4 and 8: a weight file is read only from itself, its declarations are
checked before any data is read, and float64 weights are checked as the float32 the model holds.

Each hostile file is the AllenNLP fixture's weight file with one dataset replaced, read with
the fixture's own shapes (`read_weight_arrays`, no model built).
"""

import shutil

import h5py
import numpy as np
import pytest

from elmo_keras.weights import load_softmax, read_weight_arrays, save_softmax

TARGET = "CNN_proj/b_proj"  # (16,) float32 in the fixture


@pytest.fixture
def weights(fixtures_dir, tmp_path):
    """A copy of the fixture's weight file and {dataset: shape} of the original."""
    path = tmp_path / "lm_weights.hdf5"
    shutil.copy(fixtures_dir / "allennlp" / "lm_weights.hdf5", path)
    shapes = {}
    with h5py.File(path, "r") as handle:
        handle.visititems(
            lambda name, item: (
                shapes.__setitem__(name, item.shape) if isinstance(item, h5py.Dataset) else None
            )
        )
    return path, shapes


def _replace(path, make):
    """Replaces `TARGET` in the file at `path` with what `make(handle, name)` puts there."""
    with h5py.File(path, "r+") as handle:
        del handle[TARGET]
        make(handle, TARGET)


def _refused(path, shapes, *fragments):
    with pytest.raises(ValueError) as error:
        read_weight_arrays(path, shapes)
    message = str(error.value)
    assert "\n" not in message and str(path) in message and TARGET in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_external_raw_storage_is_refused_unread(weights, tmp_path, monkeypatch):
    """The bias read another file's bytes (the process's environment file) and `embed` exited
    0; a relative path resolved against the working folder."""
    path, shapes = weights
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.arange(16, dtype=np.float32).tobytes())
    monkeypatch.chdir(tmp_path)
    _replace(
        path,
        lambda h, name: h.create_dataset(name, (16,), "f4", external=[("secret.bin", 0, 64)]),
    )
    _refused(path, shapes, "external files", "read only from itself")


def test_external_links_are_refused_before_they_are_followed(weights, tmp_path):
    path, shapes = weights
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as handle:
        handle["data"] = np.ones(16, np.float32)
        handle.create_group("group")["b_proj"] = np.ones(16, np.float32)
    _replace(path, lambda h, name: h.__setitem__(name, h5py.ExternalLink(str(other), "/data")))
    _refused(path, shapes, "external link", str(other))
    # A soft link inside the file that leads through an external link.
    _replace(path, lambda h, name: h.__setitem__(name, h5py.SoftLink("/elsewhere/data")))
    with h5py.File(path, "r+") as handle:
        handle["elsewhere"] = h5py.ExternalLink(str(other), "/")
    _refused(path, shapes, "external link")


def test_a_soft_link_loop_is_refused(weights):
    path, shapes = weights
    _replace(path, lambda h, name: h.__setitem__(name, h5py.SoftLink("/loop_a")))
    with h5py.File(path, "r+") as handle:
        handle["loop_a"] = h5py.SoftLink("/loop_b")
        handle["loop_b"] = h5py.SoftLink("/loop_a")
    _refused(path, shapes, "links")


def test_virtual_datasets_are_refused(weights, tmp_path):
    path, shapes = weights
    other = tmp_path / "source.h5"
    with h5py.File(other, "w") as handle:
        handle["data"] = np.ones(16, np.float32)

    def virtual(handle, name):
        layout = h5py.VirtualLayout((16,), "f4")
        layout[:] = h5py.VirtualSource(str(other), "data", shape=(16,))
        handle.create_virtual_dataset(name, layout)

    _replace(path, virtual)
    _refused(path, shapes, "virtual dataset")


def test_a_huge_declared_shape_is_one_line_before_any_read(weights):
    """64 TiB declared gave a 36-line `_ArrayMemoryError`; 2 GiB took 2.1 GB and 8 s."""
    path, shapes = weights
    _replace(
        path,
        lambda h, name: h.create_dataset(
            name, (2**23, 2**21), "f4", chunks=(64, 64), compression="gzip"
        ),
    )
    _refused(path, shapes, "has shape (8388608, 2097152), but the options need (16,)")


def test_a_chunk_larger_than_its_dataset_is_refused_unread(weights):
    """A dataset of the right shape whose one compressed chunk inflates to 16 MiB (the probe's
    1.5 MB file took 1.09 GB)."""
    path, shapes = weights

    def bomb(handle, name):
        dataset = handle.create_dataset(
            name, (16,), "f4", maxshape=(None,), chunks=(2**22,), compression="gzip"
        )
        dataset[...] = np.ones(16, np.float32)

    _replace(path, bomb)
    _refused(path, shapes, "chunks of 16,777,216 bytes", "64 bytes")


def test_the_declared_type_is_checked_before_the_data(weights):
    path, shapes = weights
    _replace(path, lambda h, name: h.create_dataset(name, data=np.ones(16, "S4")))
    _refused(path, shapes, "floating-point", "|S4")
    if np.dtype(np.longdouble).itemsize > 8:
        _replace(path, lambda h, name: h.create_dataset(name, data=np.ones(16, np.longdouble)))
        _refused(path, shapes, "floating-point")


def test_float64_beyond_float32_range_is_refused(weights):
    """float64 weights passed the NaN/inf check and overflowed to inf in float32."""
    path, shapes = weights
    values = np.ones(16, np.float64)
    values[[2, 5]] = 1e300
    _replace(path, lambda h, name: h.create_dataset(name, data=values))
    _refused(path, shapes, "holds 2 NaN or infinite values as float32")
    values[[2, 5]] = 3.0e38  # within float32's range: accepted
    _replace(path, lambda h, name: h.create_dataset(name, data=values))
    assert read_weight_arrays(path, shapes)[TARGET].dtype == np.float64


def test_a_checksum_attribute_that_is_not_one_integer_is_named(weights):
    """A `crc32` attribute holding an array was an unclear line naming no file."""
    path, shapes = weights
    _replace(path, lambda h, name: h.create_dataset(name, data=np.ones(16, np.float32)))
    with h5py.File(path, "r+") as handle:
        handle[TARGET].attrs["crc32"] = np.array([1, 2], np.int64)
    _refused(path, shapes, "crc32 attribute of shape (2,)", "expected one integer")


def test_a_softmax_of_another_declared_shape_is_refused_unread(tmp_path):
    path = tmp_path / "softmax.hdf5"
    save_softmax(path, np.ones((5, 4), np.float32), np.zeros(5, np.float32))
    kernel, _ = load_softmax(path, shape=(5, 4))
    np.testing.assert_array_equal(kernel, 1.0)
    with h5py.File(path, "r+") as handle:
        del handle["softmax/W"]
        handle.create_dataset("softmax/W", (2**30, 2**15), "f4", chunks=(8, 8))
    with pytest.raises(ValueError) as error:
        load_softmax(path, shape=(5, 4), need="vocab.txt and options.json need")
    message = str(error.value)
    assert "\n" not in message and str(path) in message
    assert "'softmax/W' has shape (1073741824, 32768), but vocab.txt and options.json need" in (
        message
    )
