"""Named biLMs: the four published ELMo models, the packaged `mini_en` and `tiny`, run folders.

`resolve_preset(preset)` turns a name or a folder into the local `(options_path, weights_path)`
that `elmo_keras.models.BiLM.from_bilm_tf` reads. A published model is downloaded once into the
cache
(`elmo_keras.file_io.download.cached_path`: `$ELMO_KERAS_CACHE`, else `~/.cache/elmo-keras`) from
AllenNLP's base URL, or from `$ELMO_KERAS_MIRROR` when it is set (the same relative paths under
another `http(s)://` or `file://` URL, or under a local folder). `find_model_files(folder)` is the
one place that decides which files of a folder are the biLM (`elmo-keras embed --model`,
`elmo-keras export --run-dir` and presets given as a path all use it).

Plain Python (no TensorFlow).
"""

import difflib
import importlib.resources
import os
import pathlib

from elmo_keras import efml_presets
from elmo_keras.efml import is_efml_folder
from elmo_keras.file_io.download import URL_SCHEME, DownloadError, cached_path, default_cache_dir
from elmo_keras.file_io.file_switch import settle_folder
from elmo_keras.options import read_options

BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/"
MIRROR_VARIABLE = "ELMO_KERAS_MIRROR"
OPTIONS_FILE = "options.json"
WEIGHT_FILE_NAMES = ("lm_weights.hdf5", "weights.hdf5")
TRAINING_HEAD_FILES = ("softmax.hdf5",)  # `elmo-keras train` writes it beside the biLM

_ONE_BILLION = "1B Word Benchmark (about 800M tokens of WMT 2011 news)"


def _published(folder, lstm_units, projection_dim, n_highway, parameters, trained_on):
    stem = f"{folder}/elmo_{folder}"
    # What the published options.json holds: a file that differs is another model.
    architecture = {"lstm.dim": lstm_units, "lstm.projection_dim": projection_dim}
    architecture |= {"lstm.n_layers": 2, "char_cnn.n_highway": n_highway}
    architecture |= {"char_cnn.filters": 2048, "char_cnn.embedding.dim": 16}
    return {
        "architecture": architecture,
        "options": f"{stem}_options.json",
        "weights": f"{stem}_weights.hdf5",
        "lstm_units": lstm_units,
        "projection_dim": projection_dim,
        "n_layers": 2,
        "n_highway": n_highway,
        "parameters": parameters,  # the biLM without the training softmax
        "trained_on": trained_on,
    }


# Relative paths are under `BASE_URL` (or `$ELMO_KERAS_MIRROR`); `package` is a folder of
# `elmo_keras`. Only the published models have the 2048-filter character CNN.
PRESETS = {
    "small": _published("2x1024_128_2048cnn_1xhighway", 1024, 128, 1, "13.6M", _ONE_BILLION),
    "medium": _published("2x2048_256_2048cnn_1xhighway", 2048, 256, 1, "28.0M", _ONE_BILLION),
    "original": _published("2x4096_512_2048cnn_2xhighway", 4096, 512, 2, "93.6M", _ONE_BILLION),
    "original_5.5b": _published(
        "2x4096_512_2048cnn_2xhighway_5.5B",
        4096,
        512,
        2,
        "93.6M",
        "5.5B tokens: Wikipedia (1.9B) and the WMT 2008-2012 monolingual news crawl (3.6B)",
    ),
    "mini_en": {
        "package": "assets/mini_en",
        "options": OPTIONS_FILE,
        "weights": "lm_weights.hdf5",
        "lstm_units": 1024,
        "projection_dim": 128,
        "n_layers": 2,
        "n_highway": 1,
        "parameters": "5.4M",
        "trained_on": "English prose, 9.5M words: WikiText-2, news, State of the Union "
        "addresses, film reviews, Wikipedia leads (this package's own v2; see its MODEL_CARD.md)",
    },
    "tiny": {
        "package": "assets/tiny_allennlp",
        "options": OPTIONS_FILE,
        "weights": "lm_weights.hdf5",
        "lstm_units": 64,
        "projection_dim": 16,
        "n_layers": 2,
        "n_highway": 2,
        "parameters": "0.1M",
        "trained_on": "a few sentences (AllenNLP's test biLM: checks plumbing, not quality)",
    },
}


PRESETS.update(efml_presets.entries())  # ELMoForManyLangs' 44 languages: efml_<language>


def base_url(default=BASE_URL):
    """`$ELMO_KERAS_MIRROR` (with a final "/"), else `default` (AllenNLP's `BASE_URL`)."""
    mirror = os.environ.get(MIRROR_VARIABLE, "").strip()
    if not mirror:
        return default
    return mirror if mirror.endswith("/") else mirror + "/"


def preset_sources(preset):
    """Where a named preset's two files come from, without downloading anything.

    Returns:
        `(options, weights)`: two URLs (or mirror paths) for a published model, two paths inside
        the installed package for `tiny`.
    """
    name = _preset_name(preset)
    if name is None:
        raise ValueError(_unknown(preset))
    entry = PRESETS[name]
    if "package" in entry:
        folder = _package_folder(entry["package"], (entry["options"], entry["weights"]))
        return folder / entry["options"], folder / entry["weights"]
    if "efml" in entry:  # one zip holds the whole model
        url = base_url(efml_presets.NLPL_URL) + entry["efml"]
        return url, url
    return base_url() + entry["options"], base_url() + entry["weights"]


def efml_preset(preset):
    """The entry of an ELMoForManyLangs preset name (`efml_chinese`, ...), or `None`."""
    name = _preset_name(preset)
    return PRESETS[name] if name and "efml" in PRESETS[name] else None


def is_efml_model(preset):
    """Whether `preset` is an ELMoForManyLangs preset name or model folder."""
    return bool(efml_preset(preset)) or is_efml_folder(preset)


def resolve_efml_preset(preset, cache_dir=None, progress=True):
    """The local model folder of an ELMoForManyLangs preset, downloaded and unpacked once; its
    network config is checked against the published one (`elmo_keras.efml_presets`)."""
    name = _preset_name(preset)
    base = base_url(efml_presets.NLPL_URL)
    return efml_presets.fetch(name, PRESETS[name], base, cache_dir=cache_dir, progress=progress)


def resolve_preset(preset, cache_dir=None, progress=True):
    """The local `(options_path, weights_path)` of a preset name or a model folder.

    Args:
        preset: str or path-like. A name of `PRESETS` (`"small"`, `"medium"`, `"original"`,
            `"original_5.5b"`, `"tiny"`; any case), or a folder holding `options.json` and an
            `.hdf5` weight file (an `elmo-keras train` output; see `find_model_files`). A name
            wins over a folder of that name: write `./tiny` for the folder.
        cache_dir: path or None. Where downloads go; defaults to
            `elmo_keras.file_io.download.default_cache_dir()`.
        progress: bool. A download progress bar on a terminal. Defaults to `True`.

    Returns:
        Two local paths. A published model is downloaded (and checked) on first use.

    Raises:
        ValueError: an unknown name that is not a folder either; lists the known names (and
            the closest one).
        elmo_keras.file_io.download.DownloadError: a download failed, or the options of a published
            name are not its published architecture (`check_architecture`).

    Example:
    >>> options, weights = resolve_preset("tiny")
    >>> options.name, weights.name
    ('options.json', 'lm_weights.hdf5')
    """
    if _preset_name(preset) is None:
        if isinstance(preset, os.PathLike | str) and pathlib.Path(preset).is_dir():
            return find_model_files(preset)
        raise ValueError(_unknown(preset))
    if efml_preset(preset):
        raise ValueError(
            f"{preset!r} is an ELMoForManyLangs model (a folder, not options and weights): this "
            "entry point does not take it yet; `BiLM.from_preset`, `embed`, "
            "`dump-token-embeddings` and `export` do"
        )
    options, weights = preset_sources(preset)
    entry = PRESETS[_preset_name(preset)]
    if "package" in entry:
        return options, weights  # inside the installed package: nothing to fetch
    options = cached_path(options, cache_dir=cache_dir, progress=progress)
    check_architecture(_preset_name(preset), options)  # before the large weight file
    return options, cached_path(weights, cache_dir=cache_dir, progress=progress)


def model_folder(model):
    """The folder that `model` names: a packaged preset's (`mini_en`, `tiny`; any case), else
    `model` itself as a path (what `elmo-keras evaluate --model` reads: the biLM with its
    vocabulary and softmax).

    Raises:
        ValueError: a published preset's name (it is two downloaded files, not a folder), or
            neither a packaged name nor a folder.

    Example:
    >>> model_folder("mini_en").name
    'mini_en'
    """
    name = _preset_name(model)
    packaged = ", ".join(n for n, e in PRESETS.items() if "package" in e)
    if name is None:
        if pathlib.Path(model).is_dir():
            return pathlib.Path(model)
        close = difflib.get_close_matches(str(model).lower(), PRESETS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"folder not found, nor a packaged preset ({packaged}): {str(model)!r}{hint}"
        )
    entry = PRESETS[name]
    if "package" not in entry:
        raise ValueError(
            f"the preset {name!r} is published as two files (options, weights), not as a model "
            f"folder; give a folder or a packaged preset ({packaged}). Received: {model!r}"
        )
    return _package_folder(entry["package"], (entry["options"], entry["weights"]))


def architecture(options):
    """The numbers that tell published biLMs apart, from an options dict (`read_options`):
    `{"lstm.dim": ..., "lstm.projection_dim": ..., "lstm.n_layers": ...,
    "char_cnn.n_highway": ..., "char_cnn.filters": total filters, "char_cnn.embedding.dim"}`."""
    lstm, cnn = options.get("lstm", {}), options.get("char_cnn", {})
    return {
        "lstm.dim": lstm.get("dim"),
        "lstm.projection_dim": lstm.get("projection_dim"),
        "lstm.n_layers": lstm.get("n_layers"),
        "char_cnn.n_highway": cnn.get("n_highway"),
        "char_cnn.filters": sum(int(count) for _, count in cnn.get("filters", [])),
        "char_cnn.embedding.dim": cnn.get("embedding", {}).get("dim"),
    }


def check_architecture(name, options_path):
    """Refuses an options file that is not the published preset `name`'s architecture (a
    mirror or a cache serving another model under its names): one `DownloadError` naming the
    file, the key, the published and the received value. The weights are then checked
    against these options, dataset by dataset, when they are loaded
    (`elmo_keras.weights.read_weight_arrays`)."""
    expected = PRESETS[name].get("architecture")
    if expected is None:
        return
    found = architecture(read_options(options_path))
    for key, value in expected.items():
        if found.get(key) != value:
            raise DownloadError(
                f"options file {options_path} is not the published preset {name!r}: {key} is "
                f"{found.get(key)!r}, the published model has {value!r} (does "
                f"${MIRROR_VARIABLE} serve another model under its names?)"
            )


def find_model_files(folder):
    """`(options, weights)` in a model folder: what `elmo-keras train` writes, or a download.

    The options file is `options.json`, else the folder's single `*_options.json` (as the
    published files are named). The weights are `lm_weights.hdf5`, else `weights.hdf5`, else
    the folder's single other `.hdf5` file, never the training head `softmax.hdf5`.

    Raises:
        ValueError: `folder` is not a folder, or the files are missing or ambiguous.
    """
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise ValueError(
            "`folder` must be a folder holding options.json and an .hdf5 weight file. "
            f"Received: folder={str(folder)!r}"
        )
    settle_folder(folder)  # a write cut short between its renames is finished first
    options = folder / OPTIONS_FILE
    if not options.is_file():
        named = sorted(p for p in folder.glob("*_options.json") if p.is_file())
        if len(named) != 1:
            raise ValueError(f"no options.json in the model folder {str(folder)!r}")
        options = named[0]
    for name in WEIGHT_FILE_NAMES:
        if (folder / name).is_file():
            return options, folder / name
    others = sorted(
        p for p in folder.glob("*.hdf5") if p.is_file() and p.name not in TRAINING_HEAD_FILES
    )
    if len(others) == 1:
        return options, others[0]
    found = f": found {', '.join(p.name for p in others)}" if others else ""
    raise ValueError(
        f"no weights file ({' or '.join(WEIGHT_FILE_NAMES)}, or a single other .hdf5) in the "
        f"model folder {str(folder)!r}{found}"
    )


def _preset_name(preset):
    if isinstance(preset, str) and preset.lower() in PRESETS:
        return preset.lower()
    return None


def _unknown(preset):
    names = ", ".join(repr(name) for name in PRESETS if not efml_preset(name))
    names += ", 'efml_<language>' (ELMoForManyLangs' 44 languages: `elmo-keras presets`)"
    if isinstance(preset, str) and URL_SCHEME.match(preset):
        scheme = preset.partition("://")[0]
        return (
            f"`preset` does not take {scheme}:// handles (model hubs such as hf:// or "
            f"kaggle:// are not supported): give one of {names}, a model folder, or the "
            f"files as http(s):// URLs (--options / --weights). Received: preset={preset!r}"
        )
    close = (
        difflib.get_close_matches(preset.lower(), PRESETS, n=1) if isinstance(preset, str) else []
    )
    hint = f"Did you mean {close[0]!r}? " if close else ""
    return (
        f"{hint}`preset` must be one of {names}, or a folder holding options.json and an .hdf5 "
        f"weight file. Received: preset={preset!r}"
    )


def _package_folder(relative, names):
    """A folder of the installed package as a real path (copied out of a zip if need be)."""
    folder = importlib.resources.files("elmo_keras").joinpath(relative)
    if isinstance(folder, pathlib.Path):
        return folder
    copy = default_cache_dir() / "package" / relative  # pragma: no cover - zipped install
    copy.mkdir(parents=True, exist_ok=True)
    for name in names:
        (copy / name).write_bytes(folder.joinpath(name).read_bytes())
    return copy


def describe_presets():
    """{name: description} of every preset, in `PRESETS` order: what `BiLM.presets` lists.

    Each description is a dict: `"description"` (one line: the architecture and the training
    data), `"parameters"`, `"trained_on"`, and `"source"` (`"download"` or `"package"`).

    Example:
    >>> describe_presets()["tiny"]["parameters"]
    '0.1M'
    """
    described = {}
    for name, entry in PRESETS.items():
        shape = (
            f"{entry['n_layers']} x {entry['lstm_units']}-unit LSTM per direction, "
            f"{entry['projection_dim']}-d projections, {entry['n_highway']} highway"
        )
        described[name] = {
            "description": f"{shape}; {entry['parameters']} parameters; trained on "
            f"{entry['trained_on']}",
            "parameters": entry["parameters"],
            "trained_on": entry["trained_on"],
            "source": "package" if "package" in entry else "download",
        }
    return described
