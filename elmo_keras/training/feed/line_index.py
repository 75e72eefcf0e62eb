"""The whole-text shuffle's index: `LineIndex`, every text line of the corpus by number (its file
and byte offset, about 8 bytes a line), read back in any order; and its change checks: a file
that changed since it was indexed is seen (by `elmo_keras.training.feed.file_changes.signature`)
and refused with `ChangedFileError`, never read at stale offsets.
"""

import array
import collections
import os

import numpy as np

from elmo_keras.training.feed import long_line
from elmo_keras.training.feed.file_changes import ChangedFileError, changed, signature
from elmo_keras.training.feed.long_line import LINE_END, LongLine

# Files kept open at once while reading lines by their offsets (the least recently used closes).
_OPEN_FILES = 64
# Line numbers looked up per NumPy call (bounds the Python objects alive at once).
_LINES_PER_LOOKUP = 65_536
# Bytes read at a time to find the end of a line.
_READ_BYTES = 4096


def _line_offsets(path):
    """The byte offsets of the lines of `path` that hold more than white space (int64). A line
    ends at `\\n`, `\\r\\n` or a lone `\\r`, as in Python's text mode. (A long line is held as
    bytes here for a moment, once per index: this loop is several times faster than
    `long_line.scan_lines` on ordinary text.)"""
    offsets = array.array("q")  # 8 bytes a line while it grows, too
    position = 0
    with open(path, "rb") as f:
        for piece in f:  # up to and with a newline byte: a CR LF pair is never split
            if b"\r" not in piece:
                if piece.strip():
                    offsets.append(position)
            else:
                start = 0
                for end in LINE_END.finditer(piece):
                    if piece[start : end.start()].strip():
                        offsets.append(position + start)
                    start = end.end()
                if piece[start:].strip():
                    offsets.append(position + start)
            position += len(piece)
    return np.frombuffer(offsets, dtype=np.int64) if offsets else np.zeros(0, np.int64)


def _read_line(f, offset):
    """The stripped text of the line at `offset` of the unbuffered binary file `f`; `None`
    when `offset` is at or past the end of the file (it was cut short); `LongLine` (the class)
    for a line longer than `long_line.LONG_LINE_BYTES`, which is not read whole."""
    f.seek(offset)
    blocks = []
    size = 0
    while True:
        block = f.read(_READ_BYTES)
        end = LINE_END.search(block)
        if end is not None:
            blocks.append(block[: end.start()])
            size += end.start()
            break
        blocks.append(block)
        size += len(block)
        if len(block) < _READ_BYTES:
            break
        if size > long_line.LONG_LINE_BYTES:
            return LongLine
    if size > long_line.LONG_LINE_BYTES:
        return LongLine
    if not blocks[0]:
        return None
    return b"".join(blocks).decode("utf-8", errors="replace").strip()


class LineIndex:
    """Every text line of `files` by number: its file and byte offset, read back one by one."""

    def __init__(self, files):
        self.files = files
        # Each file's signature, taken before its offsets: a change during the pass shows too.
        self.signatures = [signature(os.stat(path)) for path in files]
        self.offsets = [_line_offsets(path) for path in files]
        counts = [len(o) for o in self.offsets]
        self.ends = np.cumsum(counts)  # one past each file's last line number
        self.starts = self.ends - counts

    def __len__(self):
        return int(self.ends[-1]) if len(self.ends) else 0

    def changes(self):
        """`(path, what changed)` of the first file that is no longer as it was indexed, or
        `None`."""
        for path, before in zip(self.files, self.signatures, strict=True):
            what = changed(path, before)
            if what is not None:
                return path, what
        return None

    def check_unchanged(self):
        """Raises `ChangedFileError` (one line naming the file) if a file changed."""
        change = self.changes()
        if change is not None:
            path, what = change
            raise ChangedFileError(
                f"The training file {path} changed while the run read it ({what}): its lines' "
                "byte offsets no longer hold. Keep the text unchanged during a run (write a "
                "new corpus elsewhere)."
            )

    def permutation(self, rng):
        """A random order of the line numbers (4 bytes a line below 2**32 lines)."""
        order = np.arange(len(self), dtype=np.uint32 if len(self) < 2**32 else np.int64)
        rng.shuffle(order)
        return order

    def lines(self, order):
        """The lines numbered `order`, in that order, stripped (an empty string for a line of
        Unicode white space only, which tokenizes to nothing)."""
        handles = collections.OrderedDict()
        try:
            for chunk in range(0, len(order), _LINES_PER_LOOKUP):
                self.check_unchanged()
                numbers = order[chunk : chunk + _LINES_PER_LOOKUP]
                file_of = np.searchsorted(self.ends, numbers, side="right")
                within = numbers - self.starts[file_of]  # the line's number in its file
                for index, line in zip(file_of.tolist(), within.tolist(), strict=True):
                    f = handles.pop(index, None)
                    if f is None:  # closed when evicted or at the end
                        f = open(self.files[index], "rb", buffering=0)  # noqa: SIM115
                        handles[index] = f
                        if signature(os.fstat(f.fileno())) != self.signatures[index]:
                            self.check_unchanged()
                    handles[index] = f
                    if len(handles) > _OPEN_FILES:
                        handles.popitem(last=False)[1].close()
                    offset = int(self.offsets[index][line])
                    text = _read_line(f, offset)
                    if text is LongLine:
                        text = LongLine(self.files[index], offset, self.signatures[index])
                    elif text is None:  # past the end: cut short since the last check
                        self.check_unchanged()
                        raise ChangedFileError(
                            f"The training file {self.files[index]} was cut short while the "
                            "run read it."
                        )
                    yield text
        finally:
            for f in handles.values():
                f.close()
