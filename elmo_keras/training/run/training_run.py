"""The settings of a training run: the one list (`SETTINGS`), and `TrainingRun` made from it.

Each `Setting` says everything about one setting once: its name (a `TrainingRun` field), its
default, what a valid value is, its command-line flag and help, and whether a resumed run takes
the saved value when it is not given. From this list come the `TrainingRun` dataclass (its
fields, its checks and its docstring), the `elmo-keras train` flags (`add_arguments`,
`from_arguments`), the names in error messages (`FLAGS`), the old positional `train(...)`
arguments (`legacy_training_run`) and the new-run defaults of the resumable settings
(`NEW_RUN_DEFAULTS`). `check_setting` is the one check of a value, also used by
`Trainer.fit`.

A wrong value is a `SettingError` (`elmo_keras.training.run.setting_error`) whose message names
the setting: as the field in Python, as the flag on the command line
(`SettingError.message(FLAGS)`). Pure Python (no TensorFlow, no Keras).
"""

import dataclasses
import os
import re
import warnings

from elmo_keras.text.tokenization import TOKENIZATION_MODES
from elmo_keras.training.common.distribute import STRATEGIES
from elmo_keras.training.configs import CONFIGS, MAX_BATCH_SIZE
from elmo_keras.training.run.setting_error import SettingError, escaped
from elmo_keras.validation import check_choice, check_int, check_number

_NOT_SAVED = object()


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting of a training run.

    Attributes:
        name: str. The `TrainingRun` field.
        default: the default (`dataclasses.MISSING`: required).
        kind: str. What a valid value is: `"paths"`, `"path"`, `"config"`, `"int"` (>= 1),
            `"count"` (>= 0), `"number"` (> 0), `"choice"`, `"bool"`, `"optional_bool"`,
            `"strategy"`, `"init_from"`.
        help: str. One sentence for `--help` and the docstring.
        flag: str or None. The command-line flag (None: Python only).
        choices: tuple. For `"choice"` (None allowed when it is the default).
        saved: the new-run default of a setting that a resumed run takes from the saved run
            when it is not given (`_NOT_SAVED`: not such a setting).
        legacy: str or None. Its keyword in the old `train(...)` call.
        negated: bool. A `--no-...` switch: given means False.
        metavar: str or None.
        fixed: bool. With `saved`: the checkpoint fixes it (a resumed run cannot change it).
        maximum: int or None. The largest value of an `"int"` setting.
        config_key: str or None. The configuration key the setting overrides.
        saved_as: str or None. Its key in training_config.json, when not its name.
    """

    name: str
    default: object
    kind: str
    help: str
    flag: str | None = None
    choices: tuple = ()
    saved: object = _NOT_SAVED
    legacy: str | None = None
    negated: bool = False
    metavar: str | None = None
    fixed: bool = False
    maximum: int | None = None
    config_key: str | None = None
    saved_as: str | None = None

    @property
    def required(self):
        """Whether `TrainingRun` needs it (no default)."""
        return self.default is dataclasses.MISSING

    @property
    def resumable(self):
        """Whether a resumed run takes the saved value when it is not given."""
        return self.saved is not _NOT_SAVED

    @property
    def switch(self):
        """Whether its flag is a switch (`--resume`, `--no-carry-state`)."""
        return self.kind == "bool" or self.negated


_M = dataclasses.MISSING
# fmt: off
SETTINGS = (
    Setting("train_files", _M, "paths", "Glob(s) of training text files, one sentence or "
            "paragraph per line; left out with resume (the saved run's files)", "--train",
            saved=None, legacy="train", saved_as="train"),
    Setting("output_dir", _M, "path", "The run's folder: settings, vocabulary, checkpoints, "
            "TensorBoard logs, and the model files at the end", "--output"),
    Setting("config", None, "config", "A named configuration (" + ", ".join(CONFIGS) + ") or a "
            "JSON file or dict of bilm-tf options; with init_from, the source's architecture",
            "--config", saved="small"),
    Setting("valid_files", None, "paths", "Held-out text: its full-softmax perplexity is "
            "reported at the end", "--valid", legacy="valid"),
    Setting("steps", None, "int", "The global step to stop at", "--steps"),
    Setting("epochs", None, "int", "Passes over the training data", "--epochs"),
    Setting("batch_size", None, "int", "Global batch (rows of windows); overrides the "
            "configuration's", "--batch-size", config_key="batch_size", maximum=MAX_BATCH_SIZE),
    Setting("strategy", "auto", "strategy", "auto: every local GPU (TensorFlow) or every JAX "
            "device; default: one device; mirrored; multi-worker (TF_CONFIG, or JAX's "
            "processes); in Python also a tf.distribute.Strategy", "--strategy",
            choices=STRATEGIES),
    Setting("resume", False, "bool", "Continue the run in the output folder from its newest "
            "readable checkpoint, with its saved settings", "--resume"),
    Setting("seed", None, "count", "Seeds the weights, the data order and the softmax samples",
            "--seed", saved=0),
    Setting("vocab_file", None, "path", "An existing vocabulary file (bilm-tf format), instead "
            "of one built from the training text", "--vocab", legacy="vocab"),
    Setting("min_count", None, "int", "Vocabulary building: the fewest occurrences kept",
            "--min-count", saved=1, fixed=True),
    Setting("max_vocab_size", None, "int", "Vocabulary building: the most words kept",
            "--max-vocab-size"),
    Setting("tokenization_mode", None, "choice", "whitespace (pre-tokenized text) or "
            "punctuation", "--tokenization", choices=(None, *TOKENIZATION_MODES),
            saved="whitespace", legacy="tokenization"),
    Setting("checkpoint_every", 1000, "int", "Steps between checkpoints (also at the end and "
            "on a stop)", "--checkpoint-every"),
    Setting("keep_checkpoints", 3, "int", "Checkpoints kept (older ones are deleted)",
            "--keep-checkpoints"),
    Setting("time_budget_s", None, "number", "Stop (and checkpoint) after this many seconds of "
            "training, counted from the end of the first step (compiling it is not training); "
            "alone, the run goes on until then", "--time-budget", metavar="SECONDS"),
    Setting("mixed_precision", None, "choice", "bfloat16: the biLM computes in bfloat16, the "
            "variables and the softmax stay float32 (GPUs, TPUs)", "--mixed-precision",
            choices=(None, "bfloat16")),
    Setting("jit_compile", False, "bool", "Compile each replica's step with XLA (TensorFlow; "
            "the JAX step is always compiled)", "--xla"),
    Setting("carry_state", None, "optional_bool", "Carry the LSTM state from window to window "
            "(the flag starts every window from zero state)", "--no-carry-state", saved=True,
            negated=True),
    Setting("n_negative_samples", None, "count", "Sampled-softmax candidates (0: the full "
            "softmax); overrides the configuration's", "--n-negative-samples", metavar="N",
            config_key="n_negative_samples_batch"),
    Setting("optimizer", None, "choice", "adagrad or adam; overrides the configuration's",
            "--optimizer", choices=(None, "adagrad", "adam"), config_key="optimizer"),
    Setting("learning_rate", None, "number", "Overrides the configuration's", "--learning-rate",
            config_key="learning_rate"),
    Setting("log_every", None, "int", "Steps between logged lines and TensorBoard points (a "
            "value given on resume is saved without --override)", "--log-every", saved=50),
    Setting("progress", None, "optional_bool", "A progress bar (None: when stdout is a "
            "terminal)"),
    Setting("eval_batch_size", 16, "int", "The held-out evaluation's batch",
            "--eval-batch-size"),
    Setting("eval_max_tokens", None, "int", "Evaluate the held-out text on about this many "
            "tokens only", "--eval-max-tokens"),
    Setting("verbose", True, "bool", "Print what happens"),
    Setting("init_from", None, "init_from", "Start from a trained biLM: a run folder (its "
            "vocabulary and softmax come along), a preset name (mini_en brings its vocabulary and "
            "softmax; the published presets hold none: a new softmax over the text's "
            "vocabulary), or in Python an (options, weights) pair of paths or URLs (a new "
            "softmax)", "--init-from", metavar="SOURCE"),
    Setting("new_vocab", False, "bool", "With a run folder as init_from: a new vocabulary and "
            "softmax for the new text", "--new-vocab"),
    Setting("freeze_bilm_steps", None, "count", "With init_from: train only the softmax for "
            "this many first steps", "--freeze-bilm-steps", saved=0, metavar="N"),
    Setting("override", False, "bool", "With resume: apply (and record) settings that differ "
            "from the saved run instead of refusing them", "--override"),
    Setting("tf32", False, "bool", "Allow TensorFloat-32 matrix products on GPUs (faster, "
            "about 3 significant digits; off: exact float32)", "--tf32"),
    Setting("shuffle_buffer", None, "count", "0: every epoch shuffles all the lines of the "
            "training text (about 12 bytes a line in memory); N: the lines stream through "
            "an N-line shuffle buffer instead, for text whose index would not fit",
            "--shuffle-buffer", saved=0, metavar="LINES"),
)
# fmt: on
_BY_NAME = {s.name: s for s in SETTINGS}
# The old `train(train, output_dir, ...)` took the first 28 settings positionally.
_LEGACY_POSITIONAL = 28
FLAGS = {s.name: s.flag for s in SETTINGS if s.flag is not None}
NEW_RUN_DEFAULTS = {s.name: s.saved for s in SETTINGS if s.saved not in (_NOT_SAVED, None)}
# The settings that override a configuration key, and the key.
CONFIG_KEYS = {s.name: s.config_key for s in SETTINGS if s.config_key}
# The settings a resumed run takes from training_config.json when not given, and their keys
# there (`config` is kept apart: the whole configuration).
SAVED_KEYS = {
    s.name: s.saved_as or s.name
    for s in SETTINGS
    if s.saved is not _NOT_SAVED and s.name != "config" and not s.fixed
}


def _field_message(name, error):
    """A `validation` check's message with `{name}` placeholders for the setting."""
    text = escaped(error)
    text = text.replace(f"`{name}`", "{" + name + "}")
    return re.sub(rf"\b{re.escape(name)}=", "{" + name + "__bare}=", text)


def _is_path(value):
    return isinstance(value, str | os.PathLike)


def check_setting(name, value):
    """Checks one setting's value (its `Setting.kind`); raises a `SettingError`."""
    setting = _BY_NAME[name]
    kind = setting.kind
    if value is None and (setting.default is None or name == "train_files"):
        return value  # not given (train_files: checked with `resume` by `_check_run`)
    try:
        if kind == "int":
            check_int(name, value, maximum=setting.maximum)
        elif kind == "count":
            check_int(name, value, minimum=0)
        elif kind == "number":
            check_number(name, value, minimum=0.0)
            if not value > 0:
                raise ValueError(f"`{name}` must be a number > 0. Received: {name}={value!r}")
        elif kind == "choice" or (kind == "strategy" and isinstance(value, str)):
            check_choice(name, value, setting.choices)
        elif kind in ("bool", "optional_bool") and not isinstance(value, bool):
            expected = "True, False or None" if kind == "optional_bool" else "True or False"
            raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")
    except ValueError as error:
        raise SettingError(_field_message(name, error)) from None
    if kind in ("paths", "path"):
        _check_paths(name, value, allow_list=kind == "paths")
    elif kind == "config":
        _check_config(value)
    elif kind == "init_from":
        _check_init_from(value)
    return value


def _check_paths(name, value, allow_list):
    ok = _is_path(value)
    if allow_list and isinstance(value, list | tuple):
        ok = bool(value) and all(_is_path(v) for v in value)
    if not ok:
        expected = "a path or glob" + (", or a non-empty list of them" if allow_list else "")
        raise SettingError("{" + name + "} must be " + expected + f". Received: {value!r}")


def _check_config(value):
    if isinstance(value, dict):
        return
    if not _is_path(value):
        raise SettingError(
            "{config} must be a configuration name, a JSON file or a dict. Received: "
            + escaped(repr(value))
        )
    if os.fspath(value) not in CONFIGS and not os.path.isfile(value):
        raise SettingError(
            "{config} must be one of " + ", ".join(CONFIGS) + f" or a JSON file; got {value!r}"
        )


def _own_dictionary(folder):
    """Whether `folder` is a `save_to_preset` folder of a biLM with its own character
    dictionary (an ELMoForManyLangs model, converted): the trainer makes byte ids."""
    from elmo_keras.models.preset_folder import bilm_config, read_config

    try:
        config = read_config(folder) if os.path.isdir(folder) else None
        bilm = None if config is None else bilm_config(config, folder)["config"]
    except ValueError:  # someone else's or a broken file: the later checks say what it is
        return False
    return bilm is not None and bilm.get("char_vocabulary") is not None


def _check_init_from(value):
    from elmo_keras.presets import PRESETS, efml_preset, is_efml_model

    if isinstance(value, list | tuple):
        if len(value) == 2 and all(_is_path(v) for v in value):
            return
        raise SettingError(
            "{init_from} as a pair must hold two paths or URLs (options, weights). "
            f"Received: {value!r}"
        )
    if _is_path(value) and (is_efml_model(os.fspath(value)) or _own_dictionary(value)):
        raise SettingError(  # one line: not supported
            f"{{init_from}}: {os.fspath(value)} is an ELMoForManyLangs model; training from it is "
            "not supported (its training softmax is not published): embed with it instead"
        )
    if not _is_path(value) or (
        os.fspath(value).lower() not in PRESETS and not os.path.isdir(value)
    ):
        names = ", ".join(name for name in PRESETS if not efml_preset(name))
        raise SettingError(
            f"{{init_from}} must be a run folder or a preset ({names}), or in Python an "
            f"(options, weights) pair of paths or URLs; got {value!r}"
        )


def _check_run(run):
    """Every setting's check, then the ones between settings."""
    for setting in SETTINGS:
        value = getattr(run, setting.name)
        if setting.name == "train_files" and value is None and not run.resume:
            raise SettingError("{train_files} is required (a glob of text files)")
        check_setting(setting.name, value)
    if run.steps is None and run.epochs is None and run.time_budget_s is None:
        raise SettingError("give {steps}, {epochs} or {time_budget_s} (when the run ends)")
    if run.override and not run.resume:
        raise SettingError("{override} applies to {resume} (settings that differ from a saved run)")
    if not run.resume:
        for name in ("new_vocab", "freeze_bilm_steps"):
            if getattr(run, name) and run.init_from is None:
                raise SettingError("{" + name + "} needs {init_from} (a biLM to start from)")


def _docstring():
    lines = [
        "What `elmo_keras.training.train` does: the data, the model, when to stop, the outputs.",
        "",
        "Made from `SETTINGS`; every field is checked when the object is made (a `SettingError`",
        "names the field). `dataclasses.replace(run, steps=...)` makes a changed copy. A field",
        'marked "resumed: saved" takes the saved run\'s value when resuming if it is not given,',
        "and the default shown for a new run.",
        "",
        "Args:",
    ]
    for s in SETTINGS:
        default = "required" if s.default is _M else f"default {s.default!r}"
        if s.saved is not _NOT_SAVED:
            default = f"resumed: saved, new run: {s.saved!r}"
        flag = f" Flag: `{s.flag}`." if s.flag else ""
        lines.append(f"    {s.name}: {s.help} ({default}).{flag}")
    lines += [
        "",
        "Example:",
        '>>> run = TrainingRun("corpus/*.txt", "runs/small", config="small", steps=100_000)',
        ">>> run.steps",
        "100000",
    ]
    return "\n".join(lines)


TrainingRun = dataclasses.make_dataclass(
    "TrainingRun",
    [
        (s.name, object)
        if s.default is _M
        else (s.name, object, dataclasses.field(default=s.default))
        for s in SETTINGS
    ],
    namespace={"__post_init__": _check_run, "__doc__": _docstring(), "__module__": __name__},
    frozen=True,
)


def legacy_training_run(args, kwargs):
    """A `TrainingRun` from the old `train(train, output_dir, ...)` arguments, with a warning.

    The old names (`train`, `valid`, `vocab`, `tokenization`) and the new field names are both
    accepted as keywords. Emits a `DeprecationWarning` that points at the caller of `train`.
    """
    positional = [s.name for s in SETTINGS[:_LEGACY_POSITIONAL]]
    if len(args) > len(positional):
        raise TypeError(f"train() takes at most {len(positional)} positional arguments")
    fields = dict(zip(positional, args, strict=False))
    renamed = {s.legacy: s.name for s in SETTINGS if s.legacy}
    for name, value in kwargs.items():
        field = renamed.get(name, name)
        if field in fields:
            raise TypeError(f"train() got multiple values for argument {name!r}")
        if field not in _BY_NAME:
            raise TypeError(f"train() got an unexpected keyword argument {name!r}")
        fields[field] = value
    warnings.warn(
        "`train(train, output_dir, ...)` with keyword arguments is deprecated; use "
        "`train(TrainingRun(train_files=..., output_dir=..., ...))`.",
        DeprecationWarning,
        stacklevel=3,
    )
    return TrainingRun(**fields)
