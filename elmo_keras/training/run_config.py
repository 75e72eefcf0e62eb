"""`TrainingRun`: the settings of one `elmo_keras.training.train` run, checked in one place.

Pure Python (no TensorFlow). `legacy_training_run` turns the keyword arguments of the old
`train(train, output_dir, config=..., ...)` into a `TrainingRun`, with a `DeprecationWarning`.
"""

import dataclasses
import os
import warnings

from elmo_keras.text.pretokenize import TOKENIZATION_MODES
from elmo_keras.training.distribute import STRATEGIES
from elmo_keras.validation import check_choice, check_int, check_number

_POSITIVE_INTS = (
    "min_count",
    "checkpoint_every",
    "keep_checkpoints",
    "log_every",
    "eval_batch_size",
)
_OPTIONAL_POSITIVE_INTS = ("steps", "epochs", "batch_size", "max_vocab_size", "eval_max_tokens")
_BOOLS = ("resume", "jit_compile", "carry_state", "verbose")
_OPTIONAL_BOOLS = ("progress",)


def _check_paths(name, value, allow_list=False):
    ok = isinstance(value, str | os.PathLike)
    if allow_list and isinstance(value, list | tuple):
        ok = bool(value) and all(isinstance(v, str | os.PathLike) for v in value)
    if not ok:
        expected = "a path or glob" + (", or a non-empty list of them" if allow_list else "")
        raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """What `elmo_keras.training.train` does: the data, the model, when to stop, the outputs.

    Every field is checked when the object is made (a `ValueError` names the field, what was
    expected and what was received). `dataclasses.replace(run, steps=...)` makes a changed copy.

    Args:
        train_files: str or list. Glob(s) of text files, one sentence or paragraph per line.
        output_dir: path. The run's folder (see `elmo_keras.training.run_folder`).
        config: str, path or dict. A named configuration (`tiny`, `cpu`, `small`, `medium`,
            `original`) or a JSON file / dict of bilm-tf options. Defaults to `"small"`.
        valid_files: str or None. Held-out text: its full-softmax perplexity is reported.
        steps: int or None. The global step to stop at.
        epochs: int or None. Passes over the data (give `steps`, `epochs` or both).
        batch_size: int or None. Global batch (rows of windows); overrides the configuration.
        strategy: `"auto"`, `"default"`, `"mirrored"`, `"multi-worker"` or a
            `tf.distribute.Strategy`. Defaults to `"auto"`.
        resume: bool. Continue the run in `output_dir` from its latest checkpoint, with its
            saved configuration, vocabulary, seed, tokenization mode and `carry_state`.
        seed: int. Weights, data order and softmax samples. Defaults to `0`.
        vocab_file: path or None. An existing vocabulary file (else one is built).
        min_count: int. Vocabulary building: the fewest occurrences kept. Defaults to `1`.
        max_vocab_size: int or None. Vocabulary building: the most words kept.
        tokenization_mode: `"whitespace"` (pre-tokenized text) or `"punctuation"`.
        checkpoint_every: int. Steps between checkpoints. Defaults to `1000`.
        keep_checkpoints: int. Checkpoints kept. Defaults to `3`.
        time_budget_s: float or None. Stop after this much training time.
        mixed_precision: None or `"bfloat16"`.
        jit_compile: bool. XLA. Defaults to `False`.
        carry_state: bool. Carry the LSTM state across windows. Defaults to `True`.
        n_negative_samples: int or None. Sampled-softmax candidates (0: full softmax);
            overrides the configuration.
        optimizer: `"adagrad"`, `"adam"` or None (the configuration's).
        learning_rate: float or None (the configuration's).
        log_every: int. Steps between logged lines. Defaults to `50`.
        progress: bool or None. A progress bar (None: when stdout is a terminal).
        eval_batch_size: int. The held-out evaluation's batch. Defaults to `16`.
        eval_max_tokens: int or None. Evaluate on about this many tokens only.
        verbose: bool. Print what happens. Defaults to `True`.

    Example:
    >>> run = TrainingRun("corpus/*.txt", "runs/small", config="small", steps=100_000)
    >>> run.steps
    100000
    """

    train_files: str | os.PathLike | list
    output_dir: str | os.PathLike
    config: str | os.PathLike | dict = "small"
    valid_files: str | os.PathLike | None = None
    steps: int | None = None
    epochs: int | None = None
    batch_size: int | None = None
    strategy: object = "auto"
    resume: bool = False
    seed: int = 0
    vocab_file: str | os.PathLike | None = None
    min_count: int = 1
    max_vocab_size: int | None = None
    tokenization_mode: str = "whitespace"
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    time_budget_s: float | None = None
    mixed_precision: str | None = None
    jit_compile: bool = False
    carry_state: bool = True
    n_negative_samples: int | None = None
    optimizer: str | None = None
    learning_rate: float | None = None
    log_every: int = 50
    progress: bool | None = None
    eval_batch_size: int = 16
    eval_max_tokens: int | None = None
    verbose: bool = True

    def __post_init__(self):
        self._check_files()
        self._check_numbers()
        self._check_choices()

    def _check_files(self):
        _check_paths("train_files", self.train_files, allow_list=True)
        _check_paths("output_dir", self.output_dir)
        for name in ("valid_files", "vocab_file"):
            if getattr(self, name) is not None:
                _check_paths(name, getattr(self, name), allow_list=name == "valid_files")
        if not isinstance(self.config, str | os.PathLike | dict):
            raise ValueError(
                "`config` must be a configuration name, a JSON file or a dict. "
                f"Received: config={self.config!r}"
            )

    def _check_numbers(self):
        if self.steps is None and self.epochs is None:
            raise ValueError(
                "`steps` or `epochs` must be given (or both). Received: steps=None, epochs=None"
            )
        for name in _POSITIVE_INTS:
            check_int(name, getattr(self, name))
        for name in _OPTIONAL_POSITIVE_INTS:
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name))
        check_int("seed", self.seed, minimum=0)
        if self.n_negative_samples is not None:
            check_int("n_negative_samples", self.n_negative_samples, minimum=0)
        for name in ("time_budget_s", "learning_rate"):
            if getattr(self, name) is not None:
                check_number(name, getattr(self, name), minimum=0.0)

    def _check_choices(self):
        for name in _BOOLS + _OPTIONAL_BOOLS:
            value = getattr(self, name)
            if not isinstance(value, bool) and not (value is None and name in _OPTIONAL_BOOLS):
                expected = "True, False or None" if name in _OPTIONAL_BOOLS else "True or False"
                raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")
        if isinstance(self.strategy, str):
            check_choice("strategy", self.strategy, STRATEGIES)
        check_choice("tokenization_mode", self.tokenization_mode, TOKENIZATION_MODES)
        check_choice("mixed_precision", self.mixed_precision, (None, "bfloat16"))
        check_choice("optimizer", self.optimizer, (None, "adagrad", "adam"))


# The old `train(...)` arguments, in their positional order, and their new names.
_LEGACY_ORDER = (
    "train",
    "output_dir",
    "config",
    "valid",
    "steps",
    "epochs",
    "batch_size",
    "strategy",
    "resume",
    "seed",
    "vocab",
    "min_count",
    "max_vocab_size",
    "tokenization",
    "checkpoint_every",
    "keep_checkpoints",
    "time_budget_s",
    "mixed_precision",
    "jit_compile",
    "carry_state",
    "n_negative_samples",
    "optimizer",
    "learning_rate",
    "log_every",
    "progress",
    "eval_batch_size",
    "eval_max_tokens",
    "verbose",
)
_LEGACY_NAMES = {
    "train": "train_files",
    "valid": "valid_files",
    "vocab": "vocab_file",
    "tokenization": "tokenization_mode",
}


def legacy_training_run(args, kwargs):
    """A `TrainingRun` from the old `train(train, output_dir, ...)` arguments, with a warning.

    The old names (`train`, `valid`, `vocab`, `tokenization`) and the new field names are both
    accepted as keywords. Emits a `DeprecationWarning` that points at the caller of `train`.
    """
    if len(args) > len(_LEGACY_ORDER):
        raise TypeError(f"train() takes at most {len(_LEGACY_ORDER)} positional arguments")
    fields = {
        _LEGACY_NAMES.get(name, name): value
        for name, value in zip(_LEGACY_ORDER, args, strict=False)
    }
    for name, value in kwargs.items():
        field = _LEGACY_NAMES.get(name, name)
        if field in fields:
            raise TypeError(f"train() got multiple values for argument {name!r}")
        fields[field] = value
    known = {f.name for f in dataclasses.fields(TrainingRun)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise TypeError(f"train() got an unexpected keyword argument {unknown[0]!r}")
    warnings.warn(
        "`train(train, output_dir, ...)` with keyword arguments is deprecated; use "
        "`train(TrainingRun(train_files=..., output_dir=..., ...))`.",
        DeprecationWarning,
        stacklevel=3,
    )
    return TrainingRun(**fields)
