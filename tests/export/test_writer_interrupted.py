"""Interrupted exports (issue 12, D10, export side): a killed export's staging folder is
removed by the next one, a live writer's is kept, SIGTERM ends an export cleanly."""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from elmo_keras.export import writer
from export_helpers import leftovers

from elmo_keras.file_io import files

# `elmo-keras ARGS` once the file GATE exists; TensorFlow is imported before, so that a second
# run can start up while the first one works.
EXPORT = textwrap.dedent(
    """
    import pathlib, signal, sys, time
    from elmo_keras.cli import import_tensorflow, main, prepare_environment

    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as in a terminal
    prepare_environment()
    import_tensorflow()
    while not pathlib.Path(sys.argv[1]).exists():
        time.sleep(0.05)
    sys.exit(main(sys.argv[2:]))
    """
)
TIMEOUT = 240  # seconds: every wait below is bounded


def _start_export(gate, args):
    return subprocess.Popen(
        [sys.executable, "-c", EXPORT, str(gate), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_staging(process, parent, name, other_than=()):
    """The staging folder of `process` once it exists (the writing has started)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        found = [n for n in leftovers(parent, name) if n not in other_than and "partial" in n]
        if found:
            return found[0]
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the export never started writing: {process.communicate()[1][-2000:]}")
        time.sleep(0.05)


def _finish(process):
    try:
        return process.communicate(timeout=TIMEOUT)[1], process.returncode
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"the export did not end after the signal: {process.communicate()[1]}")


def test_a_killed_export_leaves_a_staging_folder_the_next_one_removes(tmp_path, allennlp_fixture):
    # Issue 12, D10: `.NAME.partial-XXXX` staging folders piled up after killed exports.
    output = tmp_path / "export"
    args = ["export", "--options", str(allennlp_fixture / "options.json"), "--weights"]
    args += [str(allennlp_fixture / "lm_weights.hdf5"), "--output", str(output)]
    args += ["--format", "savedmodel"]
    first = _start_export(tmp_path / "go", args)
    second = _start_export(tmp_path / "go again", args)
    (tmp_path / "go").touch()
    killed = _wait_for_staging(first, tmp_path, "export")
    first.send_signal(signal.SIGKILL)
    _finish(first)
    # SIGKILL cannot be caught: the staging folder stays, and the lock file (not the lock)
    assert leftovers(tmp_path, "export", locks=False) == [killed]

    (tmp_path / "go again").touch()
    _wait_for_staging(second, tmp_path, "export", other_than=[killed])
    assert killed not in leftovers(tmp_path, "export")  # removed by the next export
    assert ".export.lock" in leftovers(tmp_path, "export")  # the second holds it now
    second.send_signal(signal.SIGTERM)  # while TensorFlow writes the SavedModel
    err, code = _finish(second)
    assert code == -signal.SIGTERM and "Traceback" not in err, err[-2000:]  # a shell: 143
    assert leftovers(tmp_path, "export") == [] and not output.exists()


def test_a_stale_staging_folder_is_removed_by_the_next_export(fixture_bilms, tmp_path, monkeypatch):
    entry = fixture_bilms["bilm_tf"]
    pid_max = int(pathlib.Path("/proc/sys/kernel/pid_max").read_text())
    host = files._HOST
    stale = tmp_path / f".out.partial-{host}.{pid_max + 1}.abcd_123"  # no such process
    stale.mkdir()
    (stale / "model.onnx").write_bytes(b"half an export")
    live = tmp_path / f".out.partial-{host}.{os.getpid()}.live_123"  # being written now
    live.mkdir()
    import elmo_keras.export.onnx

    def fake(bilm, path, **kwargs):  # the real exporters are tested elsewhere
        pathlib.Path(path).write_text("x")

    monkeypatch.setattr(elmo_keras.export.onnx, "export_onnx", fake)
    writer.export_model(entry["options"], entry["weights"], tmp_path / "out", formats="onnx")
    assert leftovers(tmp_path, "out") == [live.name]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "export.json",
        "model.onnx",
        "options.json",
    ]
