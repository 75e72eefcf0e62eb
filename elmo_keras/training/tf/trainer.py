"""Pretraining the biLM under any `tf.distribute` strategy, with exact resume.

One global step = one global batch of windows, split over the replicas row-wise. Each replica
divides its tokens' summed negative log-likelihood by the *global* token count, so the replicas'
gradients add up to the gradient of the global mean; they are clipped by their global norm after
that sum (`gradients`). With Adagrad and a sampled softmax only the softmax rows the step read are
updated (`gradients.sparse_adagrad`, as on JAX; `trainer.sparse_softmax`). The sampled
softmax's candidates are drawn on the host for `(seed, step)` (`LanguageModel.sample_candidates`)
and handed to the step. The LSTM state carried from
window to window is checkpointed with the weights, the optimizer and the step, which is also the
data position (`state.TrainingState`): a stopped run resumes exactly.

The step is hand-written rather than left to `keras.Model.fit` for the clipping after the
cross-replica sum, the carried state and the stop votes riding on the step's all-reduce. The
loop, evaluation and output are `trainer_base.TrainerBase`'s, shared with the JAX trainer.
"""

import functools

import tensorflow as tf

from elmo_keras.training.common import distribute, step_ops
from elmo_keras.training.common.metrics import step_logs
from elmo_keras.training.common.stopping import STOP_REASONS
from elmo_keras.training.common.trainer_base import TrainerBase
from elmo_keras.training.feed.windows import make_dataset
from elmo_keras.training.tf import gradients
from elmo_keras.training.tf.state import TrainingState


class Trainer(TrainerBase):
    """Trains a `LanguageModel` on windows of text under a `tf.distribute` strategy.

    `trainer.model`, `.optimizer`, `.step`, `.state_h`, `.state_c`: see `TrainingState`
    (`trainer.state`). `trainer.sparse_softmax`: the softmax kernel is updated row by row
    (Adagrad with a sampled softmax). The loop, `evaluate` and `export`: `TrainerBase`.

    Args:
        config: `TrainingConfig`, or what `TrainingConfig.parse` takes (a name, a JSON file or
            an options dict): the training configuration, parsed once.
        vocabulary: `Vocabulary`. Sorted by frequency (sampled softmax).
        strategy: `tf.distribute.Strategy` or None (the current one).
        seed: int. Seeds the weights, the candidate sampler and the data order.
        carry_state: bool. Carry the LSTM state from window to window (bilm-tf). Defaults to
            `True`.
        mixed_precision: None or `"bfloat16"` (compute in bfloat16, variables and softmax in
            float32; no loss scaling needed). For GPUs and TPUs.
        jit_compile: bool. Compile each replica's forward and backward pass with XLA.
        freeze_bilm_steps: int. While the step is below it, the biLM's gradients are zero and
            only the softmax learns (a new softmax over a pretrained biLM). Defaults to `0`.
        tf32: bool. Allow TensorFloat-32 matrix products on GPUs. TensorFlow allows them by
            default; the trainer turns them off (exact float32) unless this is True. The
            setting is TensorFlow's, for the whole process. Defaults to `False`.
        unroll: int or None. LSTM steps per iteration of the compiled loop
            (`ProjectedBiLSTM.unroll`; TensorFlow's loop does not unroll). None: `1`.
        stack_directions: bool or None. Each layer's two directions in one loop with stacked
            weights (`ProjectedBiLSTM.stack_directions`). None: `False`.

    Example:
    >>> trainer = Trainer(get_config("tiny"), Vocabulary.load("vocab.txt"))  # doctest: +SKIP
    >>> trainer.fit("data/*.txt", steps=100, output_dir="run")  # doctest: +SKIP
    """

    def __init__(
        self,
        config,
        vocabulary,
        strategy=None,
        seed=0,
        carry_state=True,
        mixed_precision=None,
        jit_compile=False,
        freeze_bilm_steps=0,
        tf32=False,
        unroll=None,
        stack_directions=None,
    ):
        self.strategy = strategy or tf.distribute.get_strategy()
        super().__init__(
            config,
            vocabulary,
            self.strategy.num_replicas_in_sync,
            seed,
            carry_state,
            mixed_precision,
            freeze_bilm_steps,
            tf32,
            unroll,
            stack_directions,
        )
        tf.config.experimental.enable_tensor_float_32_execution(self.tf32)
        self.jit_compile = bool(jit_compile)
        self.is_chief = distribute.is_chief(self.strategy)
        self.multi_worker = distribute.num_workers(self.strategy) > 1
        self.state = TrainingState(
            self.config, len(vocabulary), self.strategy, self.seed, mixed_precision
        )
        # Adagrad with a sampled softmax: the softmax kernel is updated row by row (`gradients`).
        sampled = self.model.n_negative_samples > 0
        self.sparse_softmax = sampled and self.config.optimizer == "adagrad"
        self._set_loop()
        self._train_step = None

    model = property(lambda self: self.state.model)
    optimizer = property(lambda self: self.state.optimizer)
    checkpoint = property(lambda self: self.state.checkpoint)
    step = property(lambda self: self.state.step)
    state_h = property(lambda self: self.state.state_h)
    state_c = property(lambda self: self.state.state_c)

    @property
    def global_step(self):
        """The number of steps taken (restored with a checkpoint), a Python int."""
        return int(self.step.numpy())

    @property
    def placement(self):
        """Where the steps run, in words (the strategy's class)."""
        return type(self.strategy).__name__

    def peak_memory_bytes(self):
        """The first GPU's peak memory (TensorFlow's count), None without GPUs."""
        if not tf.config.list_logical_devices("GPU"):
            return None
        return tf.config.experimental.get_memory_info("GPU:0")["peak"]

    # --------------------------------------------------------------------------- the step

    def _forward_backward(self, batch, state_h, state_c, candidates, denominator):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            out = self.model.window_nll(batch, state_h, state_c, candidates, training=True)
            loss = step_ops.mean_loss(out, denominator)
        grads = tape.gradient(loss, variables)
        sparse = self._sparse_index()  # that gradient stays a `tf.IndexedSlices`
        grads = [
            tf.zeros_like(v) if g is None else (g if i == sparse else tf.convert_to_tensor(g))
            for i, (g, v) in enumerate(zip(grads, variables, strict=True))
        ]
        return grads, out["forward_nll"], out["backward_nll"], out["state_h"], out["state_c"]

    def _sparse_index(self):
        """The softmax kernel's position among the trainable variables when its gradient is
        kept as rows (`sparse_softmax`), else None."""
        if not self.sparse_softmax:
            return None
        kernel = self.model.softmax_kernel
        return next(i for i, v in enumerate(self.model.trainable_variables) if v is kernel)

    def _replica_step(self, batch, step, candidates, stop_votes):
        ctx = tf.distribute.get_replica_context()
        local_tokens = step_ops.token_count(self.model.token_mask(batch["forward_char_ids"]))
        # One all-reduce carries the token count and every worker's request to stop (a signal,
        # its own clock's time budget, a callback), so that all workers stop after the same step.
        totals = ctx.all_reduce(
            tf.distribute.ReduceOp.SUM, tf.concat([local_tokens[None], stop_votes], axis=0)
        )
        denominator = step_ops.denominator(totals[0])
        if self.carry_state:
            state_h, state_c = self.state.replica_rows(ctx, self.per_replica_batch)
        else:
            state_h, state_c = self.model.zero_state(self.per_replica_batch)
        compute = self._forward_backward
        if self.jit_compile:
            compute = tf.function(compute, jit_compile=True, autograph=False)
        grads, nll_fw, nll_bw, new_h, new_c = compute(
            batch, state_h, state_c, candidates, denominator
        )
        variables = self.model.trainable_variables
        if self.freeze_bilm_steps:
            bilm = {id(v) for v in self.bilm.trainable_variables}
            frozen = [id(v) in bilm for v in variables]
            grads = step_ops.freeze(grads, frozen, step < self.freeze_bilm_steps)
        norm = gradients.apply_clipped(
            ctx, self.optimizer, variables, grads, self.clip_norm, self._sparse_index()
        )
        if self.carry_state:
            self.state.carry(ctx, new_h, new_c)
        return nll_fw, nll_bw, local_tokens, norm, totals[1:]

    def _make_train_step(self):
        """The global step: `train_step(batch, candidates=None, stop_votes=None)`.

        `candidates`: the step's sampled-softmax candidates (`candidates(step)`; None: the full
        softmax). `stop_votes` is a float32 vector of this worker's requests to stop, one per
        reason of `stopping.STOP_REASONS` (1.0 or 0.0). Returns the global forward and backward
        NLL sums, the global token count, the mean gradient norm and the votes summed over all
        replicas of all workers.
        """
        strategy = self.strategy

        @tf.function(autograph=False)  # no Python control flow on tensors inside
        def train_step(batch, candidates=None, stop_votes=None):
            if stop_votes is None:
                stop_votes = tf.zeros([len(STOP_REASONS)])
            step = self.step.read_value()
            nll_fw, nll_bw, tokens, norm, votes = strategy.run(
                self._replica_step, args=(batch, step, candidates, stop_votes)
            )
            total = [
                strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)
                for x in (nll_fw, nll_bw, tokens)
            ]
            self.step.assign_add(1)
            return total + [
                strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None),
                strategy.experimental_local_results(votes)[0],
            ]

        return train_step

    def _run_step(self, batch, requests):
        """One global step; returns its logs and the votes to stop of all workers."""
        if self._train_step is None:
            self._train_step = self._make_train_step()
        candidates = self.candidates(self.global_step)
        candidates = None if candidates is None else tf.constant(candidates)
        *values, votes = self._train_step(batch, candidates, tf.constant(requests.votes()))
        return step_logs(*(float(x) for x in values)), [float(v) for v in votes.numpy()]

    # ----------------------------------------------------------------- data, checkpoints

    def _batches(self, train, epochs, tokenization_mode, shuffle_buffer, skip):
        """The run's distributed dataset, `skip` global batches in, as `(batch, epoch)`."""
        sizes = (self.batch_size, self.unroll_steps, self.max_chars)
        packer = functools.partial(self._packer, train, epochs, tokenization_mode, shuffle_buffer)

        errors = []  # what the packer raised (a text file changed under the run): re-raised
        dataset = self.strategy.distribute_datasets_from_function(
            lambda ctx: make_dataset(packer, *sizes, skip, ctx, errors=errors)
        )
        iterator = iter(dataset)
        while True:
            try:
                batch = next(iterator)
            except (StopIteration, tf.errors.OutOfRangeError):
                return
            except tf.errors.OpError:
                if errors:
                    raise errors[0] from None
                raise
            epoch = int(self.strategy.experimental_local_results(batch.pop("epoch"))[0])
            yield batch, epoch

    def _manager(self, directory, keep):
        return self.state.manager(directory, keep)

    def save_checkpoint(self, manager):
        """Saves a checkpoint numbered by the step (on every worker; the chief's is kept)."""
        return self.state.save(manager)

    def restore_file(self, prefix, skip=()):
        """`TrainingState.restore`."""
        self.state.restore(prefix, skip)
