"""HDF5 files written atomically: `write_datasets`, with a CRC-32 checksum per dataset if asked.

The file appears complete or not at all (`elmo_keras.file_io.files.atomic_file`). h5py writes
through a file object that keeps the first I/O error instead of failing the write back into HDF5, so
that a full disk is one `OSError` naming the file; a signal is acted on between two datasets
(`elmo_keras.file_io.files.deferred_signals`). h5py is imported only when a file is written.
"""

import os
import zlib

from elmo_keras.file_io.files import atomic_file, deferred_signals

CHECKSUM = "crc32"  # the attribute `write_datasets(..., checksum=True)` gives each dataset


def crc32(array):
    """The CRC-32 of a NumPy array's bytes in C order, as `write_datasets` stores it."""
    return zlib.crc32(array.tobytes(order="C"))


class _Sink:
    """A file for h5py's `fileobj` driver that never fails a write back into HDF5, which
    handles that badly (every later call fails; closing can crash the interpreter): the first
    `OSError` (full disk, quota, I/O error) is kept in `error`, later writes are dropped."""

    def __init__(self, path):
        self._file = open(path, "r+b", buffering=0)  # noqa: SIM115 (closed by `close`)
        self.error = None

    def write(self, data):
        view = memoryview(data).cast("B")
        if self.error is None:
            try:
                while view:  # a raw write may be short
                    view = view[self._file.write(view) :]
            except OSError as error:
                self.error = error
        return len(data)

    def truncate(self, size=None):
        if self.error is None:
            try:
                return self._file.truncate(size)
            except OSError as error:
                self.error = error
        return size

    def read(self, size=-1):
        return self._file.read(size)

    def seek(self, offset, whence=0):
        return self._file.seek(offset, whence)

    def tell(self):
        return self._file.tell()

    def flush(self):
        pass

    def close(self):
        if self.error is None:
            try:
                os.fsync(self._file.fileno())  # a full disk may only show here
            except OSError as error:
                self.error = error
        self._file.close()


def write_datasets(path, datasets, overwrite=True, make_parents=True, checksum=False):
    """Writes `(name, array)` pairs as an hdf5 file, atomically, in order.

    An I/O error while writing (a full disk, a quota, a failing device) stops the writing and
    raises one `OSError` naming `path`; the temporary file is removed and an existing `path`
    is left as it was. A signal is only acted on between two datasets.

    Args:
        path: str or path-like. The hdf5 file.
        datasets: iterable of `(name, array)`. May be a generator.
        overwrite: bool. Replace an existing `path`. Defaults to `True`.
        make_parents: bool. Create missing parent folders. Defaults to `True`.
        checksum: bool. Give each dataset a `CHECKSUM` attribute, the CRC-32 of its bytes
            (`crc32`), for readers to verify: hdf5 itself checks nothing in its classic format,
            which every reader (bilm-tf's too) understands. Defaults to `False`.
    """
    import h5py  # noqa: PLC0415 (h5py is only needed for this writer)

    with atomic_file(path, overwrite=overwrite, make_parents=make_parents) as tmp:
        sink = _Sink(tmp)
        try:
            with deferred_signals():
                handle = h5py.File(sink, "w")
            try:
                for name, array in datasets:
                    with deferred_signals():
                        dataset = handle.create_dataset(name, data=array)
                        if checksum:
                            dataset.attrs[CHECKSUM] = crc32(dataset[...])
                    if sink.error is not None:
                        break
            finally:
                with deferred_signals():
                    handle.close()
        except (OSError, RuntimeError):
            if sink.error is None:
                raise
        finally:
            sink.close()
        if sink.error is not None:
            error = sink.error
            failure = OSError(
                f"could not write {path}: {error.strerror or error}; nothing was written"
            )
            failure.errno = error.errno
            raise failure from None
