"""Keras callbacks in the trainer's loop: when each hook is called, and with which logs."""

import keras


class TrainingCallbacks:
    """Calls `keras.callbacks.Callback`s from `Trainer.fit`'s loop.

    The hooks run on every worker, as in `keras.Model.fit` (check `trainer.is_chief` before
    writing files):

    - `set_model(trainer.model)` (the `LanguageModel`), then `on_train_begin()`.
    - `on_train_batch_end(step, logs)` after every step: `step` is the global step just taken
      (from 1, continuing after a resume); `logs` has `loss` (the step's training loss per
      token, `0.5 * (forward + backward)`), `forward_nll` and `backward_nll` (sums over the
      step's tokens), `tokens` and `grad_norm`.
    - `on_epoch_end(epoch, logs)` when the data moves on to its next pass over the text (after
      the step whose windows start pass `epoch + 1`: rows still finish sentences of pass
      `epoch` in it) and after the last pass of an `epochs`-bounded run. `logs`: `loss`,
      `perplexity_forward`, `perplexity_backward` and `tokens_per_second` over the pass.
    - `on_train_end(logs)` with the summary `fit` returns.

    A callback that sets `model.stop_training = True` stops the run after the step (see
    `stopping.StopRequests`).

    Args:
        callbacks: list of `keras.callbacks.Callback` or None.
        model: `LanguageModel`.
        on_step: callable(step, logs) or None. Called like `on_train_batch_end`.
    """

    def __init__(self, callbacks, model, on_step=None):
        callbacks = list(callbacks or [])
        if on_step is not None:
            callbacks.append(
                keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: on_step(b, logs))
            )
        self.model = model
        self.callbacks = keras.callbacks.CallbackList(callbacks, model=model)
        self.epoch = None  # the data's pass at the previous step

    @property
    def per_step(self):
        """Whether a callback (or `on_step`) wants every step's logs as it ends."""
        return bool(self.callbacks.callbacks)

    def stop_requested(self):
        """Whether a callback set `model.stop_training`."""
        return bool(getattr(self.model, "stop_training", False))

    def train_begin(self):
        self.model.stop_training = False
        self.callbacks.on_train_begin()

    def step_end(self, step, logs, epoch, logger):
        """After a step of the data's pass `epoch`; `logger` is the run's `MetricsLogger`."""
        self.callbacks.on_train_batch_end(step, logs)
        if self.epoch is not None and epoch > self.epoch:
            self.callbacks.on_epoch_end(self.epoch, logger.epoch_logs())
        self.epoch = epoch

    def train_end(self, summary, logger):
        if summary["stopped"] == "epochs" and self.epoch is not None:
            self.callbacks.on_epoch_end(self.epoch, logger.epoch_logs())
        self.callbacks.on_train_end(summary)
