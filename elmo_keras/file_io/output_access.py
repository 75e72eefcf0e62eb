"""Who may use an output: one writer at a time, and the usual permissions once it is complete.

Plain Python (no TensorFlow).

One writer. `output_lock(path)` holds an exclusive `flock` on `.NAME.lock` beside `path` while
the output is written; a second writer (another process, or another thread) is refused at once
with a `BlockingIOError` naming the holder, so of two writers of one output at most one
succeeds. The operating system releases a `flock` when its process ends in any way (SIGKILL
included): a lock file a killed writer left behind holds nothing, the next writer takes it and
removes it when done. The same thread may take a lock it holds again (a command holds its
output's lock from its first check, and the writer it calls takes it too). Where `fcntl` is
missing (Windows), nothing is locked.

What may be replaced. An existing folder is replaced (`files.atomic_directory` with
`overwrite`) only when it is an earlier output of the same command: `check_replaceable` takes a
description and a test of the folder's entries (an export folder holds only the export's files
and its `export.json` says elmo-keras wrote it; folders written by earlier versions pass the
same test). The working folder, a folder holding one of the command's inputs, and any folder
holding something else (a training run's files, the user's) are refused in one line naming the
folder and what it holds. An empty folder loses nothing and is replaced.

Permissions. Temporary outputs are created private (0600 files, 0700 folders, as `tempfile`
makes them: nobody reads a half-written output) and get the usual mode just before they are
renamed into place: 0666 for a file, 0777 for a folder, less the process's umask, as `open` and
`mkdir` would give them. The umask is read from `/proc/self/status` (Linux 4.7 and later):
`os.umask` can only be read by setting it, and between the set and the restore every other
thread of the process (TensorFlow's, a caller's) would create files with the wrong mask. Where
`/proc` has no `Umask:` line, a probe folder made with mode 0777 beside the output shows it.
"""

import contextlib
import json
import os
import pathlib
import socket
import stat
import threading
import uuid

_HELD = {}  # absolute lock path -> the id of the thread holding it in this process
_REMOVED_AT_END = set()  # the held lock files to delete when released
_GUARD = threading.Lock()


def lock_path(output):
    """The lock file of `output`: `.NAME.lock` in the same folder."""
    output = pathlib.Path(output)
    return output.parent / f".{output.name}.lock"


def _acquire(path, busy):
    import fcntl  # noqa: PLC0415 (POSIX only; the caller checked)

    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    while True:
        fd = os.open(path, flags, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "unknown"
            os.close(fd)
            raise BlockingIOError(busy(holder)) from None
        try:  # the last holder may have removed the file before we locked it: lock a new one
            same = os.path.samestat(os.fstat(fd), os.stat(path, follow_symlinks=False))
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"process {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            return fd
        os.close(fd)


@contextlib.contextmanager
def exclusive_lock(path, busy, remove=True):
    """Holds an exclusive `flock` on the file `path` (created if missing, never through a
    symbolic link) for the block; it records the holder's process id and host.

    Args:
        path: str or path-like. The lock file.
        busy: callable. Given the holder (`"process PID on HOST"`), returns the message.
        remove: bool. Delete the lock file when the block ends. Defaults to `True`.

    Raises:
        BlockingIOError: another holder has it; the message is `busy(holder)`.
    """
    try:
        import fcntl  # noqa: F401, PLC0415
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    key = os.path.abspath(path)
    with _GUARD:
        reentered = _HELD.get(key) == threading.get_ident()
    if reentered:
        yield
        return
    fd = _acquire(key, busy)
    with _GUARD:
        _HELD[key] = threading.get_ident()
        if remove:
            _REMOVED_AT_END.add(key)
    try:
        yield
    finally:
        with _GUARD:
            del _HELD[key]
            _REMOVED_AT_END.discard(key)
        if remove:
            with contextlib.suppress(OSError):
                os.unlink(key)  # still locked: a writer that opened it retries on a new file
        os.close(fd)  # releases the lock


def remove_held_locks():
    """Deletes the lock files this process holds and would delete when done: for a signal
    that ends the process (`files.cleanup_on_signals`); the locks go with the process."""
    for key in list(_REMOVED_AT_END):
        with contextlib.suppress(OSError):
            os.unlink(key)


def remove_stale_lock(output):
    """Deletes `output`'s lock file if nobody holds it (a SIGKILLed writer's): it is locked,
    removed and released, as its holder would have done. Returns whether it was removed."""
    path = os.path.abspath(lock_path(output))
    try:
        with _GUARD:
            info = os.lstat(path)
            if path in _HELD or not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                return False
        with exclusive_lock(path, str):
            pass
    except OSError:  # held by another writer, gone meanwhile, or not ours
        return False
    return not os.path.lexists(path)


def output_lock(output):
    """`exclusive_lock` on `output`'s lock file (`lock_path`), removed afterwards.

    Raises:
        BlockingIOError: another writer holds it; the message names `output` and the holder.
    """
    return exclusive_lock(
        lock_path(output),
        lambda holder: (
            f"{output} is being written by another run ({holder}); wait for it to end or "
            "choose another output"
        ),
    )


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


def current_umask(folder="."):
    """The process's umask, read without changing it; `folder` is where a probe folder may be
    made where `/proc/self/status` does not tell it."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    probe = pathlib.Path(folder) / f".umask-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    os.mkdir(probe, 0o777)
    try:
        return 0o777 & ~probe.stat().st_mode
    finally:
        probe.rmdir()


def give_usual_mode(path, is_folder=False):
    """Sets `path`'s permissions to what `open` (0666) or `mkdir` (0777) less the umask gives."""
    path = pathlib.Path(path)
    base = 0o777 if is_folder else 0o666
    os.chmod(path, base & ~current_umask(path.parent))  # our own file or folder, not a link


def read_marker(path):
    """The JSON object in the file `path`, or `None` (missing, not a regular file, not JSON, not
    an object): what a folder's marker file (`export.json`, `config.json`) says."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _listing(entries, shown=6):
    names = sorted(entries)
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def check_replaceable(output, kind, inputs=()):
    """Raises a `ValueError` unless replacing the folder `output` (if there is one) loses
    nothing but an earlier output of the same kind (see the module docstring).

    Args:
        output: str or path-like. A folder, or a path with none (nothing is checked).
        kind: `(description, recognise)`: what the command writes, in words (`"an export
            folder"`), and a callable given the folder and the set of its entries' names, true
            for a folder that command wrote; an empty folder is always replaceable. `None`:
            any folder but the working one or one holding `inputs`.
        inputs: iterable of paths (or `None`). What the command reads: a folder holding one is
            never replaced.

    Raises:
        ValueError: one line naming `output` and what it holds.
    """
    output = pathlib.Path(output)
    if not output.is_dir():
        return
    where = output.resolve()
    here = pathlib.Path.cwd().resolve()
    if where == here or where in here.parents:
        what = (
            "the working folder" if where == here else f"a folder holding the working one, {here}"
        )
        raise ValueError(f"{output} is {what}; it is never replaced: choose another output")
    for path in inputs:
        if path is not None and where in pathlib.Path(path).resolve().parents:
            raise ValueError(
                f"{output} holds the input {path}; it is never replaced: choose another output"
            )
    description, recognise = kind or ("a folder", None)
    entries = set(os.listdir(output))
    if entries and recognise is not None and not recognise(output, entries):
        raise ValueError(
            f"{output} is not {description} (it holds {_listing(entries)}); only "
            f"{description} is replaced, so that nothing else is lost: choose another output"
        )
