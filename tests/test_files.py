"""Atomic output files: complete or absent, never half-written."""

import pathlib

import pytest

from elmo_keras.files import atomic_directory, atomic_file, check_output, write_text


def test_atomic_file_replaces_only_on_success(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_file(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]  # no temp file left
    with atomic_file(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new"


def test_atomic_file_overwrite_and_parent_rules(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(FileExistsError, match="already exists; pass `overwrite=True`"):
        with atomic_file(target, overwrite=False):
            pass
    with pytest.raises(FileNotFoundError, match="output folder does not exist"):
        with atomic_file(tmp_path / "missing" / "x.txt", make_parents=False):
            pass
    write_text(tmp_path / "made" / "x.txt", "text")
    assert (tmp_path / "made" / "x.txt").read_text() == "text"


def test_check_output(tmp_path):
    assert check_output(tmp_path / "new") == tmp_path / "new"
    with pytest.raises(FileExistsError):
        check_output(tmp_path)
    assert check_output(tmp_path, overwrite=True) == tmp_path


def test_only_regular_files_are_ever_replaced(tmp_path):
    # Issue 12, D1: `--overwrite` once renamed the output over /dev/null.
    with pytest.raises(ValueError, match="'/dev/null' is not a regular file"):
        with atomic_file("/dev/null", overwrite=True):
            pass
    assert pathlib.Path("/dev/null").is_char_device()
    with pytest.raises(ValueError, match="is a directory; only a regular file is replaced"):
        with atomic_file(tmp_path, overwrite=True):
            pass
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is not a directory"):
        with atomic_directory(tmp_path / "file", overwrite=True):
            pass
    assert (tmp_path / "file").read_text() == "x"
