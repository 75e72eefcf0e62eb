"""`RunRecord`: the saved part of a training run, `training_config.json`, read and written here.

The file holds the configuration, the seed, the tokenization mode, the shuffle, carry_state,
the training files (and each file's absolute path, size and sha256), the vocabulary settings
and the vocabulary's sha256, where the weights started (`init_from`), the frozen-biLM steps,
the logging interval, the step the current training text started at and the overrides applied
when resuming, and the format's `version`.

Folders written by 0.1, 0.2 and 0.3 hold no `version`: `RunRecord.from_json` upgrades them
(`_upgrade`): the keys they lack take the values such a run had (0.1's `tokenization` is
`tokenization_mode`; runs before the whole-text shuffle streamed through 10,000 lines).
`tests/fixtures/run_folders` holds a folder written by each. Plain Python.
"""

import dataclasses
import json
import os
import pathlib

from elmo_keras.file_io.files import write_text
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.configs import TrainingConfig
from elmo_keras.training.model_files import VOCAB_FILE, save_vocabulary

CONFIG_FILE = "training_config.json"
VERSION = 4  # written by 0.4; the folders of 0.1-0.3 have no version


def _integer(minimum=None):
    def valid(value):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return ok and (minimum is None or value >= minimum)

    return valid


def _key(default=dataclasses.MISSING, *, valid, expected, before_0_4=dataclasses.MISSING):
    """A saved key: its check and the expected value in words, and what a folder of 0.1-0.3
    that lacks it held (`before_0_4`; missing: every folder has it)."""
    metadata = {"valid": valid, "expected": expected, "before_0_4": before_0_4}
    return dataclasses.field(default=default, metadata=metadata)


def _optional(valid):
    return lambda value: value is None or valid(value)


_is_str = lambda value: isinstance(value, str)  # noqa: E731
_is_bool = lambda value: isinstance(value, bool)  # noqa: E731


def _is_files(value):
    return _is_str(value) or (isinstance(value, list) and all(_is_str(v) for v in value))


def _is_fingerprint(value):
    return isinstance(value, list) and all(isinstance(f, dict) for f in value)


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunRecord:
    """What a run folder keeps of its run (`training_config.json`); see the module docstring.

    `dataclasses.replace(record, ...)` makes a changed copy; `write` saves it, `read` loads it.
    """

    # fmt: off
    config: TrainingConfig = _key(valid=lambda v: isinstance(v, dict), expected="a JSON object")
    seed: int = _key(valid=_integer(), expected="an integer")
    tokenization_mode: str = _key(valid=_is_str, expected="a string")
    shuffle_buffer: int = _key(
        0, valid=_integer(0), expected="an integer >= 0", before_0_4=10_000)
    carry_state: bool = _key(True, valid=_is_bool, expected="true or false", before_0_4=True)
    train: str | list[str] = _key(valid=_is_files, expected="a path or a list of paths")
    vocab_file: str | None = _key(
        None, valid=_optional(_is_str), expected="null or a string", before_0_4=None)
    min_count: int | None = _key(
        None, valid=_optional(_integer(1)), expected="null or an integer", before_0_4=None)
    max_vocab_size: int | None = _key(
        None, valid=_optional(_integer(1)), expected="null or an integer", before_0_4=None)
    init_from: dict | None = _key(
        None, valid=_optional(lambda v: isinstance(v, dict)), expected="null or a JSON object",
        before_0_4=None)
    new_vocab: bool = _key(False, valid=_is_bool, expected="true or false", before_0_4=False)
    freeze_bilm_steps: int = _key(
        0, valid=_integer(0), expected="an integer", before_0_4=0)
    log_every: int = _key(50, valid=_integer(1), expected="an integer >= 1", before_0_4=50)
    data_start_step: int = _key(0, valid=_integer(0), expected="an integer", before_0_4=0)
    overrides: tuple = _key(
        (), valid=lambda v: isinstance(v, list), expected="a list", before_0_4=[])
    train_fingerprint: list | None = _key(
        None, valid=_optional(_is_fingerprint), expected="null or a list of objects",
        before_0_4=None)
    vocab_sha256: str | None = _key(
        None, valid=_optional(_is_str), expected="null or a string", before_0_4=None)
    version: int = _key(VERSION, valid=lambda v: v == VERSION, expected=str(VERSION))
    # fmt: on

    def to_json(self):
        """The JSON object of `training_config.json`."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["config"] = self.config.to_options()
        train = self.train
        data["train"] = (
            os.fspath(train)
            if isinstance(train, str | os.PathLike)
            else [os.fspath(f) for f in train]
        )
        data["overrides"] = list(self.overrides)
        return data

    @classmethod
    def from_json(cls, data, where=CONFIG_FILE):
        """The record of a `training_config.json` object (any version); a key of the wrong
        type is a `ValueError` naming `where` and the key."""
        if not isinstance(data, dict):
            raise ValueError(f"{where} must hold a JSON object. Received: {type(data).__name__}")
        data = _upgrade(dict(data))
        values = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                raise ValueError(
                    f"{where} has no key '{f.name}' (expected {f.metadata['expected']})"
                )
            if not f.metadata["valid"](data[f.name]):
                raise ValueError(
                    f"{where}: '{f.name}' must be {f.metadata['expected']}. "
                    f"Received: {data[f.name]!r}"
                )
            values[f.name] = data[f.name]
        values["overrides"] = tuple(values["overrides"])
        values["config"] = _saved_config(values["config"], where)
        return cls(**values)

    def write(self, run_dir, vocabulary):
        """Writes `training_config.json` and `vocab.txt` in `run_dir` (created): what a resumed
        run needs besides the checkpoint."""
        run_dir = pathlib.Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        save_vocabulary(vocabulary, run_dir / VOCAB_FILE)
        write_text(run_dir / CONFIG_FILE, json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def read(cls, run_dir):
        """`(record, vocabulary)` of a run folder: a file that is not JSON, or a key of the
        wrong type, is a `ValueError` naming the file (and the key)."""
        run_dir = pathlib.Path(run_dir)
        path = run_dir / CONFIG_FILE
        if not path.is_file():
            raise ValueError(
                f"`run_dir` must be the folder of an `elmo-keras train` run; {path} was not "
                f"found. Received: run_dir={str(run_dir)!r}"
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(
                f"{path} is damaged (not valid JSON: {error}); restore it from a copy, or "
                "start a new run in another folder"
            ) from None
        return cls.from_json(data, path), Vocabulary.load(run_dir / VOCAB_FILE)

    def with_overrides(self, step, changes, data_changed):
        """The record after a resumed run applied `changes` (`{name: (saved, given)}`) at
        `step`; the data starts again there when `data_changed`."""
        entry = {"step": step, **{n: {"saved": a, "given": b} for n, (a, b) in changes.items()}}
        start = int(step) if data_changed else self.data_start_step
        return dataclasses.replace(self, overrides=(*self.overrides, entry), data_start_step=start)


def _upgrade(data):
    """A `training_config.json` object of any version in this version's keys: a folder of
    0.1-0.3 (no `version`) gets the keys it lacks, with the values such a run had."""
    if "version" in data:
        return data
    if "tokenization_mode" not in data:  # the name before 0.2
        data["tokenization_mode"] = data.pop("tokenization", "whitespace")
    for f in dataclasses.fields(RunRecord):
        before = f.metadata["before_0_4"]
        if before is not dataclasses.MISSING:
            data.setdefault(f.name, before)
    data["version"] = VERSION
    return data


def _saved_config(config, where):
    """The saved configuration, parsed: a bad value names the file and the run it belongs to,
    not only the key (the same check a new run's configuration gets)."""
    try:
        return TrainingConfig.parse(config)
    except ValueError as error:
        raise ValueError(
            f"{where} (the saved run's settings), key 'config': {error}; restore the file "
            "from a copy, or start a new run in another folder"
        ) from None
