"""The folder of a training run: its saved settings, vocabulary and checkpoints.

```
run/
  training_config.json   the configuration, seed, tokenization mode, carry_state, train files
  vocab.txt              the vocabulary (bilm-tf format)
  checkpoints/ckpt-N.*   rotated `tf.train.Checkpoint`s (weights, optimizer, step, LSTM state)
  logs/                  TensorBoard scalars
  options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5   at the end (`model_files`)
```
"""

import json
import pathlib

from elmo_keras.files import write_text
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.model_files import VOCAB_FILE, save_vocabulary

CONFIG_FILE = "training_config.json"
CHECKPOINTS = "checkpoints"
LOGS = "logs"


def save_run(run_dir, config, vocabulary, seed, tokenization_mode, carry_state, train_files):
    """Writes `training_config.json` and `vocab.txt`: what a resumed run needs besides the
    checkpoint."""
    run_dir = pathlib.Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    save_vocabulary(vocabulary, run_dir / VOCAB_FILE)
    settings = {
        "config": config,
        "seed": seed,
        "tokenization_mode": tokenization_mode,
        "carry_state": carry_state,
        "train": train_files if isinstance(train_files, str) else [str(f) for f in train_files],
    }
    write_text(run_dir / CONFIG_FILE, json.dumps(settings, indent=2) + "\n")


def load_run(run_dir):
    """A run folder's saved settings (`training_config.json`) and its vocabulary.

    Returns:
        `(settings, vocabulary)`: `settings` has `config`, `seed`, `tokenization_mode`,
        `carry_state` and `train` (folders written before `tokenization_mode` had that name
        hold `tokenization`, read the same).
    """
    run_dir = pathlib.Path(run_dir)
    config_path = run_dir / CONFIG_FILE
    if not config_path.is_file():
        raise ValueError(
            f"`run_dir` must be the folder of an `elmo-keras train` run; {config_path} was not "
            f"found. Received: run_dir={str(run_dir)!r}"
        )
    settings = json.loads(config_path.read_text(encoding="utf-8"))
    if "tokenization_mode" not in settings:
        settings["tokenization_mode"] = settings.pop("tokenization", "whitespace")
    return settings, Vocabulary.load(run_dir / VOCAB_FILE)


def has_checkpoints(run_dir):
    """Whether `run_dir/checkpoints` exists and holds anything."""
    checkpoints = pathlib.Path(run_dir) / CHECKPOINTS
    return checkpoints.is_dir() and any(checkpoints.iterdir())


def find_checkpoint(run_dir, checkpoint=None):
    """The prefix of a kept checkpoint of a run.

    Args:
        run_dir: path. The run's folder.
        checkpoint: str or None. A prefix (`run_dir/checkpoints/ckpt-2000`), a bare name
            (`ckpt-2000`), or None for the latest.

    Returns:
        The checkpoint prefix, a str.
    """
    import tensorflow as tf

    checkpoints = pathlib.Path(run_dir) / CHECKPOINTS
    if checkpoint is None:
        latest = tf.train.latest_checkpoint(str(checkpoints))
        if latest is None:
            raise ValueError(f"No checkpoint in {checkpoints}.")
        return latest
    if pathlib.Path(f"{checkpoint}.index").is_file():
        return str(checkpoint)
    if pathlib.Path(f"{checkpoints / checkpoint}.index").is_file():
        return str(checkpoints / checkpoint)
    kept = sorted(p.name[: -len(".index")] for p in checkpoints.glob("*.index"))
    raise ValueError(
        f"`checkpoint` must name a checkpoint of {checkpoints} (kept: "
        f"{', '.join(kept) or 'none'}). Received: checkpoint={checkpoint!r}"
    )
