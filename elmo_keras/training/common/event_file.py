"""TensorBoard scalars written without TensorFlow or the tensorboard package.

An event file is a sequence of records (`uint64` length, masked CRC-32C of the length, the bytes,
masked CRC-32C of the bytes), each an `Event` protocol buffer. The first record names the file
version; every scalar is an `Event` with a `Summary` holding one value in the format of
`tf.summary.scalar` (a float32 scalar tensor, plugin `scalars`), so TensorBoard and
`tf.compat.v1.train.summary_iterator` read the files as they read TensorFlow's. Both trainers
write their logs with it (the JAX trainer runs where TensorFlow is not installed).
"""

import contextlib
import os
import pathlib
import socket
import struct
import time


def _crc32c_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli) of `data`, bytes."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value):
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _field(number, wire_type, payload):
    """One protocol-buffer field: its key, then the payload (length-prefixed for type 2)."""
    key = _varint((number << 3) | wire_type)
    if wire_type == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _scalar_value(tag, value):
    """A `Summary.Value`: the tag, the `scalars` plugin metadata, a float32 scalar tensor."""
    plugin = _field(1, 2, b"scalars")  # PluginData.plugin_name
    metadata = _field(1, 2, plugin)  # SummaryMetadata.plugin_data
    tensor = (
        _field(1, 0, _varint(1))  # TensorProto.dtype = DT_FLOAT
        + _field(2, 2, b"")  # TensorProto.tensor_shape: a scalar
        + _field(5, 2, struct.pack("<f", value))  # TensorProto.float_val (packed)
    )
    return _field(1, 2, tag.encode("utf-8")) + _field(9, 2, metadata) + _field(8, 2, tensor)


def _event(wall_time, step=None, summary=None, file_version=None):
    out = _field(1, 1, struct.pack("<d", wall_time))  # Event.wall_time
    if step is not None:
        out += _field(2, 0, _varint(int(step) & 0xFFFFFFFFFFFFFFFF))  # Event.step
    if file_version is not None:
        out += _field(3, 2, file_version.encode("ascii"))  # Event.file_version
    if summary is not None:
        out += _field(5, 2, summary)  # Event.summary
    return out


def _record(data):
    length = struct.pack("<Q", len(data))
    return (
        length
        + struct.pack("<I", _masked_crc(length))
        + data
        + struct.pack("<I", _masked_crc(data))
    )


class EventFileError(OSError):
    """The event file could not be written (a full disk): the message names the file."""


class EventFileWriter:
    """Appends TensorBoard scalars to a new event file in `log_dir`.

    A failed write (a full disk, a permission error) raises `EventFileError`, one line naming
    the file, and closes the file: the writer writes nothing more.

    Args:
        log_dir: path. Created if missing; the file is
            `events.out.tfevents.<time>.<host>.<pid>.<n>.v2`, as TensorFlow names its own.

    Example:
    >>> writer = EventFileWriter("runs/tiny/logs")  # doctest: +SKIP
    >>> writer.scalars({"loss": 3.2}, step=50)  # doctest: +SKIP
    >>> writer.close()  # doctest: +SKIP
    """

    _count = 0

    def __init__(self, log_dir):
        self.log_dir = pathlib.Path(log_dir)
        EventFileWriter._count += 1
        name = (
            f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}."
            f"{os.getpid()}.{EventFileWriter._count}.v2"
        )
        self.path = self.log_dir / name
        self._file = None
        with self._writing():
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab")  # noqa: SIM115 (closed by `close`)
            self._file.write(_record(_event(time.time(), file_version="brain.Event:2")))
            self._file.flush()

    @contextlib.contextmanager
    def _writing(self):
        """A failed write inside is an `EventFileError` naming the file (`_failed`)."""
        try:
            yield
        except OSError as error:
            raise self._failed(error) from None

    def _failed(self, error):
        """Closes the file (what the buffer holds is dropped); the error to raise."""
        if self._file is not None:
            try:
                self._file.close()  # flushes first: fails again, but the file is closed
            except OSError:
                pass
        from elmo_keras.training.common.checkpoints import one_line  # noqa: PLC0415

        return EventFileError(
            f"could not write the TensorBoard log {self.path} ({one_line(error)})"
        )

    def scalars(self, values, step):
        """Writes one event per `name: value` of `values` at `step`, then flushes."""
        now = time.time()
        with self._writing():
            for name, value in values.items():
                summary = _field(1, 2, _scalar_value(name, float(value)))
                self._file.write(_record(_event(now, step=step, summary=summary)))
            self._file.flush()

    def flush(self):
        with self._writing():
            self._file.flush()

    def close(self):
        if not self._file.closed:
            with self._writing():
                self._file.close()

    def abandon(self):
        """Closes the file without reporting a failure (a run that is failing already)."""
        if not self._file.closed:
            self._failed(OSError())
