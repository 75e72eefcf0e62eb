"""`TrainingRun`: the settings of one `elmo_keras.training.train` run, checked in one place.

Pure Python (no TensorFlow). `legacy_training_run` turns the keyword arguments of the old
`train(train, output_dir, config=..., ...)` into a `TrainingRun`, with a `DeprecationWarning`.
`SettingsConflict` is the error for settings that disagree with a saved run or a source.
"""

import dataclasses
import os
import warnings

from elmo_keras.text.pretokenize import TOKENIZATION_MODES
from elmo_keras.training.distribute import STRATEGIES
from elmo_keras.validation import check_choice, check_int, check_number

_POSITIVE_INTS = ("checkpoint_every", "keep_checkpoints", "log_every", "eval_batch_size")
_OPTIONAL_POSITIVE_INTS = (
    "steps",
    "epochs",
    "batch_size",
    "max_vocab_size",
    "eval_max_tokens",
    "min_count",
)
_BOOLS = ("resume", "jit_compile", "verbose", "new_vocab", "override")
_OPTIONAL_BOOLS = ("progress", "carry_state")
# Fields whose None means "the saved run's value" when resuming, else these defaults.
NEW_RUN_DEFAULTS = {
    "config": "small",
    "seed": 0,
    "tokenization_mode": "whitespace",
    "carry_state": True,
    "min_count": 1,
    "freeze_bilm_steps": 0,
}


def _check_paths(name, value, allow_list=False):
    ok = isinstance(value, str | os.PathLike)
    if allow_list and isinstance(value, list | tuple):
        ok = bool(value) and all(isinstance(v, str | os.PathLike) for v in value)
    if not ok:
        expected = "a path or glob" + (", or a non-empty list of them" if allow_list else "")
        raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")


def _check_init_from(value):
    pair = isinstance(value, list | tuple) and len(value) == 2
    if not (isinstance(value, str | os.PathLike) or pair):
        raise ValueError(
            "`init_from` must be a run folder, a preset name, or an (options, weights) pair of "
            f"paths or URLs. Received: init_from={value!r}"
        )
    if pair and not all(isinstance(v, str | os.PathLike) for v in value):
        raise ValueError(
            "`init_from` as a pair must hold two paths or URLs (options, weights). "
            f"Received: init_from={value!r}"
        )


class SettingsConflict(ValueError):
    """Settings that disagree with the saved run (`resume`) or the `init_from` source.

    The message is one line: `template` (with `{field}` placeholders naming `TrainingRun`
    fields) and then every conflict. `message(names)` writes it with other names for the
    fields, e.g. the command line's flags.

    Args:
        template: str. The sentence before the list, e.g. "{resume}: ... (pass {override})".
        conflicts: list of `(field, text)`: a `TrainingRun` field and what is wrong with it.
    """

    def __init__(self, template, conflicts):
        self.template = template
        self.conflicts = list(conflicts)
        super().__init__(self.message())

    def message(self, names=None):
        labels = _Labels(names or {})
        listed = "; ".join(f"{labels[field]} {text}" for field, text in self.conflicts)
        return f"{self.template.format_map(labels)}: {listed}"


class _Labels(dict):
    def __init__(self, names):
        super().__init__()
        self.names = names

    def __missing__(self, field):
        return self.names.get(field, f"`{field}`")


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """What `elmo_keras.training.train` does: the data, the model, when to stop, the outputs.

    Every field is checked when the object is made (a `ValueError` names the field, what was
    expected and what was received). `dataclasses.replace(run, steps=...)` makes a changed copy.
    A field marked "None: saved" takes the saved run's value when resuming and the default
    shown for a new run; given with `resume`, it must equal the saved value (or `override`).

    Args:
        train_files: str, list or None. Glob(s) of text files, one sentence or paragraph per
            line. None only with `resume` (the saved run's files).
        output_dir: path. The run's folder (see `elmo_keras.training.run_folder`).
        config: str, path, dict or None. A named configuration (`tiny`, `cpu`, `small`,
            `medium`, `original`) or a JSON file / dict of bilm-tf options. None: saved, else
            `"small"`; with `init_from`, the source's architecture and training keys.
        valid_files: str or None. Held-out text: its full-softmax perplexity is reported.
        steps: int or None. The global step to stop at.
        epochs: int or None. Passes over the data (give `steps`, `epochs` or both).
        batch_size: int or None. Global batch (rows of windows); overrides the configuration.
        strategy: `"auto"`, `"default"`, `"mirrored"`, `"multi-worker"` or a
            `tf.distribute.Strategy`. Defaults to `"auto"`.
        resume: bool. Continue the run in `output_dir` from its newest readable checkpoint,
            with its saved configuration, vocabulary, seed, tokenization mode and `carry_state`.
        seed: int or None. Weights, data order and softmax samples. None: saved, else `0`.
        vocab_file: path or None. An existing vocabulary file (else one is built).
        min_count: int or None. Vocabulary building: the fewest occurrences kept. None: `1`.
        max_vocab_size: int or None. Vocabulary building: the most words kept.
        tokenization_mode: `"whitespace"` (pre-tokenized text), `"punctuation"` or None (saved,
            else `"whitespace"`).
        checkpoint_every: int. Steps between checkpoints. Defaults to `1000`.
        keep_checkpoints: int. Checkpoints kept. Defaults to `3`.
        time_budget_s: float or None. Stop after this much training time.
        mixed_precision: None or `"bfloat16"`.
        jit_compile: bool. XLA. Defaults to `False`.
        carry_state: bool or None. Carry the LSTM state across windows. None: saved, else
            `True`.
        n_negative_samples: int or None. Sampled-softmax candidates (0: full softmax);
            overrides the configuration.
        optimizer: `"adagrad"`, `"adam"` or None (the configuration's).
        learning_rate: float or None (the configuration's).
        log_every: int. Steps between logged lines. Defaults to `50`.
        progress: bool or None. A progress bar (None: when stdout is a terminal).
        eval_batch_size: int. The held-out evaluation's batch. Defaults to `16`.
        eval_max_tokens: int or None. Evaluate on about this many tokens only.
        verbose: bool. Print what happens. Defaults to `True`.
        init_from: str, path, `(options, weights)` or None. Start from a trained biLM instead
            of random weights: a run folder (an `elmo-keras train` output: its biLM,
            vocabulary and softmax), a preset name (`elmo_keras.presets`), or the two
            published files (paths or URLs; a new softmax is trained over this run's
            vocabulary). The source's architecture wins; see `elmo_keras.training.init_source`.
        new_vocab: bool. With a run folder as `init_from`: build (or read) a new vocabulary
            and train a new softmax instead of keeping the source's. Defaults to `False`.
        freeze_bilm_steps: int or None. With `init_from`: train only the softmax for this many
            first steps (the biLM's gradients are zero). None: saved, else `0`.
        override: bool. With `resume`: apply settings that differ from the saved run (and
            record them) instead of refusing them. Defaults to `False`.

    Example:
    >>> run = TrainingRun("corpus/*.txt", "runs/small", config="small", steps=100_000)
    >>> run.steps
    100000
    """

    train_files: str | os.PathLike | list | None
    output_dir: str | os.PathLike
    config: str | os.PathLike | dict | None = None
    valid_files: str | os.PathLike | None = None
    steps: int | None = None
    epochs: int | None = None
    batch_size: int | None = None
    strategy: object = "auto"
    resume: bool = False
    seed: int | None = None
    vocab_file: str | os.PathLike | None = None
    min_count: int | None = None
    max_vocab_size: int | None = None
    tokenization_mode: str | None = None
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3
    time_budget_s: float | None = None
    mixed_precision: str | None = None
    jit_compile: bool = False
    carry_state: bool | None = None
    n_negative_samples: int | None = None
    optimizer: str | None = None
    learning_rate: float | None = None
    log_every: int = 50
    progress: bool | None = None
    eval_batch_size: int = 16
    eval_max_tokens: int | None = None
    verbose: bool = True
    init_from: str | os.PathLike | tuple | None = None
    new_vocab: bool = False
    freeze_bilm_steps: int | None = None
    override: bool = False

    def __post_init__(self):
        self._check_files()
        self._check_numbers()
        self._check_choices()
        self._check_combinations()

    def _check_files(self):
        if self.train_files is not None or not self.resume:
            _check_paths("train_files", self.train_files, allow_list=True)
        _check_paths("output_dir", self.output_dir)
        for name in ("valid_files", "vocab_file"):
            if getattr(self, name) is not None:
                _check_paths(name, getattr(self, name), allow_list=name == "valid_files")
        if self.config is not None and not isinstance(self.config, str | os.PathLike | dict):
            raise ValueError(
                "`config` must be a configuration name, a JSON file or a dict. "
                f"Received: config={self.config!r}"
            )
        if self.init_from is not None:
            _check_init_from(self.init_from)

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
        for name in ("seed", "n_negative_samples", "freeze_bilm_steps"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), minimum=0)
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
        check_choice("tokenization_mode", self.tokenization_mode, (None, *TOKENIZATION_MODES))
        check_choice("mixed_precision", self.mixed_precision, (None, "bfloat16"))
        check_choice("optimizer", self.optimizer, (None, "adagrad", "adam"))

    def _check_combinations(self):
        if self.override and not self.resume:
            raise ValueError(
                "`override` applies settings that differ from a saved run: it needs "
                "`resume=True`. Received: override=True, resume=False"
            )
        if self.resume:
            return  # `init_from` and its settings are the saved run's
        for name in ("new_vocab", "freeze_bilm_steps"):
            if getattr(self, name) and self.init_from is None:
                raise ValueError(
                    f"`{name}` needs `init_from` (a biLM to start from). "
                    f"Received: {name}={getattr(self, name)!r}, init_from=None"
                )


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
