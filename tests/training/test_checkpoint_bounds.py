"""Issue 39, point 17: a checkpoint's step and arrays are checked before a run goes on from it.
A step of -100 surfaced as "`seed` must be ..." and one of 2**62 was accepted; a `.npz` member
declaring 2 GB was decompressed before any shape was checked. NumPy only (the TensorFlow and
JAX restores that call these: tests/training/test_trainer.py and test_jax_steps.py)."""

import json
import zipfile

import numpy as np
import pytest

from elmo_keras import memory
from elmo_keras.training.common.checkpoints import MAX_STEP, check_step
from elmo_keras.training.jax.array_checkpoints import read_arrays, write_arrays

KERNEL = "model/0000/kernel"


@pytest.mark.parametrize("step", [-100, 2**62, MAX_STEP + 1, 1.5, True, np.float64(3.0)])
def test_a_step_outside_the_range_is_one_line_naming_the_checkpoint(step):
    with pytest.raises(ValueError) as error:
        check_step(np.asarray(step) if isinstance(step, int) else step, "run/ckpt-3")
    message = str(error.value)
    assert message.startswith("run/ckpt-3 holds step ") and "[0, 2,147,483,647]" in message


def test_steps_in_the_range_are_ints():
    assert check_step(np.asarray(7, np.int64), "ckpt-7") == 7
    assert check_step(MAX_STEP, "ckpt") == MAX_STEP and check_step(0, "ckpt-0") == 0


def _bomb(path, megabytes):
    """A checkpoint whose kernel member declares `megabytes` MiB of zeros, deflated to a few
    KB (written in pieces: the test never holds it)."""
    rows = megabytes * 2**20 // (4 * 1024)
    names = json.dumps([KERNEL, "step"]).encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("__names__.npy", "w") as member:
            np.lib.format.write_array(member, np.frombuffer(names, np.uint8))
        with archive.open("step.npy", "w") as member:
            np.lib.format.write_array(member, np.asarray(3, np.int64))
        with archive.open(f"{KERNEL}.npy", "w", force_zip64=True) as member:
            header = {"descr": "<f4", "fortran_order": False, "shape": (rows, 1024)}
            np.lib.format.write_array_header_1_0(member, header)
            zeros = bytes(2**20)
            for _ in range(megabytes):
                member.write(zeros)
    assert path.stat().st_size < 2**20


def test_a_member_of_another_declared_shape_is_refused_unread(tmp_path):
    path = tmp_path / "ckpt-3.npz"
    _bomb(path, 64)
    with pytest.raises(ValueError) as error:
        read_arrays(path, {KERNEL: (4, 4), "step": ()})
    message = str(error.value)
    assert message == (
        f"{path} does not fit this run: {KERNEL} is declared [16384, 1024], expected [4, 4] "
        "(not read)"
    )


def test_all_arrays_are_refused_when_their_declared_sizes_do_not_fit(tmp_path, monkeypatch):
    path = tmp_path / "ckpt-3.npz"
    _bomb(path, 64)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**20)
    with pytest.raises(memory.NotEnoughMemory, match=r"ckpt-3.npz: its arrays would need"):
        read_arrays(path)


def test_the_arrays_a_run_needs_are_read_by_name(tmp_path):
    path = tmp_path / "ckpt-3.npz"
    kernel = np.arange(12, dtype=np.float32).reshape(3, 4)
    write_arrays(path, {KERNEL: kernel, "step": np.asarray(3), "other": np.ones(2)})
    arrays = read_arrays(path, {KERNEL: (3, 4), "step": (), "missing": (1,)})
    assert list(arrays) == [KERNEL, "step"]  # "other" not read, "missing" for the caller
    np.testing.assert_array_equal(arrays[KERNEL], kernel)
    assert list(read_arrays(path)) == [KERNEL, "step", "other"]
