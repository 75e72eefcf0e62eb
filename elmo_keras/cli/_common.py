"""Helpers shared by the subcommands: input reading, files named by flags, a progress bar."""

import contextlib
import os
import pathlib
import sys
import time

from elmo_keras.cli import CommandError
from elmo_keras.text.pretokenize import (
    DEFAULT_TOKENIZATION_MODE,
    TOKENIZATION_MODES,
    tokenize_python,
)


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


STDIN = "-"  # `--input -`: standard input (a file named "-" is `./-`)


def iter_lines(path):
    """Yields the lines of a UTF-8 text file, lazily, with the rule of `split_lines`.

    A leading UTF-8 byte-order mark is dropped. Only b"\n" ends a line (UTF-8 never uses that
    byte inside a character, so each line decodes on its own), one "\r" before it is dropped,
    and a final "\n" does not start an extra line. `path` `"-"` reads standard input (left
    open). A missing file, a folder, or bytes that are not UTF-8 (named by line and byte) are a
    `CommandError`.
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
        for number, raw in enumerate(handle):
            start = 3 if number == 0 and raw.startswith(b"\xef\xbb\xbf") else 0
            if start == len(raw):
                break  # a file that is only a byte-order mark has no line
            try:
                line = raw[start:].decode("utf-8")
            except UnicodeDecodeError as error:
                raise CommandError(
                    f"{name} is not UTF-8 text ({error.reason} at byte "
                    f"{offset + start + error.start}, line {number + 1})"
                ) from None
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


def input_sentences(path, mode=DEFAULT_TOKENIZATION_MODE):
    """`(lines, tokens, sentences)` for a command that needs the sizes before the work.

    A regular file is read twice: `count_tokens` now, then `sentences`, a lazy
    `iter_sentences(path)`, one line at a time. A pipe (`/dev/stdin`, a FIFO) can be read only
    once: it is read whole here and `sentences` is a list; so is standard input (`"-"`).
    """
    regular = str(path) != STDIN and (pathlib.Path(path).is_file() or not os.path.exists(path))
    if regular:  # a missing file: `count_tokens` names it
        return *count_tokens(path, mode), iter_sentences(path, mode)
    sentences = read_sentences(path, mode)
    return len(sentences), sum(len(s) for s in sentences), sentences


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
    """A file named by `flag` that is missing, or a folder, is a usage mistake (`CommandError`,
    exit code 2) found before any work; `None` and URLs (downloaded later) pass."""
    from elmo_keras.download import is_url

    if path is None or is_url(str(path)):
        return
    if pathlib.Path(path).is_dir():
        raise CommandError(f"{flag} must be a file, not a folder. Received: {path}")
    if not pathlib.Path(path).exists():
        raise CommandError(f"{flag}: file not found: {path}")


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


def select_keras_backend(choice):
    """Sets `KERAS_BACKEND` for `--backend tensorflow|jax|torch` (Keras reads it once, when
    first imported); `keras` keeps the environment's. TensorFlow is imported with its logs
    hidden."""
    from elmo_keras.cli import import_tensorflow

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
