"""Running a script in a fresh Python interpreter, for the tests whose point needs one (what a
new process imports, an installed wheel, a real exit code): the one copy of "run it, check its
exit code, read the report on its last line".

`run_command` runs any command, `run_script` Python source (`python -c`, this environment's
interpreter unless told), `run_cli` the `elmo-keras` command; `last_line_json` parses the JSON
report a script prints last, and `script_report` does the three.
"""

import json
import subprocess
import sys


def run_command(command, cwd=None, env=None, timeout=300, returncode=0):
    """Runs `command` (its parts made strings) and returns the `CompletedProcess`, output
    captured as text. An exit code other than `returncode` (`None`: any) fails the test with
    the command and the ends of its output."""
    result = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
    if returncode is not None:
        assert result.returncode == returncode, (
            f"{command}\nexit code {result.returncode}, expected {returncode}\n"
            f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        )
    return result


def run_script(code, *args, python=sys.executable, **kwargs):
    """`python -c code *args` (see `run_command` for the keyword arguments)."""
    return run_command([python, "-c", code, *args], **kwargs)


# The `elmo-keras` command in a fresh interpreter (the checkout's package, no installed script).
CLI = "import sys; from elmo_keras.cli import main; sys.exit(main(sys.argv[1:]))"


def run_cli(*args, **kwargs):
    """`elmo-keras *args` in a fresh interpreter (see `run_command` for the keyword
    arguments)."""
    return run_script(CLI, *args, **kwargs)


def last_line_json(result):
    """The JSON value on the last line of `result`'s standard output."""
    lines = result.stdout.strip().splitlines()
    assert lines, f"the script printed nothing\n{result.stderr[-3000:]}"
    return json.loads(lines[-1])


def script_report(code, *args, **kwargs):
    """Runs `code` (`run_script`, exit code 0) and returns the JSON report on its last line."""
    return last_line_json(run_script(code, *args, **kwargs))
