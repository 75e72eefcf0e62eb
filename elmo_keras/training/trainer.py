"""Pretraining the biLM under any `tf.distribute` strategy, with exact resume.

One global step = one global batch of windows, split over the replicas row-wise. Each replica
divides its tokens' summed negative log-likelihood by the *global* token count, so the replicas'
gradients add up to the gradient of the global mean; they are clipped by their global norm after
that sum (`gradients`). The sampled softmax's candidates come from a stateless generator keyed
by `(seed, step)`. The LSTM state carried from window to window is checkpointed with the
weights, the optimizer and the step, which is also the data position (`state.TrainingState`):
a stopped run resumes exactly.

The step is hand-written rather than left to `keras.Model.fit` for the clipping after the
cross-replica sum, the carried state and the stop votes riding on the step's all-reduce. `fit`
is a short loop of named pieces: `StopRequests`, `MetricsLogger`, `TrainingCallbacks`.
"""

import dataclasses
import functools
import pathlib
import sys

import tensorflow as tf

from elmo_keras.training import distribute, gradients
from elmo_keras.training.callbacks import TrainingCallbacks
from elmo_keras.training.checkpoints import skipped_message
from elmo_keras.training.configs import normalize_config
from elmo_keras.training.data import (
    TOKENIZATION_RENAMED,
    SentenceStream,
    expand_files,
    no_other_arguments,
)
from elmo_keras.training.distribute import STRATEGIES, make_strategy  # noqa: F401 (old home)
from elmo_keras.training.evaluation import evaluate_model
from elmo_keras.training.metrics import MetricsLogger, step_logs
from elmo_keras.training.model_files import export_model, load_language_model  # noqa: F401
from elmo_keras.training.run_folder import CHECKPOINTS, LOGS
from elmo_keras.training.state import TrainingState
from elmo_keras.training.stopping import STOP_REASONS, StopRequests, stop_reason
from elmo_keras.training.windows import WindowPacker, make_dataset
from elmo_keras.validation import check_choice, check_int, check_number, renamed_argument


def _next_batch(iterator):
    """The next batch, or None at the end of the data."""
    try:
        return next(iterator)
    except (StopIteration, tf.errors.OutOfRangeError):
        return None


def _check_fit_arguments(steps, epochs, time_budget_s, checkpoint_every, keep, log_every):
    if steps is None and epochs is None:
        raise ValueError("Give `steps` or `epochs` (or both).")
    names = ("steps", "epochs", "checkpoint_every", "keep_checkpoints", "log_every")
    for name, value in zip(names, (steps, epochs, checkpoint_every, keep, log_every), strict=True):
        check_int(name, value, allow_none=name in ("steps", "epochs"))
    if time_budget_s is not None:
        check_number("time_budget_s", time_budget_s, minimum=0.0)


@dataclasses.dataclass
class _Fit:
    """What one `Trainer.fit` call works with, handed from step to step."""

    steps: int | None
    log_every: int
    checkpoint_every: int
    manager: tf.train.CheckpointManager | None
    logger: MetricsLogger
    hooks: TrainingCallbacks
    requests: StopRequests


class Trainer:
    """Trains a `LanguageModel` on windows of text under a `tf.distribute` strategy.

    `trainer.model`, `.optimizer`, `.step`, `.state_h`, `.state_c`: see `TrainingState`.
    `trainer.data_start_step` (0): the step at which the training data began; `fit` skips
    `step - data_start_step` batches (a resumed run that switched data starts it afresh).

    Args:
        config: dict. A training configuration (`elmo_keras.training.configs.get_config`).
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
    ):
        self.config = normalize_config(config)
        self.vocabulary = vocabulary
        self.config["n_tokens_vocab"] = len(vocabulary)
        self.strategy = strategy or tf.distribute.get_strategy()
        self.seed = int(seed)
        self.carry_state = bool(carry_state)
        self.jit_compile = bool(jit_compile)
        self.mixed_precision = check_choice("mixed_precision", mixed_precision, (None, "bfloat16"))
        self.freeze_bilm_steps = check_int("freeze_bilm_steps", freeze_bilm_steps, minimum=0)
        self.data_start_step = 0
        replicas = self.strategy.num_replicas_in_sync
        self.batch_size = int(self.config["batch_size"])
        if self.batch_size % replicas:
            raise ValueError(
                f"`batch_size` must be a multiple of the number of replicas ({replicas}). "
                f"Received: batch_size={self.batch_size}"
            )
        self.per_replica_batch = self.batch_size // replicas
        self.unroll_steps = int(self.config["unroll_steps"])
        self.max_chars = int(self.config["char_cnn"]["max_characters_per_token"])
        self.is_chief = distribute.is_chief(self.strategy)
        self.multi_worker = distribute.num_workers(self.strategy) > 1
        self.state = TrainingState(
            self.config, len(vocabulary), self.strategy, self.seed, mixed_precision
        )
        state = self.state
        self.model, self.optimizer, self.checkpoint = state.model, state.optimizer, state.checkpoint
        self.step, self.state_h, self.state_c = state.step, state.state_h, state.state_c
        self._train_step = None

    @property
    def bilm(self):
        return self.model.bilm

    @property
    def global_step(self):
        """The number of steps taken (restored with a checkpoint), a Python int."""
        return int(self.step.numpy())

    # --------------------------------------------------------------------------- the step

    def _forward_backward(self, batch, state_h, state_c, candidates, denominator):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            out = self.model.window_nll(batch, state_h, state_c, candidates, training=True)
            loss = 0.5 * (out["forward_nll"] + out["backward_nll"]) / denominator
        grads = tape.gradient(loss, variables)
        grads = [
            tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            for g, v in zip(grads, variables, strict=True)
        ]
        return grads, out["forward_nll"], out["backward_nll"], out["state_h"], out["state_c"]

    def _replica_step(self, batch, step, stop_votes):
        ctx = tf.distribute.get_replica_context()
        mask = self.model.token_mask(batch["forward_char_ids"])
        local_tokens = tf.reduce_sum(tf.cast(mask, tf.float32))
        # One all-reduce carries the token count and every worker's request to stop (a signal,
        # its own clock's time budget, a callback), so that all workers stop after the same step.
        totals = ctx.all_reduce(
            tf.distribute.ReduceOp.SUM, tf.concat([local_tokens[None], stop_votes], axis=0)
        )
        denominator = tf.maximum(totals[0], 1.0)
        if self.carry_state:
            state_h, state_c = self.state.replica_rows(ctx, self.per_replica_batch)
        else:
            state_h, state_c = self.model.zero_state(self.per_replica_batch)
        # Drawn outside the compiled part: XLA's stateless random numbers differ from the
        # graph's, and the candidates must not depend on `jit_compile`.
        candidates = self.model.sample_candidates(
            tf.stack([tf.constant(self.seed, tf.int64), step])
        )
        compute = self._forward_backward
        if self.jit_compile:
            compute = tf.function(compute, jit_compile=True)
        grads, nll_fw, nll_bw, new_h, new_c = compute(
            batch, state_h, state_c, candidates, denominator
        )
        variables = self.model.trainable_variables
        if self.freeze_bilm_steps:
            frozen = step < self.freeze_bilm_steps
            grads = gradients.freeze(grads, variables, self.bilm.trainable_variables, frozen)
        clip = float(self.config.get("all_clip_norm_val") or 0.0)
        norm = gradients.apply_clipped(ctx, self.optimizer, variables, grads, clip)
        if self.carry_state:
            self.state.carry(ctx, new_h, new_c)
        return nll_fw, nll_bw, local_tokens, norm, totals[1:]

    def _make_train_step(self):
        """The global step: `train_step(batch, stop_votes=None)`.

        `stop_votes` is a float32 vector of this worker's requests to stop, one per reason of
        `stopping.STOP_REASONS` (1.0 or 0.0). Returns the global forward and backward NLL sums,
        the global token count, the mean gradient norm and the votes summed over all replicas
        of all workers.
        """
        strategy = self.strategy

        @tf.function
        def train_step(batch, stop_votes=None):
            if stop_votes is None:
                stop_votes = tf.zeros([len(STOP_REASONS)])
            step = self.step.read_value()
            nll_fw, nll_bw, tokens, norm, votes = strategy.run(
                self._replica_step, args=(batch, step, stop_votes)
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
        *values, votes = self._train_step(batch, tf.constant(requests.votes()))
        return step_logs(*(float(x) for x in values)), [float(v) for v in votes.numpy()]

    # ----------------------------------------------------------------- data, checkpoints

    def _dataset(self, pattern, epochs, tokenization_mode, shuffle_buffer, skip):
        """The distributed dataset of the run, `skip` global batches in (the resumed step)."""
        sizes = (self.batch_size, self.unroll_steps, self.max_chars)
        stream = functools.partial(
            SentenceStream, pattern, tokenization_mode, True, shuffle_buffer, self.seed, epochs
        )

        def packer():
            return WindowPacker(stream(), self.vocabulary, *sizes)

        return self.strategy.distribute_datasets_from_function(
            lambda ctx: make_dataset(packer, *sizes, skip, ctx)
        )

    def save_checkpoint(self, manager):
        """Saves a checkpoint numbered by the step (on every worker; the chief's is kept)."""
        return self.state.save(manager)

    def restore(self, checkpoint_dir, skip=()):
        """Restores the newest readable checkpoint of `checkpoint_dir`; returns its path or None.

        Newer checkpoints that cannot be read (damaged, truncated, missing files) are skipped,
        with one line on stderr saying which and why. `skip`: see `TrainingState.restore`.
        """
        restored, skipped = self.state.restore_latest(checkpoint_dir, skip)
        if skipped and self.is_chief:
            print(skipped_message(restored, skipped), file=sys.stderr, flush=True)
        return restored

    # ---------------------------------------------------------------------------- training

    def fit(
        self,
        train,
        steps=None,
        epochs=None,
        output_dir=None,
        checkpoint_every=1000,
        keep_checkpoints=3,
        time_budget_s=None,
        log_every=50,
        tokenization_mode="whitespace",
        shuffle_buffer=10000,
        progress=None,
        on_step=None,
        handle_signals=True,
        callbacks=None,
        **kwargs,
    ):
        """Trains until `steps` global steps, the end of `epochs`, the time budget or a signal.

        Args:
            train: str or list. Glob(s) of training text files.
            steps: int or None. The global step to stop at, counted from the run's start (a
                resumed run given the same `steps` ends where an uninterrupted one would).
            epochs: int or None. Passes over the data (`None`: repeat).
            output_dir: path or None. For `checkpoints/` and `logs/` (TensorBoard).
            checkpoint_every: int. Steps between checkpoints (also at the end and on a stop).
            keep_checkpoints: int. Checkpoints kept (older ones are deleted).
            time_budget_s: float or None. Stop (and checkpoint) after this many seconds.
            log_every: int. Steps between logged lines / TensorBoard points.
            tokenization_mode: `"whitespace"` or `"punctuation"` (old name: `tokenization`).
            shuffle_buffer: int. Sentences in the shuffle buffer.
            progress: bool or None. A progress bar (None: when stdout is a terminal).
            on_step: callable(step, logs) or None, called after every step.
            handle_signals: bool. Checkpoint and stop on SIGTERM / SIGINT.
            callbacks: list of `keras.callbacks.Callback` or None. When each hook is called and
                with which logs: `elmo_keras.training.callbacks.TrainingCallbacks`.

        Returns:
            A dict: `steps`, `tokens`, `seconds`, `tokens_per_second`, `stopped` (`"steps"`,
            `"epochs"`, `"time"`, `"signal"` or `"callback"`), `train_perplexity_forward` and
            `train_perplexity_backward` (training softmax, last log interval).
        """
        tokenization_mode = renamed_argument(
            kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "Trainer.fit"
        )
        no_other_arguments(kwargs, "Trainer.fit")
        _check_fit_arguments(
            steps, epochs, time_budget_s, checkpoint_every, keep_checkpoints, log_every
        )
        expand_files(train)  # a clear error now rather than inside tf.data
        start = self.global_step
        if steps is not None and start >= steps:
            return MetricsLogger(echo=False).summary(start, "steps")
        output_dir = None if output_dir is None else pathlib.Path(output_dir)
        manager = output_dir and self.state.manager(output_dir / CHECKPOINTS, keep_checkpoints)
        hooks = TrainingCallbacks(callbacks, self.model, on_step)
        requests = StopRequests(time_budget_s, handle_signals, hooks.stop_requested)
        logger = self._logger(output_dir, progress, steps, start)
        fit = _Fit(steps, log_every, checkpoint_every, manager, logger, hooks, requests)
        skip = start - self.data_start_step
        dataset = self._dataset(train, epochs, tokenization_mode, shuffle_buffer, skip)
        return self._run(dataset, fit)

    def _run(self, dataset, fit):
        fit.hooks.train_begin()
        with fit.requests:
            stopped = self._train_loop(iter(dataset), fit)
        fit.logger.close(self.global_step)
        if fit.manager is not None:
            self.state.save_unless_saved(fit.manager)
        summary = fit.logger.summary(self.global_step, stopped)
        fit.hooks.train_end(summary, fit.logger)
        return summary

    def _train_loop(self, iterator, fit):
        """Steps until a stop; returns why (`"steps"`, `"epochs"` or one of `STOP_REASONS`)."""
        if self._train_step is None:
            self._train_step = self._make_train_step()
        while fit.steps is None or self.global_step < fit.steps:
            batch = _next_batch(iterator)
            if batch is None:
                return "epochs"
            epoch = int(self.strategy.experimental_local_results(batch.pop("epoch"))[0])
            logs, votes = self._run_step(batch, fit.requests)
            reason = self._after_step(fit, logs, votes, epoch)
            if reason is not None:
                return reason
        return "steps"

    def _after_step(self, fit, logs, votes, epoch):
        """Callbacks, metrics and checkpoint of the step just taken; returns a stop reason."""
        step = self.global_step
        fit.hooks.step_end(step, logs, epoch, fit.logger)
        fit.logger.update(step, logs)
        if step % fit.log_every == 0 or step == fit.steps:
            fit.logger.write(step)
        if fit.manager is not None and step % fit.checkpoint_every == 0:
            self.save_checkpoint(fit.manager)
        if not self.multi_worker:  # one process: stop right after this step
            votes = fit.requests.votes()
        # Several workers decide from everyone's votes taken at the start of this step: all
        # leave after the same step (a lone worker leaving would keep the others waiting in a
        # collective) and save the same checkpoint.
        return stop_reason(votes)

    def _logger(self, output_dir, progress, steps, start):
        if progress is None:
            progress = sys.stdout.isatty() and self.is_chief
        log_dir = output_dir / LOGS if output_dir is not None and self.is_chief else None
        bar_steps = steps - start if progress and steps else None
        return MetricsLogger(log_dir, self.optimizer, self.is_chief, bar_steps, start)

    # -------------------------------------------------------------------- evaluation, output

    def evaluate(
        self, data, batch_size=16, max_tokens=None, tokenization_mode="whitespace", **kwargs
    ):
        """Full-softmax perplexity: `evaluation.evaluate_model` with this run's `unroll_steps`.

        `tokenization=` is the deprecated name of `tokenization_mode`.
        """
        tokenization_mode = renamed_argument(
            kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "Trainer.evaluate"
        )
        no_other_arguments(kwargs, "Trainer.evaluate")
        model, vocabulary, unroll_steps = self.model, self.vocabulary, self.unroll_steps
        return evaluate_model(
            model, vocabulary, data, batch_size, unroll_steps, max_tokens, tokenization_mode
        )

    def export(self, output_dir):
        """Writes options.json, lm_weights.hdf5 (published layout), vocab.txt, softmax.hdf5."""
        export_model(self.model, self.vocabulary, output_dir)
