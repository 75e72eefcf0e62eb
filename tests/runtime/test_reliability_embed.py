"""`elmo-keras embed` in real processes: disk full, killed while writing (issue 12, D2 and D6).

The runs use the ONNX backend (the fixture biLM exported once per session), so a process
starts in about a second without TensorFlow; the hdf5 writing is the same for both backends.
"""

import signal
import subprocess
import sys
import textwrap
import time

import h5py
import pytest

from elmo_keras.cli import main
from tests.file_io.test_files import mounted_tmpfs

SENTENCES = [" ".join(["the", "bank", "raised", "its", "rates", "."] * 3)] * 300

# Runs `elmo-keras ARGS`; once two datasets are written it writes its pid to MARKER and waits,
# so that the test kills it in the middle of the hdf5 file. The pause is in the iteration over
# the embeddings (between two datasets), not inside h5py.
PAUSING_EMBED = textwrap.dedent(
    """
    import os, pathlib, signal, sys, time
    from elmo_keras.cli import main
    from elmo_keras.runtime import onnx_embedder

    # As in a terminal, whatever the test runner ignores.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

    marker = pathlib.Path(sys.argv[1])
    go = marker.with_name(marker.name + ".go")  # the test lets it finish by creating this

    iter_embed = onnx_embedder.OnnxEmbedder.iter_embed

    def pauses_while_written(self, sentences, progress=None):
        for i, item in enumerate(iter_embed(self, sentences, progress)):
            if i == 2:
                marker.write_text(str(os.getpid()))
                for _ in range(1200):
                    if go.exists():
                        break
                    time.sleep(0.05)
            yield item

    onnx_embedder.OnnxEmbedder.iter_embed = pauses_while_written  # `embed` streams through it
    sys.exit(main(sys.argv[2:]))
    """
)
CLI = "import sys; from elmo_keras.cli import main; sys.exit(main(sys.argv[1:]))"
TIMEOUT = 120  # seconds: every wait below is bounded


@pytest.fixture
def input_file(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path


def _embed_args(onnx_model, input_file, output):
    return ["embed", "--backend", "onnx", "--model", str(onnx_model)] + [
        "--input",
        str(input_file),
        "--output",
        str(output),
        "--batch-size",
        "64",
    ]


def _leftovers(folder, name, locks=True):
    """Hidden files of writes of `name`: temporary outputs and (with `locks`) its lock file."""
    found = (p.name for p in folder.iterdir() if p.name.startswith(f".{name}."))
    return sorted(n for n in found if locks or n != f".{name}.lock")


def _start_and_wait_until_writing(args, tmp_path):
    marker = tmp_path / f"writing-{time.monotonic_ns()}"
    process = subprocess.Popen(
        [sys.executable, "-c", PAUSING_EMBED, str(marker), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            _, err = process.communicate(timeout=TIMEOUT)
            pytest.fail(f"the run never reached the writing: {err[-2000:]}")
        time.sleep(0.05)
    process.go = marker.with_name(marker.name + ".go")
    return process


def _finish(process):
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"the run did not end after the signal: {err[-2000:]}")
    return process.returncode, err


def test_sigkill_leaves_a_partial_file_the_next_run_removes_then_sigterm_leaves_nothing(
    tmp_path, onnx_model, input_file
):
    # Issue 12, D6: a hidden 42-54 MB `.partial` file stayed beside the output.
    output = tmp_path / "out.hdf5"
    args = _embed_args(onnx_model, input_file, output)
    first = _start_and_wait_until_writing(args, tmp_path)
    (killed,) = _leftovers(tmp_path, "out.hdf5", locks=False)  # the hdf5 file being written
    first.send_signal(signal.SIGKILL)
    assert _finish(first)[0] == -signal.SIGKILL
    # SIGKILL cannot be caught: the file stays, and the lock file (the lock went with the process)
    assert _leftovers(tmp_path, "out.hdf5") == sorted([killed, ".out.hdf5.lock"])

    second = _start_and_wait_until_writing(args, tmp_path)
    (writing,) = _leftovers(tmp_path, "out.hdf5", locks=False)  # the killed run's file is gone
    assert writing != killed
    second.send_signal(signal.SIGTERM)
    code, err = _finish(second)
    assert code == -signal.SIGTERM and "Traceback" not in err  # a shell reports 143
    assert _leftovers(tmp_path, "out.hdf5") == [] and not output.exists()


def test_ctrl_c_or_sighup_keep_the_previous_output(tmp_path, onnx_model, input_file):
    output = tmp_path / "out.hdf5"
    output.write_bytes(b"the previous output")
    args = [*_embed_args(onnx_model, input_file, output), "--overwrite"]
    for signum, code in ((signal.SIGINT, 130), (signal.SIGHUP, -signal.SIGHUP)):
        process = _start_and_wait_until_writing(args, tmp_path)
        process.send_signal(signum)
        assert _finish(process)[0] == code
        assert _leftovers(tmp_path, "out.hdf5") == []
        assert output.read_bytes() == b"the previous output"
    assert main(args) == 0  # and a run that is not interrupted replaces it
    with h5py.File(output, "r") as handle:
        assert len(handle) == len(SENTENCES)


def test_two_runs_of_one_output_never_both_succeed(tmp_path, onnx_model, input_file):
    """Issue 30, point 2: two runs to one output both exited 0, the later one's file silently
    replacing the other's. The second is now refused in one line (exit 1) while the first
    writes, with or without --overwrite; the file is the first's, whole; nothing is left."""
    output = tmp_path / "out.hdf5"
    args = _embed_args(onnx_model, input_file, output)
    for overwrite in ([], ["--overwrite"]):
        before = output.read_bytes() if overwrite else None
        first = _start_and_wait_until_writing([*args, *overwrite], tmp_path)
        second = subprocess.run(
            [sys.executable, "-c", CLI, *args, *overwrite],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert (output.read_bytes() if overwrite else output.exists()) == (before or False)
        first.go.touch()
        assert (_finish(first)[0], second.returncode) == (0, 1), second.stderr[-3000:]
        (line,) = second.stderr.strip().splitlines()
        assert line.startswith(f"elmo-keras embed: error: {output} is being written by another")
        assert f"process {first.pid} on " in line
        with h5py.File(output, "r") as handle:
            assert len(handle) == len(SENTENCES)
        assert _leftovers(tmp_path, "out.hdf5") == []


@pytest.fixture
def full_disk(tmp_path, onnx_model, input_file):
    """A tmpfs with room for the embeddings' values but not for the whole hdf5 file."""
    reference = tmp_path / "reference.hdf5"
    assert main(_embed_args(onnx_model, input_file, reference)) == 0
    with h5py.File(reference, "r") as handle:
        values = sum(handle[name].nbytes for name in handle)
    page = 4096
    size = (values + reference.stat().st_size) // 2 // page * page
    assert values < size < reference.stat().st_size - page
    with mounted_tmpfs(tmp_path / "small", f"size={size}") as folder:
        yield folder


def test_a_full_disk_is_one_line_and_leaves_nothing(full_disk, onnx_model, input_file):
    # Issue 12, D2: h5py's RuntimeError, a traceback, then a segfault (exit 139).
    output = full_disk / "out.hdf5"
    result = subprocess.run(
        [sys.executable, "-c", CLI, *_embed_args(onnx_model, input_file, output)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        f"elmo-keras embed: error: could not write {output}: No space left on device; "
        "nothing was written"
    ]
    assert list(full_disk.iterdir()) == []
