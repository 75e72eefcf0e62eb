"""The download cache no one else can steer (issue 30, point 4): planted links, other users'
folders and files, private permissions. Downloads come from the loopback `FileServer` of
tests/file_io/test_download.py; every case there, run against a cache someone else prepared."""

import hashlib
import json
import os
import stat

import pytest

from elmo_keras.file_io.download import DownloadError, cache_location, cached_path
from tests.file_io.test_download import WEIGHTS, start_server

NOBODY = 65534
as_root = pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0, reason="chown to another user needs root"
)


@pytest.fixture
def server(monkeypatch, tmp_path):
    served = start_server(monkeypatch, tmp_path)
    yield served
    served.stop()


def _entry(server):
    url = server.url(WEIGHTS)
    target = cache_location(url)
    target.parent.mkdir(parents=True)
    return url, target


def test_a_planted_partial_link_is_refused_and_its_target_is_untouched(server, tmp_path):
    url, target = _entry(server)
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    partial = target.with_name(target.name + ".partial")
    partial.symlink_to(victim)
    partial.with_name(partial.name + ".json").write_text(json.dumps({"url": url}))
    with pytest.raises(
        DownloadError, match=r"symbolic link at .*lm_weights.hdf5.partial; "
    ) as info:
        cached_path(url)
    assert "\n" not in str(info.value) and url in str(info.value)
    assert victim.read_bytes() == b"precious"  # before: the body was appended to it
    assert not target.is_symlink() and not target.exists()  # before: the entry became the link
    assert server.requests(WEIGHTS) == []


def test_a_planted_lock_link_is_refused_and_creates_nothing(server, tmp_path):
    url, target = _entry(server)
    elsewhere = tmp_path / "created-by-the-lock"
    (target.parent / ".lock").symlink_to(elsewhere)
    with pytest.raises(DownloadError, match=r"symbolic link at .*\.lock; "):
        cached_path(url)
    assert not elsewhere.exists()  # before: opening the lock created it
    assert server.requests(WEIGHTS) == []


def test_a_linked_cache_entry_is_refused_not_read(server, tmp_path):
    url, target = _entry(server)
    body = server.files[WEIGHTS]
    elsewhere = tmp_path / "elsewhere.hdf5"
    elsewhere.write_bytes(body)  # a valid copy, reached through a link
    target.symlink_to(elsewhere)
    record = {"url": url, "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    target.with_name(target.name + ".json").write_text(json.dumps(record))
    with pytest.raises(DownloadError, match=r"symbolic link at .*lm_weights.hdf5; "):
        cached_path(url)  # before: the link was returned as the cached file


@as_root
@pytest.mark.parametrize("what", ["root", "entry folder", "sidecar"])
def test_a_cache_of_another_user_is_refused(what, server):
    url = server.url(WEIGHTS)
    cached_path(url)
    target = cache_location(url)
    owned = {
        "root": target.parents[2],
        "entry folder": target.parent,
        "sidecar": target.with_name(target.name + ".json"),
    }[what]
    os.chown(owned, NOBODY, NOBODY)
    with pytest.raises(DownloadError, match=rf"{owned} belongs to another user \(uid {NOBODY}"):
        cached_path(url)  # before: used (and written to) as if it were the user's
    assert len(server.requests(WEIGHTS)) == 1


def test_the_cache_folders_and_files_are_private(server):
    old = os.umask(0o022)
    try:
        path = cached_path(server.url(WEIGHTS))
    finally:
        os.umask(old)
    for folder in (path.parents[2], path.parents[1], path.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder  # before: 0o755
    for file in path.parent.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file  # before: 0o644


def test_a_url_named_like_the_lock_file_keeps_the_lock(server):
    """Issue 39, point 17: a URL whose file name is `.lock` was cached under that name: the
    finished download was renamed over the entry's lock file while the lock was held (another
    process waiting on it then locked a file nobody held). It is cached as `download`, the lock
    file stays the lock's."""
    server.files["/m/.lock"] = server.files[WEIGHTS]
    url = server.url("/m/.lock")
    path = cached_path(url)
    assert path.name == "download" and path.read_bytes() == server.files[WEIGHTS]
    lock = path.parent / ".lock"
    assert lock.is_file() and lock.stat().st_size == 0  # the lock's, not the body
    assert cached_path(url) == path and len(server.requests("/m/.lock")) == 1
