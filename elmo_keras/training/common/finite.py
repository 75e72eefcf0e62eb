"""A run that diverges says so: a non-finite loss or weights stop it, and nothing NaN is kept.

`check_step` stops the run after a step whose loss or gradient norm is NaN or infinite (the
step's update has already made the weights unusable); `check_weights` is run before every
checkpoint and before the model files are written, so a checkpoint or a published file never
holds NaN weights: the run's last checkpoint stays the last finite one. Both raise
`NonFiniteError` (a `ValueError`: `elmo-keras` ends with one line, exit code 1). Keras only.
"""

import math

import keras
import numpy as np

from elmo_keras.training.common.checkpoints import resume_hint


class NonFiniteError(ValueError):
    """A loss or weights that are NaN or infinite: the run diverged, nothing was written."""


def _where_to_go_on(checkpoint_dir):
    if checkpoint_dir is None:
        return "a smaller learning rate may help"
    hint = resume_hint(checkpoint_dir)
    if hint.startswith("no checkpoint"):
        return "no checkpoint was kept yet: start again with a smaller learning rate"
    return f"{hint}, with a smaller learning rate (`--override --learning-rate`)"


def check_step(step, logs, checkpoint_dir=None):
    """Raises `NonFiniteError` when step `step`'s `loss` or `grad_norm` is NaN or infinite.

    Args:
        step: int. The global step just taken.
        logs: dict. Its `metrics.step_logs`.
        checkpoint_dir: path or None. The run's `checkpoints/` (named in the message).
    """
    bad = {k: logs[k] for k in ("loss", "grad_norm") if not math.isfinite(logs[k])}
    if bad:
        values = ", ".join(
            f"{'gradient norm' if k == 'grad_norm' else k} {v}" for k, v in bad.items()
        )
        raise NonFiniteError(
            f"training diverged at step {step} ({values}); no checkpoint or model file was "
            f"written from it: {_where_to_go_on(checkpoint_dir)}"
        )


def first_non_finite(variables):
    """`(path, count)` of the first variable holding NaN or infinite values, or None.

    Each value is read on the host, one variable at a time, as the checkpoint and the model
    files read them: no computation on the devices, which a multi-process JAX run's chief
    could not launch alone (it writes the model files by itself).
    """
    for variable in variables:
        finite = np.isfinite(keras.ops.convert_to_numpy(variable.value))
        if not finite.all():
            return variable.path, int(finite.size - np.count_nonzero(finite))
    return None


def check_weights(model, what, action, checkpoint_dir=None):
    """Raises `NonFiniteError` when a weight of `model` (a `LanguageModel`) is NaN or infinite.

    Args:
        model: `LanguageModel`.
        what: str. The weights, in words (`"the weights at step 40"`, `"checkpoint ..."`).
        action: str. What was refused (`"not saved"`, `"nothing was written to ..."`).
        checkpoint_dir: path or None. A run's `checkpoints/`: the message says where to resume.
    """
    found = first_non_finite(v for v in model.weights if "float" in str(v.dtype))
    if found is None:
        return
    path, count = found
    message = f"{what} hold {count} NaN or infinite values in '{path}' (the run diverged); {action}"
    if checkpoint_dir is not None:
        message += f": {_where_to_go_on(checkpoint_dir)}"
    raise NonFiniteError(message)
