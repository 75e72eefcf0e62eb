"""Atomic output files: complete or absent, never half-written."""

import pytest

from elmo_keras.files import atomic_file, check_output, write_text


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
