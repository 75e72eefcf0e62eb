"""The `elmo-keras` command line.

Each module of this package that defines `add_parser(subparsers)` and `run(args)` is one
subcommand; the dispatcher finds them, so a new subcommand is a new file. TensorFlow is imported
only inside `run`, after the environment has been prepared, so `--help` is fast and oneDNN can be
switched on before TensorFlow's first import.

Output: a command prints its own lines and nothing else. TensorFlow and ONNX Runtime log from
C++ straight to file descriptor 2 (start-up lines, "failed call to cuInit", oneDNN notes); unless
`--verbose` is given, what reaches descriptor 2 goes to a temporary file while Python's
`sys.stderr` keeps the terminal, and it is shown only if the command fails unexpectedly. Python
log records below ERROR (ONNX Runtime's quantizer, TensorFlow's Python logger) are dropped too.

Exit codes: 0 success (also when the reader of standard output went away: `elmo-keras presets |
head -1`); 1 a failure: a file that cannot be read as what it should be (malformed, damaged), a
failed download or write (a full disk); 2 a usage mistake: a bad or missing flag, a file or
folder named on the command line that does not exist or is of the wrong kind, an existing
output without `--overwrite`, or a missing optional dependency (one line naming the
`pip install "elmo-keras[...]"` that brings it); 130 interrupted (Ctrl-C). SIGTERM and SIGHUP
end the command by that signal (a shell reports 143 and 129) once the temporary output is
removed (`elmo_keras.file_io.files`).
"""

import argparse
import contextlib
import faulthandler
import importlib
import logging
import os
import pkgutil
import select
import sys
import tempfile

# The extra that brings each optional module the commands import (pyproject.toml's
# optional-dependencies); `export` raises its own message naming `[onnx]`. Keras and TensorFlow
# are optional too (installs go by backend): TensorFlow is the commands' default engine.
EXTRAS = {
    "onnx": "onnx",
    "tf2onnx": "onnx",
    "onnxruntime": "runtime",
    "keras": "tensorflow",
    "tensorflow": "tensorflow",
    "tensorflow_text": "tensorflow",
    "jax": "jax",
    "jaxlib": "jax",
    "torch": "torch",
    "apache_beam": "beam",
}
_verbose = False
_stage_open = False  # a `print_stage` line waits for its time


class CommandError(Exception):
    """A user's mistake: printed as one line on stderr, exit code 2."""


def _subcommand_modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "add_parser") and hasattr(module, "run"):
            yield module


def _version():
    import elmo_keras  # noqa: PLC0415

    return f"elmo-keras {elmo_keras.__version__}"


def build_parser():
    parser = argparse.ArgumentParser(
        prog="elmo-keras",
        description="ELMo biLM: embed, train, evaluate and export (Keras 3 / TensorFlow).",
    )
    parser.add_argument("--version", action="version", version=_version())
    verbose_help = "show TensorFlow's and ONNX Runtime's own log lines"
    parser.add_argument("--verbose", action="store_true", help=verbose_help)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _subcommand_modules():
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run)
        # Also after the subcommand (`elmo-keras export ... --verbose`); SUPPRESS keeps a
        # `--verbose` given before it. A subcommand with a `--verbose` of its own keeps it.
        with contextlib.suppress(argparse.ArgumentError):
            sub.add_argument(
                "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose_help
            )
    return parser


def prepare_environment(verbose=False):
    """Settings that must precede TensorFlow's first import; a user's own setting wins.

    oneDNN runs the large hoisted matrix products much faster on AMD CPUs, where TensorFlow
    leaves it off by default (see docs/benchmarks.md). TensorFlow's C++ log level is ERROR
    and up (those lines are captured, see `quiet_native_logs`), or TensorFlow's own default
    with `--verbose`.
    """
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def import_tensorflow():
    """Imports TensorFlow with its start-up log lines hidden (unless `--verbose` or
    ELMO_KERAS_DEBUG=1).

    TensorFlow's C++ logging prints several lines on import that `TF_CPP_MIN_LOG_LEVEL` does not
    reach; a command-line user should see the command's own output.
    """
    if _verbose or os.environ.get("ELMO_KERAS_DEBUG") or "tensorflow" in sys.modules:
        import tensorflow

        return tensorflow
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        import tensorflow

        tensorflow.config.list_physical_devices()  # device discovery logs, too
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    return tensorflow


def print_stage(stage, seconds):
    """A progress callback for `elmo_keras.export.export_model`: `SavedModel ... 12.1 s`."""
    global _stage_open
    if seconds is None:
        sys.stderr.write(f"{stage} ...")
        _stage_open = True
    else:
        sys.stderr.write(f" {seconds:.1f} s\n")
        _stage_open = False
    sys.stderr.flush()


def missing_extra_message(error):
    """The one line for a `ModuleNotFoundError` of an optional dependency, else `None`."""
    if 'pip install "elmo-keras[' in str(error):
        return str(error)
    extra = EXTRAS.get((error.name or "").partition(".")[0])
    if extra is None:
        return None
    from elmo_keras.installs import install_hint

    return f"{error.name} is not installed: {install_hint(extra)}"


@contextlib.contextmanager
def quiet_native_logs():
    """Sends what is written to file descriptor 2 by C++ code to a temporary file, while
    Python's `sys.stderr` keeps writing to the terminal; yields the file.

    Does nothing (yields `None`) when `sys.stderr` is not descriptor 2 (e.g. under pytest's
    capture), so a caller that replaced `sys.stderr` still sees every line.
    """
    try:
        is_fd2 = sys.stderr.fileno() == 2
    except (AttributeError, OSError, ValueError):
        is_fd2 = False
    if not is_fd2:
        yield None
        return
    sys.stderr.flush()
    terminal = os.dup(2)
    stream = os.fdopen(terminal, "w", buffering=1, encoding=sys.stderr.encoding, errors="replace")
    original = sys.stderr
    faulthandler_was_on = faulthandler.is_enabled()
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        sys.stderr = stream
        faulthandler.enable(stream)  # a native crash still shows where it happened
        try:
            yield captured
        finally:
            faulthandler.disable()
            if faulthandler_was_on:
                faulthandler.enable(original)
            stream.flush()
            os.dup2(terminal, 2)
            sys.stderr = original
            stream.close()


def _show_captured(captured):
    """Copies the captured native log lines to stderr (after an unexpected failure)."""
    if captured is None:
        return
    captured.seek(0)
    text = captured.read().decode("utf-8", "replace").strip()
    if text:
        print("TensorFlow / ONNX Runtime log:\n" + text, file=sys.stderr)


def _error(command, message, kind="error: "):
    global _stage_open
    if _stage_open:  # end a `print_stage` line that will not get its time
        sys.stderr.write("\n")
        _stage_open = False
    print(f"elmo-keras {command}: {kind}{message}", file=sys.stderr)


def main(argv=None):
    global _verbose
    parser = build_parser()
    # `beam-embed` passes the flags it does not know on to Beam (its pipeline options); every
    # other command rejects them as argparse does.
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        if not getattr(args, "_takes_unknown_args", False):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        args.unknown_args = unknown
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 2
    _verbose = bool(args.verbose)
    prepare_environment(_verbose)
    if _verbose:
        return _run(args, None)
    with errors_only_logging(), quiet_native_logs() as captured:
        return _run(args, captured)


@contextlib.contextmanager
def errors_only_logging(names=("", "tensorflow")):
    """Python log records below ERROR are dropped (the root logger, where ONNX Runtime's
    quantizer warns, and TensorFlow's); the levels are restored afterwards."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _run(args, captured):
    try:
        result = args._run(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers, not at exit
    except BrokenPipeError as error:
        if not _stdout_closed():  # another pipe or socket (a download, a worker): a failure
            _error(args.command, error)
            return 1
        # The reader went away (`elmo-keras presets | head -1`): nothing is wrong with the
        # command, so it ends quietly. Standard output is pointed at /dev/null so that the
        # interpreter's own flush at exit finds nothing to complain about.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0
    except CommandError as error:
        _error(args.command, error)
        return 2
    except ModuleNotFoundError as error:
        message = missing_extra_message(error)
        if message is None:
            _show_captured(captured)
            raise
        _error(args.command, message)
        return 2
    except (ValueError, OSError) as error:
        # Bad input (a missing or malformed file, a wrong shape): one clear line, no traceback.
        if os.environ.get("ELMO_KERAS_DEBUG"):
            _show_captured(captured)
            raise
        _error(args.command, error)
        return 1
    except KeyboardInterrupt:
        _error(args.command, "interrupted", kind="")
        return 130
    except BaseException:
        _show_captured(captured)
        raise
    return int(result or 0)


def _stdout_closed():
    """Whether standard output is a pipe whose reader has gone (poll reports an error on it)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture), no poll
        return False


if __name__ == "__main__":
    sys.exit(main())
