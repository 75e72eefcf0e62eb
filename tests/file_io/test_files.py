"""Atomic output files: complete or absent, never half-written, nothing left behind."""

import contextlib
import errno
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time
import zlib

import h5py
import numpy as np
import pytest

from elmo_keras.file_io import files, hdf5_writer
from elmo_keras.file_io.files import (
    atomic_directory,
    atomic_file,
    check_output,
    check_writable,
    remove_stale,
    write_text,
)
from elmo_keras.file_io.hdf5_writer import write_datasets


def test_atomic_file_replaces_only_on_success(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]  # no temp file left
    with atomic_file(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"


def test_atomic_file_overwrite_and_parent_rules(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(FileExistsError, match="already exists; pass `overwrite=True`"):
        with atomic_file(target, overwrite=False):
            pass
    with pytest.raises(FileNotFoundError, match="output folder does not exist"):
        with atomic_file(tmp_path / "missing" / "x.txt", make_parents=False):
            pass
    write_text(tmp_path / "made" / "x.txt", "text")
    assert (tmp_path / "made" / "x.txt").read_text() == "text"


def test_check_output(tmp_path):
    assert check_output(tmp_path / "new") == tmp_path / "new"
    with pytest.raises(FileExistsError):
        check_output(tmp_path)
    assert check_output(tmp_path, overwrite=True) == tmp_path


def test_only_regular_files_are_ever_replaced(tmp_path):
    # Issue 12, D1: `--overwrite` once renamed the output over /dev/null.
    with pytest.raises(ValueError, match="'/dev/null' is not a regular file"):
        with atomic_file("/dev/null", overwrite=True):
            pass
    assert pathlib.Path("/dev/null").is_char_device()
    with pytest.raises(ValueError, match="is a directory; only a regular file is replaced"):
        with atomic_file(tmp_path, overwrite=True):
            pass
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        with atomic_directory(tmp_path / "file", overwrite=True):
            pass
    assert (tmp_path / "file").read_text() == "x"


# Issue 12: disk full, signals and the leftovers of killed writes.


def _names(folder):
    return sorted(p.name for p in folder.iterdir())


class _DiskFillsUp:
    """The sink's file with a byte budget: a short write, then ENOSPC, like a full disk."""

    def __init__(self, raw, budget):
        self.raw, self.budget = raw, budget

    def write(self, data):
        if self.budget <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = min(len(data), self.budget)
        self.budget -= n
        return self.raw.write(data[:n])

    def __getattr__(self, name):
        return getattr(self.raw, name)


def _fill_disk_after(monkeypatch, budget):
    original = hdf5_writer._Sink.__init__

    def init(self, path):
        original(self, path)
        self._file = _DiskFillsUp(self._file, budget)

    monkeypatch.setattr(hdf5_writer._Sink, "__init__", init)


def _arrays(n=20, size=2000):
    rng = np.random.default_rng(0)
    return [(str(i), rng.standard_normal(size).astype(np.float32)) for i in range(n)]


def test_write_datasets_round_trip_with_and_without_checksums(tmp_path):
    arrays = _arrays(3) + [("empty", np.zeros((0, 4), np.float32)), ("group/x", np.ones(2))]
    for checksum in (False, True):
        path = tmp_path / f"out{checksum}.hdf5"
        write_datasets(path, iter(arrays), checksum=checksum)
        with h5py.File(path, "r") as handle:
            for name, array in arrays:
                np.testing.assert_array_equal(handle[name][...], array)
                expected = zlib.crc32(np.ascontiguousarray(array).tobytes())
                assert handle[name].attrs.get("crc32") == (expected if checksum else None)
    assert _names(tmp_path) == ["outFalse.hdf5", "outTrue.hdf5"]


@pytest.mark.parametrize("budget", [0, 5000, 60_000])
def test_disk_full_while_writing_is_one_oserror_and_leaves_nothing(tmp_path, monkeypatch, budget):
    # Issue 12, D2: h5py's own file driver fails every later call after a failed write, and
    # closing the file then crashed the interpreter (exit 139, 42k lines of stderr).
    target = tmp_path / "out.hdf5"
    target.write_bytes(b"the previous output")
    _fill_disk_after(monkeypatch, budget)
    with pytest.raises(OSError) as error:
        write_datasets(target, _arrays())
    assert error.value.errno == errno.ENOSPC
    assert str(error.value) == (
        f"could not write {target}: No space left on device; nothing was written"
    )
    assert target.read_bytes() == b"the previous output"
    assert _names(tmp_path) == ["out.hdf5"]


def test_a_failed_fsync_is_a_failed_write(tmp_path, monkeypatch):
    # Some file systems report a full disk only when the data is flushed.
    def fail(fd):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(hdf5_writer.os, "fsync", fail)
    with pytest.raises(OSError, match=r"could not write .*out.hdf5: Input/output error"):
        write_datasets(tmp_path / "out.hdf5", _arrays(2))
    assert _names(tmp_path) == []


def _leftover(folder, name, kind="partial", host=None, pid=None, directory=False, tag="abcd_123"):
    host = host or files._HOST
    pid = pid if pid is not None else _dead_pid()
    path = folder / f".{name}.{kind}-{host}.{pid}.{tag}"
    if directory:
        path.mkdir()
        (path / "inside.onnx").write_text("half")
    else:
        path.write_text("half")
    return path


def _dead_pid():
    # Above the kernel's pid_max: no process can have it.
    return int(pathlib.Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_leftovers_of_killed_writes_are_removed_and_nothing_else(tmp_path):
    # Issue 12, D6 and D10: SIGKILL leaves the temporary file or staging folder behind.
    stale = [
        _leftover(tmp_path, "out.hdf5"),
        _leftover(tmp_path, "out.hdf5", kind="old", tag="old_1234"),  # swap done: deleted
        _leftover(tmp_path, "out.hdf5", directory=True, tag="dir_1234"),
    ]
    kept = [
        _leftover(tmp_path, "out.hdf5", pid=os.getppid()),  # a live process is writing
        _leftover(tmp_path, "out.hdf5", pid=1, tag="init_123"),
        _leftover(tmp_path, "out.hdf5", host="another-host"),  # may be alive there
        _leftover(tmp_path, "other.hdf5"),  # another output's
        _leftover(tmp_path, "out.hdf5.bak"),
    ]
    for name in [
        ".out.hdf5.partial-notes",  # the user's own files, whatever they look like
        ".out.hdf5.abcd_123.partial",  # the 0.2.0 temporary name: no owner in it, kept
        "out.hdf5.partial-x.1.abcdefgh",
        f".out.hdf5.partial-{files._HOST}.{_dead_pid()}.abcd_123.txt",
    ]:
        (tmp_path / name).write_text("mine")
        kept.append(tmp_path / name)
    link = tmp_path / f".out.hdf5.partial-{files._HOST}.{_dead_pid()}.link_123"
    link.symlink_to(kept[-1])
    kept.append(link)
    (tmp_path / "out.hdf5").write_text("the finished output")
    kept.append(tmp_path / "out.hdf5")
    removed = remove_stale(tmp_path / "out.hdf5")
    assert sorted(removed) == sorted(stale)
    assert _names(tmp_path) == sorted(p.name for p in kept)
    assert (tmp_path / "out.hdf5").read_text() == "the finished output"
    with atomic_file(tmp_path / "other.hdf5") as tmp:  # the next write of a name cleans it
        tmp.write_text("new")
    assert not (tmp_path / f".other.hdf5.partial-{files._HOST}.{_dead_pid()}.abcd_123").exists()


def test_an_output_moved_aside_by_a_killed_swap_is_put_back(tmp_path):
    aside = _leftover(tmp_path, "export", kind="old", directory=True)
    with pytest.raises(RuntimeError):
        with atomic_directory(tmp_path / "export"):  # the next export, failing at once
            raise RuntimeError("stop")
    assert _names(tmp_path) == ["export"]
    assert (tmp_path / "export" / "inside.onnx").read_text() == "half"
    assert not aside.exists()
    again = _leftover(tmp_path, "export", kind="old", directory=True)  # the swap had finished
    assert remove_stale(tmp_path / "export") == [again]
    assert _names(tmp_path) == ["export"]


@pytest.fixture
def default_sigterm():
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("SIGTERM has a handler in this process")
    yield
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


# Writes "half" into a temporary output of OUTPUT (a file, or a folder with a file in it)
# beside an existing OUTPUT, then signals itself. Without TensorFlow: about 0.2 s a run.
SIGNALLED_WRITE = textwrap.dedent(
    """
    import os, pathlib, signal, sys, time
    from elmo_keras.file_io.files import atomic_directory, atomic_file

    signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, whatever
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the test runner ignores
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    output, kind, signum = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    with (atomic_file if kind == "file" else atomic_directory)(output, overwrite=True) as tmp:
        (tmp if kind == "file" else tmp / "model.onnx").write_text("half")
        os.kill(os.getpid(), signum)
        time.sleep(30)
    """
)


@pytest.mark.parametrize("kind", ["file", "folder"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_while_writing_removes_the_temporary_output(tmp_path, kind, signum):
    # Issue 12, D6 and D10 (tests/runtime/test_reliability_embed.py and
    # tests/export/test_writer_interrupted.py kill real `embed` and `export` runs).
    output = tmp_path / "out"
    if kind == "file":
        output.write_text("old")
    else:
        output.mkdir()
        (output / "old.onnx").write_text("old")
    script = [sys.executable, "-c", SIGNALLED_WRITE, str(output), kind, str(int(signum))]
    result = subprocess.run(script, capture_output=True, text=True, timeout=60)
    if signum == signal.SIGINT:  # KeyboardInterrupt, through the clean-up, then Python's exit
        assert result.returncode == -signum and "KeyboardInterrupt" in result.stderr
    else:  # removed, then ended by the same signal: no exception a library could swallow
        assert result.returncode == -signum and result.stderr == ""
    assert _names(tmp_path) == ["out"]
    assert (output if kind == "file" else output / "old.onnx").read_text() == "old"


def test_a_signal_in_a_step_that_must_not_be_cut_waits_for_its_end(default_sigterm):
    # With a second thread (TensorFlow and ONNX Runtime start many), a signal mask blocked in
    # the main thread would let that thread take the signal, and Python would still run the
    # handler mid-step.
    import threading

    done = threading.Event()
    other = threading.Thread(target=done.wait, daemon=True)
    other.start()
    received, steps = [], []
    signal.signal(signal.SIGTERM, lambda signum, frame: received.append(list(steps)))
    with files.deferred_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        steps.append("the step finished")
    assert received == [["the step finished"]]  # the handler ran after the step
    # Python's own SIGINT handler (a shell starts background jobs with SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with files.deferred_signals():
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
                steps.append("again")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert steps[-1] == "again"
    done.set()
    other.join()


def test_a_handler_the_program_set_is_kept(tmp_path, default_sigterm):
    received = []
    signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    with atomic_file(tmp_path / "out.txt") as tmp:
        tmp.write_text("done")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
    assert received == [signal.SIGTERM]
    assert (tmp_path / "out.txt").read_text() == "done"


def test_output_location_problems_are_found_before_the_work(tmp_path):
    # Issue 12, D11: each names the path.
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileNotFoundError, match=f"output folder does not exist: {tmp_path}/no"):
        check_writable(tmp_path / "no" / "out.hdf5", make_parents=False)
    with pytest.raises(NotADirectoryError, match=f"{tmp_path}/file is not a folder"):
        check_writable(tmp_path / "file" / "out.hdf5", make_parents=False)
    with pytest.raises(NotADirectoryError, match=f"{tmp_path}/file is not a folder"):
        check_writable(tmp_path / "file" / "sub" / "export")
    check_writable(tmp_path / "new" / "sub" / "export")  # missing folders will be made
    assert _names(tmp_path) == ["file"]  # the probe is gone


def test_an_unwritable_folder_is_found_before_the_work(read_only_folder):
    with pytest.raises(OSError, match=f"cannot write to {read_only_folder} .*Read-only"):
        check_writable(read_only_folder / "out.hdf5", make_parents=False)
    with pytest.raises(OSError, match=f"cannot write to {read_only_folder} "):
        check_writable(read_only_folder / "sub" / "export")


@contextlib.contextmanager
def mounted_tmpfs(folder, options):
    """A tmpfs mounted on `folder` for the block (skips the test where mounting is refused).

    Root in a container may mount one; root ignores file modes, so a read-only or a full file
    system is the honest way to test those.
    """
    folder.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)]
    try:
        result = subprocess.run(mount, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        pytest.skip(f"cannot mount a tmpfs here: {error}")
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True, timeout=30)


@pytest.fixture
def read_only_folder(tmp_path):
    with mounted_tmpfs(tmp_path / "read-only", "ro,size=64k") as folder:
        yield folder
