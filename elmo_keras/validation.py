"""Argument checks shared by the layers, the models, the CLI and the ONNX Runtime client.

Plain Python (no TensorFlow, no NumPy), so that `elmo_keras.runtime` can use it too. Every
check raises a `ValueError` that names the argument, what was expected and what was received:
"`projection_dim` must be an integer >= 1. Received: projection_dim=0".
"""

import numbers
import os
import stat
import warnings


def check_int(name, value, minimum=1, maximum=None, allow_none=False):
    """Returns `value` if it is an integer in `[minimum, maximum]` (not a bool), or None if
    `allow_none` and `value` is None."""
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        if allow_none:
            bound += " or None"
        raise ValueError(f"`{name}` must be an integer {bound}. Received: {name}={value!r}")
    return int(value)


def file_kind(mode):
    """What a file of `os.stat` mode `mode` is, in words ("a FIFO", "a device", ...)."""
    for test, kind in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "an unusual file"


def check_regular_file(path, what, expected):
    """Refuses, without opening it, a `path` that is not a regular file (links followed).

    Opening a FIFO waits for a writer and reading a device (`/dev/zero`) never ends: both are
    refused here, before any `open`.

    Args:
        path: str or path-like.
        what: str. The file's role, first in the message ("options file").
        expected: str. What it should be ("a JSON file").

    Raises:
        FileNotFoundError: `path` does not exist ("options file not found: PATH").
        ValueError: `path` is a directory, a FIFO, a device or a socket.
    """
    problem = file_problem(path)
    if problem == "missing":
        raise FileNotFoundError(f"{what} not found: {os.fspath(path)}")
    if problem == "a directory":
        raise ValueError(f"{what} {os.fspath(path)} is a directory; expected {expected}")
    if problem is not None:
        raise ValueError(
            f"{what} {os.fspath(path)} is not a regular file ({problem}); expected {expected}"
        )


def file_problem(path):
    """What keeps `path` from being read as a regular file, found without opening it (links
    followed): `None`, `"missing"`, or what it is instead (`file_kind`: "a directory", "a FIFO
    (named pipe)", "a device", ...)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    return None if stat.S_ISREG(mode) else file_kind(mode)


def check_number(name, value, minimum=None, maximum=None, include_maximum=True):
    """Returns `value` as a float if it is a real number (not a bool) within the bounds."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and value == value
    if ok and minimum is not None:
        ok = value >= minimum
    if ok and maximum is not None:
        ok = value <= maximum if include_maximum else value < maximum
    if not ok:
        low, high = (
            f"{minimum:g}" if minimum is not None else "",
            f"{maximum:g}" if maximum is not None else "",
        )
        if minimum is not None and maximum is not None:
            closing = "]" if include_maximum else ")"
            bound = f" in [{low}, {high}{closing}"
        elif minimum is not None:
            bound = f" >= {low}"
        elif maximum is not None:
            bound = f" <= {high}"
        else:
            bound = ""
        raise ValueError(f"`{name}` must be a number{bound}. Received: {name}={value!r}")
    return float(value)


def check_choice(name, value, choices):
    """Returns `value` if it is one of `choices`."""
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {tuple(choices)}. Received: {name}={value!r}")
    return value


def renamed_argument(kwargs, old, new, value, default, owner):
    """Resolves a renamed keyword argument: returns the value to use for `new`.

    `kwargs` is the caller's `**kwargs`; `old` is removed from it. Passing the old name warns
    (`DeprecationWarning`) and still works; passing both names is an error.
    """
    if old not in kwargs:
        return value
    old_value = kwargs.pop(old)
    if value is not default and value != old_value:
        raise ValueError(
            f"`{owner}` got both `{new}` and its old name `{old}`. Received: "
            f"{new}={value!r}, {old}={old_value!r}"
        )
    warnings.warn(
        f"`{owner}({old}=...)` is deprecated; use `{new}=` instead.",
        DeprecationWarning,
        stacklevel=3,
    )
    return old_value


def renamed_attribute(old, new):
    """A read-only property `old` that warns and returns the attribute `new`."""

    def getter(self):
        warnings.warn(
            f"`{type(self).__name__}.{old}` is deprecated; use `.{new}` instead.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(self, new)

    return property(getter, doc=f"Deprecated alias of `{new}`.")
