"""What a JAX training checkpoint holds: the model, the optimizer, the sparse softmax's Adagrad
accumulator, the step and the LSTM state carried from window to window (the counterpart of
TensorFlow's `tf.state.TrainingState`).

Between `fit` calls the values are on the host: the Keras variables, NumPy arrays for the
carried state. While the steps run they are on the devices (`on_devices`: the dict the compiled
step takes and returns, `jax_steps.make_train_step`), written back into the Keras variables
after each step (`keep`) and brought home at the end (`settle`).
"""

import jax.numpy as jnp
import numpy as np

from elmo_keras.training.common.checkpoints import (
    CheckpointWriteError,
    check_step,
    one_line,
    resume_hint,
)
from elmo_keras.training.common.model_setup import make_language_model, make_optimizer
from elmo_keras.training.jax.array_checkpoints import (
    ArrayCheckpointManager,
    assign_variables,
    checkpoint_path,
    read_arrays,
    variable_arrays,
    variable_shapes,
)

_ACCUMULATOR = "optimizer/softmax_accumulator"  # the sparse softmax kernel's Adagrad slots


class JaxTrainingState:
    """The values of a JAX training run and their checkpoints.

    Builds, in the placement's scope, a `LanguageModel` for the configuration and its optimizer;
    `step` (int: also the data position), `state_h` `[batch_size, 2, n_layers, projection_dim]`
    and `state_c` (`lstm_units`) as NumPy, and with `sparse_softmax` the softmax kernel's Adagrad
    accumulator (the Keras optimizer updates every other variable). A process other than the
    chief writes no files (`manager`).

    Args:
        config: dict. A normalized training configuration.
        vocabulary_size: int. Words of the softmax.
        placement: `jax_placement.JaxPlacement`.
        seed: int. Seeds the initial weights.
        mixed_precision: None or `"bfloat16"`.
        sparse_softmax: bool or None. Update only the softmax rows a step uses (Adagrad with a
            sampled softmax). None: whenever that applies.
        is_chief: bool. This process writes the checkpoints.
    """

    def __init__(
        self,
        config,
        vocabulary_size,
        placement,
        seed=0,
        mixed_precision=None,
        sparse_softmax=None,
        is_chief=True,
    ):
        self.placement = placement
        self.is_chief = is_chief
        with placement.scope():
            self.model = make_language_model(config, vocabulary_size, seed, mixed_precision)
            self.optimizer = make_optimizer(config)
            sampled = self.model.n_negative_samples > 0
            adagrad = config.optimizer == "adagrad"
            if sparse_softmax is None:
                sparse_softmax = sampled and adagrad
            if sparse_softmax and not (sampled and adagrad):
                raise ValueError(
                    "`sparse_softmax` needs Adagrad and a sampled softmax. Received: "
                    f"optimizer={config.optimizer!r}, "
                    f"n_negative_samples={self.model.n_negative_samples}"
                )
            self.sparse_softmax = bool(sparse_softmax)
            self.optimizer.build(self.optimized_variables())
        self.accumulator = None
        if self.sparse_softmax:
            self.accumulator = jnp.full(
                self.model.softmax_kernel.shape,
                self.optimizer.initial_accumulator_value,
                jnp.float32,
            )
        bilm = self.model.bilm
        layers = (config.batch_size, 2, bilm.n_layers)
        self.state_h = np.zeros(layers + (bilm.projection_dim,), np.float32)
        self.state_c = np.zeros(layers + (bilm.lstm_units,), np.float32)
        self.step = 0
        self.device_values = None  # while the steps run: `on_devices`' dict

    def optimized_variables(self):
        """The variables the Keras optimizer updates (all but the sparse softmax kernel)."""
        kernel = self.model.softmax_kernel
        return [
            v for v in self.model.trainable_variables if not (self.sparse_softmax and v is kernel)
        ]

    # ------------------------------------------------------------------------ on the devices

    def on_devices(self):
        """The values on the devices, as the compiled step takes them (made once per `fit`)."""
        if self.device_values is None:
            put, rows = self.placement.put, self.placement.local_rows()
            model = self.model
            self.device_values = {
                "trainable": [put(v.value, False) for v in model.trainable_variables],
                "non_trainable": [put(v.value, False) for v in model.non_trainable_variables],
                "optimizer": [put(v.value, False) for v in self.optimizer.variables],
                "accumulator": None if self.accumulator is None else put(self.accumulator, False),
                "state_h": put(self.state_h[rows], True),
                "state_c": put(self.state_c[rows], True),
            }
        return self.device_values

    def keep(self, values):
        """Takes a step's new values: into the Keras variables, and for the next step."""
        model = self.model
        for variables, arrays in (
            (model.trainable_variables, values["trainable"]),
            (model.non_trainable_variables, values["non_trainable"]),
            (self.optimizer.variables, values["optimizer"]),
        ):
            for variable, array in zip(variables, arrays, strict=True):
                variable.assign(array)
        self.accumulator = values["accumulator"]
        self.device_values = values
        self.step += 1

    def settle(self):
        """Brings the carried state back to the host and drops the device copies."""
        if self.device_values is not None:
            self._fetch_carried()
            self.device_values = None

    def _fetch_carried(self):
        self.state_h = self.placement.fetch(self.device_values["state_h"])
        self.state_c = self.placement.fetch(self.device_values["state_c"])

    # ---------------------------------------------------------------------------- checkpoints

    def arrays(self):
        """Everything a checkpoint holds, by name (NumPy)."""
        if self.device_values is not None:
            self._fetch_carried()
        fetch = self.placement.fetch
        arrays = variable_arrays("model", self.model.variables, fetch)
        arrays.update(variable_arrays("optimizer", self.optimizer.variables, fetch))
        if self.accumulator is not None:
            arrays[_ACCUMULATOR] = fetch(self.accumulator)
        arrays["step"] = np.asarray(self.step, np.int64)
        arrays["state_h"] = np.asarray(self.state_h)
        arrays["state_c"] = np.asarray(self.state_c)
        return arrays

    def manager(self, directory, keep):
        """An `ArrayCheckpointManager` keeping `keep` checkpoints (none written off the chief)."""
        return ArrayCheckpointManager(directory, keep) if self.is_chief else _NoFiles(directory)

    def save(self, manager):
        """Writes `ckpt-<step>.npz` (the chief; every process gathers the arrays)."""
        arrays = self.arrays()
        try:
            return manager.save(self.step, arrays)
        except OSError as error:
            raise CheckpointWriteError(
                f"could not write checkpoint ckpt-{self.step} in {manager.directory} "
                f"({one_line(error)}); " + resume_hint(manager.directory)
            ) from None

    def restore(self, prefix, skip=()):
        """Restores the checkpoint `prefix` (`.../ckpt-N`): every array must match by name and
        shape. `skip`: `"optimizer"` and/or `"state"` (see `TrainerBase.restore`)."""
        path = checkpoint_path(prefix)
        if not path.is_file():
            raise ValueError(
                f"{path} not found (a TensorFlow checkpoint needs KERAS_BACKEND=tensorflow)"
            )
        keep_state = "state" not in skip
        own = ("step",) + (("state_h", "state_c") if keep_state else ())
        shapes = {name: np.shape(getattr(self, name)) for name in own}
        shapes.update(variable_shapes("model", self.model.variables))
        if "optimizer" not in skip:
            shapes.update(variable_shapes("optimizer", self.optimizer.variables))
            if self.accumulator is not None:
                shapes[_ACCUMULATOR] = tuple(self.accumulator.shape)
        saved = read_arrays(path, shapes)
        for name in own:
            if name not in saved:
                raise ValueError(f"{path} does not fit this run: {name} missing or reshaped")
        step = check_step(saved["step"], path)
        self.device_values = None
        assign_variables("model", self.model.variables, saved, path)
        if "optimizer" not in skip:
            assign_variables("optimizer", self.optimizer.variables, saved, path)
            if self.accumulator is not None:
                if _ACCUMULATOR not in saved:
                    raise ValueError(f"{path} does not fit this run: {_ACCUMULATOR} is missing")
                self.accumulator = jnp.asarray(saved[_ACCUMULATOR])
        self.step = step
        if keep_state:
            self.state_h, self.state_c = saved["state_h"], saved["state_c"]


class _NoFiles:
    """A non-chief process's checkpoint manager: takes part, writes nothing."""

    def __init__(self, directory):
        self.directory = directory
        self.latest_checkpoint = None

    def save(self, step, arrays):
        self.latest_checkpoint = f"{self.directory}/ckpt-{step}"
        return self.latest_checkpoint
