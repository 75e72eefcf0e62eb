"""The `elmo-keras` command line.

Each module of this package that defines `add_parser(subparsers)` and `run(args)` is one
subcommand; the dispatcher finds them, so a new subcommand is a new file. TensorFlow is imported
only inside `run`, after the environment has been prepared, so `--help` is fast and oneDNN can be
switched on before TensorFlow's first import.
"""

import argparse
import importlib
import os
import pkgutil
import sys


class CommandError(Exception):
    """A user's mistake: printed as one line on stderr, exit code 2."""


def _subcommand_modules():
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "add_parser") and hasattr(module, "run"):
            yield module


def build_parser():
    parser = argparse.ArgumentParser(
        prog="elmo-keras",
        description="ELMo biLM: embed, train, evaluate and export (Keras 3 / TensorFlow).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _subcommand_modules():
        sub = module.add_parser(subparsers)
        sub.set_defaults(_run=module.run)
    return parser


def prepare_environment():
    """Settings that must precede TensorFlow's first import.

    oneDNN runs the large hoisted matrix products much faster on AMD CPUs, where TensorFlow
    leaves it off by default (see docs/benchmarks.md); a user's own setting wins.
    """
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def import_tensorflow():
    """Imports TensorFlow with its start-up log lines hidden (set ELMO_KERAS_DEBUG=1 to see them).

    TensorFlow's C++ logging prints several lines on import that `TF_CPP_MIN_LOG_LEVEL` does not
    reach; a command-line user should see the command's own output.
    """
    if os.environ.get("ELMO_KERAS_DEBUG") or "tensorflow" in sys.modules:
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


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 2
    prepare_environment()
    try:
        result = args._run(args)
    except CommandError as error:
        print(f"elmo-keras {args.command}: error: {error}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as error:
        # Bad input (a missing or malformed file, a wrong shape): one clear line, no traceback.
        if os.environ.get("ELMO_KERAS_DEBUG"):
            raise
        print(f"elmo-keras {args.command}: error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"elmo-keras {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
