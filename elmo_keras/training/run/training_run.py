"""The settings of a training run: `TrainingRun`, a frozen dataclass of typed fields.

Each field says everything about one setting once, in its metadata (a `Setting`): its check,
its command-line flag and help, and whether a resumed run takes the saved value when it is not
given (and whether the checkpoint fixes it). From the fields come `TrainingRun`'s checks (once,
when it is made) and docstring, the `elmo-keras train` flags (`cli/train.py` reads
`SETTINGS`), the names in error messages (`FLAGS`) and the new-run defaults of the resumable
settings (`NEW_RUN_DEFAULTS`). `check_setting` is the one check of a value, also used by a
trainer's own Python API (`Trainer.fit`).

A wrong value is a `SettingError` (`elmo_keras.training.run.setting_error`) whose message names
the setting: as the field in Python, as the flag on the command line
(`SettingError.message(FLAGS)`). Pure Python (no TensorFlow, no Keras).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Callable, Sequence

from elmo_keras.text.tokenization import TOKENIZATION_MODES
from elmo_keras.training.common.distribute import STRATEGIES
from elmo_keras.training.configs import CONFIGS, MAX_BATCH_SIZE
from elmo_keras.training.run import setting_checks as checks
from elmo_keras.training.run.setting_error import SettingError
from elmo_keras.validation import check_int

if typing.TYPE_CHECKING:
    import tensorflow as tf

# A path or glob, or a list of them.
Paths = str | os.PathLike | Sequence[str | os.PathLike]


class _NotSaved:
    def __repr__(self):
        return "NOT_SAVED"


NOT_SAVED = _NotSaved()


@dataclasses.dataclass(frozen=True)
class Setting:
    """What a `TrainingRun` field is, besides its type and default (its metadata).

    Attributes:
        help: str. One sentence for `--help` and the docstring.
        check: callable(name, value). Raises a `SettingError` for a wrong value
            (`setting_checks`); a None where the default is None is not checked.
        flag: str or None. The command-line flag (None: Python only).
        saved: the new-run default of a setting that a resumed run takes from the saved run
            when it is not given (`NOT_SAVED`: not such a setting).
        fixed: bool. With `saved`: the checkpoint fixes it (a resumed run cannot change it).
        negated: bool. A `--no-...` switch: given means False.
        switch: bool. Its flag takes no value (`--resume`, `--no-carry-state`).
        metavar: str or None.
        choices: tuple. The flag's choices.
        config_key: str or None. The configuration key the setting overrides.
        name, default, required, parse: filled in from the field: its name, its default,
            whether it has none, and the flag's type (`int`, `float` or None).
    """

    help: str
    check: Callable[[str, object], None]
    flag: str | None = None
    saved: object = NOT_SAVED
    fixed: bool = False
    negated: bool = False
    switch: bool = False
    metavar: str | None = None
    choices: tuple = ()
    config_key: str | None = None
    name: str = ""
    default: object = None
    required: bool = False
    parse: type | None = None

    @property
    def resumable(self):
        """Whether a resumed run takes the saved value when it is not given."""
        return self.saved is not NOT_SAVED


def _setting(default=dataclasses.MISSING, **metadata):
    return dataclasses.field(default=default, metadata={"setting": Setting(**metadata)})


_TOKENIZATIONS = (None, *TOKENIZATION_MODES)
_PRECISIONS = (None, "bfloat16")
_OPTIMIZERS = (None, "adagrad", "adam")


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    # fmt: off
    train_files: Paths | None = _setting(
        help="Glob(s) of training text files, one sentence or paragraph per line; left out "
        "with resume (the saved run's files)", check=checks.paths, flag="--train", saved=None)
    output_dir: str | os.PathLike = _setting(
        help="The run's folder: settings, vocabulary, checkpoints, TensorBoard logs, and the "
        "model files at the end", check=checks.path, flag="--output")
    config: str | os.PathLike | dict | None = _setting(
        None, help="A named configuration (" + ", ".join(CONFIGS) + ") or a JSON file or dict "
        "of bilm-tf options; with init_from, the source's architecture", check=checks.config,
        flag="--config", saved="small")
    valid_files: Paths | None = _setting(
        None, help="Held-out text: its full-softmax perplexity is reported at the end",
        check=checks.paths, flag="--valid")
    steps: int | None = _setting(
        None, help="The global step to stop at", check=checks.positive_int(), flag="--steps")
    epochs: int | None = _setting(
        None, help="Passes over the training data", check=checks.positive_int(), flag="--epochs")
    batch_size: int | None = _setting(
        None, help="Global batch (rows of windows); overrides the configuration's",
        check=checks.positive_int(MAX_BATCH_SIZE), flag="--batch-size", config_key="batch_size")
    strategy: str | tf.distribute.Strategy = _setting(
        "auto", help="auto: every local GPU (TensorFlow) or every JAX device; default: one "
        "device; mirrored; multi-worker (TF_CONFIG, or JAX's processes); in Python also a "
        "tf.distribute.Strategy", check=checks.strategy(STRATEGIES), flag="--strategy",
        choices=STRATEGIES)
    resume: bool = _setting(
        False, help="Continue the run in the output folder from its newest readable checkpoint, "
        "with its saved settings", check=checks.switch, flag="--resume", switch=True)
    seed: int | None = _setting(
        None, help="Seeds the weights, the data order and the softmax samples",
        check=checks.count, flag="--seed", saved=0)
    vocab_file: str | os.PathLike | None = _setting(
        None, help="An existing vocabulary file (bilm-tf format), instead of one built from the "
        "training text", check=checks.path, flag="--vocab")
    min_count: int | None = _setting(
        None, help="Vocabulary building: the fewest occurrences kept",
        check=checks.positive_int(), flag="--min-count", saved=1, fixed=True)
    max_vocab_size: int | None = _setting(
        None, help="Vocabulary building: the most words kept", check=checks.positive_int(),
        flag="--max-vocab-size")
    tokenization_mode: str | None = _setting(
        None, help="whitespace (pre-tokenized text) or punctuation",
        check=checks.choice(_TOKENIZATIONS), flag="--tokenization", saved="whitespace",
        choices=TOKENIZATION_MODES)
    checkpoint_every: int = _setting(
        1000, help="Steps between checkpoints (also at the end and on a stop)",
        check=checks.positive_int(), flag="--checkpoint-every")
    keep_checkpoints: int = _setting(
        3, help="Checkpoints kept (older ones are deleted)", check=checks.positive_int(),
        flag="--keep-checkpoints")
    time_budget_s: float | None = _setting(
        None, help="Stop (and checkpoint) after this many seconds of training, counted from "
        "the end of the first step (compiling it is not training); alone, the run goes on "
        "until then", check=checks.positive_number, flag="--time-budget", metavar="SECONDS")
    mixed_precision: str | None = _setting(
        None, help="bfloat16: the biLM computes in bfloat16, the variables and the softmax "
        "stay float32 (GPUs, TPUs)", check=checks.choice(_PRECISIONS), flag="--mixed-precision",
        choices=("bfloat16",))
    jit_compile: bool = _setting(
        False, help="Compile each replica's step with XLA (TensorFlow; the JAX step is always "
        "compiled)", check=checks.switch, flag="--xla", switch=True)
    carry_state: bool | None = _setting(
        None, help="Carry the LSTM state from window to window (the flag starts every window "
        "from zero state)", check=checks.optional_switch, flag="--no-carry-state", saved=True,
        negated=True, switch=True)
    n_negative_samples: int | None = _setting(
        None, help="Sampled-softmax candidates (0: the full softmax); overrides the "
        "configuration's", check=checks.count, flag="--n-negative-samples", metavar="N",
        config_key="n_negative_samples_batch")
    optimizer: str | None = _setting(
        None, help="adagrad or adam; overrides the configuration's",
        check=checks.choice(_OPTIMIZERS), flag="--optimizer", choices=_OPTIMIZERS[1:],
        config_key="optimizer")
    learning_rate: float | None = _setting(
        None, help="Overrides the configuration's", check=checks.positive_number,
        flag="--learning-rate", config_key="learning_rate")
    log_every: int | None = _setting(
        None, help="Steps between logged lines and TensorBoard points (a value given on resume "
        "is saved without --override)", check=checks.positive_int(), flag="--log-every",
        saved=50)
    progress: bool | None = _setting(
        None, help="A progress bar (None: when stdout is a terminal)",
        check=checks.optional_switch)
    eval_batch_size: int = _setting(
        16, help="The held-out evaluation's batch", check=checks.positive_int(),
        flag="--eval-batch-size")
    eval_max_tokens: int | None = _setting(
        None, help="Evaluate the held-out text on about this many tokens only",
        check=checks.positive_int(), flag="--eval-max-tokens")
    verbose: bool = _setting(True, help="Print what happens", check=checks.switch)
    init_from: str | os.PathLike | tuple | list | None = _setting(
        None, help="Start from a trained biLM: a run folder (its vocabulary and softmax come "
        "along), a preset name (mini_en brings its vocabulary and softmax; the published "
        "presets hold none: a new softmax over the text's vocabulary), or in Python an "
        "(options, weights) pair of paths or URLs (a new softmax)", check=checks.init_from,
        flag="--init-from", metavar="SOURCE")
    new_vocab: bool = _setting(
        False, help="With a run folder as init_from: a new vocabulary and softmax for the new "
        "text", check=checks.switch, flag="--new-vocab", switch=True)
    freeze_bilm_steps: int | None = _setting(
        None, help="With init_from: train only the softmax for this many first steps",
        check=checks.count, flag="--freeze-bilm-steps", saved=0, metavar="N")
    override: bool = _setting(
        False, help="With resume: apply (and record) settings that differ from the saved run "
        "instead of refusing them", check=checks.switch, flag="--override", switch=True)
    tf32: bool = _setting(
        False, help="Allow TensorFloat-32 matrix products on GPUs (faster, about 3 significant "
        "digits; off: exact float32)", check=checks.switch, flag="--tf32", switch=True)
    unroll: int | None = _setting(
        None, help="LSTM steps per iteration of the compiled loop (JAX: lax.scan's unroll; "
        "the same numbers; default 4 on JAX's GPUs and TPUs, else 1)", check=checks.positive_int(),
        flag="--unroll", metavar="N")
    feed_workers: int = _setting(
        0, help="Processes that tokenize the training text and look up its word ids ahead of "
        "the trainer's feed (0: none; for GPUs, whose step outruns one core's feed)",
        check=checks.count, flag="--feed-workers", metavar="N")
    stack_directions: bool | None = _setting(
        None, help="Run each layer's forward and backward LSTMs in one loop with stacked "
        "weights: one batched product a step instead of two (the same numbers; the default on "
        "JAX's GPUs and TPUs)", check=checks.optional_switch, flag="--stack-directions",
        switch=True)
    shuffle_buffer: int | None = _setting(
        None, help="0: every epoch shuffles all the lines of the training text (about 12 bytes "
        "a line in memory); N: the lines stream through an N-line shuffle buffer instead, for "
        "text whose index would not fit", check=checks.count, flag="--shuffle-buffer", saved=0,
        metavar="LINES")
    # fmt: on

    def __post_init__(self):
        """Every field's check, then the ones between fields (a `SettingError`)."""
        if self.train_files is None and not self.resume:
            raise SettingError("{train_files} is required (a glob of text files)")
        for setting in SETTINGS:
            check_setting(setting.name, getattr(self, setting.name))
        if self.steps is None and self.epochs is None and self.time_budget_s is None:
            raise SettingError("give {steps}, {epochs} or {time_budget_s} (when the run ends)")
        if self.override and not self.resume:
            raise SettingError(
                "{override} applies to {resume} (settings that differ from a saved run)"
            )
        if not self.resume:
            for name in ("new_vocab", "freeze_bilm_steps"):
                if getattr(self, name) and self.init_from is None:
                    raise SettingError("{" + name + "} needs {init_from} (a biLM to start from)")


def _parse(annotation):
    """The flag's type of a field's annotation: `int`, `float`, or None (a string)."""
    kinds = annotation.replace(" ", "").split("|")
    return next((kind for kind in (int, float) if kind.__name__ in kinds), None)


SETTINGS = tuple(
    dataclasses.replace(
        f.metadata["setting"],
        name=f.name,
        default=None if f.default is dataclasses.MISSING else f.default,
        required=f.default is dataclasses.MISSING,
        parse=_parse(f.type),
    )
    for f in dataclasses.fields(TrainingRun)
)
_BY_NAME = {s.name: s for s in SETTINGS}
FLAGS = {s.name: s.flag for s in SETTINGS if s.flag is not None}
NEW_RUN_DEFAULTS = {s.name: s.saved for s in SETTINGS if s.saved not in (NOT_SAVED, None)}
# The settings that override a configuration key, and the key.
CONFIG_KEYS = {s.name: s.config_key for s in SETTINGS if s.config_key}


def check_setting(name, value):
    """Checks one setting's value (its field's `Setting.check`); returns it, or raises a
    `SettingError`. None is accepted where the default is None (not given)."""
    setting = _BY_NAME[name]
    if value is None and (setting.resumable or (setting.default is None and not setting.required)):
        return value
    setting.check(name, value)
    return value


def _docstring():
    lines = [
        "What `elmo_keras.training.train` does: the data, the model, when to stop, the outputs.",
        "",
        "Every field is checked once, when the object is made (a `SettingError` names the",
        "field). `dataclasses.replace(run, steps=...)` makes a changed copy. A field marked",
        '"resumed: saved" takes the saved run\'s value when resuming if it is not given, and',
        "the default shown for a new run.",
        "",
        "Args:",
    ]
    for s in SETTINGS:
        default = "required" if s.required else f"default {s.default!r}"
        if s.resumable:
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


TrainingRun.__doc__ = _docstring()


def check_fit_arguments(steps, epochs, time_budget_s, checkpoint_every, keep, log_every, shuffle):
    """The checks of `fit`'s own arguments (a `TrainingRun` was checked when it was made): those
    of the same settings (where a `TrainingRun` takes None for "the saved value", `fit` needs
    the value itself)."""
    for name, value in (
        ("steps", steps),
        ("epochs", epochs),
        ("time_budget_s", time_budget_s),
        ("checkpoint_every", checkpoint_every),
        ("keep_checkpoints", keep),
        ("log_every", log_every),
    ):
        check_setting(name, value)
    if steps is None and epochs is None and time_budget_s is None:
        raise SettingError("give {steps}, {epochs} or {time_budget_s} (when the run ends)")
    check_int("shuffle_buffer", shuffle, minimum=0)
