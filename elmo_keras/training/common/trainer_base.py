"""What the TensorFlow and the JAX trainers share: the settings, the loop, evaluation and output.

A trainer takes one global step per global batch of windows. `TrainerBase.fit` is the loop:
data, step, callbacks, metrics, checkpoints, and the stop requests (a signal, the time budget,
a callback); the subclasses supply the backend's parts: the variables (`model`, `optimizer`,
`global_step`), the data feed (`_batches`), the compiled step (`_run_step`) and the checkpoints
(`_manager`, `save_checkpoint`, `restore_file`): `trainer.Trainer` under a `tf.distribute`
strategy, `jax_trainer.JaxTrainer` over JAX devices. Imports neither TensorFlow nor JAX.
"""

import abc
import dataclasses
import functools
import pathlib
import sys

from elmo_keras.memory import check_step_fits
from elmo_keras.training.common.callbacks import TrainingCallbacks
from elmo_keras.training.common.checkpoints import (
    CheckpointWriteError,
    restore_newest_readable,
    resume_hint,
    skipped_message,
)
from elmo_keras.training.common.event_file import EventFileError
from elmo_keras.training.common.finite import check_step, check_weights
from elmo_keras.training.common.metrics import MetricsLogger
from elmo_keras.training.common.pending_logs import PendingLogs
from elmo_keras.training.common.stopping import StopRequests, stop_reason
from elmo_keras.training.configs import TrainingConfig
from elmo_keras.training.feed.data import SentenceStream, expand_files
from elmo_keras.training.feed.tokenization import TOKENIZATION_RENAMED, no_other_arguments
from elmo_keras.training.feed.windows import WindowPacker
from elmo_keras.training.run.run_folder import CHECKPOINTS, LOGS
from elmo_keras.training.run.training_run import check_fit_arguments, check_setting
from elmo_keras.validation import renamed_argument


@dataclasses.dataclass
class _Fit:
    """What one `fit` call works with, handed from step to step."""

    steps: int | None
    log_every: int
    checkpoint_every: int
    manager: object  # the backend's checkpoint manager, or None
    logger: MetricsLogger
    hooks: TrainingCallbacks
    requests: StopRequests
    epochs: int | None = None
    pending: PendingLogs = None


class TrainerBase(abc.ABC):
    """The settings, loop, evaluation and output of both trainers (see the module docstring).

    `trainer.data_start_step` (0): the step at which the training data began; `fit` skips
    `step - data_start_step` batches (a resumed run that switched data starts it afresh).

    Args:
        config: `TrainingConfig`, or what `TrainingConfig.parse` takes (a name, a JSON file or
            an options dict).
        vocabulary: `Vocabulary`. Sorted by frequency (sampled softmax).
        replicas: int. The devices the global batch is split over.
        seed: int. Seeds the weights, the candidate sampler and the data order.
        carry_state: bool. Carry the LSTM state from window to window (bilm-tf).
        mixed_precision: None or `"bfloat16"`.
        freeze_bilm_steps: int. While the step is below it, only the softmax learns.
        tf32: bool. Allow TensorFloat-32 matrix products on GPUs (off: exact float32).
        unroll, stack_directions: int, bool or None. The LSTMs' loop (`ProjectedBiLSTM`'s
            `unroll` and `stack_directions`); None: `loop_defaults`, the trainer's.
    """

    is_chief, multi_worker = True, False
    # Steps whose logs may wait on the devices (`PendingLogs`; 1: read every step), and the
    # processes that tokenize the text and look up its word ids for the packer (0: none).
    pending_steps, feed_workers = 1, 0
    loop_defaults = (1, False)  # `unroll` and `stack_directions` when not given

    def __init__(
        self,
        config,
        vocabulary,
        replicas=1,
        seed=0,
        carry_state=True,
        mixed_precision=None,
        freeze_bilm_steps=0,
        tf32=False,
        unroll=None,
        stack_directions=None,
    ):
        self.config = TrainingConfig.parse(config).replace(n_tokens_vocab=len(vocabulary))
        self.vocabulary = vocabulary
        self.seed = int(seed)
        self.carry_state = bool(carry_state)
        self.mixed_precision = check_setting("mixed_precision", mixed_precision)
        self.freeze_bilm_steps = check_setting("freeze_bilm_steps", freeze_bilm_steps) or 0
        self.tf32 = check_setting("tf32", tf32)
        self.unroll = check_setting("unroll", unroll)
        self.stack_directions = check_setting("stack_directions", stack_directions)
        self.data_start_step = 0
        self.batch_size = self.config.batch_size
        if self.batch_size % replicas:
            raise ValueError(
                f"`batch_size` must be a multiple of the number of replicas ({replicas}). "
                f"Received: batch_size={self.batch_size}"
            )
        self.replicas = replicas
        self.per_replica_batch = self.batch_size // replicas
        self.unroll_steps = self.config.unroll_steps
        check_step_fits(self.config, len(vocabulary), self.per_replica_batch)
        self.max_chars = self.config.bilm_kwargs["max_characters_per_token"]
        self.clip_norm = float(self.config.all_clip_norm_val or 0.0)

    @property
    def bilm(self):
        return self.model.bilm

    def _set_loop(self):
        """The run's loop settings to the LSTMs: how, not what, they compute (not saved)."""
        given, bilstm = (self.unroll, self.stack_directions), self.model.bilm.bilstm
        chosen = [d if g is None else g for g, d in zip(given, self.loop_defaults, strict=True)]
        bilstm.unroll, bilstm.stack_directions = chosen

    def candidates(self, step):
        """The sampled softmax's candidates of `step` (NumPy; None: the full softmax)."""
        return self.model.sample_candidates(self.seed, step)

    # ---------------------------------------------------------------- the backend's parts

    @property
    @abc.abstractmethod
    def global_step(self):
        """The number of steps taken (restored with a checkpoint), a Python int."""

    @abc.abstractmethod
    def _batches(self, train, epochs, tokenization_mode, shuffle_buffer, skip):
        """`(batch, epoch)` of `_packer` for this process, `skip` global batches in."""

    def _packer(self, train, epochs, tokenization_mode, shuffle_buffer):
        """A new `WindowPacker` of the run's training text: the same on every backend."""
        words = self.vocabulary if self.feed_workers else None  # word ids made by the workers
        stream = SentenceStream(train, tokenization_mode, True, shuffle_buffer, self.seed, epochs,
                                words, self.feed_workers)  # fmt: skip
        sizes = (self.batch_size, self.unroll_steps, self.max_chars)
        return WindowPacker(stream, self.vocabulary, *sizes)

    @abc.abstractmethod
    def _run_step(self, batch, requests):
        """One global step: its logs (`metrics.step_logs`) and the stop votes of all workers."""

    @abc.abstractmethod
    def _manager(self, directory, keep):
        """The backend's checkpoint manager for `directory`, keeping `keep` checkpoints."""

    @abc.abstractmethod
    def save_checkpoint(self, manager):
        """Saves a checkpoint numbered by the step; returns its path."""

    @abc.abstractmethod
    def restore_file(self, prefix, skip=()):
        """Restores the checkpoint `prefix` (every variable must match); `skip`: see `restore`."""

    def restore(self, checkpoint_dir, skip=()):
        """Restores the newest readable checkpoint of `checkpoint_dir`; returns its path or None.

        Newer checkpoints that cannot be read (damaged, truncated, missing files) are skipped,
        with one line on stderr saying which and why. `skip`: parts left as they are:
        `"optimizer"` (another optimizer) and `"state"` (the LSTM state, another batch size).
        """
        restore = functools.partial(self.restore_file, skip=skip)
        restored, skipped = restore_newest_readable(restore, checkpoint_dir)
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
        shuffle_buffer=0,
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
            epochs: int or None. Passes over the data (`None`: repeat). Give `steps`,
                `epochs` or `time_budget_s` (or several: the first reached ends the run).
            output_dir: path or None. For `checkpoints/` and `logs/` (TensorBoard).
            checkpoint_every: int. Steps between checkpoints (also at the end and on a stop).
            keep_checkpoints: int. Checkpoints kept (older ones are deleted).
            time_budget_s: float or None. Stop (and checkpoint) after this many seconds,
                counted from the end of the first step (its tracing and compiling excluded).
            log_every: int. Steps between logged lines / TensorBoard points (printed also
                with a progress bar, above it).
            tokenization_mode: `"whitespace"` or `"punctuation"` (old name: `tokenization`).
            shuffle_buffer: int. `0`: every epoch a permutation of all the lines (about 12
                bytes a line); `N`: a streaming shuffle through an `N`-line buffer
                (`data.SentenceStream`).
            progress: bool or None. A progress bar (None: when stdout is a terminal).
            on_step: callable(step, logs) or None, called after every step.
            handle_signals: bool. Checkpoint and stop on SIGTERM / SIGINT.
            callbacks: list of `keras.callbacks.Callback` or None. When each hook is called and
                with which logs: `elmo_keras.training.common.callbacks.TrainingCallbacks`.

        Returns:
            A dict: `steps`, `tokens`, `seconds`, `tokens_per_second`, `stopped` (`"steps"`,
            `"epochs"`, `"time"`, `"signal"` or `"callback"`), `train_perplexity_forward` and
            `train_perplexity_backward` (training softmax, last log interval).
        """
        tokenization_mode = renamed_argument(
            kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "Trainer.fit"
        )
        no_other_arguments(kwargs, "Trainer.fit")
        check_fit_arguments(
            steps, epochs, time_budget_s, checkpoint_every, keep_checkpoints, log_every,
            shuffle_buffer,
        )  # fmt: skip
        return self._fit(
            train, steps, epochs, output_dir, checkpoint_every, keep_checkpoints, time_budget_s,
            log_every, tokenization_mode, shuffle_buffer, progress, on_step, handle_signals,
            callbacks,
        )  # fmt: skip

    def fit_run(self, run, callbacks=None):
        """`fit` with the settings of a planned `TrainingRun` (checked when it was made)."""
        return self._fit(
            run.train_files, run.steps, run.epochs, run.output_dir, run.checkpoint_every,
            run.keep_checkpoints, run.time_budget_s, run.log_every, run.tokenization_mode,
            run.shuffle_buffer, run.progress, None, True, callbacks,
        )  # fmt: skip

    def _fit(
        self, train, steps, epochs, output_dir, checkpoint_every, keep_checkpoints,
        time_budget_s, log_every, tokenization_mode, shuffle_buffer, progress, on_step,
        handle_signals, callbacks,
    ):  # fmt: skip
        expand_files(train)  # a clear error now rather than inside the data pipeline
        start = self.global_step
        if steps is not None and start >= steps:
            return MetricsLogger(echo=False).summary(start, "steps")
        output_dir = None if output_dir is None else pathlib.Path(output_dir)
        manager = output_dir and self._manager(output_dir / CHECKPOINTS, keep_checkpoints)
        hooks = TrainingCallbacks(callbacks, self.model, on_step)
        requests = StopRequests(time_budget_s, handle_signals, hooks.stop_requested)
        logger = self._logger(output_dir, progress, steps, start)
        fit = _Fit(steps, log_every, checkpoint_every, manager, logger, hooks, requests, epochs)
        fit.pending = PendingLogs(1 if hooks.per_step else self.pending_steps)
        skip = start - self.data_start_step
        batches = self._batches(train, epochs, tokenization_mode, shuffle_buffer, skip)
        return self._run(batches, fit)

    def _run(self, batches, fit):
        fit.hooks.train_begin()
        try:
            with fit.requests:
                stopped = self._train_loop(batches, fit)
                fit.pending.settle(functools.partial(self._take_logs, fit))
        except BaseException:
            fit.logger.abandon()
            raise
        finally:
            batches.close()  # stops the data's background work
        if fit.manager is not None:
            self._save(fit, unless_saved=True)
        try:
            fit.logger.close(self.global_step)
        except EventFileError as error:
            raise EventFileError(f"{error}; {self._kept(fit)}") from None
        summary = fit.logger.summary(self.global_step, stopped)
        fit.hooks.train_end(summary, fit.logger)
        return summary

    def _train_loop(self, batches, fit):
        """Steps until a stop; returns why (`"steps"`, `"epochs"` or one of `STOP_REASONS`)."""
        first = True
        while fit.steps is None or self.global_step < fit.steps:
            item = next(batches, None)
            if item is None:
                return "epochs"
            batch, epoch = item
            logs, votes = self._run_step(batch, fit.requests)
            if first:  # the time budget counts from here: compiling the step is not training
                fit.requests.start_clock()
                first = False
            reason = self._after_step(fit, logs, votes, epoch)
            if reason is not None:
                return reason
        return "steps"

    def _after_step(self, fit, logs, votes, epoch):
        """The step just taken: its logs (kept in `fit.pending` until a point that needs them),
        log line and checkpoint; returns a stop reason."""
        step = self.global_step
        fit.pending.add(step, logs, epoch)
        log_now = step % fit.log_every == 0 or step == fit.steps
        save_now = fit.manager is not None and step % fit.checkpoint_every == 0
        if log_now or save_now or fit.pending.full():
            fit.pending.settle(functools.partial(self._take_logs, fit))
        if log_now:  # with `epochs`, the line also says which pass over the data it was in
            passes = None if fit.epochs is None else (epoch + 1, fit.epochs)
            try:
                fit.logger.write(step, epoch=passes)
            except EventFileError as error:
                self._stop_without_log(fit, error)
        if save_now:
            self._save(fit)
        if not self.multi_worker:  # one process: stop right after this step
            votes = fit.requests.votes()
        # Several workers decide from everyone's votes taken at the start of this step: all
        # leave after the same one (a lone one would leave the others waiting in a collective).
        return stop_reason(votes)

    def _take_logs(self, fit, step, logs, epoch):
        """A step's logs, read: the finite check, the callbacks, the metrics."""
        check_step(step, logs, fit.manager and fit.manager.directory)
        fit.hooks.step_end(step, logs, epoch, fit.logger)
        fit.logger.update(step, logs)

    def _save(self, fit, unless_saved=False):
        """A checkpoint of the current step (`unless_saved`: unless the newest holds it); the
        weights are checked first: a checkpoint never holds NaN or infinite weights."""
        step, manager = self.global_step, fit.manager
        what = f"the weights at step {step}"
        check_weights(self.model, what, "no checkpoint was written", manager.directory)
        latest = manager.latest_checkpoint
        if not unless_saved or latest is None or not latest.endswith(f"-{step}"):
            self.save_checkpoint(manager)

    def _kept(self, fit):
        """Where the run can go on from, in words (after a failure that ends it)."""
        if fit.manager is None:
            return "the run stopped"
        return f"the run stopped at step {self.global_step}: " + resume_hint(fit.manager.directory)

    def _stop_without_log(self, fit, error):
        """The TensorBoard file could not be written (a full disk): a checkpoint of this step
        is attempted (not with several workers: the chief alone writes the file, and a
        checkpoint is a collective), then the run stops with one line saying where to resume."""
        if fit.manager is not None and not self.multi_worker:
            try:
                self._save(fit, unless_saved=True)
            except CheckpointWriteError as failed:
                raise CheckpointWriteError(f"{error}; {failed}") from None
        raise EventFileError(f"{error}; {self._kept(fit)}") from None

    def _logger(self, output_dir, progress, steps, start):
        if progress is None:
            progress = sys.stdout.isatty() and self.is_chief
        log_dir = output_dir / LOGS if output_dir is not None and self.is_chief else None
        bar_steps = steps - start if progress and steps else None
        return MetricsLogger(
            log_dir, self.optimizer, self.is_chief, bar_steps, start, self.peak_memory_bytes
        )

    def peak_memory_bytes(self):  # the accelerator's peak memory so far; None on CPUs
        return None

    # -------------------------------------------------------------------- evaluation, output

    def evaluate(
        self, data, batch_size=16, max_tokens=None, tokenization_mode="whitespace", **kwargs
    ):
        """Full-softmax perplexity: `evaluation.evaluate_model` with this run's `unroll_steps`.

        `tokenization=` is the deprecated name of `tokenization_mode`.
        """
        from elmo_keras.training.common.evaluation import evaluate_model

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
        from elmo_keras.training.model_files import save_language_model

        save_language_model(self.model, self.vocabulary, output_dir)
