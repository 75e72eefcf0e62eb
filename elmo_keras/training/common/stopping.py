"""Why a training run stops early: a signal, the time budget, or a callback's request.

Each process turns its own reasons into votes (`StopRequests.votes`), a float32 vector with one
entry per reason in `STOP_REASONS` order (1.0: stop). The train step sums the votes of every
worker on the all-reduce it does anyway, so that all workers leave after the same step.
"""

import signal
import time

STOP_REASONS = ("signal", "time", "callback")
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequests:
    """A context manager that catches SIGTERM / SIGINT and watches a time budget.

    Inside the `with` block a SIGTERM or SIGINT no longer kills the process: it is recorded,
    and the training loop checkpoints and stops after the current step. Leaving the block puts
    the previous handlers back.

    Args:
        time_budget_s: float or None. Seconds after entering the block (or the last
            `start_clock`) when the run should stop.
        handle_signals: bool. Catch the signals (only possible in the main thread; elsewhere
            they keep their handlers). Defaults to `True`.
        stop_training: callable or None. Returns True when something else asks to stop (a
            callback that set `model.stop_training`).

    Example:
    >>> with StopRequests(time_budget_s=3600) as requests:
    ...     requests.votes()
    [0.0, 0.0, 0.0]
    """

    def __init__(self, time_budget_s=None, handle_signals=True, stop_training=None):
        self.time_budget_s = time_budget_s
        self.handle_signals = bool(handle_signals)
        self.stop_training = stop_training
        self.received = None
        self.started = time.perf_counter()
        self._previous = {}

    def _handler(self, signum, frame):
        self.received = signum

    def __enter__(self):
        self.started = time.perf_counter()
        if self.handle_signals:
            for signum in _SIGNALS:
                try:
                    self._previous[signum] = signal.signal(signum, self._handler)
                except ValueError:  # not the main thread
                    pass
        return self

    def __exit__(self, *exc_info):
        for signum, old in self._previous.items():
            signal.signal(signum, old)
        self._previous = {}
        return False

    def start_clock(self):
        """Counts the time budget from now (the trainers call it after the first step, whose
        tracing and compiling are not training time)."""
        self.started = time.perf_counter()

    def out_of_time(self):
        return (
            self.time_budget_s is not None
            and time.perf_counter() - self.started >= self.time_budget_s
        )

    def votes(self):
        """This process's requests to stop, in `STOP_REASONS` order: 1.0 or 0.0 each."""
        asked = bool(self.stop_training()) if self.stop_training is not None else False
        return [float(self.received is not None), float(self.out_of_time()), float(asked)]


def stop_reason(votes):
    """The first reason in `STOP_REASONS` with a vote, or None."""
    for reason, vote in zip(STOP_REASONS, votes, strict=True):
        if vote > 0:
            return reason
    return None
