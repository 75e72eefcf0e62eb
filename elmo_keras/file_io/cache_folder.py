"""One folder of the download cache, opened so that no one else can steer what is written.

`elmo_keras.file_io.download.cached_path` keeps each URL's file in `<cache>/downloads/<key>/`. Other
users may be able to write to `<cache>` (`ELMO_KERAS_CACHE=/tmp/...`), so every file of an entry
is reached through a descriptor of its folder (`dir_fd`) and opened with `O_NOFOLLOW`: a planted
symbolic link is never followed, never written through and never becomes a cache entry. The
folders below `<cache>` are created 0700; a folder or a file of the entry that is a link, is not
what it should be (a folder, a regular file) or belongs to another user is refused in one
`PermissionError` naming it, and nothing is written. `<cache>` itself may be a link (a cache on
another disk) but must be a folder of the user's own.

Standard library only.
"""

import contextlib
import json
import os
import stat

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_MODES = {
    "rb": os.O_RDONLY,
    "r": os.O_RDONLY,
    "wb": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "ab": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
}
_HINT = "remove it, and check who can write to the cache ($ELMO_KERAS_CACHE)"
LOCK_FILE = ".lock"  # each folder's lock (`CacheFolder.locked`): never an entry's file name


def _owner():
    """The user id files must belong to; None where there is none (Windows)."""
    return os.getuid() if hasattr(os, "getuid") else None


def _check(status, path, kind):
    """Refuses a link, something other than `kind` ("folder" or "file"), another's file."""
    if stat.S_ISLNK(status.st_mode):
        raise PermissionError(f"the cache holds a symbolic link at {path}; {_HINT}")
    is_kind = stat.S_ISDIR if kind == "folder" else stat.S_ISREG
    if not is_kind(status.st_mode):
        raise PermissionError(f"the cache holds {path}, which is not a {kind}; {_HINT}")
    owner = _owner()
    if owner is not None and status.st_uid != owner:
        raise PermissionError(
            f"the cache {kind} {path} belongs to another user (uid {status.st_uid}, not "
            f"{owner}); {_HINT}"
        )


class CacheFolder:
    """A cache entry's folder, held open by descriptor; every file in it opened without
    following links. A context manager: the folder is created and checked on entry.

    Args:
        root: path-like. The cache (`$ELMO_KERAS_CACHE`); created if missing.
        parts: sequence of str. The folders below `root` (`("downloads", key)`), each created
            0700 and checked.

    Example:
    >>> import tempfile
    >>> with CacheFolder(tempfile.mkdtemp(), ("downloads", "key")) as folder:
    ...     folder.write_json("record.json", {"size": 1})
    ...     folder.read_json("record.json")
    {'size': 1}
    """

    def __init__(self, root, parts):
        self.root = os.fspath(root)
        self.parts = tuple(parts)
        self.path = os.path.join(self.root, *self.parts)
        self.fd = None

    def __enter__(self):
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        fd = os.open(self.root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        path = self.root
        try:
            _check(os.fstat(fd), path, "folder")
            for part in self.parts:
                path = os.path.join(path, part)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
                _check(os.stat(part, dir_fd=fd, follow_symlinks=False), path, "folder")
                child = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = child
                status = os.fstat(fd)
                _check(status, path, "folder")
                if status.st_mode & 0o077:
                    os.chmod(fd, 0o700)  # ours: no one else may add a file to it
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        try:
            for name in os.listdir(fd):
                self.size(name)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def file(self, name):
        """The path of `name` in the folder (for messages and for callers outside)."""
        return os.path.join(self.path, name)

    def size(self, name):
        """The size of the regular file `name`, or None when there is none; a link or a file
        of another user is refused."""
        try:
            status = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        _check(status, self.file(name), "file")
        return status.st_size

    def open(self, name, mode="rb"):
        """Opens `name` without following a link (created 0600 when writing); a link, a
        non-regular file or a file of another user is a `PermissionError`."""
        flags = _MODES[mode] | _NOFOLLOW | _CLOEXEC
        try:
            fd = os.open(name, flags, 0o600, dir_fd=self.fd)
        except OSError as error:
            if os.path.islink(self.file(name)):
                raise PermissionError(
                    f"the cache holds a symbolic link at {self.file(name)}; {_HINT}"
                ) from None
            raise error
        try:
            _check(os.fstat(fd), self.file(name), "file")
        except BaseException:
            os.close(fd)
            raise
        return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"}))

    def unlink(self, name):
        """Removes `name` (a link is removed, never followed); nothing when it is missing."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def replace(self, source, target):
        """Renames `source` to `target` inside the folder (atomic)."""
        os.replace(source, target, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def read_json(self, name):
        """The JSON value in `name`, or None when it is missing or not JSON."""
        try:
            with self.open(name, "r") as handle:
                return json.load(handle)
        except (FileNotFoundError, ValueError):
            return None

    def write_json(self, name, value):
        """Writes `value` as JSON to `name` atomically (a fresh file, then a rename)."""
        temporary = f".{name}.{os.getpid()}.tmp"
        self.unlink(temporary)
        try:
            with self.open(temporary, "x") as handle:
                handle.write(json.dumps(value, indent=2) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            self.replace(temporary, name)
        finally:
            self.unlink(temporary)

    @contextlib.contextmanager
    def locked(self):
        """An exclusive lock on `.lock` in the folder (POSIX), so two processes never write one
        entry; a planted `.lock` link is refused, never followed."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            yield
            return
        with self.open(LOCK_FILE, "ab") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
