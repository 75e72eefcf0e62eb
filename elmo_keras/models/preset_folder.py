"""Preset folders: what `save_to_preset(folder)` writes and `from_preset(folder)` reads back.

The layout follows keras-hub's preset folders (`config.json`, `metadata.json`,
`preprocessor.json`) where it can, and keeps bilm-tf's two files for the biLM, so that bilm-tf,
AllenNLP, `elmo-keras embed --model` and `elmo_keras.presets.find_model_files` read the folder
too:

- `config.json`: the saved object as `keras.saving.serialize_keras_object` writes it (a `BiLM`,
  or an `ElmoEmbedding` with its biLM's config inside), without its build config. Read back,
  its biLM is checked against `options.json` (one architecture, whichever file is read),
  through the options' limits and the memory check.
- `metadata.json`: the versions of elmo-keras and Keras, the class, the parameter count, the
  date.
- `options.json` and `lm_weights.hdf5`: the biLM in bilm-tf's layout. They are its only weight
  file: keras-hub's `model.weights.h5` would hold the same numbers a second time.
- `embedding.weights.h5` (an `ElmoEmbedding` only): the layer's weights outside the biLM (each
  scalar mix's weights and gamma), by sublayer and weight name.
- `preprocessor.json`, when `ElmoPreprocessor.save_to_preset` wrote one into the folder.

The folder is written atomically (`elmo_keras.file_io.files.atomic_directory`): a failed
save leaves no folder that looks complete. A folder without `config.json` (a published model, an
`elmo-keras train` output) is read as before, from `options.json` and its hdf5 file.
"""

import contextlib
import datetime
import json
import os
import pathlib
import shutil
import types

import keras
import numpy as np

from elmo_keras import efml
from elmo_keras.file_io.files import atomic_directory, write_text
from elmo_keras.file_io.hdf5_writer import write_datasets
from elmo_keras.file_io.output_access import read_marker
from elmo_keras.memory import FLOAT_BYTES, bilm_parameters, check_fits
from elmo_keras.options import (
    bilm_kwargs_to_options,
    options_to_bilm_kwargs,
    parse_json,
    read_options,
    write_options,
)
from elmo_keras.presets import (
    OPTIONS_FILE,
    PRESETS,
    describe_presets,
    efml_preset,
    find_model_files,
    resolve_efml_preset,
    resolve_preset,
)
from elmo_keras.text.char_ids import N_CHARACTERS
from elmo_keras.weights import (
    build_for_weights,
    load_weights,
    read_weight_arrays,
    save_weights,
)

CONFIG_FILE = "config.json"
METADATA_FILE = "metadata.json"
PREPROCESSOR_FILE = "preprocessor.json"
BILM_WEIGHTS_FILE = "lm_weights.hdf5"
LAYER_WEIGHTS_FILE = "embedding.weights.h5"
SAVED_CLASSES = ("elmo_keras>BiLM", "elmo_keras>ElmoEmbedding")
# Everything a preset folder holds: only such a folder, whose config.json (or, alone,
# preprocessor.json) is elmo-keras's, is replaced by `save_to_preset(..., overwrite=True)`.
PRESET_NAMES = frozenset(
    (
        CONFIG_FILE,
        METADATA_FILE,
        PREPROCESSOR_FILE,
        OPTIONS_FILE,
        BILM_WEIGHTS_FILE,
        LAYER_WEIGHTS_FILE,
    )
)


class _ClassProperty:
    """A read-only property of a class (`BiLM.presets`), as keras-hub's `classproperty`."""

    def __init__(self, getter):
        self.getter = getter

    def __get__(self, instance, owner):
        return self.getter(owner)


def presets_property():
    """The `presets` class property: `{name: description}` of the named presets, read-only."""
    return _ClassProperty(lambda owner: types.MappingProxyType(describe_presets()))


def is_preset_name(preset):
    """Whether `preset` names a preset of `elmo_keras.presets.PRESETS` (a name wins over a
    folder of the same name, as in `resolve_preset`)."""
    return isinstance(preset, str) and preset.lower() in PRESETS


def read_json(folder, name, accepted):
    """The serialized elmo-keras object in `folder/name`, checked, or `None`.

    `None` when `folder` is a preset name, has no such file, or the file is someone else's (a
    JSON object that is not a serialized `elmo_keras>` object: AllenNLP's or keras-hub's
    `config.json` beside bilm-tf's files); the folder is then read as a model folder.

    Raises:
        ValueError: the file is not JSON, or is an elmo-keras object not in `accepted`.
    """
    if is_preset_name(preset=folder) or not isinstance(folder, str | os.PathLike):
        return None
    path = pathlib.Path(folder) / name
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not a JSON file: {error}") from None
    value = parse_json(text, str(path))
    registered = value.get("registered_name") if isinstance(value, dict) else None
    if not (isinstance(registered, str) and registered.startswith("elmo_keras>")):
        return None
    if registered not in accepted or not isinstance(value.get("config"), dict):
        raise ValueError(
            f"{path} must describe one of {accepted} with its config. "
            f"Received: registered_name={registered!r}"
        )
    return value


def read_config(folder):
    """The saved `BiLM`'s or `ElmoEmbedding`'s `config.json` in a preset folder, or `None`."""
    return read_json(folder, CONFIG_FILE, SAVED_CLASSES)


def serialized(layer):
    """`keras.saving.serialize_keras_object(layer)` without build and compile configs."""

    def strip(value):
        if isinstance(value, dict):
            return {
                key: strip(item)
                for key, item in value.items()
                if key not in ("build_config", "compile_config")
            }
        return value

    return strip(keras.saving.serialize_keras_object(layer))


def own_weights(layer, bilm):
    """`{sublayer/weight: variable}` of `layer`'s weights outside `bilm` (none for a biLM)."""
    inside = {id(variable) for variable in bilm.weights}
    found = {}
    for variable in layer.weights:
        if id(variable) not in inside:
            found["/".join(variable.path.split("/")[-2:])] = variable
    return found


def is_preset_folder(folder, entries):
    """Whether the folder (its entries' names given) is a preset folder this package wrote:
    its files only, and its config.json (or a lone preprocessor.json) is elmo-keras's."""
    if not entries <= PRESET_NAMES:
        return False
    marker, accepted = (
        (PREPROCESSOR_FILE, ("elmo_keras>ElmoPreprocessor",))
        if entries == {PREPROCESSOR_FILE}
        else (CONFIG_FILE, SAVED_CLASSES)
    )
    value = read_marker(pathlib.Path(folder) / marker)
    return value is not None and value.get("registered_name") in accepted


PRESET_FOLDER = ("a preset folder", is_preset_folder)


def save_preset(layer, bilm, folder, overwrite=False):
    """Writes `layer` (a `BiLM`, or an `ElmoEmbedding` around `bilm`) as a preset folder.

    With `overwrite`, only an earlier preset folder is replaced (never a training run's folder,
    the working folder or one holding other files: a `ValueError` naming it); the
    preprocessor.json `ElmoPreprocessor.save_to_preset` wrote there is kept.

    Returns:
        The folder, as a `pathlib.Path`.
    """
    from elmo_keras import __version__  # noqa: PLC0415

    if not layer.built:
        layer.build(None)
    extra = own_weights(layer, bilm)
    metadata = {
        "elmo_keras_version": __version__,
        "keras_version": keras.version(),
        "class": type(layer).__name__,
        "parameter_count": layer.count_params(),
        "date_saved": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    with atomic_directory(folder, overwrite, PRESET_FOLDER) as staging:
        kept = pathlib.Path(folder) / PREPROCESSOR_FILE
        if kept.is_file() and not kept.is_symlink():
            shutil.copy2(kept, staging / PREPROCESSOR_FILE)
        write_options(bilm.to_options(), staging / OPTIONS_FILE)
        save_weights(bilm, staging / BILM_WEIGHTS_FILE)
        if extra:
            arrays = ((name, keras.ops.convert_to_numpy(v)) for name, v in extra.items())
            write_datasets(staging / LAYER_WEIGHTS_FILE, arrays, checksum=True)
        write_text(staging / CONFIG_FILE, json.dumps(serialized(layer), indent=2) + "\n")
        write_text(staging / METADATA_FILE, json.dumps(metadata, indent=2) + "\n")
    return pathlib.Path(folder)


def bilm_config(config, folder):
    """The serialized `BiLM` of a preset folder's `config.json` (`config`, as `read_config`
    gives it): the config itself, or an `ElmoEmbedding`'s `bilm` entry, checked to be one."""
    if config["registered_name"] == "elmo_keras>BiLM":
        return config
    inner = config["config"].get("bilm")
    if not (
        isinstance(inner, dict)
        and inner.get("registered_name") == "elmo_keras>BiLM"
        and isinstance(inner.get("config"), dict)
    ):
        received = inner.get("registered_name") if isinstance(inner, dict) else inner
        raise ValueError(
            f"{pathlib.Path(folder) / CONFIG_FILE}: an ElmoEmbedding's config must hold its "
            f"biLM as `config.bilm` (a serialized elmo_keras>BiLM). Received: {received!r}"
        )
    return inner


def checked_architecture(config, folder, kwargs):
    """A preset folder's biLM config (`config["config"]`) checked against its `options.json`
    and through the options' limits and the memory check, with `kwargs` (the caller's
    overrides) applied: the folder has one architecture, whichever file is read.

    Returns:
        The config to build the biLM from: `options.json`'s architecture, the config's other
        arguments (`dropout`, `length_aware`, the name) and `kwargs`.

    Raises:
        ValueError: a value beyond the options' limits, or a key on which `config.json` and
            `options.json` disagree (one line naming both files and the key).
        NotEnoughMemory: the weights would not fit in memory.
    """
    config_path = pathlib.Path(folder) / CONFIG_FILE
    options_path = find_model_files(folder)[0]
    saved = config["config"]
    # A model with its own character dictionary (ELMoForManyLangs) takes that many ids.
    characters = saved.get("char_vocabulary")
    n_characters = N_CHARACTERS if characters is None else len(characters) + 1
    architecture = options_to_bilm_kwargs(
        read_options(options_path, n_characters), n_characters=n_characters
    )
    source = f"preset config {config_path}"
    from_config = _through_limits(saved, architecture, source, n_characters)
    for key, value in architecture.items():
        if from_config[key] != value:
            raise ValueError(
                f"{config_path} and {options_path} disagree on `{key}`: {saved[key]!r} in "
                f"{CONFIG_FILE}, {value!r} in {options_path.name}; a preset folder holds one "
                "architecture (save it again with `save_to_preset`)"
            )
    overridden = sorted(set(kwargs) & set(architecture))
    if overridden:
        source = f"{source} with the arguments {overridden}"
        architecture = _through_limits(kwargs, architecture, source, n_characters)
    check_fits(FLOAT_BYTES * bilm_parameters(architecture), "its weights", source)
    return {**saved, **kwargs, **architecture}


def _through_limits(values, architecture, source, n_characters):
    """`architecture` (`BiLM` arguments) with the keys of `values` replaced, checked as an
    options file's are (`options_to_bilm_kwargs`, errors naming `source`)."""
    given = {key: values.get(key, value) for key, value in architecture.items()}
    try:
        options = bilm_kwargs_to_options(given)
    except TypeError:
        raise ValueError(
            f"{source}: `filters` must be a list of [width, count] pairs. "
            f"Received: {given['filters']!r}"
        ) from None
    return options_to_bilm_kwargs(options, source, n_characters)


def load_bilm(cls, preset, cache_dir=None, progress=True, check_finite=True, **kwargs):
    """`cls.from_preset`: a saved preset folder's biLM (its own config, checked against its
    `options.json`, `kwargs` overriding it), else the named preset's or the model folder's
    `options.json` and hdf5 file."""
    config = read_config(preset)
    if efml_preset(preset):  # a published language: its pinned network, supplied
        folder = resolve_efml_preset(preset, cache_dir=cache_dir, progress=progress)
        network = efml_preset(preset)["network"]
        return load_efml_folder(cls, folder, check_finite, network=network, **kwargs)
    if config is None and efml.is_efml_folder(preset):
        return load_efml_folder(cls, preset, check_finite, **kwargs)
    if config is None:
        options, weights = resolve_preset(preset, cache_dir=cache_dir, progress=progress)
        return cls.from_bilm_tf(options, weights, check_finite=check_finite, **kwargs)
    config = bilm_config(config, preset)  # an ElmoEmbedding's folder: its biLM
    config = {**config, "config": checked_architecture(config, preset, kwargs)}
    bilm = keras.saving.deserialize_keras_object(config)
    if not isinstance(bilm, cls):
        raise ValueError(f"`preset` {str(preset)!r} holds a {type(bilm).__name__}, not a {cls}")
    return load_weights(bilm, find_model_files(preset)[1], check_finite=check_finite)


def load_efml_folder(cls, folder, check_finite=True, network=None, **kwargs):
    """An ELMoForManyLangs model folder as a `cls` (`elmo_keras.efml`), `kwargs` overriding
    its architecture (`network`, a pinned network config, replaces the folder's); a tensor of
    the wrong shape or not finite is one `ValueError` line."""
    efml_kwargs, arrays = efml.read_folder(folder, network=network)
    bilm = build_for_weights(cls(**{**efml_kwargs, **kwargs}))
    for name, shape in bilm.weight_shapes().items():
        found = arrays[name].shape
        if found != shape:
            raise ValueError(
                f"{folder}: tensor {name!r} (in bilm-tf's names) has shape {found}; its config "
                f"and dictionaries make it {shape}"
            )
        if check_finite and not np.all(np.isfinite(arrays[name])):
            raise ValueError(f"{folder}: tensor {name!r} holds NaN or infinite values")
    bilm.set_weight_arrays(arrays)
    return bilm


@contextlib.contextmanager
def restoring_cache(layer):
    """While an `ElmoEmbedding` is built for weights loaded next (a `.keras` file, a preset
    folder, a token-embedding file): its `vocab_to_cache` vectors are made, not computed."""
    layer._restoring = True
    try:
        yield
    finally:
        layer._restoring = False


def load_embedding(cls, bilm_cls, preset, cache_dir=None, progress=True, **kwargs):
    """`ElmoEmbedding.from_preset`: a saved `ElmoEmbedding` with its mixes' weights, `kwargs`
    overriding its config; any other preset's biLM wrapped in a new layer made with `kwargs`."""
    config = read_config(preset)
    bilm = load_bilm(bilm_cls, preset, cache_dir=cache_dir, progress=progress)
    if config is None or config["registered_name"] != "elmo_keras>ElmoEmbedding":
        return cls(bilm, **kwargs)
    layer = cls.from_config({**config["config"], **kwargs, "bilm": bilm})
    with restoring_cache(layer):  # a saved word cache is among the arrays read below
        layer.build(None)
    variables = own_weights(layer, bilm)
    shapes = {name: tuple(variable.shape) for name, variable in variables.items()}
    arrays = read_weight_arrays(pathlib.Path(preset) / LAYER_WEIGHTS_FILE, shapes)
    for name, variable in variables.items():
        variable.assign(arrays[name])
    return layer
