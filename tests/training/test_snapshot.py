"""What `snapshot` and the end of training write (issue 39): only a model's files, never into a
live run's folder, never a mix of two checkpoints, and a checkpoint the running training deletes
meanwhile is one line (or the newer one). One short TensorFlow run shared by the tests."""

import os
import pathlib
import shutil
import signal
import subprocess
import sys

import h5py
import pytest

from elmo_keras.cli import main
from tests.training.test_run_folder import DATA, ROOT, run_lock_held


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run with ckpt-1 and ckpt-2 and its model files (of step 2)."""
    folder = tmp_path_factory.mktemp("snapshot") / "run"
    argv = ["train", "--train", DATA, "--output", str(folder), "--config", "tiny"]
    assert main([*argv, "--batch-size", "2", "--steps", "2", "--checkpoint-every", "1"]) == 0
    return folder


def _arrays(path):
    """Every dataset of an hdf5 file, as bytes."""
    found = {}
    with h5py.File(path) as handle:
        handle.visititems(
            lambda name, item: (
                found.__setitem__(name, item[()].tobytes())
                if isinstance(item, h5py.Dataset)
                else None
            )
        )
    return found


def _files(folder):
    return {p.name: p.read_bytes() for p in pathlib.Path(folder).iterdir() if p.is_file()}


def test_snapshot_writes_only_a_models_files_and_respects_the_run_lock(run, tmp_path, capsys):
    """Issue 39, point 1: `snapshot` wrote into a live run's folder (its lock ignored), into
    another run's folder, and replaced a vocab.txt or softmax.hdf5 of the user's without
    `--overwrite` (only options.json and lm_weights.hdf5 were checked). Now: a live run's folder
    is one line naming the holder, another run's folder is refused, the four files are all
    checked, and with `--overwrite` only a model's files (or the run's own) are replaced."""
    own = tmp_path / "run"
    shutil.copytree(run, own)
    snapshot = ["snapshot", "--run", str(own), "--output"]
    with run_lock_held(own) as holder:
        before = _files(own)
        assert main([*snapshot, str(own), "--overwrite", "--checkpoint", "ckpt-1"]) == 1
        err = capsys.readouterr().err.strip()
        assert f"{own} is used by another training run (process {holder.pid} on" in err, err
        assert len(err.splitlines()) == 1 and _files(own) == before
    other = tmp_path / "other"
    shutil.copytree(run, other)
    before = _files(other)
    assert main([*snapshot, str(other), "--overwrite"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--output {other} is the folder of another training run" in err, err
    assert _files(other) == before
    user = tmp_path / "user"
    user.mkdir()
    (user / "vocab.txt").write_text("my words\n")
    assert main([*snapshot, str(user)]) == 2
    assert f"--output {user} already holds vocab.txt; pass --overwrite" in capsys.readouterr().err
    assert main([*snapshot, str(user), "--overwrite"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--output {user} holds vocab.txt but no model (options.json and" in err, err
    assert _files(user) == {"vocab.txt": b"my words\n"}
    assert main([*snapshot, str(own), "--overwrite", "--checkpoint", "ckpt-1"]) == 0
    assert main([*snapshot, str(user / "model")]) == 0
    assert main([*snapshot, str(user / "model"), "--overwrite", "--checkpoint", "ckpt-1"]) == 0
    assert _arrays(user / "model" / "lm_weights.hdf5") == _arrays(own / "lm_weights.hdf5")


_KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from elmo_keras.training.model_files import MODEL_FILES
from elmo_keras.training.pipeline import export_checkpoint

run, out = sys.argv[1], os.path.abspath(sys.argv[2])
export_checkpoint(run, out, "ckpt-1")
replace, moved = os.replace, []

def replace_then_die(source, target, **kwargs):
    replace(source, target, **kwargs)
    target = os.path.abspath(target)
    if os.path.dirname(target) == out and os.path.basename(target) in MODEL_FILES:
        moved.append(target)
        if len(moved) == 2:  # two of the four files renamed into place
            os.kill(os.getpid(), signal.SIGKILL)

os.replace = replace_then_die
export_checkpoint(run, out, "ckpt-2")
"""


def test_a_kill_between_the_final_renames_never_leaves_a_mix(run, tmp_path):
    """Issue 39, point 14: a SIGKILL between the four renames that put a checkpoint's files in
    place left lm_weights.hdf5 of one step beside softmax.hdf5 of another, and readers took the
    mix. The complete set is now renamed into the folder first (`.files.next`, one step), then
    file by file: the next reader (or writer) finishes the switch, and every file is the newer
    checkpoint's. A real process killed after two of the renames."""
    out = tmp_path / "model"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_BETWEEN_RENAMES, str(run), str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    from elmo_keras.training.model_files import load_language_model
    from elmo_keras.training.pipeline import export_checkpoint

    reference = tmp_path / "step2"
    export_checkpoint(run, reference, "ckpt-2")
    model, vocabulary = load_language_model(out)  # finishes the switch first
    for name in ("lm_weights.hdf5", "softmax.hdf5"):
        assert _arrays(out / name) == _arrays(reference / name), name
    assert (out / "vocab.txt").read_bytes() == (reference / "vocab.txt").read_bytes()
    assert sorted(p.name for p in out.iterdir()) == [
        "lm_weights.hdf5",
        "options.json",
        "softmax.hdf5",
        "vocab.txt",
    ]


def test_a_checkpoint_deleted_while_snapshot_reads_it(run, tmp_path, monkeypatch, capsys):
    """Issue 39, point 17: `snapshot` of a running training read its newest checkpoint while the
    run's rotation deleted it: "No such file" (or a traceback). Now the newest checkpoint left
    is read instead; a checkpoint named by `--checkpoint` is one line saying what happened."""
    from elmo_keras.training.tf.state import TrainingState

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    restore = TrainingState.restore

    def rotated_away(self, prefix, skip=()):
        if pathlib.Path(prefix).name == "ckpt-2":  # the running training deletes it now
            for path in pathlib.Path(prefix).parent.glob("ckpt-2.*"):
                path.unlink()
        return restore(self, prefix, skip)

    monkeypatch.setattr(TrainingState, "restore", rotated_away)
    snapshot = ["snapshot", "--run", str(copy), "--output"]
    assert main([*snapshot, str(tmp_path / "newest")]) == 0
    assert capsys.readouterr().out.strip().endswith("ckpt-1")
    shutil.copytree(run / "checkpoints", copy / "checkpoints", dirs_exist_ok=True)
    assert main([*snapshot, str(tmp_path / "named"), "--checkpoint", "ckpt-2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "ckpt-2 was deleted while it was read (the running training keeps only" in err, err
    assert len(err.splitlines()) == 1 and not (tmp_path / "named" / "lm_weights.hdf5").exists()
