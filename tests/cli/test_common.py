"""`elmo_keras.cli._common`: how `embed` reads its input, as a stream (issue 10), also from
standard input (`--input -`, issue 29)."""

import io
import os
import sys
import threading
import types

import pytest

from elmo_keras.cli._common import input_sentences, iter_lines, split_lines


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
    lines, tokens, sentences = input_sentences(fifo)
    writer.join(timeout=30)
    assert (lines, tokens, sentences) == (3, 3, [["a", "b"], [], ["c"]])


def test_dash_reads_standard_input(monkeypatch):
    stdin = io.TextIOWrapper(io.BytesIO("\ufeffa b\r\n\nc \u00e9\n".encode()), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert input_sentences("-") == (3, 4, [["a", "b"], [], ["c", "\u00e9"]])
    assert not stdin.closed  # standard input is the caller's, left open
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"caf\xe9\n")))
    with pytest.raises(ValueError, match=r"^standard input is not UTF-8 text"):
        input_sentences("-")


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
