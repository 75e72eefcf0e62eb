"""The folder of a training run: its saved settings, vocabulary and checkpoints.

```
run/
  training_config.json   the configuration, seed, tokenization mode, carry_state, train files
                         (and each file's absolute path, size and sha256), vocabulary settings
                         and the vocabulary's sha256, where the weights started (`init_from`),
                         the frozen-biLM steps, and the overrides applied when resuming
  vocab.txt              the vocabulary (bilm-tf format)
  checkpoints/ckpt-N.*   rotated checkpoints (weights, optimizer, step, LSTM state):
                         `tf.train.Checkpoint`s (TensorFlow) or `ckpt-N.npz` files (JAX)
  logs/                  TensorBoard scalars
  options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5   at the end (`model_files`)
```

Plain Python (no TensorFlow).
"""

import contextlib
import json
import os
import pathlib

from elmo_keras.file_io.files import write_text
from elmo_keras.file_io.output_access import exclusive_lock
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.model_files import VOCAB_FILE, save_vocabulary

CONFIG_FILE = "training_config.json"
LOCK_FILE = ".run.lock"
CHECKPOINTS = "checkpoints"
LOGS = "logs"

# Keys of training_config.json that folders written by older versions lack, and their values.
_OPTIONAL_KEYS = {
    "carry_state": True,
    "init_from": None,
    "new_vocab": False,
    "freeze_bilm_steps": 0,
    "data_start_step": 0,
    "overrides": [],
    "train_fingerprint": None,
    "vocab_sha256": None,
    # Runs started before the whole-text shuffle streamed their lines through this buffer.
    "shuffle_buffer": 10000,
    "log_every": 50,
}
# What each saved key must be: (a check, the expected value in words).
_KEY_TYPES = {
    "config": (lambda v: isinstance(v, dict), "a JSON object"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "tokenization_mode": (lambda v: isinstance(v, str), "a string"),
    "carry_state": (lambda v: isinstance(v, bool), "true or false"),
    "train": (
        lambda v: (
            isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
        ),
        "a path or a list of paths",
    ),
    "init_from": (lambda v: v is None or isinstance(v, dict), "null or a JSON object"),
    "new_vocab": (lambda v: isinstance(v, bool), "true or false"),
    "freeze_bilm_steps": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "data_start_step": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "overrides": (lambda v: isinstance(v, list), "a list"),
    "train_fingerprint": (
        lambda v: v is None or (isinstance(v, list) and all(isinstance(x, dict) for x in v)),
        "null or a list of objects",
    ),
    "vocab_sha256": (lambda v: v is None or isinstance(v, str), "null or a string"),
    "shuffle_buffer": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "an integer >= 0",
    ),
    "log_every": (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1,
        "an integer >= 1",
    ),
}


def save_run(run_dir, settings, vocabulary):
    """Writes `training_config.json` and `vocab.txt`: what a resumed run needs besides the
    checkpoint.

    Args:
        run_dir: path. The run's folder (created).
        settings: dict. `config`, `seed`, `tokenization_mode`, `carry_state`, `train` and the
            other keys `load_run` returns.
        vocabulary: `Vocabulary`.
    """
    run_dir = pathlib.Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_vocabulary(vocabulary, run_dir / VOCAB_FILE)
    settings = dict(settings)
    train = settings["train"]
    if isinstance(train, str | os.PathLike):
        settings["train"] = os.fspath(train)
    else:
        settings["train"] = [os.fspath(f) for f in train]
    write_text(run_dir / CONFIG_FILE, json.dumps(settings, indent=2) + "\n")


def load_run(run_dir):
    """A run folder's saved settings (`training_config.json`) and its vocabulary.

    Every key is checked: a file that is not JSON, or a key of the wrong type, is a
    `ValueError` naming the file and the key.

    Returns:
        `(settings, vocabulary)`: `settings` has `config`, `seed`, `tokenization_mode`,
        `carry_state`, `train`, `init_from` (None or where the weights came from),
        `new_vocab`, `freeze_bilm_steps`, `data_start_step` (the step at which the current
        training files started), `overrides` (those applied when resuming) and
        `shuffle_buffer` (0: the whole text shuffled; folders written before it was saved
        streamed through 10,000 lines, read so), `log_every` (50 for older folders); runs
        written by this version also have
        `vocab_file`, `min_count` and `max_vocab_size`. Folders
        written before `tokenization_mode` had that name hold `tokenization`, read the same.
    """
    run_dir = pathlib.Path(run_dir)
    config_path = run_dir / CONFIG_FILE
    if not config_path.is_file():
        raise ValueError(
            f"`run_dir` must be the folder of an `elmo-keras train` run; {config_path} was not "
            f"found. Received: run_dir={str(run_dir)!r}"
        )
    try:
        settings = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(
            f"{config_path} is damaged (not valid JSON: {error}); restore it from a copy, or "
            "start a new run in another folder"
        ) from None
    if not isinstance(settings, dict):
        raise ValueError(
            f"{config_path} must hold a JSON object. Received: {type(settings).__name__}"
        )
    if "tokenization_mode" not in settings:
        settings["tokenization_mode"] = settings.pop("tokenization", "whitespace")
    for key, default in _OPTIONAL_KEYS.items():
        settings.setdefault(key, default)
    for key, (valid, expected) in _KEY_TYPES.items():
        if key not in settings:
            raise ValueError(f"{config_path} has no key '{key}' (expected {expected})")
        if not valid(settings[key]):
            raise ValueError(
                f"{config_path}: '{key}' must be {expected}. Received: {settings[key]!r}"
            )
    _check_saved_config(settings["config"], config_path)
    return settings, Vocabulary.load(run_dir / VOCAB_FILE)


def _check_saved_config(config, config_path):
    """A bad value in the saved configuration names the file and the run it belongs to, not
    only the key (the same check a new run's configuration gets)."""
    from elmo_keras.training.configs import normalize_config  # noqa: PLC0415

    try:
        normalize_config(config)
    except ValueError as error:
        raise ValueError(
            f"{config_path} (the saved run's settings), key 'config': {error}; restore the file "
            "from a copy, or start a new run in another folder"
        ) from None


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
