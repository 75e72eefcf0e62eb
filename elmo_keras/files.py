"""Atomic output: files and folders appear complete or not at all.

Plain Python (no TensorFlow). Everything is written under a temporary name in the target's own
folder (so the final `os.replace` stays on one file system) and renamed into place only when
the writing succeeded; on an exception the temporary file or folder is removed and an existing
target is left as it was. Used by the weight files, `elmo-keras embed`, the exporters and
training.
"""

import contextlib
import os
import pathlib
import shutil
import tempfile


def check_output(output, overwrite=False, kind=None):
    """Returns `output` as a path, if writing it is allowed.

    Args:
        output: str or path-like.
        overwrite: bool. An existing `output` may be replaced. Defaults to `False`.
        kind: `"file"`, `"directory"` or `None`. With `overwrite`, only an existing regular
            file (or folder) is ever replaced: a device, a socket, a pipe, or a folder where a
            file is expected is refused, even with `overwrite`. Defaults to `None` (no check).

    Raises:
        FileExistsError: `output` exists and `overwrite` is false.
        ValueError: `output` exists and is not of `kind`.
    """
    output = pathlib.Path(output)
    if not (output.exists() or output.is_symlink()):
        return output
    if not overwrite:
        raise FileExistsError(
            f"The output {str(output)!r} already exists; pass `overwrite=True` "
            "(`--overwrite`) to replace it."
        )
    if kind == "file" and not output.is_file():
        what = "a directory" if output.is_dir() else "not a regular file"
        raise ValueError(f"The output {str(output)!r} is {what}; only a regular file is replaced.")
    if kind == "directory" and not output.is_dir():
        raise ValueError(f"The output {str(output)!r} is not a directory; only one is replaced.")
    return output


@contextlib.contextmanager
def atomic_file(path, overwrite=True, make_parents=True):
    """Yields a temporary path beside `path`; it becomes `path` when the block succeeds.

    Args:
        path: str or path-like. The file to write.
        overwrite: bool. Replace an existing `path`. Defaults to `True`.
        make_parents: bool. Create missing parent folders; with `False` a missing folder is a
            `FileNotFoundError` before anything is written. Defaults to `True`.
    """
    path = check_output(path, overwrite, kind="file")
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    elif not path.parent.is_dir():
        raise FileNotFoundError(f"output folder does not exist: {path.parent}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(fd)
    tmp = pathlib.Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def atomic_directory(output, overwrite=False):
    """Yields a fresh temporary folder that becomes `output` when the block succeeds.

    The temporary folder is created in `output`'s parent. On an exception it is deleted and
    `output` is left as it was. With `overwrite=True` an existing `output` is moved aside,
    replaced, then deleted; if the final rename fails the old output is put back.

    Args:
        output: str or path-like. The folder to create.
        overwrite: bool. Replace an existing `output`. Defaults to `False`.
    """
    output = check_output(output, overwrite, kind="directory").absolute()
    parent = output.parent
    parent.mkdir(parents=True, exist_ok=True)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=parent))
    try:
        yield staging
        check_output(output, overwrite, kind="directory")  # again: it may have changed meanwhile
        aside = None
        if output.exists() or output.is_symlink():
            aside = pathlib.Path(tempfile.mkdtemp(prefix=f".{output.name}.old-", dir=parent))
            aside.rmdir()
            os.replace(output, aside)
        try:
            os.replace(staging, output)
        except BaseException:
            if aside is not None:
                os.replace(aside, output)
            raise
        if aside is not None:
            if aside.is_dir() and not aside.is_symlink():
                shutil.rmtree(aside, ignore_errors=True)
            else:
                aside.unlink()
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
