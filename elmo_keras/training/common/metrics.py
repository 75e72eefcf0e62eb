"""Training metrics: summed per step, written to TensorBoard and the terminal per interval.

Imports Keras, not TensorFlow (the TensorBoard files: `event_file`)."""

import math
import sys
import time

import keras

from elmo_keras.training.common.event_file import EventFileError, EventFileWriter


def perplexity(loss):
    """`exp(loss)`, or `inf` where that exceeds the largest float64 (a mean loss per token above
    about 709.78 nats): a perplexity that overflows is reported, never an `OverflowError`."""
    try:
        return math.exp(loss)
    except OverflowError:
        return math.inf


def step_logs(forward_nll, backward_nll, tokens, grad_norm):
    """The logs of one step: its sums, and `loss`, bilm-tf's training loss per token."""
    return {
        "loss": 0.5 * (forward_nll + backward_nll) / max(tokens, 1.0),
        "forward_nll": forward_nll,
        "backward_nll": backward_nll,
        "tokens": tokens,
        "grad_norm": grad_norm,
    }


class _Sums:
    """Negative log-likelihood and token sums over a span of steps, and when the span began."""

    def __init__(self):
        self.forward = self.backward = self.tokens = 0.0
        self.started = time.perf_counter()

    def add(self, logs):
        self.forward += logs["forward_nll"]
        self.backward += logs["backward_nll"]
        self.tokens += logs["tokens"]

    def scalars(self):
        tokens = max(self.tokens, 1.0)
        loss_fw, loss_bw = self.forward / tokens, self.backward / tokens
        return {
            "loss": 0.5 * (loss_fw + loss_bw),
            "perplexity_forward": math.exp(min(loss_fw, 50.0)),
            "perplexity_backward": math.exp(min(loss_bw, 50.0)),
            "tokens_per_second": self.tokens / max(time.perf_counter() - self.started, 1e-9),
        }


class MetricsLogger:
    """Sums the step metrics and reports them: TensorBoard scalars, a line or a progress bar.

    Every `write` reports the interval since the previous one: `loss`, `perplexity_forward`,
    `perplexity_backward` (of the training softmax, sampled or full), `learning_rate` and
    `tokens_per_second`. `epoch_logs` does the same for the span since the previous call.
    With a progress bar, each printed line first clears the bar's line; the bar is drawn again
    below it at the next step. A failed write of the TensorBoard file raises `EventFileError`
    (one line naming the file), after which TensorBoard is no longer written.

    Args:
        log_dir: path or None. TensorBoard event files go here (None: no TensorBoard).
        optimizer: `keras.optimizers.Optimizer` or None. Its learning rate is logged.
        echo: bool. Print a line per interval (with or without a progress bar).
        progress_steps: int or None. Show a `keras.utils.Progbar` of this many steps.
        first_step: int. The global step the run starts from (the bar counts from it).
        peak_memory: callable or None. Returns the accelerator's peak memory in bytes, or None
            (a CPU): logged as `peak_memory_gib`.
    """

    def __init__(
        self,
        log_dir=None,
        optimizer=None,
        echo=True,
        progress_steps=None,
        first_step=0,
        peak_memory=None,
    ):
        self.writer = EventFileWriter(log_dir) if log_dir else None
        self.optimizer = optimizer
        self.bar = keras.utils.Progbar(progress_steps, unit_name="step") if progress_steps else None
        self.echo = bool(echo)
        self.first_step = int(first_step)
        self.peak_memory = peak_memory
        self.started = time.perf_counter()
        self.total_tokens = 0.0
        self.last = {}
        self._interval = _Sums()
        self._epoch = _Sums()

    def update(self, step, logs):
        """Adds one step's `logs` (`forward_nll`, `backward_nll`, `tokens`, `loss`)."""
        self._interval.add(logs)
        self._epoch.add(logs)
        self.total_tokens += logs["tokens"]
        if self.bar is not None:
            self.bar.update(
                step - self.first_step,
                values=[
                    ("loss", logs["loss"]),
                    ("tokens/s", self.total_tokens / max(self.elapsed(), 1e-9)),
                ],
            )

    def elapsed(self):
        return time.perf_counter() - self.started

    @property
    def pending(self):
        """Whether steps were added since the last `write`."""
        return bool(self._interval.tokens)

    def write(self, step, echo=True, epoch=None):
        """Reports the interval that ends at `step` and starts a new one; returns its scalars.

        `epoch`: `(current, total)` passes over the data, named in the printed line.
        """
        scalars = self._interval.scalars()
        if self.optimizer is not None:
            scalars["learning_rate"] = float(
                keras.ops.convert_to_numpy(self.optimizer.learning_rate)
            )
        peak = self.peak_memory() if self.peak_memory is not None else None
        if peak is not None:
            scalars["peak_memory_gib"] = peak / 2**30
        if self.writer is not None:
            try:
                self.writer.scalars(scalars, step)
            except EventFileError:
                self.writer = None
                raise
        if echo and self.echo:
            self._clear_bar()
            print(
                f"step {step}"
                + ("" if epoch is None else f" (epoch {epoch[0]} of {epoch[1]})")
                + f": loss {scalars['loss']:.4f}, perplexity forward "
                f"{scalars['perplexity_forward']:.1f} backward {scalars['perplexity_backward']:.1f}"
                f", {scalars['tokens_per_second']:.0f} tokens/s"
                + (f", peak memory {scalars['peak_memory_gib']:.2f} GiB" if peak else ""),
                flush=True,
            )
        self._interval = _Sums()
        self.last = scalars
        return scalars

    def epoch_logs(self):
        """The scalars since the previous call (or the start), and a new span."""
        scalars = self._epoch.scalars()
        self._epoch = _Sums()
        return scalars

    def summary(self, steps, stopped):
        """What `Trainer.fit` returns: the run's totals and the last interval's perplexities."""
        seconds = self.elapsed()
        return {
            "steps": steps,
            "tokens": int(self.total_tokens),
            "seconds": seconds,
            "tokens_per_second": self.total_tokens / max(seconds, 1e-9),
            "stopped": stopped,
            "train_perplexity_forward": self.last.get("perplexity_forward"),
            "train_perplexity_backward": self.last.get("perplexity_backward"),
        }

    def _clear_bar(self):
        """Blanks the progress bar's line (a terminal's), for a line printed in its place."""
        if self.bar is not None and getattr(self.bar, "_dynamic_display", False):
            sys.stdout.write("\r\x1b[K")

    def close(self, step):
        """Writes what is left of the last interval (no line) and closes TensorBoard's file; a
        bar stopped before its end (a time budget, a signal) gets its line ended."""
        if self.bar is not None and 0 < self.bar._seen_so_far < (self.bar.target or 0):
            print(flush=True)
        if self.pending:
            self.write(step, echo=False)
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.close()

    def abandon(self):
        """Closes TensorBoard's file of a run that is failing (no further error)."""
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.abandon()
