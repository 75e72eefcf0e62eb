"""Text files are UTF-8: one rule, and one message, for every command that reads text.

`elmo-keras train` (its training and held-out text), `evaluate` and `embed` refuse a file
holding bytes that are not UTF-8 before any work, in one line naming the file, the line and
the byte (a `ValueError`: exit code 1, a file that cannot be read as what it should be); none
replaces such bytes silently. A file with no text at all (empty, or white space only) is
refused the same way where a command needs text (`train`, `evaluate`). Plain Python.
"""

import os


def decode_line(raw, name, number, offset):
    """The text of one line's bytes `raw`.

    Args:
        raw: bytes. The line, as read from the file.
        name: str. The file, in words (`"input file x.txt"`, `"standard input"`).
        number: int. The line's number, from 1.
        offset: int. The byte of the file where `raw` starts.

    Raises:
        ValueError: `raw` is not UTF-8: names the file, the byte and the line.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{name} is not UTF-8 text ({error.reason} at byte {offset + error.start}, line "
            f"{number}); convert it first (e.g. `iconv -f latin1 -t utf-8`)"
        ) from None


def holds_text(path, name):
    """Whether the file `path` holds more than white space; reads it once, line by line.

    Raises:
        ValueError: a line that is not UTF-8 (`decode_line`; `name` is the file in words).
    """
    found = False
    offset = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            line = decode_line(raw, name, number, offset)
            found = found or bool(line.strip().lstrip("\ufeff"))
            offset += len(raw)
    return found


def check_text_files(paths, what):
    """Reads every file of `paths` once: each must be UTF-8 (`decode_line`), and together they
    must hold some text (more than white space).

    Args:
        paths: list of paths.
        what: str. What the files are, for the message (`"training text"`, `"--data"`).

    Raises:
        ValueError: one line naming the file and what is wrong.
    """
    paths = [os.fspath(p) for p in paths]
    # A list, not a generator: every file is checked for UTF-8, also after one with text.
    if not any([holds_text(path, f"{what} file {path}") for path in paths]):
        listed = ", ".join(paths[:3]) + (", ..." if len(paths) > 3 else "")
        raise ValueError(f"{what}: no text in {listed} (empty, or white space only)")


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
