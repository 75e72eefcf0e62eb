"""ELMoForManyLangs' 44 published models as presets: `efml_<language>` (`efml_chinese`, ...).

Each language is one zip on the NLPL vectors repository (EFML's README, HIT-SCIR/ELMoForManyLangs
at b3de5f1), fetched once into the cache (`elmo_keras.file_io.download.cached_path`;
`$ELMO_KERAS_MIRROR` replaces the base URL as for AllenNLP's models: the same relative paths,
`11/<id>.zip`) and unpacked once into the cache's `unpacked/` folder. Only the model's own files are
taken from the archive (`config.json`, the dictionaries, the two `.pkl` files, a network config),
from the one folder that holds `encoder.pkl`, never by a path that leaves it.

The architecture is pinned: every published model is EFML's bundled network
(`elmo_keras.efml.PUBLISHED_NETWORK`), which most archives do not hold and which is supplied
here. A network config in the archive that says otherwise is refused (a mirror serving another
model under a language's name), and so are tensors of other shapes when the weights load.

Plain Python (no TensorFlow).
"""

import pathlib
import zipfile

from elmo_keras.efml import PUBLISHED_NETWORK, WEIGHT_FILES, network_config
from elmo_keras.file_io.download import DownloadError, cached_path
from elmo_keras.file_io.files import atomic_directory

NLPL_URL = "http://vectors.nlpl.eu/repository/"
PREFIX = "efml_"
TRAINED_ON = (
    "{language}: 20M words sampled from the CoNLL 2018 shared task's raw text (Wikipedia and "
    "Common Crawl), ELMoForManyLangs"
)
# language name -> the zip's path under NLPL_URL (PUBLISHED.md of the EFML fixture).
LANGUAGES = {
    "Arabic": "11/136.zip",
    "Bulgarian": "11/137.zip",
    "Catalan": "11/138.zip",
    "Czech": "11/139.zip",
    "Old Church Slavonic": "11/140.zip",
    "Danish": "11/141.zip",
    "German": "11/142.zip",
    "Greek": "11/143.zip",
    "English": "11/144.zip",
    "Spanish": "11/145.zip",
    "Estonian": "11/146.zip",
    "Basque": "11/147.zip",
    "Persian": "11/148.zip",
    "Finnish": "11/149.zip",
    "French": "11/150.zip",
    "Irish": "11/151.zip",
    "Galician": "11/152.zip",
    "Ancient Greek": "11/153.zip",
    "Hebrew": "11/154.zip",
    "Hindi": "11/155.zip",
    "Croatian": "11/156.zip",
    "Hungarian": "11/157.zip",
    "Indonesian": "11/158.zip",
    "Italian": "11/159.zip",
    "Japanese": "11/160.zip",
    "Korean": "11/161.zip",
    "Latin": "11/162.zip",
    "Latvian": "11/163.zip",
    "Norwegian Bokmål": "11/165.zip",
    "Dutch": "11/164.zip",
    "Norwegian Nynorsk": "11/166.zip",
    "Polish": "11/167.zip",
    "Portuguese": "11/168.zip",
    "Romanian": "11/169.zip",
    "Russian": "11/170.zip",
    "Slovak": "11/171.zip",
    "Slovene": "11/172.zip",
    "Swedish": "11/173.zip",
    "Turkish": "11/174.zip",
    "Uyghur": "11/175.zip",
    "Ukrainian": "11/176.zip",
    "Urdu": "11/177.zip",
    "Vietnamese": "11/178.zip",
    "Chinese": "11/179.zip",
}
_MODEL_FILES = ("config.json", "char.dic", "word.dic", *WEIGHT_FILES)
# The numbers that make an EFML network: (section, key).
_PINNED = (
    ("encoder", "name"), ("encoder", "dim"), ("encoder", "projection_dim"),
    ("encoder", "n_layers"), ("encoder", "cell_clip"), ("encoder", "proj_clip"),
    ("token_embedder", "name"), ("token_embedder", "filters"), ("token_embedder", "n_highway"),
    ("token_embedder", "word_dim"), ("token_embedder", "char_dim"),
    ("token_embedder", "max_characters_per_token"), ("token_embedder", "activation"),
)  # fmt: skip


def preset_name(language):
    """`"Norwegian Bokmål"` -> `"efml_norwegian_bokmal"`."""
    ascii_name = language.lower().replace("å", "a").replace(" ", "_")
    return PREFIX + ascii_name


def entries():
    """`{preset name: entry}` in `elmo_keras.presets.PRESETS`' form, one per language."""
    encoder = PUBLISHED_NETWORK["encoder"]
    return {
        preset_name(language): {
            "efml": path,
            "language": language,
            "network": PUBLISHED_NETWORK,
            "lstm_units": encoder["dim"],
            "projection_dim": encoder["projection_dim"],
            "n_layers": encoder["n_layers"],
            "n_highway": PUBLISHED_NETWORK["token_embedder"]["n_highway"],
            "parameters": "93.6M + 100-d word embeddings",
            "trained_on": TRAINED_ON.format(language=language),
        }
        for language, path in LANGUAGES.items()
    }


def check_network(name, entry, folder):
    """Refuses a folder whose network config is not the pinned one: one `DownloadError`."""
    try:
        found = network_config(folder)
    except ValueError:
        return  # the published archives name EFML's bundled config: it is supplied
    expected = entry["network"]
    for section, key in _PINNED:
        have, want = found.get(section, {}).get(key), expected[section][key]
        if have != want:
            raise DownloadError(
                f"{folder} is not the published preset {name!r}: {section}.{key} is {have!r}, "
                f"the published model has {want!r} (does $ELMO_KERAS_MIRROR serve another "
                "model under its name?)"
            )


def _model_root(archive, source):
    roots = {
        str(pathlib.PurePosixPath(n).parent)
        for n in archive.namelist()
        if pathlib.PurePosixPath(n).name == "encoder.pkl"
    }
    if len(roots) != 1:
        raise DownloadError(f"{source} must hold one ELMoForManyLangs model (one encoder.pkl)")
    return roots.pop()


def unpack(zip_path, folder):
    """The model files of a published zip, written atomically into `folder`; returns it."""
    try:
        archive = zipfile.ZipFile(zip_path)
    except (OSError, zipfile.BadZipFile) as error:
        raise DownloadError(f"{zip_path} is not a readable zip archive: {error}") from None
    with archive, atomic_directory(folder) as staging:
        root = pathlib.PurePosixPath(_model_root(archive, zip_path))
        for info in archive.infolist():
            path = pathlib.PurePosixPath(info.filename)
            inside = path.parent == root and not info.is_dir()
            if inside and (path.name in _MODEL_FILES or path.name.endswith("_sample.json")):
                (staging / path.name).write_bytes(archive.read(info))
    return pathlib.Path(folder)


def fetch(name, entry, base_url, cache_dir=None, progress=True):
    """The local model folder of an EFML preset: downloaded and unpacked once, checked."""
    zip_path = pathlib.Path(
        cached_path(base_url + entry["efml"], cache_dir=cache_dir, progress=progress)
    )
    # beside the downloads (an entry's folder holds its files only): unpacked/<url's key>/model
    folder = zip_path.parents[2] / "unpacked" / zip_path.parent.name / "model"
    if not (folder / "encoder.pkl").is_file():
        unpack(zip_path, folder)
    check_network(name, entry, folder)
    return folder
