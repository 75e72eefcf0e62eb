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
- the training state (model, optimizer, step, carried LSTM state) is a `jax_state.JaxTrainingState`
  (TensorFlow's is `tf.state.TrainingState`), placed by a `jax_placement.JaxPlacement`;
- checkpoints are `checkpoints/ckpt-N.npz` files (`array_checkpoints`), written atomically;
- the compiled step is kept in JAX's persistent compilation cache (`elmo_keras.compilation_cache`,
  as `BiLMEmbedder`'s programs), so a run resumed in a new process does not compile it again;
- several hosts: `jax.distributed.initialize()` before the trainer is made; each process feeds
  the rows of its own devices, the chief writes the files, and the stop votes are gathered
  from every process after each step so that all leave after the same one.

TensorFlow is never imported.
"""

import jax
import keras
import numpy as np

from elmo_keras import compilation_cache
from elmo_keras.training.common.metrics import step_logs
from elmo_keras.training.common.trainer_base import TrainerBase
from elmo_keras.training.feed.windows import prefetched
from elmo_keras.training.jax import jax_steps
from elmo_keras.training.jax.jax_placement import JaxPlacement
from elmo_keras.training.jax.jax_state import JaxTrainingState

_PREFETCH = 4  # batches prepared ahead of the step
_METRICS = ("forward_nll", "backward_nll", "tokens", "grad_norm")


def loop_defaults(devices):
    """`(unroll, stack_directions)` when a run gives neither: `(4, True)` on GPUs and TPUs
    (measured on an H200: `JaxTrainer`'s `stack_directions`), `(1, False)` on CPUs."""
    return (4, True) if any(device.platform != "cpu" for device in devices) else (1, False)


class JaxTrainer(TrainerBase):
    """Trains a `LanguageModel` with a jit-compiled step, data-parallel over JAX devices.

    `trainer.model` and `.optimizer` are the Keras objects (their variables hold the values of
    the last step); `.state_h` and `.state_c` the carried LSTM state (NumPy): see
    `JaxTrainingState` (`trainer.state`). The loop, `evaluate` and `export`: `TrainerBase`.
    `.compilation_cache`: the folder of JAX's persistent compilation cache the trainer turned
    on (`elmo_keras.compilation_cache.enable`), or None.

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
        unroll: int or None. LSTM steps per iteration of the compiled loop
            (`ProjectedBiLSTM.unroll`: `lax.scan`'s). None: `4` on GPUs and TPUs, `1` on CPUs.
        stack_directions: bool or None. Each layer's two directions in one loop with stacked
            weights (`ProjectedBiLSTM.stack_directions`). None: on GPUs and TPUs, not on CPUs.
            Both are how the step computes, not what: the same numbers. The plain loop's bf16
            step ran at 0.83x-0.92x the plain-JAX reference on an H100, these at 1.04x-1.09x
            on an H200 (benchmarks/results/accelerator.md).

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
        unroll=None,
        stack_directions=None,
    ):
        # Before anything compiles: the folder in use, or None (`$ELMO_KERAS_JAX_CACHE=off`).
        self.compilation_cache = compilation_cache.enable()
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
            unroll,
            stack_directions,
        )
        self.precision = "tensorfloat32" if self.tf32 else "highest"
        self.loop_defaults = loop_defaults(self.devices)
        self.is_chief = jax.process_index() == 0
        self._placement = JaxPlacement(self.devices, self.batch_size)
        self.multi_worker = self._placement.multi_worker
        self.state = JaxTrainingState(
            self.config,
            len(vocabulary),
            self._placement,
            self.seed,
            mixed_precision,
            sparse_softmax,
            self.is_chief,
        )
        self._set_loop()
        self._train_step = None
        self._learning_rate = None

    # The step's metrics stay on the devices for up to this many steps (`PendingLogs`): the
    # host dispatches the next step without waiting for the last one to finish.
    pending_steps = 16

    model = property(lambda self: self.state.model)
    optimizer = property(lambda self: self.state.optimizer)
    sparse_softmax = property(lambda self: self.state.sparse_softmax)
    state_h = property(lambda self: self.state.state_h)
    state_c = property(lambda self: self.state.state_c)

    @property
    def global_step(self):
        return self.state.step

    @property
    def placement(self):
        """Where the steps run, in words."""
        kinds = sorted({d.platform.upper() for d in self.devices})
        hosts = f" on {jax.process_count()} hosts" if self.multi_worker else ""
        return f"JAX, {len(self.devices)} {'/'.join(kinds)} device(s){hosts}"

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
        values = self.state.on_devices()
        candidates = batch.pop("candidates")  # drawn with the batch (`_batches`)
        if isinstance(candidates, np.ndarray):  # several processes: placed here, in step
            candidates = self._placement.put(candidates, False)
        if self._learning_rate is None:
            # Read once per `fit`: reading the variable each step would wait for the last step.
            rate = keras.ops.convert_to_numpy(self.optimizer.learning_rate)
            self._learning_rate = np.float32(rate)
        step = np.int32(self.global_step)
        with jax.default_matmul_precision(self.precision):
            values, metrics = self._train_step(values, batch, candidates, step, self._learning_rate)
        self.state.keep(values)
        votes = requests.votes()
        if self.multi_worker:
            from jax.experimental import multihost_utils

            gathered = multihost_utils.process_allgather(np.asarray(votes, np.float32))
            votes = [float(v) for v in np.sum(np.reshape(gathered, (-1, len(votes))), axis=0)]
        # Read when the loop needs the numbers (`TrainerBase._after_step`), not now.
        return (lambda: step_logs(*(float(metrics[k]) for k in _METRICS))), votes

    def _fit(self, *args, **kwargs):
        """`TrainerBase.fit`; afterwards the carried state is in `state_h` and `state_c`."""
        self._learning_rate = None  # a callback may have changed it since the last `fit`
        try:
            return super()._fit(*args, **kwargs)
        finally:
            self.state.settle()

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

    # ------------------------------------------------------------------- data, checkpoints

    def _batches(self, train, epochs, tokenization_mode, shuffle_buffer, skip):
        packer = self._packer(train, epochs, tokenization_mode, shuffle_buffer)
        rows, put = self._placement.local_rows(), self._placement.put
        first_step = self.global_step

        def produce():
            for index, batch in enumerate(packer.batches(skip=skip)):
                local = {key: value[rows] for key, value in batch.items()}
                local = {key: put(value, True) for key, value in local.items()}
                # The step's candidates, drawn here for `(seed, step)` as the step would, and
                # placed here too unless several processes must place them together (a
                # replicated `device_put` is a collective: it belongs to the step's thread).
                candidates = self.candidates(first_step + index)
                if candidates is not None and not self.multi_worker:
                    candidates = put(candidates, False)
                local["candidates"] = candidates
                yield local, packer.epoch

        return prefetched(produce(), _PREFETCH)

    def _manager(self, directory, keep):
        return self.state.manager(directory, keep)

    def save_checkpoint(self, manager):
        """`JaxTrainingState.save`: `ckpt-<step>.npz`."""
        return self.state.save(manager)

    def restore_file(self, prefix, skip=()):
        """`JaxTrainingState.restore`."""
        self.state.restore(prefix, skip)
