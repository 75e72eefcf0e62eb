"""What a run trains with: a new run, a run that starts from a trained biLM, or a resumed run.

`plan_run(run)` resolves a `TrainingRun` into a `RunPlan`: the run with every "None: saved"
field filled in, the configuration, the vocabulary and the settings that training_config.json
keeps. A resumed run is checked against what it saved: a setting given with another value is a
`SettingsConflict` listing every difference, unless `override` is given, in which case the
differences are applied and recorded (`RunPlan.record_overrides`). The vocabulary and the
architecture are fixed by the checkpoint and cannot be overridden.
"""

import dataclasses
import os
import pathlib
import time

from elmo_keras.text.text_files import check_text_files
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.configs import TrainingConfig
from elmo_keras.training.feed.data import build_vocabulary, expand_files
from elmo_keras.training.model_files import OPTIONS_FILE, SOFTMAX_FILE, VOCAB_FILE, WEIGHTS_FILE
from elmo_keras.training.run.init_source import (
    resolve_source,
    start_config,
    vocabulary_conflicts,
)
from elmo_keras.training.run.run_folder import (
    fingerprint_changes,
    has_checkpoints,
    text_fingerprint,
    vocabulary_sha256,
)
from elmo_keras.training.run.run_record import CONFIG_FILE, RunRecord
from elmo_keras.training.run.setting_error import SettingError, SettingsConflict, escaped
from elmo_keras.training.run.training_run import CONFIG_KEYS, NEW_RUN_DEFAULTS, SETTINGS

# `TrainingRun` fields that set a configuration key (`training_run.SETTINGS`).
FLAG_KEYS = CONFIG_KEYS
# Saved settings a resumed run may override, by field, and their `RunRecord` names.
_SAVED_FIELDS = {
    s.name: "train" if s.name == "train_files" else s.name
    for s in SETTINGS
    if s.resumable and s.name != "config" and not s.fixed
}
# Saved settings that the checkpoint fixes (the vocabulary's).
_FIXED = ("min_count", "max_vocab_size")
# Saved settings that change nothing in what is trained: a resumed run given another value
# takes it (and saves it) without `override`.
_FREE = ("log_every",)
# After overriding these, the data starts again from its beginning at the resumed step.
_DATA_CHANGES = (
    "train_files",
    "train_text",
    "seed",
    "tokenization_mode",
    "shuffle_buffer",
    "batch_size",
    "config.batch_size",
    "config.unroll_steps",
)


@dataclasses.dataclass
class RunPlan:
    """A resolved run: see the module docstring.

    Attributes:
        run: `TrainingRun` with its "None: saved" fields filled in.
        config: `TrainingConfig` (`n_tokens_vocab` included).
        vocabulary: `Vocabulary`.
        record: `RunRecord`. What training_config.json holds.
        source: `init_source.InitSource` or None. Where a new run's weights start.
        changes: dict. For a resumed run with overrides: `{name: (saved, given)}`.
        restore_skip: tuple. Parts of the checkpoint not restored (`TrainingState.restore`).
        settings_changed: bool. A resumed run changed a saved setting of `_FREE` (logging):
            training_config.json is to be written again.
    """

    run: object
    config: TrainingConfig
    vocabulary: Vocabulary
    record: RunRecord
    source: object = None
    changes: dict = dataclasses.field(default_factory=dict)
    restore_skip: tuple = ()
    settings_changed: bool = False

    def record_overrides(self, step):
        """Adds the applied overrides, at `step`, to `record`; the data restarts there if
        they change it."""
        data_changed = any(name in self.changes for name in _DATA_CHANGES)
        self.record = self.record.with_overrides(step, self.changes, data_changed)

    def describe_changes(self):
        return "; ".join(f"{name} {old!r} -> {new!r}" for name, (old, new) in self.changes.items())


def plan_run(run):
    """The `RunPlan` of a `TrainingRun` (new, started from a biLM, or resumed).

    The text files are looked for first: a glob that matches nothing is a `SettingError`
    before anything is read or written; then each file given is read once
    (`text_files.check_text_files`): bytes that are not UTF-8, or no text at all, are a
    `ValueError` naming the file, before any folder is made.
    """
    for name, what in (("train_files", "training text"), ("valid_files", "held-out text")):
        value = getattr(run, name)
        if value is not None:
            try:
                files = expand_files(value)
            except ValueError:
                raise SettingError(
                    "{" + name + "} matches no file. Received: " + escaped(repr(value))
                ) from None
            check_text_files(files, what)
    return _resumed_run(run) if run.resume else _new_run(run)


def _with_defaults(run, values):
    """`run` with each None field among `values` set to the value there."""
    missing = {name: value for name, value in values.items() if getattr(run, name) is None}
    return dataclasses.replace(run, **missing)


def _flagged(run):
    """The configuration keys the run's `batch_size`, `n_negative_samples`... set."""
    return {key: getattr(run, n) for n, key in FLAG_KEYS.items() if getattr(run, n) is not None}


def _new_run(run):
    output_dir = pathlib.Path(run.output_dir)
    if has_checkpoints(output_dir):
        raise SettingError(
            escaped(output_dir) + " already holds checkpoints: pass {resume} to continue that "
            "run, or choose a new {output_dir}"
        )
    # A finished model's files (vocab.txt alone is a run that stopped before its first
    # checkpoint: starting it again is fine).
    written = [
        name for name in (OPTIONS_FILE, WEIGHTS_FILE, SOFTMAX_FILE) if (output_dir / name).exists()
    ]
    if written:
        raise SettingError(
            escaped(output_dir) + f" already holds a model ({', '.join(written)}), which a "
            "new run would overwrite: choose a new {output_dir}"
        )
    source = None
    if run.init_from is not None:
        source = resolve_source(run.init_from, run.new_vocab, progress=run.verbose)
        conflict = vocabulary_conflicts(source, run)
        if conflict is not None:
            raise conflict
        config = start_config(source, run.config)
    else:
        given = run.config if run.config is not None else NEW_RUN_DEFAULTS["config"]
        config = TrainingConfig.parse(given)
    config = config.replace(**_flagged(run))
    vocabulary = source.load_vocabulary() if source is not None else None
    run = _with_defaults(run, {k: v for k, v in NEW_RUN_DEFAULTS.items() if k != "config"})
    if vocabulary is None:
        vocabulary = _build_vocabulary(run)
    config = config.replace(n_tokens_vocab=len(vocabulary))
    config = _fit_candidates(config, len(vocabulary), run.verbose)
    saved = {_SAVED_FIELDS.get(n, n): getattr(run, n) for n in (*_SAVED_FIELDS, *_FIXED)}
    record = RunRecord(
        **saved,
        config=config,
        vocab_file=None if run.vocab_file is None else os.fspath(run.vocab_file),
        init_from=None if source is None else source.record(),
        new_vocab=run.new_vocab,
        train_fingerprint=text_fingerprint(run.train_files),
        vocab_sha256=vocabulary_sha256(vocabulary),
    )
    return RunPlan(run, config, vocabulary, record, source)


def _fit_candidates(config, vocabulary_size, verbose):
    """A sampled softmax draws fewer candidates than there are words: a vocabulary no larger
    than `n_negative_samples_batch` (a small text) trains with the full softmax instead (exact,
    and no dearer then), said in one line."""
    samples = config.samples
    if not samples or samples < vocabulary_size:
        return config
    if verbose:
        print(
            f"softmax: full ({vocabulary_size:,} words, no more than the {samples:,} "
            "sampled-softmax candidates asked for)",
            flush=True,
        )
    return config.replace(n_negative_samples_batch=0)


def _build_vocabulary(run):
    if run.vocab_file is not None:
        return Vocabulary.load(run.vocab_file)
    started = time.perf_counter()
    vocabulary = build_vocabulary(
        run.train_files, run.min_count, run.max_vocab_size, run.tokenization_mode
    )
    if run.verbose:
        seconds = time.perf_counter() - started
        print(f"vocabulary: {len(vocabulary)} tokens ({seconds:.1f} s)", flush=True)
    return vocabulary


@dataclasses.dataclass(frozen=True)
class _Difference:
    """A setting given with another value than the saved run's."""

    name: str  # "seed", "batch_size", "config.learning_rate", ...
    field: str  # the `TrainingRun` field that gave it
    saved: object
    given: object
    fixed: bool = False  # the checkpoint fixes it: never overridden
    note: str | None = None  # what to say instead of the two values

    def text(self):
        if self.note is not None:
            return self.note
        key = self.name.removeprefix("config.") + " " if self.name.startswith("config.") else ""
        return f"{key}{self.given!r} (saved: {self.saved!r})" + (" [fixed]" if self.fixed else "")


def _resumed_run(run):
    output_dir = pathlib.Path(run.output_dir)
    if not (output_dir / CONFIG_FILE).is_file():
        raise SettingError(
            "{resume}: no previous run in "
            + escaped(f"{output_dir} ({output_dir / CONFIG_FILE} not found)")
        )
    saved, vocabulary = RunRecord.read(output_dir)
    _check_vocabulary(saved, vocabulary, output_dir)
    recorded = run.train_files is None and saved.train_fingerprint is not None
    if recorded:  # the recorded absolute paths: the run resumes from any working directory
        run = dataclasses.replace(run, train_files=[f["path"] for f in saved.train_fingerprint])
    record, differences = resumed_record(saved, run, vocabulary, recorded)
    if differences and (not run.override or any(d.fixed for d in differences)):
        where = escaped(output_dir / CONFIG_FILE)
        how = "pass {override} to apply them"
        if any(d.fixed for d in differences):
            how = "the checkpoint fixes those marked [fixed]; " + how.replace("them", "the others")
        raise SettingsConflict(
            "{resume}: these settings differ from " + where + f" ({how})",
            [(d.field, d.text()) for d in differences],
        )
    skip = ("state",) if record.config.batch_size != saved.config.batch_size else ()
    skip += ("optimizer",) if record.config.optimizer != saved.config.optimizer else ()
    run = _with_defaults(run, {name: getattr(record, key) for name, key in _SAVED_FIELDS.items()})
    run = _with_defaults(run, NEW_RUN_DEFAULTS)
    changes = {d.name: (d.saved, d.given) for d in differences}
    changed = record.log_every != saved.log_every
    return RunPlan(run, record.config, vocabulary, record, None, changes, skip, changed)


def resumed_record(saved, run, vocabulary, recorded=False):
    """The record of `run` resuming the run of `saved` (a `RunRecord`), and the differences
    (`_Difference`s) between the two: the saved one with every setting `run` gives (its
    configuration, the keys its flags set, its saved settings), and a new training text's
    fingerprint. `recorded`: `run.train_files` are the recorded paths."""
    config = saved.config if run.config is None else TrainingConfig.parse(run.config)
    config = config.replace(n_tokens_vocab=saved.config.n_tokens_vocab, **_flagged(run))
    given = {
        _SAVED_FIELDS[n]: getattr(run, n) for n in _SAVED_FIELDS if getattr(run, n) is not None
    }
    if "train" in given and (recorded or _same_files(given["train"], saved.train)):
        del given["train"]  # the recorded or the same files: the saved spelling stays
    record = dataclasses.replace(saved, config=config, **given)
    differences = _differences(saved, record, run) + _text_changes(run, saved, recorded)
    differences += _fixed_differences(run, saved, vocabulary)
    if saved.train_fingerprint is not None and any(d.field == "train_files" for d in differences):
        record = dataclasses.replace(record, train_fingerprint=text_fingerprint(run.train_files))
    return record, differences


def _check_vocabulary(saved, vocabulary, output_dir):
    """vocab.txt must be the run's: the checkpoint's softmax rows follow its order."""
    if saved.vocab_sha256 is not None and vocabulary_sha256(vocabulary) != saved.vocab_sha256:
        raise SettingError(
            "{resume}: "
            + escaped(output_dir / VOCAB_FILE)
            + " changed since the run started (its sha256 differs from the one in "
            + CONFIG_FILE
            + "); the checkpoint's softmax rows follow the saved vocabulary: put it back"
        )


def _text_changes(run, saved, recorded):
    """The training text's files changed under the same setting (content, size, files);
    `recorded`: `run.train_files` are the recorded paths."""
    if saved.train_fingerprint is None:
        return []  # a run folder of an older version
    if not recorded and not _same_files(run.train_files, saved.train):
        return []  # other files given: `_differences` says so
    try:
        changes = fingerprint_changes(saved.train_fingerprint, text_fingerprint(run.train_files))
    except ValueError:  # the files are gone
        changes = ["no file matches any more"]
    if not changes:
        return []
    note = "changed since the run started: " + "; ".join(changes)
    return [_Difference("train_text", "train_files", "recorded", "changed", note=note)]


def _differences(saved, given, run):
    """The settings of the record `given` that differ from `saved`'s, named by the field that
    gave them: the configuration's other keys (`config.KEY`), the flags' keys, the settings."""
    flagged = {key: name for name, key in FLAG_KEYS.items() if getattr(run, name) is not None}
    out = []
    saved_config, given_config = saved.config.to_options(), given.config.to_options()
    for key in sorted((set(given_config) | set(saved_config)) - {"n_tokens_vocab", *flagged}):
        old, new = saved_config.get(key), given_config.get(key)
        if old != new:
            fixed = key in ("lstm", "char_cnn")
            out.append(_Difference(f"config.{key}", "config", old, new, fixed))
    for key, name in flagged.items():
        if saved_config.get(key) != given_config[key]:
            out.append(_Difference(name, name, saved_config.get(key), given_config[key]))
    for name, key in _SAVED_FIELDS.items():
        old, new = getattr(saved, key), getattr(given, key)
        if name not in _FREE and old != new:
            out.append(_Difference(name, name, old, new))
    return out


def _fixed_differences(run, saved, vocabulary):
    """Differences in what the checkpoint fixes: the vocabulary and the starting weights."""
    out = []
    if run.vocab_file is not None and Vocabulary.load(run.vocab_file) != vocabulary:
        out.append(
            _Difference("vocab_file", "vocab_file", "vocab.txt", os.fspath(run.vocab_file), True)
        )
    for name in ("min_count", "max_vocab_size"):
        value = getattr(run, name)
        # A folder of 0.1 did not record them (`min_count` None: unknown).
        if value is not None and saved.min_count is not None and value != getattr(saved, name):
            out.append(_Difference(name, name, getattr(saved, name), value, True))
    if run.init_from is not None and not _same_source(run.init_from, saved.init_from):
        record = saved.init_from
        out.append(
            _Difference("init_from", "init_from", record and record["source"], run.init_from, True)
        )
    if run.new_vocab and not saved.new_vocab:
        out.append(_Difference("new_vocab", "new_vocab", False, True, True))
    return out


def _paths(value):
    return (
        [os.fspath(value)]
        if isinstance(value, str | os.PathLike)
        else [os.fspath(v) for v in value]
    )


def _same_files(given, saved):
    """Whether two `train` settings name the same files (same spelling, or same matches)."""
    if _paths(given) == _paths(saved):
        return True
    try:
        matches = [[os.path.realpath(p) for p in expand_files(x)] for x in (given, saved)]
    except ValueError:  # one of them matches nothing
        return False
    return matches[0] == matches[1]


def _same_source(given, record):
    """Whether `init_from` names the source recorded in training_config.json."""
    if record is None:
        return False
    saved = record["source"]
    if isinstance(given, list | tuple) or isinstance(saved, list):
        return isinstance(saved, list) and _paths(given) == saved
    given = os.fspath(given)
    if record["kind"] == "preset":
        return given.lower() == saved
    return os.path.abspath(given) == os.path.abspath(saved)
