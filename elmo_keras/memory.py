"""Memory estimates of a biLM and of its training step, checked before anything is allocated.

Sizes are bounded one by one (`options.LIMITS`, the training limits), but sizes within their
bounds can still multiply into more memory than a machine has: `lstm.dim` 65,536 with 64 layers
is 4 TB of weights. Such a configuration used to end in a 50-line `ResourceExhaustedError` or
`MemoryError` after minutes of building. `check_fits` turns it into one line naming the source,
the estimate and the memory available, before the first array exists.

The estimates count float32 parameters exactly and activations roughly (what one training step
keeps for its backward pass); they decide only whether a configuration cannot fit. Set
`ELMO_KERAS_IGNORE_MEMORY=1` to go ahead anyway (on a machine with swap, or where the estimate
is wrong). Plain Python: no TensorFlow, no Keras.
"""

import os

IGNORE_VARIABLE = "ELMO_KERAS_IGNORE_MEMORY"
FLOAT_BYTES = 4
OPTIMIZER_SLOTS = {"adagrad": 1, "adam": 2}


class NotEnoughMemory(ValueError):
    """A configuration that needs more memory than the machine has (one line)."""


def bilm_parameters(kwargs):
    """The number of float parameters of a `BiLM` built from `kwargs` (its constructor's).

    Example:
    >>> from elmo_keras.options import options_to_bilm_kwargs, read_options
    >>> options = read_options("elmo_keras/assets/tiny_allennlp/options.json")
    >>> bilm_parameters(options_to_bilm_kwargs(options))
    105124
    """
    char_dim, projection = kwargs["char_embedding_dim"], kwargs["projection_dim"]
    units, layers = kwargs["lstm_units"], kwargs["n_layers"]
    filters = [tuple(pair) for pair in kwargs["filters"]]
    width = sum(count for _, count in filters)
    characters = kwargs["n_characters"] * char_dim
    convolutions = sum(w * char_dim * count + count for w, count in filters)
    highway = kwargs["n_highway"] * (width * 2 * width + 2 * width)
    cnn_projection = width * projection + projection
    lstm = 2 * projection * 4 * units + 4 * units + units * projection
    return characters + convolutions + highway + cnn_projection + 2 * layers * lstm


def training_bytes(kwargs, vocabulary_size, batch_size, unroll_steps, optimizer, candidates):
    """About the memory of one training step: weights, gradients, optimizer slots, activations.

    Args:
        kwargs: dict. The `BiLM` constructor's arguments.
        vocabulary_size: int. Words of the softmax.
        batch_size, unroll_steps: int. The global batch and the window length.
        optimizer: str. `"adagrad"` or `"adam"`.
        candidates: int. Sampled-softmax candidates (0: the full softmax).
    """
    projection, units = kwargs["projection_dim"], kwargs["lstm_units"]
    width = sum(count for _, count in kwargs["filters"])
    weights = bilm_parameters(kwargs) + vocabulary_size * (projection + 1)
    copies = 2 + OPTIMIZER_SLOTS.get(optimizer, 2)  # values, gradients, slots
    tokens = batch_size * unroll_steps
    per_token = (
        2 * width * kwargs["max_characters_per_token"]  # both directions' convolutions
        + 2 * 3 * width * kwargs["n_highway"]
        + 2 * kwargs["n_layers"] * (6 * units + projection)  # gates, cell, output, projection
        + 2 * ((candidates or vocabulary_size) + 1)  # each direction's logits
    )
    return FLOAT_BYTES * (weights * copies + 2 * tokens * per_token)


def check_step_fits(config, vocabulary_size, rows):
    """One line, before the model exists, when a training step of `rows` rows per replica
    (weights, gradients, optimizer slots, activations) cannot fit the machine's memory.

    Args:
        config: `elmo_keras.training.configs.TrainingConfig`.
        vocabulary_size: int. Words of the softmax.
        rows: int. The batch rows of one replica.
    """
    needed = training_bytes(
        config.bilm_kwargs,
        vocabulary_size,
        rows,
        config.unroll_steps,
        config.optimizer,
        config.samples,
    )
    where = f"the training configuration (batch {rows} x {config.unroll_steps} per replica"
    check_fits(needed, "a training step", f"{where}, {vocabulary_size:,} words)")


def available_bytes():
    """The memory this process could still allocate: the host's available memory, or the
    accelerator's when a JAX accelerator is in use and larger; None when unknown."""
    host = None
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    host = int(line.split()[1]) * 1024
                    break
    except OSError:
        try:
            host = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            host = None
    return max(filter(None, (host, _accelerator_bytes())), default=None)


def _accelerator_bytes():
    import sys

    jax = sys.modules.get("jax")  # only where JAX is in use already; never imported here
    if jax is None:
        return None
    try:
        device = jax.devices()[0]
        if device.platform == "cpu":
            return None
        return int((device.memory_stats() or {}).get("bytes_limit", 0)) or None
    except Exception:  # noqa: BLE001 - a figure the backend may not give
        return None


def check_fits(needed, what, source):
    """Raises `NotEnoughMemory` when `needed` bytes exceed what the machine has available.

    Args:
        needed: int. The estimate, in bytes.
        what: str. What needs it ("its weights", "a training step").
        source: str. Where the configuration comes from (a file, a flag).
    """
    if os.environ.get(IGNORE_VARIABLE, "").strip() not in ("", "0"):
        return
    available = available_bytes()
    if available is None or needed <= available:
        return
    raise NotEnoughMemory(
        f"{source}: {what} would need about {_gib(needed)} of memory, more than the "
        f"{_gib(available)} this machine has available; make the configuration smaller (or set "
        f"{IGNORE_VARIABLE}=1 to try anyway)"
    )


def _gib(count):
    value = count / 2**30
    return f"{value:,.0f} GiB" if value >= 10 else f"{value:.1f} GiB"
