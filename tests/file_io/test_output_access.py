"""One writer per output, and outputs with the permissions the umask allows (issue 30, points 2
and 12; issue 29, point 5): `elmo_keras.file_io.output_access` and the writers that use it."""

import os
import stat
import subprocess
import sys
import textwrap
import threading
import time

import h5py
import pytest

from elmo_keras.cli import main
from elmo_keras.file_io import output_access
from elmo_keras.file_io.files import atomic_directory, atomic_file, remove_stale, write_text

TIMEOUT = 60  # seconds: every wait below is bounded

# Writes ARGV[1] (a folder) with `atomic_directory(..., overwrite=True)`, touches ARGV[2] once
# inside the block, and stays there until ARGV[2] + ".go" exists.
WRITER = textwrap.dedent(
    """
    import pathlib, sys, time
    from elmo_keras.file_io.files import atomic_directory

    marker = pathlib.Path(sys.argv[2])
    go = marker.with_name(marker.name + ".go")
    with atomic_directory(sys.argv[1], overwrite=True) as staging:
        (staging / "who").write_text("the first writer")
        marker.touch()
        for _ in range(1200):
            if go.exists():
                break
            time.sleep(0.05)
    """
)


def start_writer(folder, marker):
    """Starts `WRITER` on `folder` and returns the process once it is inside its block; its
    `finish()` lets it end and checks that it succeeded."""
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder), str(marker)], stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + TIMEOUT
    while not marker.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the writer never started: {process.communicate()[1][-2000:]}")
        time.sleep(0.05)

    def finish():
        marker.with_name(marker.name + ".go").touch()
        _, err = process.communicate(timeout=TIMEOUT)
        assert process.returncode == 0, err[-2000:]

    process.finish = finish
    return process


@pytest.fixture
def writing(tmp_path):
    """`start_writer` for a test; a writer still running at the end is killed."""
    processes = []

    def start(folder):
        processes.append(start_writer(folder, tmp_path / f"writing-{len(processes)}"))
        return processes[-1]

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=TIMEOUT)


def test_a_second_writer_of_an_output_is_refused_in_one_line(writing, tmp_path, capsys):
    """Two writers of one export folder both succeeded with `overwrite=True` (the later one
    replacing the other's folder). Now, while one writes, the other is refused at once, naming
    the holder: an export (`atomic_directory`), a snapshot into that folder, a new file."""
    output = tmp_path / "out"
    first = writing(output)
    with pytest.raises(
        BlockingIOError, match=f"is being written by another run .process {first.pid} on "
    ):
        with atomic_directory(output, overwrite=True) as staging:
            (staging / "who").write_text("the second writer")
    run = tmp_path / "run"
    run.mkdir()
    (run / "training_config.json").write_text("{}")
    capsys.readouterr()
    assert main(["snapshot", "--run", str(run), "--output", str(output)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"elmo-keras snapshot: error: {output.absolute()} is being written")
    first.finish()
    assert (output / "who").read_text() == "the first writer"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_lock_is_reentrant_in_its_thread_and_exclusive_across_threads(tmp_path):
    output = tmp_path / "out.txt"
    errors = []
    with output_access.output_lock(output), atomic_file(output, overwrite=False) as tmp:
        tmp.write_text("mine")  # the same thread takes it again
        thread = threading.Thread(target=lambda: errors.append(_try_lock(output)))
        thread.start()
        thread.join(TIMEOUT)
    assert errors == [BlockingIOError] and output.read_text() == "mine"
    assert not output_access.lock_path(output).exists()  # removed on release


def _try_lock(output):
    try:
        with output_access.output_lock(output):
            return None
    except OSError as error:
        return type(error)


def test_a_lock_file_nobody_holds_is_removed_by_the_next_writer(tmp_path):
    # What a SIGKILLed writer leaves: the file, without the lock (it went with the process).
    output = tmp_path / "out.txt"
    lock = output_access.lock_path(output)
    lock.write_text("process 1 on elsewhere\n")
    assert remove_stale(output) == [lock] and not lock.exists()
    with output_access.output_lock(output):  # a held one is kept
        assert remove_stale(output) == [] and lock.exists()
    link = output_access.lock_path(tmp_path / "other")
    link.symlink_to(tmp_path / "target")
    with pytest.raises(OSError):  # a planted link is never followed
        with output_access.output_lock(tmp_path / "other"):
            pass
    assert not (tmp_path / "target").exists()


def test_the_umask_is_read_without_changing_it(tmp_path, monkeypatch):
    previous = os.umask(0o027)
    try:
        assert output_access.current_umask() == 0o027
        monkeypatch.setattr(output_access, "open", _no_proc, raising=False)
        assert output_access.current_umask(tmp_path) == 0o027  # a probe folder tells it
        assert list(tmp_path.iterdir()) == []
    finally:
        os.umask(previous)


def _no_proc(*args, **kwargs):
    raise FileNotFoundError("no /proc here")


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path):
    return stat.S_IMODE(path.stat().st_mode)


def test_outputs_get_the_usual_permissions(umask_022, tmp_path, onnx_model, keras_bilm):
    """Under umask 022 the `embed` hdf5 was 0600, an export folder 0700 and its options.json
    0600 (tempfile's modes); now 0644 and 0755, as `open` and `mkdir` make them."""
    text = tmp_path / "in.txt"
    text.write_text("the bank .\n")
    output = tmp_path / "out.hdf5"
    argv = ["embed", "--model", str(onnx_model), "--input", str(text), "--output", str(output)]
    assert main(argv) == 0 and _mode(output) == 0o644
    with h5py.File(output, "r") as handle:
        assert len(handle) == 1
    with atomic_directory(tmp_path / "export") as staging:  # the export's folder and writer
        write_text(staging / "options.json", "{}")
    assert _mode(tmp_path / "export") == 0o755
    assert _mode(tmp_path / "export" / "options.json") == 0o644

    from elmo_keras.models.language_model import LanguageModel
    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.configs import TrainingConfig
    from elmo_keras.training.model_files import MODEL_FILES, save_language_model
    from elmo_keras.training.run.run_folder import CONFIG_FILE, lock_run
    from elmo_keras.training.run.run_record import RunRecord

    vocabulary = Vocabulary(["<S>", "</S>", "<UNK>", "the", "bank"])
    model = LanguageModel(keras_bilm, len(vocabulary), 0)
    model.build()
    save_language_model(
        model, vocabulary, tmp_path / "snapshot"
    )  # what `snapshot` and `train` write
    assert sorted(p.name for p in (tmp_path / "snapshot").iterdir()) == sorted(MODEL_FILES)
    assert {_mode(tmp_path / "snapshot" / name) for name in MODEL_FILES} == {0o644}
    with lock_run(tmp_path / "run"):
        record = RunRecord(
            config=TrainingConfig.parse("tiny"),
            seed=0,
            tokenization_mode="whitespace",
            train="t.txt",
        )
        record.write(tmp_path / "run", vocabulary)
    assert {_mode(p) for p in (tmp_path / "run").iterdir()} == {0o644}
    assert CONFIG_FILE in {p.name for p in (tmp_path / "run").iterdir()}
