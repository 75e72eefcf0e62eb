"""Atomic output: files and folders appear complete or not at all, and nothing is left behind.

Plain Python (no TensorFlow). Everything is written under a temporary name in the target's
folder (one file system for `os.replace`) and renamed into place once complete; on an exception
the temporary file or folder is removed and an existing target is left as it was.

Interruptions. While a temporary output exists, SIGTERM and SIGHUP remove it, then end the
process by that signal (not by an exception, which the library running at that moment, e.g.
TensorFlow's tracing, may swallow); Ctrl-C's `KeyboardInterrupt` cleans up on its way out.
SIGKILL cannot be caught: temporary names carry the writer's host and process id
(`.NAME.partial-HOST.PID.XXXXXXXX`, like git's `gc.pid`), and the next write of `NAME` removes
those of ended processes (`remove_stale`); nothing else is ever removed. One writer per
output, what may be replaced and the permissions: `elmo_keras.file_io.output_access`; hdf5 files:
`elmo_keras.file_io.hdf5_writer`.
"""

import contextlib
import os
import pathlib
import re
import shutil
import signal
import socket
import tempfile
import threading

from elmo_keras.file_io.output_access import (
    check_output,
    check_replaceable,
    give_usual_mode,
    lock_path,
    output_lock,
    remove_held_locks,
    remove_stale_lock,
)

_HOST = re.sub(r"[^A-Za-z0-9-]", "", socket.gethostname())[:32] or "host"
_TERMINATING = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)
_DEFERRED = _TERMINATING + (signal.SIGINT,)
_LIVE = {}  # this process's temporary outputs: path -> whether it is a folder


def _terminate(signum, frame):
    """SIGTERM or SIGHUP with temporary outputs: remove them, then die of the signal."""
    for path, is_folder in list(_LIVE.items()):
        with contextlib.suppress(OSError):
            shutil.rmtree(path) if is_folder else os.unlink(path)
    remove_held_locks()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)  # the default action ends the process here


@contextlib.contextmanager
def cleanup_on_signals():
    """Within the block, SIGTERM and SIGHUP remove the temporary outputs before they end the
    process: in the main thread, for a signal with its default action only (a program's own
    handler is kept, a nested block adds nothing); the previous actions are restored after."""
    installed = {}
    if threading.current_thread() is threading.main_thread():
        for signum in _TERMINATING:
            if signal.getsignal(signum) is signal.SIG_DFL:
                installed[signum] = signal.signal(signum, _terminate)
    try:
        yield
    finally:
        for signum, previous in installed.items():
            signal.signal(signum, previous)


@contextlib.contextmanager
def deferred_signals():
    """Python's handlers of SIGINT, SIGTERM and SIGHUP wait until the block ends (a few
    renames, one hdf5 call). Not a blocked signal mask: another thread (TensorFlow's, ONNX
    Runtime's) would take the signal and Python would still run the handler mid-block."""
    pending, previous = [], {}
    if threading.current_thread() is threading.main_thread():
        for signum in _DEFERRED:
            if callable(signal.getsignal(signum)):
                previous[signum] = signal.signal(signum, lambda n, frame: pending.append(n))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if pending:
            previous[pending[0]](pending[0], None)


def _temp_prefix(name, kind):
    return f".{name}.{kind}-{_HOST}.{os.getpid()}."


def _leftover_pattern(name):
    # tempfile's random part: 8 characters of [a-z0-9_].
    return re.compile(
        rf"\.{re.escape(name)}\.(?P<kind>partial|old)-(?P<host>[A-Za-z0-9-]{{1,32}})\."
        r"(?P<pid>[0-9]{1,10})\.[a-z0-9_]{8}"
    )


def _process_alive(pid):
    """Whether `pid` runs here (a zombie has finished writing)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # someone else's process: alive
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def remove_stale(path):
    """Removes what killed writes of `path` left beside it; returns the removed paths.

    Only entries with this module's temporary names for `path`, made on this host by a process
    that has ended, owned by the current user and not symbolic links, are touched. A previous
    output moved aside by `atomic_directory` is put back if `path` is missing (the swap was cut
    short), else deleted. A lock file nobody holds goes too (`output_access.remove_stale_lock`).
    """
    path = pathlib.Path(path)
    pattern = _leftover_pattern(path.name)
    removed = [lock_path(path)] if remove_stale_lock(path) else []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or match["host"] != _HOST or _process_alive(int(match["pid"])):
            continue
        try:
            if entry.is_symlink() or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            leftover = pathlib.Path(entry.path)
            if match["kind"] == "old" and not (path.exists() or path.is_symlink()):
                os.replace(leftover, path)
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
            removed.append(leftover)
        except OSError:
            continue  # gone meanwhile, or not ours to remove: leave it
    return removed


def check_writable(output, make_parents=True):
    """Raises an `OSError` naming the folder unless a file can be created beside `output`
    (tried for real: permissions, read-only mounts, a full inode table), before slow work.

    Args:
        output: str or path-like.
        make_parents: bool. Missing parent folders will be created (the first existing one is
            tried); with `False` a missing parent is a `FileNotFoundError`. Defaults to `True`.
    """
    output = pathlib.Path(output).absolute()
    folder = output.parent
    if not (make_parents or folder.exists()):
        raise FileNotFoundError(f"output folder does not exist: {folder}")
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(f"cannot create {output}: {folder} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=_temp_prefix(output.name, "partial"), dir=folder)
    except OSError as error:
        raise OSError(f"cannot write to {folder} (for {output}): {error.strerror}") from None
    os.close(fd)
    os.unlink(probe)


@contextlib.contextmanager
def parent_folders(output):
    """Makes `output`'s missing parent folders for the block; if the block fails, those it
    made are removed again (while empty).

    Every command's rule for an output whose folder is missing: the folders are made, as
    `train --output` makes its run folder (Beam's file sinks do the same). A parent that is a
    file is a `NotADirectoryError` naming it.

    Args:
        output: str or path-like. The file or folder that will be written.
    """
    output = pathlib.Path(output).absolute()
    made = []
    folder = output.parent
    while not folder.exists() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    if made and not folder.is_dir():
        raise NotADirectoryError(f"cannot create {output}: {folder} is not a folder")
    output.parent.mkdir(parents=True, exist_ok=True)
    try:
        yield output.parent
    except BaseException:
        for folder in made:  # the innermost first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


@contextlib.contextmanager
def atomic_file(path, overwrite=True, make_parents=True):
    """Yields a temporary path beside `path`; it becomes `path` when the block succeeds, with
    the usual permissions (0666 less the umask; private while it is written).

    Leftovers of interrupted writes of `path` are removed first (`remove_stale`). Without
    `overwrite`, the block holds `path`'s lock (`output_access.output_lock`): of two writers
    of a new `path` one succeeds, the other gets a `BlockingIOError` or a `FileExistsError`.

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
    with contextlib.ExitStack() as held:
        if not overwrite:
            held.enter_context(output_lock(path))
            check_output(path, overwrite, kind="file")  # another writer may have finished
        remove_stale(path)
        with temporary_output(path) as tmp:
            yield tmp
            give_usual_mode(tmp)
            os.replace(tmp, path)


@contextlib.contextmanager
def temporary_output(path, is_folder=False):
    """Yields a new empty file (or folder) beside `path`, named as a leftover of `path`'s
    writes (`remove_stale` removes it after a SIGKILL); it is removed when the block ends
    unless renamed, and by SIGTERM or SIGHUP meanwhile (`cleanup_on_signals`)."""
    path = pathlib.Path(path)
    tmp = None
    with cleanup_on_signals():
        try:
            with deferred_signals():  # a signal is acted on once `tmp` is known
                prefix = _temp_prefix(path.name, "partial")
                if is_folder:
                    tmp = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir=path.parent))
                else:
                    fd, name = tempfile.mkstemp(prefix=prefix, dir=path.parent)
                    os.close(fd)
                    tmp = pathlib.Path(name)
                _LIVE[tmp] = is_folder
            yield tmp
        finally:
            if tmp is not None:
                with deferred_signals():
                    if is_folder:
                        shutil.rmtree(tmp, ignore_errors=True)
                    else:
                        tmp.unlink(missing_ok=True)
                    _LIVE.pop(tmp, None)


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


@contextlib.contextmanager
def atomic_directory(output, overwrite=False, replaces=None, inputs=()):
    """Yields a fresh temporary folder that becomes `output` when the block succeeds.

    The block holds `output`'s lock (`output_access.output_lock`: a second writer of `output`
    gets a `BlockingIOError`). The temporary folder is created in `output`'s parent, after the
    leftovers of interrupted writes of `output` are removed (`remove_stale`). On an exception
    it is deleted and `output` is left as it was. With `overwrite=True` an existing `output`
    (one `check_replaceable` allows) is moved aside, replaced, then deleted; if the final rename
    fails the old output is put back. The new folder gets the usual permissions.

    Args:
        output: str or path-like. The folder to create.
        overwrite: bool. Replace an existing `output`. Defaults to `False`.
        replaces, inputs: `output_access.check_replaceable`'s `kind` and `inputs`, checked under
            the lock before and after the block. Default: any folder but the working one.
    """
    output = check_output(output, overwrite, kind="directory").absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(output):
        check_output(output, overwrite, kind="directory")  # another writer may have finished
        check_replaceable(output, replaces, inputs)
        remove_stale(output)
        with temporary_output(output, is_folder=True) as staging:
            yield staging
            check_output(output, overwrite, kind="directory")  # not made meanwhile by others
            check_replaceable(output, replaces, inputs)  # nor filled meanwhile
            give_usual_mode(staging, is_folder=True)
            with deferred_signals():  # the swap is not cut in the middle
                _swap_into_place(staging, output)


def _swap_into_place(staging, output):
    aside = None
    if output.exists() or output.is_symlink():
        prefix = _temp_prefix(output.name, "old")
        aside = pathlib.Path(tempfile.mkdtemp(prefix=prefix, dir=output.parent))
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
