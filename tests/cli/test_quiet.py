"""The command line prints its own lines only: no TensorFlow or ONNX Runtime log lines on success
unless `--verbose`. Their C++ logs go to file descriptor 2, so the commands run in subprocesses.
(`embed` and `demo` are checked the same way from an installed wheel, in tests/test_install.py.)
"""

import os
import pathlib
import re
import textwrap

import pytest

from elmo_keras.cli import build_parser
from tests.fresh_interpreter import run_cli, run_script

TINY = pathlib.Path(__file__).resolve().parents[2] / "elmo_keras" / "assets" / "tiny_allennlp"
# What TensorFlow, absl and ONNX Runtime lines look like ("I0000 00:00:...", "2024-...
# [W:onnxruntime:...]", "WARNING:root:...", "WARNING: All log messages before absl...").
NATIVE_LOG = re.compile(
    r"^([IWEF]\d{4} |WARNING|\d{4}-\d\d-\d\d |.*onnxruntime|.*oneDNN|.*cuInit|.*absl)"
)


def _environment():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    for name in ("TF_CPP_MIN_LOG_LEVEL", "ELMO_KERAS_DEBUG", "PYTHONWARNINGS"):
        env.pop(name, None)  # the command's own defaults, as a user gets them
    return env


def _elmo_keras(*args, cwd):
    return run_cli(*args, env=_environment(), cwd=cwd)


def test_export_with_int8_prints_no_native_log_lines(tmp_path):
    """ONNX conversion and int8 quantization used to print TensorFlow's start-up lines,
    "failed call to cuInit" and ONNX Runtime's quantizer warnings."""
    output = tmp_path / "out"
    args = ["export", "--run-dir", str(TINY), "--output", str(output), "--format", "onnx"]
    result = _elmo_keras(*args, "--quantize", cwd=tmp_path)
    assert (output / "model.int8.onnx").is_file()
    assert result.stdout.startswith(f"wrote {output}")
    noise = [line for line in result.stderr.splitlines() if NATIVE_LOG.match(line)]
    assert noise == [], result.stderr[-3000:]


def test_native_lines_are_kept_for_a_failure(tmp_path):
    """What C++ code writes to descriptor 2 is hidden on success, and shown before the
    traceback of an unexpected failure; Python's own stderr lines always show."""
    script = textwrap.dedent(
        """
        import os, sys
        from elmo_keras import cli

        def fake_command(args):
            os.write(2, b"I0000 native log line\\n")
            print("own line", file=sys.stderr)
            if args.fail:
                raise RuntimeError("boom")

        class Args:
            command = "fake"
            _run = staticmethod(fake_command)
            fail = sys.argv[1] == "fail"

        with cli.quiet_native_logs() as captured:
            code = cli._run(Args, captured)
        """
    )
    ok = run_script(script, "ok", timeout=60)
    assert ok.stderr == "own line\n", ok.stderr
    failed = run_script(script, "fail", timeout=60, returncode=1)
    assert "own line" in failed.stderr and "I0000 native log line" in failed.stderr
    assert failed.stderr.rstrip().endswith("RuntimeError: boom")


@pytest.mark.parametrize(
    "argv", [["--verbose", "demo"], ["demo", "--verbose"]], ids=["before", "after"]
)
def test_verbose_is_accepted_before_and_after_the_command(argv):
    assert build_parser().parse_args(argv).verbose is True
    assert build_parser().parse_args(["demo"]).verbose is False


def test_version(capsys):
    import elmo_keras
    from elmo_keras.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"elmo-keras {elmo_keras.__version__}\n"


def test_missing_runtime_extra_is_one_line(tmp_path):
    """`embed --backend onnx` without onnxruntime: the extra to install, exit code 2."""
    (tmp_path / "in.txt").write_text("Hello world\n")
    code = textwrap.dedent(
        """
        import sys
        sys.modules["onnxruntime"] = None  # as if it were not installed
        from elmo_keras.cli import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    args = ["embed", "--backend", "onnx", "--model", "m.onnx", "--input", "in.txt"]
    result = run_script(code, *args, "--output", "out.hdf5", cwd=tmp_path, timeout=60, returncode=2)
    assert result.stderr.strip().splitlines() == [
        'elmo-keras embed: error: onnxruntime is not installed: pip install "elmo-keras[runtime]"'
    ]
