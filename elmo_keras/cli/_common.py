"""Helpers shared by the subcommands: input reading, a progress bar."""

import pathlib
import sys
import time

from elmo_keras.cli import CommandError


def split_lines(text):
    """Lines as `embed` numbers them: only "\n" (with an optional "\r" before it) ends a line.

    `str.splitlines()` also breaks at \v, \f, \x1c-\x1e, NEL and U+2028/U+2029, which would
    shift every later line number; here those stay inside their line (as whitespace between
    tokens). A final "\n" does not start an extra line.
    """
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_sentences(path):
    """One whitespace-tokenized sentence per line; an empty line is an empty sentence.

    A leading UTF-8 byte-order mark is dropped; line `i` (0-based) is sentence `i`.
    """
    path = pathlib.Path(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            return [line.split() for line in split_lines(handle.read())]
    except FileNotFoundError:
        raise CommandError(f"input file not found: {path}") from None
    except IsADirectoryError:
        raise CommandError(f"input is a directory, not a file: {path}") from None
    except UnicodeDecodeError as error:
        raise CommandError(
            f"input file {path} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None


class Progress:
    """A one-line progress bar on a terminal (stderr); silent when stderr is not a terminal."""

    def __init__(self, total, unit="sentences", stream=None):
        self.total = total
        self.unit = unit
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() and total > 0
        self.start = time.monotonic()

    def __call__(self, done):
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * done / self.total)
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r[{bar}] {done}/{self.total} {self.unit} {rate:.1f}/s ETA {eta:.0f}s")
        if done >= self.total:
            self.stream.write("\n")
        self.stream.flush()
