"""`elmo-keras embed`'s output file: problems found before the work, failures while writing
that are one line and leave nothing behind, missing folders made (issues 12 and 39)."""

import pathlib

import h5py
import pytest

from elmo_keras.cli import main
from tests.cli.embed_helpers import SENTENCES, one_error_line, read
from tests.file_io.test_files import _fill_disk_after, mounted_tmpfs


def test_output_problems_are_found_before_the_work(tmp_path, model_args, input_file, capsys):
    # Issue 12, D1 and D11: a device or a folder is never replaced (a missing folder is made:
    # test_missing_output_folders_are_made_and_removed_on_a_failure).
    for output, message in [
        ("/dev/null", "'/dev/null' is not a regular file"),
        (str(tmp_path), "is a directory; only a regular file is replaced"),
    ]:
        argv = ["embed", *model_args, "--input", str(input_file), "--output", output]
        assert main([*argv, "--overwrite"]) != 0
        assert message in capsys.readouterr().err
    assert pathlib.Path("/dev/null").is_char_device()


# Issue 12: failures while writing are one line and leave nothing behind.


def test_disk_full_while_writing_is_one_line_and_leaves_nothing(
    tmp_path, model_args, input_file, monkeypatch, capsys
):
    # Issue 12, D2: a traceback, then a segfault (exit 139) and 42k lines of stderr.
    out = tmp_path / "out.hdf5"
    out.write_bytes(b"the previous output")
    _fill_disk_after(monkeypatch, 3000)
    argv = ["embed", *model_args, "--input", str(input_file), "--output", str(out)]
    assert main([*argv, "--overwrite"]) == 1
    assert one_error_line(capsys) == (
        f"elmo-keras embed: error: could not write {out}: No space left on device; "
        "nothing was written"
    )
    assert out.read_bytes() == b"the previous output"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.hdf5", "sentences.txt"]


def test_an_hdf5_error_while_writing_is_one_line(
    tmp_path, model_args, input_file, monkeypatch, capsys
):
    def fail(self, name, **kwargs):
        raise RuntimeError("Can't decrement id ref count (file write failed:\n, errno = 5)")

    monkeypatch.setattr(h5py.Group, "create_dataset", fail)
    out = tmp_path / "out.hdf5"
    assert main(["embed", *model_args, "--input", str(input_file), "--output", str(out)]) == 1
    assert one_error_line(capsys) == (
        f"elmo-keras embed: error: could not write {out}: Can't decrement id ref count (file "
        "write failed: , errno = 5); nothing was written"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sentences.txt"]


def test_every_output_problem_is_found_before_the_model_loads(
    tmp_path, model_args, input_file, monkeypatch, capsys, read_only_folder
):
    # Issue 12, D11: a folder, a file as a folder, an unwritable folder, named before any work.
    import elmo_keras.cli.embed

    def no_work(args):
        raise AssertionError("the model was loaded before the output was checked")

    monkeypatch.setattr(elmo_keras.cli.embed, "make_embedder", no_work)
    (tmp_path / "file").write_text("x")
    for output, message in [
        (tmp_path, f"'{tmp_path}' is a directory; only a regular file is replaced"),
        (tmp_path / "file" / "out.hdf5", f"cannot create {tmp_path}/file/out.hdf5: {tmp_path}/"),
        (read_only_folder / "out.hdf5", f"cannot write to {read_only_folder} (for "),
    ]:
        argv = ["embed", *model_args, "--input", str(input_file), "--output", str(output)]
        assert main([*argv, "--overwrite"]) == 1
        assert message in one_error_line(capsys)


@pytest.mark.parametrize("command", ["embed", "dump-token-embeddings"])
def test_missing_output_folders_are_made_and_removed_on_a_failure(
    command, tmp_path, model_args, input_file, monkeypatch, capsys
):
    """One rule for every command (issue 39): an output's missing folders are made (embed
    was exit 1 "output folder does not exist"); a run that then fails leaves none behind."""
    (tmp_path / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nbank\n", encoding="utf-8")
    given = {"embed": ["--input", str(input_file)], "dump-token-embeddings": ["--vocab"]}
    given["dump-token-embeddings"].append(str(tmp_path / "vocab.txt"))
    output = tmp_path / "new" / "deeper" / "out.hdf5"
    argv = [command, *model_args, *given[command], "--output", str(output)]
    assert main(argv) == 0, capsys.readouterr().err
    assert read(output)

    import elmo_keras.models

    def broken(*args, **kwargs):
        raise OSError("the model file cannot be read")

    monkeypatch.setattr(elmo_keras.models.BiLM, "from_bilm_tf", broken)
    failed = tmp_path / "other" / "deeper" / "out.hdf5"
    assert main([*argv[:-1], str(failed)]) == 1
    assert "the model file cannot be read" in one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "sentences.txt", "vocab.txt"]


@pytest.fixture
def read_only_folder(tmp_path):
    with mounted_tmpfs(tmp_path / "read-only", "ro,size=64k") as folder:
        yield folder


@pytest.fixture
def small_folder(tmp_path):
    with mounted_tmpfs(tmp_path / "small", "size=8192") as folder:
        yield folder


def test_too_little_space_is_found_before_the_work(
    model_args, input_file, monkeypatch, capsys, small_folder
):
    folder = small_folder
    import elmo_keras.models.bilm_embedder

    def no_work(self, sentences):
        raise AssertionError("the embedding ran although the output cannot fit")

    monkeypatch.setattr(elmo_keras.models.bilm_embedder.BiLMEmbedder, "embed_batch", no_work)
    out = folder / "out.hdf5"
    assert main(["embed", *model_args, "--input", str(input_file), "--output", str(out)]) == 1
    tokens = sum(len(s.split()) for s in SENTENCES)
    needed = 4 * 3 * 32 * tokens  # float32, 3 layers, 32 features
    assert one_error_line(capsys) == (
        f"elmo-keras embed: error: not enough free space for {out}: the embeddings need "
        f"{needed / 1e3:.1f} kB, 4.1 kB are free"  # the lock file takes a page
    )
    assert list(folder.iterdir()) == []
