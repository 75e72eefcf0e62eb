"""Pretraining the biLM on Keras' JAX backend: one device, all local devices, several hosts.

The same run as `trainer.Trainer` (TensorFlow): the same `LanguageModel`, windows, candidates
(drawn on the host for `(seed, step)`), loss, clipping, freezing, carried LSTM state, loop,
callbacks, metrics, run folder and published weights. What differs is below the loop:

- the step is one `jax.jit` function of the variables' values (`jax_steps.make_train_step`);
  with several devices the global batch and the carried state are split over them along the
  batch axis and the weights replicated (`keras.distribution.DataParallel`), and XLA adds the
  all-reduces;
- the data are NumPy `WindowPacker` batches, prepared and copied to the devices by a background
  thread a few steps ahead (no TensorFlow);
- checkpoints are `checkpoints/ckpt-N.npz` files (`array_checkpoints`), written atomically;
- several hosts: `jax.distributed.initialize()` before the trainer is made; each process feeds
  the rows of its own devices, the chief writes the files, and the stop votes are gathered
  from every process after each step so that all leave after the same one.

TensorFlow is never imported.
"""

import contextlib
import functools

import jax
import jax.numpy as jnp
import keras
import numpy as np

from elmo_keras.training.common.checkpoints import (
    CheckpointWriteError,
    check_step,
    one_line,
    restore_newest_readable,
    resume_hint,
)
from elmo_keras.training.common.metrics import step_logs
from elmo_keras.training.common.model_setup import make_language_model, make_optimizer
from elmo_keras.training.common.trainer_base import TrainerBase
from elmo_keras.training.feed.data import SentenceStream
from elmo_keras.training.feed.windows import WindowPacker, prefetched
from elmo_keras.training.jax import jax_steps
from elmo_keras.training.jax.array_checkpoints import (
    ArrayCheckpointManager,
    assign_variables,
    checkpoint_path,
    read_arrays,
    variable_arrays,
    variable_shapes,
)

_PREFETCH = 4  # batches prepared ahead of the step
_ACCUMULATOR = "optimizer/softmax_accumulator"  # the sparse softmax kernel's Adagrad slots


class JaxTrainer(TrainerBase):
    """Trains a `LanguageModel` with a jit-compiled step, data-parallel over JAX devices.

    `trainer.model` and `.optimizer` are the Keras objects (their variables hold the values of
    the last step); `.state_h` and `.state_c` the carried LSTM state (NumPy). The loop,
    `evaluate` and `export`: `TrainerBase`.

    Args:
        config: `TrainingConfig`, or what `TrainingConfig.parse` takes (a name, a JSON file or
            an options dict): the training configuration, parsed once.
        vocabulary: `Vocabulary`. Sorted by frequency (sampled softmax).
        devices: list of JAX devices or None (all of them, on every host).
        seed: int. Seeds the weights, the candidate sampler, dropout and the data order.
        carry_state: bool. Carry the LSTM state from window to window (bilm-tf).
        mixed_precision: None or `"bfloat16"` (the biLM computes in bfloat16; variables, the
            softmax and the optimizer stay float32).
        freeze_bilm_steps: int. While the step is below it, only the softmax learns.
        sparse_softmax: bool or None. Gather and update only the softmax rows a step uses
            (Adagrad with a sampled softmax). None: whenever that applies.
        tf32: bool. Matrix products in TensorFloat-32 on GPUs (`jax.default_matmul_precision`
            `"tensorfloat32"`); off: `"highest"`, exact float32. Defaults to `False`.

    Example:
    >>> trainer = JaxTrainer(get_config("tiny"), Vocabulary.load("vocab.txt"))  # doctest: +SKIP
    >>> trainer.fit("data/*.txt", steps=100, output_dir="run")  # doctest: +SKIP
    """

    def __init__(
        self,
        config,
        vocabulary,
        devices=None,
        seed=0,
        carry_state=True,
        mixed_precision=None,
        freeze_bilm_steps=0,
        sparse_softmax=None,
        tf32=False,
    ):
        self.devices = list(devices) if devices is not None else jax.devices()
        super().__init__(
            config,
            vocabulary,
            len(self.devices),
            seed,
            carry_state,
            mixed_precision,
            freeze_bilm_steps,
            tf32,
        )
        self.precision = "tensorfloat32" if self.tf32 else "highest"
        self.is_chief = jax.process_index() == 0
        self.multi_worker = jax.process_count() > 1
        self.distribution = None
        scope = contextlib.nullcontext()
        if len(self.devices) > 1:
            self.distribution = keras.distribution.DataParallel(devices=self.devices)
            scope = self.distribution.scope()
        with scope:
            self.model = make_language_model(
                self.config, len(vocabulary), self.seed, mixed_precision
            )
            self.optimizer = make_optimizer(self.config)
            sampled = self.model.n_negative_samples > 0
            adagrad = self.config.optimizer == "adagrad"
            if sparse_softmax is None:
                sparse_softmax = sampled and adagrad
            if sparse_softmax and not (sampled and adagrad):
                raise ValueError(
                    "`sparse_softmax` needs Adagrad and a sampled softmax. Received: "
                    f"optimizer={self.config.optimizer!r}, "
                    f"n_negative_samples={self.model.n_negative_samples}"
                )
            self.sparse_softmax = bool(sparse_softmax)
            self.optimizer.build(self._optimized_variables())
        kernel = self.model.softmax_kernel
        self._accumulator = None
        if self.sparse_softmax:
            self._accumulator = jnp.full(
                kernel.shape, self.optimizer.initial_accumulator_value, jnp.float32
            )
        bilm = self.model.bilm
        layers = (self.batch_size, 2, bilm.n_layers)
        self.state_h = np.zeros(layers + (bilm.projection_dim,), np.float32)
        self.state_c = np.zeros(layers + (bilm.lstm_units,), np.float32)
        self._step = 0
        self._train_step = None

    def _optimized_variables(self):
        """The variables the Keras optimizer updates (all but the sparse softmax kernel)."""
        kernel = self.model.softmax_kernel
        return [
            v for v in self.model.trainable_variables if not (self.sparse_softmax and v is kernel)
        ]

    @property
    def global_step(self):
        return self._step

    @property
    def placement(self):
        """Where the steps run, in words."""
        kinds = sorted({d.platform.upper() for d in self.devices})
        hosts = f" on {jax.process_count()} hosts" if self.multi_worker else ""
        return f"JAX, {len(self.devices)} {'/'.join(kinds)} device(s){hosts}"

    # ---------------------------------------------------------------------- placement

    def _sharding(self, rank, split):
        """Where an array of `rank` dimensions goes: split over the devices along the batch
        axis, or replicated."""
        if self.distribution is None:
            return jax.sharding.SingleDeviceSharding(self.devices[0])
        if split:
            return self.distribution.get_data_layout(
                (self.batch_size,) + (1,) * (rank - 1)
            ).backend_layout
        mesh = self.distribution.device_mesh.backend_mesh
        return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def _put(self, array, split):
        """`array` (this process's rows when `split`) on the devices."""
        sharding = self._sharding(np.ndim(array), split)
        if split and self.multi_worker:
            return jax.make_array_from_process_local_data(sharding, np.asarray(array))
        return jax.device_put(array, sharding)

    def _local_rows(self):
        """The rows of the global batch that this process's devices hold."""
        if not self.multi_worker:
            return slice(None)
        per_process = self.batch_size // jax.process_count()
        start = jax.process_index() * per_process
        return slice(start, start + per_process)

    def _fetch(self, array):
        """A device array as a NumPy array (gathered from every process when split)."""
        if self.multi_worker and not array.is_fully_addressable:
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(array, tiled=True))
        return np.asarray(array)

    # --------------------------------------------------------------------------- the step

    def _device_state(self):
        model = self.model
        return {
            "trainable": [self._put(v.value, False) for v in model.trainable_variables],
            "non_trainable": [self._put(v.value, False) for v in model.non_trainable_variables],
            "optimizer": [self._put(v.value, False) for v in self.optimizer.variables],
            "accumulator": None
            if self._accumulator is None
            else self._put(self._accumulator, False),
            "state_h": self._put(self.state_h[self._local_rows()], True),
            "state_c": self._put(self.state_c[self._local_rows()], True),
        }

    def _keep(self, state):
        """Writes a step's state back into the Keras variables and the trainer."""
        model = self.model
        for variables, arrays in (
            (model.trainable_variables, state["trainable"]),
            (model.non_trainable_variables, state["non_trainable"]),
            (self.optimizer.variables, state["optimizer"]),
        ):
            for variable, array in zip(variables, arrays, strict=True):
                variable.assign(array)
        self._accumulator = state["accumulator"]

    def _run_step(self, batch, requests):
        if self._train_step is None:
            self._train_step = jax_steps.make_train_step(
                self.model,
                self.optimizer,
                self.clip_norm,
                self.freeze_bilm_steps,
                self.sparse_softmax,
                self.carry_state,
            )
        if self._state is None:
            self._state = self._device_state()
        candidates = self.candidates(self._step)
        if candidates is not None:
            candidates = self._put(candidates, False)
        learning_rate = np.float32(keras.ops.convert_to_numpy(self.optimizer.learning_rate))
        with jax.default_matmul_precision(self.precision):
            self._state, metrics = self._train_step(
                self._state, batch, candidates, np.int32(self._step), learning_rate
            )
        self._step += 1
        self._keep(self._state)
        values = [float(metrics[k]) for k in ("forward_nll", "backward_nll", "tokens", "grad_norm")]
        votes = requests.votes()
        if self.multi_worker:
            from jax.experimental import multihost_utils

            gathered = multihost_utils.process_allgather(np.asarray(votes, np.float32))
            votes = [float(v) for v in np.sum(np.reshape(gathered, (-1, len(votes))), axis=0)]
        return step_logs(*values), votes

    _state = None

    def _fit(self, *args, **kwargs):
        """`TrainerBase.fit`; afterwards the carried state is in `state_h` and `state_c`."""
        try:
            return super()._fit(*args, **kwargs)
        finally:
            self._settle()

    def peak_memory_bytes(self):
        """The highest `peak_bytes_in_use` of this process's devices (None on CPUs)."""
        peaks = [
            (device.memory_stats() or {}).get("peak_bytes_in_use")
            for device in self.devices
            if device.process_index == jax.process_index()
        ]
        peaks = [p for p in peaks if p is not None]
        return max(peaks) if peaks else None

    def evaluate(self, *args, **kwargs):
        """`TrainerBase.evaluate`, in this trainer's matrix-product precision."""
        with jax.default_matmul_precision(self.precision):
            return super().evaluate(*args, **kwargs)

    def _settle(self):
        """Brings the carried state back to the host and drops the device copies."""
        if self._state is not None:
            self.state_h = self._fetch(self._state["state_h"])
            self.state_c = self._fetch(self._state["state_c"])
            self._state = None

    # ------------------------------------------------------------------------------ data

    def _batches(self, train, epochs, tokenization_mode, shuffle_buffer, skip):
        sizes = (self.batch_size, self.unroll_steps, self.max_chars)
        stream = functools.partial(
            SentenceStream, train, tokenization_mode, True, shuffle_buffer, self.seed, epochs
        )
        packer = WindowPacker(stream(), self.vocabulary, *sizes)
        rows = self._local_rows()

        def produce():
            for batch in packer.batches(skip=skip):
                local = {key: value[rows] for key, value in batch.items()}
                yield {key: self._put(value, True) for key, value in local.items()}, packer.epoch

        return prefetched(produce(), _PREFETCH)

    # ------------------------------------------------------------------------ checkpoints

    def _arrays(self):
        """Everything a checkpoint holds, by name (NumPy)."""
        if self._state is not None:
            self.state_h = self._fetch(self._state["state_h"])
            self.state_c = self._fetch(self._state["state_c"])
        arrays = variable_arrays("model", self.model.variables, self._fetch)
        arrays.update(variable_arrays("optimizer", self.optimizer.variables, self._fetch))
        if self._accumulator is not None:
            arrays[_ACCUMULATOR] = self._fetch(self._accumulator)
        arrays["step"] = np.asarray(self._step, np.int64)
        arrays["state_h"] = np.asarray(self.state_h)
        arrays["state_c"] = np.asarray(self.state_c)
        return arrays

    def _manager(self, directory, keep):
        return ArrayCheckpointManager(directory, keep) if self.is_chief else _NoFiles(directory)

    def save_checkpoint(self, manager):
        """Writes `ckpt-<step>.npz` (the chief; every process gathers the arrays)."""
        arrays = self._arrays()
        try:
            return manager.save(self._step, arrays)
        except OSError as error:
            raise CheckpointWriteError(
                f"could not write checkpoint ckpt-{self._step} in {manager.directory} "
                f"({one_line(error)}); " + resume_hint(manager.directory)
            ) from None

    def save_unless_saved(self, manager):
        latest = manager.latest_checkpoint
        if latest is None or not latest.endswith(f"-{self._step}"):
            self.save_checkpoint(manager)

    def _restore_latest(self, checkpoint_dir, skip):
        return restore_newest_readable(
            lambda prefix: self.restore_file(prefix, skip), checkpoint_dir
        )

    def restore_file(self, prefix, skip=()):
        """Restores the checkpoint `prefix` (`.../ckpt-N`): every array must match by name and
        shape. `skip`: `"optimizer"` and/or `"state"` (see `TrainerBase.restore`)."""
        path = checkpoint_path(prefix)
        if not path.is_file():
            raise ValueError(
                f"{path} not found (a TensorFlow checkpoint needs KERAS_BACKEND=tensorflow)"
            )
        keep_state = "state" not in skip
        own = ("step",) + (("state_h", "state_c") if keep_state else ())
        shapes = {name: np.shape(getattr(self, name, 0)) for name in own}
        shapes.update(variable_shapes("model", self.model.variables))
        if "optimizer" not in skip:
            shapes.update(variable_shapes("optimizer", self.optimizer.variables))
            if self._accumulator is not None:
                shapes[_ACCUMULATOR] = tuple(self._accumulator.shape)
        saved = read_arrays(path, shapes)
        for name in own:
            if name not in saved:
                raise ValueError(f"{path} does not fit this run: {name} missing or reshaped")
        step = check_step(saved["step"], path)
        self._state = None
        assign_variables("model", self.model.variables, saved, path)
        if "optimizer" not in skip:
            assign_variables("optimizer", self.optimizer.variables, saved, path)
            if self._accumulator is not None:
                if _ACCUMULATOR not in saved:
                    raise ValueError(f"{path} does not fit this run: {_ACCUMULATOR} is missing")
                self._accumulator = jnp.asarray(saved[_ACCUMULATOR])
        self._step = step
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
