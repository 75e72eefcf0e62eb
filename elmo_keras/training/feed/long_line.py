"""A line longer than `LONG_LINE_BYTES`, never held whole: `LongLine` (its file and offset, read
a piece at a time, forward and backward), and `scan_lines`, which finds the lines of a file and
marks the long ones without holding them.

A line ends at `\\n`, `\\r\\n` or a lone `\\r`, as in Python's text mode (`LINE_END`).
"""

import os
import re

from elmo_keras.backend import keras_backend
from elmo_keras.training.feed.file_changes import ChangedFileError, signature
from elmo_keras.training.feed.streamed_sentence import StreamedSentence

# A line longer than this is never held whole: its tokens are streamed from its file, a piece
# at a time, forward and backward (`LongLine`), so memory does not grow with a line's length
# times the batch (each row of a batch may hold a line). Shorter lines are read and tokenized
# whole. Both give the same tokens: this bound changes memory, never the batches.
LONG_LINE_BYTES = 2**18
# Bytes of a long line read and tokenized at a time (cut at a space or a tab).
_PIECE_BYTES = 2**16
# Bytes read at a time by the line scanner.
_SCAN_BYTES = 2**16
# Where a line ends: `\n`, `\r\n` or a lone `\r` (Python's text mode).
LINE_END = re.compile(rb"\r\n?|\n")


def scan_lines(f):
    """`(offset, bytes)` of each line of the binary file `f` that holds more than ASCII white
    space, in order; `(offset, None)` for a line longer than `LONG_LINE_BYTES`, which is not
    held (the scan skips to its end). A line ends at `\\n`, `\\r\\n` or a lone `\\r`, as in
    Python's text mode; the line's bytes exclude its end."""
    buffer, base, skipping = b"", 0, False  # `base`: the file offset of `buffer[0]`
    while True:
        block = f.read(_SCAN_BYTES)
        buffer += block
        start = 0
        for end in LINE_END.finditer(buffer):
            if block and end.end() == len(buffer) and end.group() == b"\r":
                break  # perhaps the first half of a CR LF pair: decided with the next block
            if skipping:
                skipping = False  # the end of a long line
            elif end.start() - start > LONG_LINE_BYTES:
                yield base + start, None
            elif buffer[start : end.start()].strip():
                yield base + start, buffer[start : end.start()]
            start = end.end()
        buffer, base = buffer[start:], base + start
        if not block:
            if not skipping and len(buffer) > LONG_LINE_BYTES:
                yield base, None
            elif buffer.strip() and not skipping:
                yield base, buffer
            return
        if not skipping and len(buffer) > LONG_LINE_BYTES:
            yield base, None
            skipping = True
        if skipping:  # keep a final CR: it may end the long line with the next block's LF
            kept = buffer[-1:] if buffer.endswith(b"\r") else b""
            buffer, base = kept, base + len(buffer) - len(kept)


class LongLine:
    """A line longer than `LONG_LINE_BYTES`, by its file and byte offset; never held whole.

    `sentence(mode)` gives a `StreamedSentence` over its tokens: read from the file a piece
    (`_PIECE_BYTES`, cut at a space or a tab) at a time, forward from its start and backward
    from its end, and tokenized piece by piece with `tokenize_lines` (tokens never cross white
    space, so the pieces give the tokens of the whole line). tensorflow-text ignores a line
    from its first NUL character on: on the TensorFlow backend the line ends there too.
    """

    def __init__(self, path, offset, signature):
        self.path = path
        self.offset = offset
        self.signature = signature  # of the file when the line was found (`signature`)

    def _open(self):
        """The file, if it is still the one the line was found in; else `ChangedFileError`."""
        f = open(self.path, "rb")  # noqa: SIM115 (the callers close it)
        if signature(os.fstat(f.fileno())) != self.signature:
            f.close()
            raise ChangedFileError(
                f"The training file {self.path} changed while the run read it: the line at "
                f"byte {self.offset} is no longer there to read. Keep the text unchanged "
                "during a run (write a new corpus elsewhere)."
            )
        return f

    def sentence(self, tokenization_mode):
        return StreamedSentence(self, tokenization_mode)

    def end(self):
        """The offset where the line's text ends (its line end, the file's end, or on the
        TensorFlow backend its first NUL byte), found by one pass over its bytes."""
        stop = re.compile(rb"[\r\n\0]" if keras_backend() == "tensorflow" else rb"[\r\n]")
        with self._open() as f:
            f.seek(self.offset)
            position = self.offset
            while block := f.read(_SCAN_BYTES):
                found = stop.search(block)
                if found is not None:
                    return position + found.start()
                position += len(block)
        return position

    def pieces(self, start, end, backward=False):
        """Decoded pieces of the bytes `[start, end)`, each cut at a space or a tab, in file
        order or (`backward`) from the end."""
        with self._open() as f:
            rest = b""
            position = start if not backward else end
            while True:
                size = min(_PIECE_BYTES, (end - position) if not backward else (position - start))
                if backward:
                    position -= size
                    f.seek(position)
                    buffer = f.read(size) + rest
                else:
                    f.seek(position)
                    buffer = rest + f.read(size)
                    position += size
                last = size == 0 or position == (start if backward else end)
                if last:
                    if buffer:
                        yield buffer.decode("utf-8", errors="replace")
                    return
                if backward:
                    cut = min(
                        (i for i in (buffer.find(b" "), buffer.find(b"\t")) if i >= 0), default=-1
                    )
                    if cut >= 0:
                        rest, piece = buffer[: cut + 1], buffer[cut + 1 :]
                        yield piece.decode("utf-8", errors="replace")
                    else:
                        rest = buffer
                else:
                    cut = max(buffer.rfind(b" "), buffer.rfind(b"\t"))
                    if cut >= 0:
                        piece, rest = buffer[: cut + 1], buffer[cut + 1 :]
                        yield piece.decode("utf-8", errors="replace")
                    else:
                        rest = buffer
