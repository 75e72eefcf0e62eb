"""`elmo_keras.cli._common`: how `embed` reads its input, as a stream (issue 10), also from
standard input (`--input -`, issue 29)."""

import io
import os
import sys
import threading
import types

import pytest

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import input_sentences, iter_lines
from elmo_keras.text.text_files import split_lines


def test_the_input_is_read_lazily_with_the_same_rules(tmp_path):
    text = "\ufeffFirst  line\r\nsplit\vby\x85more\n\n\r\nlast \u00e9"
    path = tmp_path / "lines.txt"
    path.write_bytes(text.encode("utf-8"))
    lines, tokens, sentences = input_sentences(path)
    assert (lines, tokens) == (5, 7)
    assert not isinstance(sentences, list)  # a generator: one line in memory at a time
    assert list(sentences) == [line.split() for line in split_lines(text[1:])]
    assert list(iter_lines(path)) == split_lines(text[1:])
    for content, expected in [(b"", []), (b"\xef\xbb\xbf", []), (b"\n", [""]), (b"\r", [""])]:
        path.write_bytes(content)
        assert list(iter_lines(path)) == expected == split_lines(content.decode("utf-8-sig"))
    path.write_bytes("ok\nstill ok\ncaf\xe9 au lait\n".encode("latin-1"))
    with pytest.raises(ValueError) as error:  # a failure (exit 1), as for every command
        input_sentences(path)  # the first pass finds it, before any model loads
    assert str(error.value) == (
        f"input file {path} is not UTF-8 text (invalid continuation byte at byte 15, line 3); "
        "convert it first (e.g. `iconv -f latin1 -t utf-8`)"
    )


def test_a_pipe_is_read_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("a b\n\nc\n", encoding="utf-8"))
    writer.start()
    lines, tokens, sentences = input_sentences(fifo)  # a stream: no sizes, read as it comes
    assert (lines, tokens, list(sentences)) == (None, None, [["a", "b"], [], ["c"]])
    writer.join(timeout=30)


def test_dash_reads_standard_input(monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO("\ufeffa b\r\n\nc \u00e9\n".encode()), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    lines, tokens, sentences = input_sentences("-")
    assert (lines, tokens, list(sentences)) == (None, None, [["a", "b"], [], ["c", "\u00e9"]])
    assert not stdin.closed  # standard input is the caller's, left open
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9\n")))
    with pytest.raises(ValueError, match=r"^standard input is not UTF-8 text"):
        list(input_sentences("-")[2])


class _Lines(io.RawIOBase):
    """`count` lines `b"word\n"` (`yes word | head -n COUNT`), made as they are read."""

    def __init__(self, count, line=b"word\n"):
        self.left = count
        self.line = line
        self.given = 0  # bytes read so far

    def readable(self):
        return True

    def readinto(self, buffer):
        n = min(len(buffer) // len(self.line), self.left)
        buffer[: n * len(self.line)] = self.line * n
        self.left -= n
        self.given += n * len(self.line)
        return n * len(self.line)


def test_standard_input_is_streamed_not_held(monkeypatch):
    """Issue 39, point 11: `--input -` reads standard input as it comes (it held all of it: 16M
    lines took 1.67 GB): after the first sentences, only a buffer's worth has been read."""
    source = _Lines(2_000_000)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(source)))
    lines, tokens, sentences = input_sentences("-")
    assert (lines, tokens) == (None, None)
    assert [next(sentences) for _ in range(3)] == [["word"]] * 3
    assert source.given <= 64 * 1024, source.given  # of 10 MB


def test_a_line_without_end_is_refused_at_the_limit(monkeypatch):
    """Issue 39, point 11: an endless line (`cat /dev/zero |`) stops at `MAX_LINE_BYTES` with
    one line, not a `MemoryError`."""
    from elmo_keras.cli import _common

    monkeypatch.setattr(_common, "MAX_LINE_BYTES", 1000)
    source = _Lines(10_000, line=b"\0" * 100)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(source)))
    with pytest.raises(CommandError, match=r"^line 1 of standard input is longer than 1000 "):
        list(input_sentences("-")[2])
    assert source.given < 10_000


def test_a_device_or_a_folder_is_refused_without_reading(tmp_path):
    """Issue 39, point 11: `--input /dev/zero` was a `MemoryError` traceback (read forever)."""
    from elmo_keras.cli._common import input_source

    for path, message in [
        (
            "/dev/zero",
            "--input must be a regular file, a pipe or - (standard input), not a "
            "device. Received: /dev/zero",
        ),
        (tmp_path, f"input is a directory, not a file: {tmp_path}"),
        (tmp_path / "missing", f"input file not found: {tmp_path / 'missing'}"),
    ]:
        with pytest.raises(CommandError) as error:
            input_source(path)
        assert str(error.value) == message


def test_every_flag_of_every_command_has_help_with_its_default():
    """`COMMAND --help` explains each flag and, where it has one, names its default."""
    import argparse

    from elmo_keras.cli import build_parser

    commands = next(
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ).choices
    problems = []
    for name, parser in commands.items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            flag = f"{name} {'/'.join(action.option_strings) or action.dest}"
            text = action.help or ""
            if not text or text == argparse.SUPPRESS:
                problems.append(f"{flag}: no help")
            elif action.default not in (None, False, argparse.SUPPRESS) and (
                "default" not in text.lower()
            ):
                problems.append(f"{flag}: the default {action.default!r} is not named")
    assert not problems, problems


def _visible(written):
    """What a terminal shows of one line written with carriage returns."""
    screen = ""
    for part in written.split("\r"):
        screen = part + screen[len(part) :]
    return screen


def test_the_progress_bar_leaves_no_stale_characters(monkeypatch):
    """Issue 39, point 18: a shorter drawing (rate 1000.0/s, then 20.0/s) blanks what is left
    of the longer one (was: its last characters stayed on the line)."""
    from elmo_keras.cli import _common

    now = [0.0]
    monkeypatch.setattr(_common, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    stream = io.StringIO()
    stream.isatty = lambda: True
    progress = _common.Progress(100, stream=stream)
    now[0] = 0.01
    progress(10)
    now[0] = 1.0
    progress(20)
    shown = "[######------------------------] 20/100 sentences 20.0/s ETA 4s"
    assert _visible(stream.getvalue()).rstrip() == shown
