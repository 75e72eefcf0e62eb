"""A command whose reader goes away (`elmo-keras presets | head -1`) ends quietly: exit 0, no
"Broken pipe" line (issue 29, point 8)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_a_closed_pipe_ends_the_command_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the command writes its first line
    code = "import sys; from elmo_keras.cli import main; sys.exit(main(['presets']))"
    try:
        result = subprocess.run(
            [sys.executable, "-c", code],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
