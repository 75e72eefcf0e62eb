"""The one place that maps a Keras backend to its training parts.

Each entry of `BACKENDS` names, for one backend, the trainer (and how a run's strategy setting
becomes its placement), the compiled evaluation step, whether it sees a GPU, and the checkpoint
format it writes (the suffix of a checkpoint prefix's file: TensorFlow's `ckpt-N.index`, the JAX
trainer's `ckpt-N.npz`) with the reader that loads a `LanguageModel` from such a checkpoint.
`pipeline`, `common.evaluation`, `common.distribute`, `cli/train.py` and `cli/snapshot.py` ask
here rather than testing the backend's name themselves.

A checkpoint's format is told by its entry's file next to the prefix (`holds`); a folder's
format is the one whose files are there (`checkpoint_backend`). Every folder written so far
resumes and exports that way: the format is a property of the files, not a setting.

Nothing here imports TensorFlow or JAX: each part is imported when it is asked for.
"""

import dataclasses
import importlib
import pathlib


def _load(target):
    """`"package.module:name"` -> the object (imported now)."""
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


@dataclasses.dataclass(frozen=True)
class _Backend:
    name: str  # Keras' name for it
    title: str  # in messages
    checkpoint_suffix: str  # the file of a checkpoint prefix
    _trainer: str  # "module:class"
    _placement: str  # "module:function(strategy, jit_compile)" -> the trainer's keywords
    _eval_step: str  # "module:make_eval_step(model, in_basis)"
    _has_gpu: str  # "module:function()"
    _read_model: str  # "module:function(prefix, config, vocabulary_size, seed)"

    def make_trainer(self, config, vocabulary, strategy, jit_compile, **common):
        """The backend's trainer for a run's strategy setting (a name, or a
        `tf.distribute.Strategy` on TensorFlow); `common`: the settings both trainers take."""
        placement = _load(self._placement)(strategy, jit_compile)
        return _load(self._trainer)(config, vocabulary, **placement, **common)

    def make_eval_step(self, model, in_basis):
        """`eval_step(batch, state_h, state_c)` of `model`, compiled for this backend."""
        return _load(self._eval_step)(model, in_basis)

    def has_gpu(self):
        return bool(_load(self._has_gpu)())

    def holds(self, prefix):
        """Whether the checkpoint `prefix` is in this backend's format (its file is there)."""
        return pathlib.Path(f"{prefix}{self.checkpoint_suffix}").is_file()

    def wrote(self, directory):
        """Whether `directory` holds checkpoints in this backend's format."""
        return any(pathlib.Path(directory).glob(f"ckpt-*{self.checkpoint_suffix}"))

    def read_model(self, prefix, config, vocabulary_size, seed):
        """The `LanguageModel` of the checkpoint `prefix` (weights only)."""
        return _load(self._read_model)(prefix, config, vocabulary_size, seed)


_HERE = "elmo_keras.training.backends"

BACKENDS = {
    "tensorflow": _Backend(
        "tensorflow",
        "TensorFlow",
        ".index",
        "elmo_keras.training.tf.trainer:Trainer",
        f"{_HERE}:_tensorflow_placement",
        "elmo_keras.training.tf.tf_steps:make_eval_step",
        f"{_HERE}:_tensorflow_has_gpu",
        "elmo_keras.training.tf.state:read_model",
    ),
    "jax": _Backend(
        "jax",
        "JAX",
        ".npz",
        "elmo_keras.training.jax.jax_trainer:JaxTrainer",
        f"{_HERE}:_jax_placement",
        "elmo_keras.training.jax.jax_steps:make_model_eval_step",
        f"{_HERE}:_jax_has_gpu",
        "elmo_keras.training.jax.array_checkpoints:read_model",
    ),
}


def training_backend(name=None):
    """The entry of backend `name` (None: the running Keras backend's).

    Raises:
        ValueError: no trainer runs on that backend.
    """
    if name is None:
        from elmo_keras.backend import keras_backend  # noqa: PLC0415

        name = keras_backend()
    if name not in BACKENDS:
        raise ValueError(
            f"training runs on the Keras backends {', '.join(BACKENDS)}; received {name!r}"
        )
    return BACKENDS[name]


def checkpoint_backend(directory):
    """The entry whose checkpoints are in `directory`, or None (none there, or several kinds)."""
    found = [backend for backend in BACKENDS.values() if backend.wrote(directory)]
    return found[0] if len(found) == 1 else None


def prefix_backend(prefix):
    """The entry whose format the checkpoint `prefix` is in; TensorFlow's when no file is
    there (its reader then says what is missing)."""
    return next((b for b in BACKENDS.values() if b.holds(prefix)), BACKENDS["tensorflow"])


def _tensorflow_placement(strategy, jit_compile):
    from elmo_keras.training.common.distribute import make_strategy  # noqa: PLC0415

    strategy = make_strategy(strategy) if isinstance(strategy, str) else strategy
    return {"strategy": strategy, "jit_compile": jit_compile}


def _jax_placement(strategy, jit_compile):
    """(`jit_compile`: the JAX step is always compiled.)"""
    from elmo_keras.training.common.distribute import jax_devices  # noqa: PLC0415

    return {"devices": jax_devices(strategy)}


def _tensorflow_has_gpu():
    import tensorflow as tf  # noqa: PLC0415

    return tf.config.list_physical_devices("GPU")


def _jax_has_gpu():
    import jax  # noqa: PLC0415

    return any(device.platform != "cpu" for device in jax.devices())
