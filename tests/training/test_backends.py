"""The one map from a Keras backend to its training parts (`elmo_keras.training.backends`)."""

import pytest

from elmo_keras.training.backends import (
    BACKENDS,
    checkpoint_backend,
    prefix_backend,
    training_backend,
)


def test_each_backend_names_its_own_checkpoint_file(tmp_path):
    (tmp_path / "tf").mkdir()
    (tmp_path / "tf" / "ckpt-3.index").write_bytes(b"")
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "ckpt-3.npz").write_bytes(b"")
    (tmp_path / "both").mkdir()
    for name in ("ckpt-1.index", "ckpt-2.npz"):
        (tmp_path / "both" / name).write_bytes(b"")
    assert checkpoint_backend(tmp_path / "tf") is BACKENDS["tensorflow"]
    assert checkpoint_backend(tmp_path / "jax") is BACKENDS["jax"]
    assert checkpoint_backend(tmp_path / "both") is None
    assert checkpoint_backend(tmp_path / "missing") is None
    assert prefix_backend(tmp_path / "jax" / "ckpt-3") is BACKENDS["jax"]
    assert prefix_backend(tmp_path / "tf" / "ckpt-3") is BACKENDS["tensorflow"]
    # A prefix without files: TensorFlow's reader says what is missing.
    assert prefix_backend(tmp_path / "jax" / "ckpt-9") is BACKENDS["tensorflow"]
    assert [b.title for b in BACKENDS.values()] == ["TensorFlow", "JAX"]


def test_a_backend_without_a_trainer_is_one_line():
    with pytest.raises(ValueError, match="training runs on the Keras backends tensorflow, jax; "):
        training_backend("torch")
    assert training_backend("jax") is BACKENDS["jax"]
