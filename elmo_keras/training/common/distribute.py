"""Strategy set-up and the roles of the processes of a multi-worker run.

`make_strategy` picks a `tf.distribute` strategy by name; `is_chief`, `num_workers` and
`worker_id` read a strategy's cluster. Every worker of a `MultiWorkerMirroredStrategy` run must
take part in each checkpoint save (a collective), but only the chief keeps its copy: the others
write to `worker_directory(...)` and delete it (`discard_worker_copy`). TensorFlow is imported by
`make_strategy` only.
"""

import itertools
import json
import os
import pathlib
import shutil

from elmo_keras.validation import check_choice

STRATEGIES = ("auto", "default", "mirrored", "multi-worker")
_KEY_RANGE = 100_000  # collective keys set aside for one MirroredStrategy
_key_ranges = itertools.count(1)


def tf_config_cluster():
    """The `cluster` of the TF_CONFIG environment variable (`{}` when it is not set), checked:
    TF_CONFIG must be a JSON object whose `cluster` maps job names to lists of addresses.

    Raises:
        ValueError: one line naming TF_CONFIG, what it must be and what it holds.
    """
    text = os.environ.get("TF_CONFIG")
    if text is None:
        return {}
    expected = (
        'TF_CONFIG must be a JSON object such as {"cluster": {"worker": ["host:port", ...]}, '
        '"task": {"type": "worker", "index": 0}}'
    )
    shown = text if len(text) <= 80 else text[:77] + "..."
    try:
        config = json.loads(text)
    except ValueError:
        raise ValueError(f"{expected}. Received (not JSON): TF_CONFIG={shown!r}") from None
    cluster = config.get("cluster", {}) if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not all(
        isinstance(addresses, list) for addresses in cluster.values()
    ):
        raise ValueError(f"{expected}. Received: TF_CONFIG={shown!r}")
    return cluster


def _auto_strategy_name():
    import tensorflow as tf

    cluster = tf_config_cluster()
    n_workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
    if n_workers > 1:
        return "multi-worker"
    if len(tf.config.list_logical_devices("GPU")) > 1:
        return "mirrored"
    return "default"


def make_strategy(name="auto"):
    """A `tf.distribute` strategy by name.

    Args:
        name: str. `"auto"`: `MultiWorkerMirroredStrategy` when `TF_CONFIG` names more than one
            worker, `MirroredStrategy` over all GPUs when there are several, else the default
            strategy (one device). `"default"`: the current strategy. `"mirrored"`: every
            local GPU (or, without GPUs, every logical CPU device). `"multi-worker"`:
            `MultiWorkerMirroredStrategy` from `TF_CONFIG`. Defaults to `"auto"`.

    Returns:
        A `tf.distribute.Strategy`.
    """
    import tensorflow as tf

    check_choice("strategy", name, STRATEGIES)
    if name == "auto":
        name = _auto_strategy_name()
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "multi-worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("`strategy='multi-worker'` needs the TF_CONFIG environment variable.")
        tf_config_cluster()  # a malformed TF_CONFIG is one line, not TensorFlow's traceback
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    return _mirrored_strategy(devices)


def _mirrored_strategy(devices):
    """`tf.distribute.MirroredStrategy(devices)` with collective keys of its own.

    Every MirroredStrategy numbers its collectives from the same key, and the runtime keeps what
    it learnt about those of an earlier strategy: a second one on the same devices in the same
    process (two `train` calls in a notebook) fails with "Shape mismatch in the collective
    instance". TensorFlow's own tests give each strategy a key range (`_collective_key_base`);
    so does this, and it moves the base on again for a strategy made elsewhere afterwards.
    """
    import tensorflow as tf

    strategy_class = tf.distribute.MirroredStrategy
    if not hasattr(strategy_class, "_collective_key_base"):  # another TensorFlow: as it is
        return strategy_class(devices)
    strategy_class._collective_key_base = next(_key_ranges) * _KEY_RANGE
    try:
        return strategy_class(devices)
    finally:
        strategy_class._collective_key_base = next(_key_ranges) * _KEY_RANGE


def jax_devices(strategy="auto"):
    """The JAX devices a run's `strategy` setting names (the JAX trainer's counterpart of
    `make_strategy`).

    `"auto"`: every device of every process (`jax.devices()`); `"mirrored"` the same;
    `"default"`: the first one; `"multi-worker"`: every device of every process, after joining
    the processes with `keras.distribution.initialize()` (from `KERAS_DISTRIBUTION_JOB_ADDRESSES`,
    `KERAS_DISTRIBUTION_NUM_PROCESSES` and `KERAS_DISTRIBUTION_PROCESS_ID`; on CPUs with Gloo's
    collectives) unless `jax.distributed` is already initialized. A `tf.distribute.Strategy` is
    a `ValueError`.
    """
    import jax

    if not isinstance(strategy, str):
        raise ValueError(
            "On the JAX backend `strategy` must be one of "
            f"{', '.join(repr(s) for s in STRATEGIES)}; a tf.distribute strategy needs "
            f"KERAS_BACKEND=tensorflow. Received: strategy={strategy!r}"
        )
    check_choice("strategy", strategy, STRATEGIES)
    if strategy == "multi-worker" and not jax.distributed.is_initialized():
        _join_jax_processes()
    if strategy == "default":
        return jax.devices()[:1]
    return jax.devices()


def _join_jax_processes():
    import jax
    import keras

    names = ("JOB_ADDRESSES", "NUM_PROCESSES", "PROCESS_ID")
    missing = [
        f"KERAS_DISTRIBUTION_{n}" for n in names if f"KERAS_DISTRIBUTION_{n}" not in os.environ
    ]
    if missing:
        raise ValueError(
            "`strategy='multi-worker'` on JAX joins the processes named by the environment; "
            f"set {', '.join(missing)} (read by `keras.distribution.initialize`). Received: "
            "strategy='multi-worker'"
        )
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPUs only; GPUs: NCCL
    keras.distribution.initialize()


def _resolver(strategy):
    return getattr(strategy, "cluster_resolver", None)


def is_chief(strategy):
    """Whether this process is the chief: the `chief` task, else worker 0, else the only one."""
    resolver = _resolver(strategy)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().jobs
    )


def chief_by_environment(strategy):
    """Whether this process will be the run's chief, told before any strategy or trainer
    exists (the run folder's lock is taken first): a strategy object by its cluster; a name by
    `TF_CONFIG` (TensorFlow) or `KERAS_DISTRIBUTION_PROCESS_ID` (JAX), as `is_chief` and the
    JAX trainer decide once the processes are joined. A `TF_CONFIG` that is not a JSON object
    counts as one process (the strategy reports it)."""
    if not isinstance(strategy, str):
        return is_chief(strategy)
    if strategy in ("default", "mirrored"):
        return True
    from elmo_keras.backend import keras_backend  # noqa: PLC0415

    if keras_backend() == "jax":
        import jax  # noqa: PLC0415

        if jax.distributed.is_initialized() or strategy != "multi-worker":
            return jax.process_index() == 0
        return os.environ.get("KERAS_DISTRIBUTION_PROCESS_ID", "0").strip() in ("0", "")
    try:
        config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    except ValueError:
        return True
    cluster = config.get("cluster") if isinstance(config, dict) else None
    task = config.get("task") if isinstance(config, dict) else None
    if not (isinstance(cluster, dict) and isinstance(task, dict)):
        return True
    jobs = {name: cluster.get(name) or [] for name in ("chief", "worker")}
    if sum(len(hosts) for hosts in jobs.values()) <= 1 and strategy == "auto":
        return True  # `auto` is the default strategy then
    task_type, task_id = task.get("type"), task.get("index", 0)
    return task_type == "chief" or (task_type == "worker" and task_id == 0 and not jobs["chief"])


def num_workers(strategy):
    """The number of processes (chief and workers) that run the strategy's steps."""
    resolver = _resolver(strategy)
    if resolver is None:
        return 1
    jobs = resolver.cluster_spec().as_dict()
    return max(1, sum(len(jobs.get(name, ())) for name in ("chief", "worker")))


def worker_id(strategy):
    """This process's task index (0 without a cluster)."""
    resolver = _resolver(strategy)
    return 0 if resolver is None or resolver.task_id is None else int(resolver.task_id)


def worker_directory(directory, strategy):
    """Where this process writes checkpoints: `directory` on the chief, a private folder else."""
    directory = pathlib.Path(directory)
    if is_chief(strategy):
        return directory
    return directory / f".worker-{worker_id(strategy)}"


def discard_worker_copy(directory, strategy):
    """Deletes a non-chief worker's checkpoint folder (the chief's copy is the one kept)."""
    if not is_chief(strategy):
        shutil.rmtree(directory, ignore_errors=True)
