"""The folder of a training run: its saved settings, vocabulary and checkpoints.

```
run/
  training_config.json   what the run keeps of its settings (`run_record.RunRecord`)
  vocab.txt              the vocabulary (bilm-tf format)
  checkpoints/ckpt-N.*   rotated checkpoints (weights, optimizer, step, LSTM state):
                         `tf.train.Checkpoint`s (TensorFlow) or `ckpt-N.npz` files (JAX)
  logs/                  TensorBoard scalars
  options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5   at the end (`model_files`)
```

Plain Python (no TensorFlow).
"""

import contextlib
import os
import pathlib

from elmo_keras.file_io.output_access import exclusive_lock
from elmo_keras.training.run.run_record import CONFIG_FILE

LOCK_FILE = ".run.lock"
CHECKPOINTS = "checkpoints"
LOGS = "logs"


def has_checkpoints(run_dir):
    """Whether `run_dir/checkpoints` exists and holds anything."""
    checkpoints = pathlib.Path(run_dir) / CHECKPOINTS
    return checkpoints.is_dir() and any(checkpoints.iterdir())


def checkpoint_written(prefix):
    """Whether a checkpoint prefix has its files: TensorFlow's `.index` or the JAX `.npz`."""
    return pathlib.Path(f"{prefix}.index").is_file() or pathlib.Path(f"{prefix}.npz").is_file()


def find_checkpoint(run_dir, checkpoint=None):
    """The prefix of a kept checkpoint of a run.

    Args:
        run_dir: path. The run's folder.
        checkpoint: str or None. A prefix (`run_dir/checkpoints/ckpt-2000`), a bare name
            (`ckpt-2000`), or None for the latest.

    Returns:
        The checkpoint prefix, a str.
    """
    from elmo_keras.training.common.checkpoints import kept_checkpoints

    checkpoints = pathlib.Path(run_dir) / CHECKPOINTS
    kept = [p for p in kept_checkpoints(checkpoints) if checkpoint_written(p)]
    if checkpoint is None:
        if not kept:
            raise ValueError(f"No checkpoint in {checkpoints}.")
        return kept[0]
    for prefix in (pathlib.Path(checkpoint), checkpoints / checkpoint):
        if checkpoint_written(prefix):
            return str(prefix)
    kept = sorted(pathlib.Path(p).name for p in kept)
    raise ValueError(
        f"`checkpoint` must name a checkpoint of {checkpoints} (kept: "
        f"{', '.join(kept) or 'none'}). Received: checkpoint={checkpoint!r}"
    )


class RunFolderBusy(ValueError):
    """Another training run holds the run folder (`lock_run`)."""


@contextlib.contextmanager
def lock_run(run_dir):
    """Holds the run folder for one training run: a second one is refused while it lives.

    An exclusive `flock` on `run_dir/.run.lock` (created if missing, kept afterwards), which
    records the holder's host and process id (`output_access.exclusive_lock`, the lock every
    output's writer takes). The operating system releases it when the process ends in any way
    (SIGKILL included), so no stale lock outlives its run. Where `fcntl` is missing (Windows),
    nothing is locked.

    It is taken before anything of the run is checked or written. A run that fails before it
    wrote its `training_config.json` (a refused folder, a bad setting) takes back what the lock
    made: the lock file, and the folders it created if they are empty.

    Raises:
        RunFolderBusy: another process holds it; the message names the folder and the holder.
    """
    run_dir = pathlib.Path(run_dir)
    where = run_dir.absolute()
    made = [folder for folder in (where, *where.parents) if not folder.exists()]
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = run_dir / LOCK_FILE
    new_lock = not os.path.lexists(lock)

    def busy(holder):
        return (
            f"{run_dir} is used by another training run ({holder}); wait for it to end or "
            "choose another output folder"
        )

    with contextlib.ExitStack() as held:
        try:
            held.enter_context(exclusive_lock(lock, busy, remove=False))
        except BlockingIOError as error:
            _take_back(made, None)
            raise RunFolderBusy(str(error)) from None
        try:
            yield
        except BaseException:
            if new_lock and not (run_dir / CONFIG_FILE).exists():
                _take_back(made, lock)
            raise


def _take_back(made, lock):
    """Removes `lock` (held: a waiting run then locks a new file) and the empty folders of
    `made`, deepest first."""
    with contextlib.suppress(OSError):
        if lock is not None:
            lock.unlink()
        for folder in made:
            folder.rmdir()


def text_fingerprint(train_files):
    """What a run's training text is: each matched file's absolute path, size and sha256."""
    from elmo_keras.file_io.download import file_sha256  # noqa: PLC0415
    from elmo_keras.training.feed.data import expand_files  # noqa: PLC0415

    return [
        {"path": os.path.abspath(p), "size": os.path.getsize(p), "sha256": file_sha256(p)}
        for p in expand_files(train_files)
    ]


def vocabulary_sha256(vocabulary):
    """The sha256 of a vocabulary's tokens in order (what the softmax's rows follow)."""
    import hashlib  # noqa: PLC0415

    return hashlib.sha256("\n".join(vocabulary.tokens).encode("utf-8")).hexdigest()


def fingerprint_changes(saved, current):
    """One phrase per difference between two `text_fingerprint`s, or [] when they agree."""
    before = {f["path"]: f for f in saved}
    after = {f["path"]: f for f in current}
    out = [f"{p} is gone" for p in before if p not in after]
    out += [f"{p} is new" for p in after if p not in before]
    for path in before.keys() & after.keys():
        old, new = before[path], after[path]
        if old["size"] != new["size"]:
            out.append(f"{path} changed (size {old['size']} -> {new['size']} bytes)")
        elif old["sha256"] != new["sha256"]:
            out.append(f"{path} changed (same size, other content)")
    return sorted(out)
