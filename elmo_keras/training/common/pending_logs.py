"""The logs of steps taken whose numbers have not been read on the host yet.

A JAX step returns its metrics as device arrays; reading one (`float(...)`) waits for the step
to finish, and then the device idles until the host has dispatched the next step. So the loop
keeps each step's logs pending and reads them in order at a settling point: a logged step, a
checkpoint, a stop, the end, every `limit` steps (which also bounds how far the host runs ahead
of the device), and at every step when callbacks want each step's logs. The numbers are the
same; a non-finite loss is reported with the step it happened at, before any checkpoint or model
file is written.
"""


class PendingLogs:
    """Steps' `(step, logs, epoch)` not yet read, in order.

    `logs` is a `metrics.step_logs` dict, or a callable that returns one (reading the device).

    Args:
        limit: int >= 1. Settle at the latest when this many steps are pending.
    """

    def __init__(self, limit):
        self.limit = limit
        self.steps = []

    def add(self, step, logs, epoch):
        self.steps.append((step, logs, epoch))

    def full(self):
        return len(self.steps) >= self.limit

    def settle(self, take):
        """Calls `take(step, logs, epoch)` for each pending step in order, logs read."""
        while self.steps:
            step, logs, epoch = self.steps.pop(0)
            take(step, logs() if callable(logs) else logs, epoch)
