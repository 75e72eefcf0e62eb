"""Helpers shared by the subcommands: input reading, files named by flags, a progress bar."""

import contextlib
import functools
import os
import pathlib
import stat
import sys
import time

from elmo_keras.cli import CommandError
from elmo_keras.text.text_files import decode_line
from elmo_keras.text.tokenization import (
    DEFAULT_TOKENIZATION_MODE,
    TOKENIZATION_MODES,
    tokenize_python,
)
from elmo_keras.validation import file_kind, file_problem

STDIN = "-"  # `--input -`: standard input (a file named "-" is `./-`)
MAX_LINE_BYTES = 16 * 2**20  # the longest input line (a sentence of millions of tokens)


def iter_lines(path):
    """Yields the lines of a UTF-8 text file, lazily, with the rule of `text_files.split_lines`.

    A leading UTF-8 byte-order mark is dropped. Only b"\n" ends a line (UTF-8 never uses that
    byte inside a character, so each line decodes on its own), one "\r" before it is dropped,
    and a final "\n" does not start an extra line. `path` `"-"` reads standard input (left
    open). A missing file, a folder or a line longer than `MAX_LINE_BYTES` (memory stays bounded
    on endless input without line ends) are a `CommandError`; bytes that are not UTF-8 are a
    `ValueError` naming the line and the byte (`text_files.decode_line`, the rule of every
    command).
    """
    if str(path) == STDIN:
        name, handle = "standard input", contextlib.nullcontext(sys.stdin.buffer)
    else:
        path = pathlib.Path(path)
        name = f"input file {path}"
        try:
            handle = open(path, "rb")  # noqa: SIM115 (closed below, also when the caller stops)
        except FileNotFoundError:
            raise CommandError(f"input file not found: {path}") from None
        except IsADirectoryError:
            raise CommandError(f"input is a directory, not a file: {path}") from None
    with handle as handle:
        offset = 0
        read = functools.partial(handle.readline, MAX_LINE_BYTES + 1)
        for number, raw in enumerate(iter(read, b"")):
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                raise CommandError(
                    f"line {number + 1} of {name} is longer than {MAX_LINE_BYTES} bytes "
                    "(a file without line ends?)"
                )
            start = 3 if number == 0 and raw.startswith(b"\xef\xbb\xbf") else 0
            if start == len(raw):
                break  # a file that is only a byte-order mark has no line
            line = decode_line(raw[start:], name, number + 1, offset + start)
            offset += len(raw)
            yield line.removesuffix("\n").removesuffix("\r")


_SHARED_TOKENS = 100_000  # distinct token strings shared between lines, at most


def iter_sentences(path, mode=DEFAULT_TOKENIZATION_MODE):
    """Yields the tokens of each line of `path` (`iter_lines`), lazily, split by
    `tokenize_python(line, mode)`; an empty line is an empty sentence, line `i` (0-based) is
    sentence `i`.

    Repeated tokens share one `str` (a bounded table, cleared when full): a chunk of 10,000
    lines of WikiText held by `embed` takes 8 MB instead of 34.
    """
    shared = {}
    for line in iter_lines(path):
        if len(shared) > _SHARED_TOKENS:
            shared.clear()
        yield [shared.setdefault(token, token) for token in tokenize_python(line, mode)]


def count_tokens(path, mode=DEFAULT_TOKENIZATION_MODE):
    """`(lines, tokens)` of `path`, read as `iter_sentences` reads it, holding one line at a
    time: a cheap first pass (it also finds a file that is not UTF-8 before any work)."""
    lines = tokens = 0
    for sentence in iter_sentences(path, mode):
        lines += 1
        tokens += len(sentence)
    return lines, tokens


def input_source(path):
    """How `embed` reads `path`, found without reading it: `"file"` for a regular file,
    `"stream"` for standard input (`"-"`) or a pipe (`/dev/stdin`, a FIFO), which can be read
    only once. A missing path, a folder, a device (`/dev/zero` never ends) or a socket is a
    `CommandError` (exit code 2); so is standard input redirected from a device other than a
    terminal."""
    if str(path) == STDIN:
        mode = os.fstat(sys.stdin.fileno()).st_mode if _has_descriptor(sys.stdin) else None
        if mode is None or stat.S_ISREG(mode) or stat.S_ISFIFO(mode) or sys.stdin.isatty():
            return "stream"
        raise CommandError(
            f"--input -: standard input must be a file, a pipe or a terminal, not {file_kind(mode)}"
        )
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise CommandError(f"input file not found: {path}") from None
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "stream"
    if stat.S_ISDIR(mode):
        raise CommandError(f"input is a directory, not a file: {path}")
    raise CommandError(
        f"--input must be a regular file, a pipe or - (standard input), not {file_kind(mode)}. "
        f"Received: {path}"
    )


def _has_descriptor(stream):
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):  # a test's `io.BytesIO`, a closed stream
        return False
    return True


def input_sentences(path, mode=DEFAULT_TOKENIZATION_MODE):
    """`(lines, tokens, sentences)` for `embed` (after `input_source`).

    A regular file is read twice: `count_tokens` now (the sizes for the progress bar and the
    free-space check), then `sentences`, a lazy `iter_sentences(path)`, one line at a time. A
    stream (standard input, a pipe) can be read only once: `lines` and `tokens` are `None` and
    `sentences` reads it as it comes, one line at a time (memory does not grow with it).
    """
    if input_source(path) == "stream":
        return None, None, iter_sentences(path, mode)
    return *count_tokens(path, mode), iter_sentences(path, mode)


def read_sentences(path, mode=DEFAULT_TOKENIZATION_MODE):
    """All of `iter_sentences(path, mode)` as a list."""
    return list(iter_sentences(path, mode))


def add_tokenization_argument(parser, what):
    """`--tokenization-mode` (also `--tokenization`): how `what` splits each line into tokens."""
    parser.add_argument(
        "--tokenization-mode",
        "--tokenization",
        dest="tokenization_mode",
        choices=TOKENIZATION_MODES,
        default=DEFAULT_TOKENIZATION_MODE,
        help=f"how {what}: punctuation splits on whitespace and makes each punctuation or "
        "symbol character a token (the split of every elmo-keras entry point); whitespace "
        "only splits on whitespace (TF-Hub's module; for text tokenized already) "
        f"(default: {DEFAULT_TOKENIZATION_MODE})",
    )


def check_input_file(flag, path):
    """A file named by `flag` that is missing, a folder, a FIFO, a device or a socket is a
    usage mistake (`CommandError`, exit code 2) found before any work and before it is opened
    (opening a FIFO waits for a writer; a device never ends); `None` and URLs (downloaded
    later) pass."""
    from elmo_keras.file_io.download import is_url

    if path is None or is_url(str(path)):
        return
    problem = file_problem(path)
    if problem == "missing":
        raise CommandError(f"{flag}: file not found: {path}")
    if problem == "a directory":
        raise CommandError(f"{flag} must be a file, not a folder. Received: {path}")
    if problem is not None:
        raise CommandError(f"{flag} must be a regular file, not {problem}. Received: {path}")


class Progress:
    """A one-line progress bar on a terminal (stderr); silent when stderr is not a terminal.

    Each drawing pads with spaces to the previous one's width: a shorter line (an ETA of one
    digit after two) leaves no stale characters behind.
    """

    def __init__(self, total, unit="sentences", stream=None):
        self.total = total
        self.unit = unit
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() and total > 0
        self.start = time.monotonic()
        self.width = 0  # of the line drawn last

    def __call__(self, done):
        if not self.enabled:
            return
        elapsed = time.monotonic() - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * done / self.total)
        bar = "#" * filled + "-" * (width - filled)
        line = f"[{bar}] {done}/{self.total} {self.unit} {rate:.1f}/s ETA {eta:.0f}s"
        self.stream.write("\r" + line.ljust(self.width))
        self.width = len(line)
        if done >= self.total:
            self.stream.write("\n")
        self.stream.flush()


def select_keras_backend(choice):
    """Sets `KERAS_BACKEND` for `--backend tensorflow|jax|torch` (Keras reads it once, when
    first imported); `keras` keeps the environment's. TensorFlow is imported with its logs
    hidden."""
    from elmo_keras.cli import import_tensorflow
    from elmo_keras.installs import BACKEND_EXTRAS, install_hint, is_installed

    if choice in BACKEND_EXTRAS and not is_installed(choice):  # the flag's, not the setting's
        raise CommandError(
            f"--backend {choice}: {choice} is not installed: {install_hint(BACKEND_EXTRAS[choice])}"
        )
    if choice in ("tensorflow", "jax", "torch"):
        loaded = sys.modules.get("keras")
        if loaded is not None and loaded.config.backend() != choice:
            raise CommandError(
                f"--backend {choice}: Keras was already loaded on {loaded.config.backend()!r}"
            )
        os.environ["KERAS_BACKEND"] = choice
    from elmo_keras.installs import configured_backend

    if configured_backend() == "tensorflow":  # the environment's, else keras.json's
        import_tensorflow()


def require_engine(command, engines, what_works):
    """Raises a `CommandError` unless Keras will run on one of `engines` (`KERAS_BACKEND`, else
    keras.json's; read without importing Keras), naming `what_works`.

    Example: `require_engine("train", ("tensorflow", "jax"), "--backend jax or tensorflow")`
    """
    from elmo_keras.installs import configured_backend

    backend = configured_backend()
    if backend not in engines:
        raise CommandError(
            f"{command} runs on {' or '.join(engines)}, not on Keras' {backend!r} backend "
            f"(KERAS_BACKEND): {what_works}"
        )
