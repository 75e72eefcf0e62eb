"""Where a run's weights start (`TrainingRun.init_from`): a run folder, a preset, or two files.

- A **run folder** (what `elmo-keras train` writes: `options.json`, `lm_weights.hdf5`,
  `vocab.txt`, `softmax.hdf5`): the biLM, the vocabulary and the softmax come along, as with
  bilm-tf's `restart.py`; with `new_vocab` only the biLM does, and a new softmax is trained over
  a vocabulary of the new text. The source run's training keys (batch size, optimizer...) are the
  defaults when no configuration is given.
- A **preset** (`elmo_keras.presets`: `tiny`, or a published model downloaded into the cache) or
  the two **published files** (`(options, weights)`, paths or `http(s)://` URLs): the biLM only;
  a new softmax is trained over the new text's vocabulary (published files hold no softmax).

The source's architecture always wins: a configuration with another one is a `SettingsConflict`;
its training keys may still be given. The optimizer starts fresh and the step counts from 0.
"""

import dataclasses
import os
import pathlib

from elmo_keras.file_io.download import cached_path, file_sha256
from elmo_keras.options import bilm_kwargs_to_options, options_to_bilm_kwargs, read_options
from elmo_keras.presets import PRESETS, find_model_files, resolve_preset
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.configs import (
    TrainingConfig,
    architecture_options,
    get_config,
    normalize_config,
)
from elmo_keras.training.model_files import SOFTMAX_FILE, VOCAB_FILE
from elmo_keras.training.run.run_record import CONFIG_FILE, RunRecord
from elmo_keras.training.run.setting_error import SettingsConflict, escaped

KINDS = ("run", "preset", "files")


@dataclasses.dataclass(frozen=True)
class InitSource:
    """A resolved `init_from`: local files, and what comes along with the biLM.

    Attributes:
        kind: `"run"` (a run folder), `"preset"` or `"files"` (published files, or a folder of
            them).
        given: str or list. `init_from` as it was given (recorded in training_config.json).
        options, weights: `pathlib.Path`. The biLM's local files.
        vocab, softmax: `pathlib.Path` or None. The run folder's vocabulary and softmax, when
            they come along.
        training_config: `TrainingConfig` or None. The source run's saved configuration.
    """

    kind: str
    given: object
    options: pathlib.Path
    weights: pathlib.Path
    vocab: pathlib.Path | None = None
    softmax: pathlib.Path | None = None
    training_config: TrainingConfig | None = None

    def architecture(self):
        """The source's architecture as an options dict with every key spelled out."""
        options = read_options(self.options)
        source = f"options file {self.options}"
        return bilm_kwargs_to_options(options_to_bilm_kwargs(options, source))

    def record(self):
        """What training_config.json keeps of the source (`init_from`)."""
        return {
            "kind": self.kind,
            "source": self.given,
            "options": str(self.options),
            "weights": str(self.weights),
            "weights_sha256": file_sha256(self.weights),
            "softmax": "kept" if self.softmax is not None else "new",
        }

    def load_vocabulary(self):
        """The vocabulary that comes along (a run folder's), or None."""
        return None if self.vocab is None else Vocabulary.load(self.vocab)

    def initialize(self, model):
        """Loads the biLM's weights (and a kept softmax) into a built `LanguageModel`."""
        from elmo_keras.weights import load_softmax, load_weights

        load_weights(model.bilm, self.weights)
        if self.softmax is None:
            return
        kernel, bias = load_softmax(
            self.softmax,
            shape=(model.vocabulary_size, model.projection_dim),
            need="the run (its vocab.txt and options.json) needs",
        )
        model.softmax_kernel.assign(kernel)
        model.softmax_bias.assign(bias)


def describe(record):
    """One line for a training_config.json `init_from` record: where the weights came from."""
    given = record["source"]
    what = "biLM, vocabulary and softmax" if record["softmax"] == "kept" else "biLM, new softmax"
    if record["kind"] == "run":
        return f"the run folder {given} ({what})"
    if record["kind"] == "preset":
        return f"the preset {given!r} ({what})"
    if isinstance(given, list | tuple):
        given = " + ".join(str(g) for g in given)
    return f"{given} ({what})"


def _unknown(init_from):
    names = ", ".join(repr(name) for name in PRESETS)
    return ValueError(
        "`init_from` must be a run folder, a preset name (" + names + "), or an (options, "
        f"weights) pair of paths or URLs. Received: init_from={init_from!r}"
    )


def resolve_source(init_from, new_vocab=False, progress=True):
    """Turns `TrainingRun.init_from` into an `InitSource` (downloading a URL or preset once).

    Args:
        init_from: str, path or `(options, weights)`. See `TrainingRun`.
        new_vocab: bool. Leave a run folder's vocabulary and softmax behind.
        progress: bool. A download progress bar on a terminal.

    Returns:
        An `InitSource`.
    """
    if isinstance(init_from, list | tuple):
        options, weights = (cached_path(p, progress=progress) for p in init_from)
        given = [os.fspath(p) for p in init_from]
        return InitSource("files", given, pathlib.Path(options), pathlib.Path(weights))
    given = os.fspath(init_from)
    if given.lower() in PRESETS:
        options, weights = resolve_preset(given, progress=progress)
        options, weights = pathlib.Path(options), pathlib.Path(weights)
        # A packaged model that ships its vocabulary and softmax (`mini_en`) starts like a run
        # folder: they come along unless `new_vocab`.
        head = [options.parent / VOCAB_FILE, options.parent / SOFTMAX_FILE]
        if not new_vocab and all(path.is_file() for path in head):
            return InitSource("preset", given.lower(), options, weights, *head)
        return InitSource("preset", given.lower(), options, weights)
    folder = pathlib.Path(given)
    if not folder.is_dir():
        raise _unknown(init_from)
    is_run = (folder / CONFIG_FILE).is_file()
    if is_run and not (folder / "options.json").is_file():
        raise ValueError(
            f"`init_from`: the run folder {given} holds no final weights yet (options.json, "
            f"lm_weights.hdf5); write a checkpoint's with `elmo-keras snapshot --run {given} "
            "--output DIR` and start from DIR"
        )
    options, weights = find_model_files(folder)
    head = [folder / VOCAB_FILE, folder / SOFTMAX_FILE]
    if not all(path.is_file() for path in head):
        return InitSource("files", given, options, weights)
    training_config = RunRecord.read(folder)[0].config if is_run else None
    if new_vocab:
        return InitSource("run", given, options, weights, training_config=training_config)
    return InitSource("run", given, options, weights, *head, training_config)


def _architecture_differences(config, architecture):
    """`name value (source: value)` for each `BiLM` argument where the two differ."""
    ours = options_to_bilm_kwargs(architecture_options(config), "the configuration")
    theirs = options_to_bilm_kwargs(architecture, "the source's options")
    return [
        f"{name}={ours[name]!r} (source: {theirs[name]!r})"
        for name in ours
        if ours[name] != theirs[name]
    ]


def start_config(source, config=None):
    """The configuration of a run that starts from `source`.

    The architecture is the source's; the training keys are `config`'s when it is given (its
    architecture must then be the source's), else the source run's, else the defaults.
    """
    architecture = source.architecture()
    if config is not None:
        base = get_config(config)
        differences = _architecture_differences(base, architecture)
        if differences:
            raise SettingsConflict(
                "{init_from}: the architecture is the source's ("
                + escaped(source.options)
                + "), leave {config} out or give one with that architecture",
                [("config", ", ".join(differences))],
            )
    elif source.training_config is not None:
        base = source.training_config.to_options()
    else:
        base = normalize_config(architecture)  # the default training keys
    base.update(architecture)
    base.pop("n_tokens_vocab", None)
    return TrainingConfig.parse(base)


def vocabulary_conflicts(source, run):
    """A `SettingsConflict` when vocabulary settings are given but the source's vocabulary
    comes along, else None."""
    if source.vocab is None:
        return None
    given = [
        (name, repr(getattr(run, name)))
        for name in ("vocab_file", "min_count", "max_vocab_size")
        if getattr(run, name) is not None
    ]
    if not given:
        return None
    return SettingsConflict(
        "{init_from}: the run folder's vocabulary and softmax come along, so no vocabulary "
        "setting applies (pass {new_vocab} to build a new vocabulary and softmax)",
        given,
    )
