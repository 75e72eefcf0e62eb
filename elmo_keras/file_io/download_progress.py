"""The progress line of a download (`elmo_keras.file_io.download.cached_path`) on a terminal.

Standard library only.
"""

import sys
import time


class DownloadProgress:
    """Bytes received, on one stderr line; silent unless enabled and stderr is a terminal.

    Args:
        name: str. The file's name, at the start of the line.
        total: int or None. The full size, when known (then a bar is drawn).
        done: int. The bytes already there (a resumed download).
        enabled: bool. Show anything at all.

    Example:
    >>> bar = DownloadProgress("lm_weights.hdf5", 100, 0, enabled=False)
    >>> bar.update(100); bar.close()
    """

    def __init__(self, name, total, done, enabled):
        self.enabled = bool(enabled) and sys.stderr.isatty()
        self.name, self.total, self.first = name, total, done
        self.start = self.last = time.monotonic()
        self.shown = False

    def update(self, done):
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and done != self.total):
            return
        self.last, self.shown = now, True
        rate = (done - self.first) / max(now - self.start, 1e-9) / 1e6
        text = f"{done / 1e6:.1f} MB"
        if self.total:
            filled = int(30 * done / self.total)
            text = f"[{'#' * filled}{'-' * (30 - filled)}] {text} of {self.total / 1e6:.1f} MB"
        sys.stderr.write(f"\r{self.name}: {text}, {rate:.1f} MB/s")
        sys.stderr.flush()

    def close(self):
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
