"""`elmo-keras beam-embed` on the multi-processing DirectRunner: one record per line, equal to
`elmo-keras embed` on each file; the reader, the hdf5 converter and the command's errors."""

import collections
import os
import textwrap

import h5py
import numpy as np
import pytest

pytest.importorskip(
    "apache_beam", reason='apache-beam is not installed: pip install "elmo-keras[beam]"'
)

from elmo_keras.beam import read_embeddings, to_hdf5  # noqa: E402
from elmo_keras.cli import main  # noqa: E402
from elmo_keras.cli._common import read_sentences  # noqa: E402
from elmo_keras.file_io.output_access import current_umask  # noqa: E402
from tests.file_io.test_output_access import start_writer  # noqa: E402
from tests.fresh_interpreter import run_script

TWO_WORKERS = ["--direct_num_workers=2", "--direct_running_mode=multi_processing"]


@pytest.fixture(scope="session")
def beam_output(onnx_model, corpus, tmp_path_factory):
    """The corpus embedded by two worker processes; returns the shards' prefix (in a folder
    that did not exist: beam-embed makes it, as every command makes its output's folders)."""
    prefix = tmp_path_factory.mktemp("beam_out") / "made" / "embeddings"
    argv = ["beam-embed", "--model", str(onnx_model), "--input", str(corpus / "*.txt")]
    argv += ["--output", str(prefix), "--batch-size", "2", "--max-batch-tokens", "12"]
    assert main([*argv, "--", *TWO_WORKERS]) == 0
    return prefix


def test_every_line_has_exactly_one_record(beam_output, corpus, capsys):
    records = list(read_embeddings(f"{beam_output}-*").as_numpy_iterator())
    keys = collections.Counter((r["source"].decode(), int(r["line"])) for r in records)
    expected = {
        (str(path), line): tokens
        for path in corpus.iterdir()
        for line, tokens in enumerate(read_sentences(path))
    }
    assert set(keys) == set(expected) and max(keys.values()) == 1
    for record in records:
        tokens = expected[record["source"].decode(), int(record["line"])]
        assert [t.decode() for t in record["tokens"]] == tokens
        assert record["embeddings"].shape == (3, len(tokens), 32)
        assert record["embeddings"].dtype == np.float32
    assert any(not tokens for tokens in expected.values())  # empty lines are there too


def test_each_file_equals_elmo_keras_embed(beam_output, corpus, allennlp_fixture, tmp_path):
    for path in sorted(corpus.iterdir()):
        reference, converted = tmp_path / f"{path.stem}.embed.h5", tmp_path / f"{path.stem}.h5"
        argv = ["embed", "--model", str(allennlp_fixture), "--input", str(path)]
        assert main([*argv, "--output", str(reference)]) == 0  # the Keras backend
        n_lines = to_hdf5(f"{beam_output}-*", str(path), converted)
        with h5py.File(reference, "r") as want, h5py.File(converted, "r") as got:
            assert sorted(got) == sorted(want) and len(want) == n_lines
            for name in want:
                assert got[name].dtype == np.float32 and got[name].shape == want[name].shape
                np.testing.assert_allclose(got[name][()], want[name][()], atol=1e-5)


def test_to_hdf5_errors(beam_output, tmp_path):
    with pytest.raises(ValueError, match="no records for `source`='nope.txt'.*sources found"):
        to_hdf5(f"{beam_output}-*", "nope.txt", tmp_path / "x.h5")
    assert not (tmp_path / "x.h5").exists()
    with pytest.raises(ValueError, match="`file_pattern` matched no files"):
        read_embeddings(str(tmp_path / "none-*"))


def test_command_errors_are_one_line(onnx_model, corpus, beam_output, tmp_path, capsys):
    base = ["beam-embed", "--model", str(onnx_model), "--input", str(corpus / "*.txt")]
    cases = [
        ([*base, "--output", str(beam_output)], "output shard(s)"),
        ([*base, "--output", str(tmp_path / "o"), "--batch-size", "0"], "--batch-size must be"),
        ([*base, "--output", str(tmp_path / "o"), "--", "stray"], "Received: stray"),
        (
            ["beam-embed", "--model", str(tmp_path / "m.onnx"), "--input", "x", "--output", "o"],
            "--model not found",
        ),
        ([*base[:3], "--input", str(tmp_path / "*.txt"), "--output", "o"], "matched no files"),
        ([*base[:3], "--input", "-", "--output", "o"], "use `elmo-keras embed --input -`"),
    ]
    for argv, message in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("elmo-keras beam-embed: error:") and message in err, err
        assert "\n" not in err


def test_overwrite_deletes_the_old_shards_only(onnx_model, corpus, tmp_path, capsys):
    prefix = tmp_path / "emb"
    stale, unrelated = tmp_path / "emb-00003-of-00009", tmp_path / "emb-notes.txt"
    stale.write_bytes(b"stale")
    unrelated.write_text("keep me")
    argv = ["beam-embed", "--model", str(onnx_model), "--input", str(corpus / "short.txt")]
    # A Beam option may also come without `--`: the command passes on what it does not know.
    argv += ["--direct_num_workers=1", "--output", str(prefix), "--num-shards", "1"]
    assert main([*argv, "--overwrite"]) == 0
    assert "wrote 5 lines (5 tokens)" in capsys.readouterr().out
    assert not stale.exists() and unrelated.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.glob("emb-*-of-*")) == ["emb-00000-of-00001"]
    assert len(list(read_embeddings(f"{prefix}-*-of-*"))) == 5


def test_beam_options_pass_in_both_forms(onnx_model, corpus, tmp_path, monkeypatch, capsys):
    import apache_beam

    given = {}

    def pipeline(options):  # Beam's parse of what the command passed; no pipeline runs
        given.update(options.get_all_options())
        raise KeyboardInterrupt

    monkeypatch.setattr(apache_beam, "Pipeline", pipeline)
    argv = ["beam-embed", "--model", str(onnx_model), "--direct_num_workers", "2"]
    argv += ["--input", str(corpus / "*.txt"), "--direct_running_mode", "multi_processing"]
    argv += ["--output", str(tmp_path / "o"), "--", "--job_name=space-and-equals"]
    assert main(argv) == 130
    assert capsys.readouterr().err == "elmo-keras beam-embed: interrupted\n"
    assert given["direct_num_workers"] == 2
    assert given["direct_running_mode"] == "multi_processing"
    assert given["job_name"] == "space-and-equals"


def test_other_commands_reject_unknown_flags(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["presets", "--direct_num_workers=2"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --direct_num_workers=2" in capsys.readouterr().err


def test_without_apache_beam_the_command_names_the_extra(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        sys.modules["apache_beam"] = None  # as if it were not installed
        from elmo_keras.cli import main
        sys.exit(main(["beam-embed", "--model", "m.onnx", "--input", "x", "--output", "o"]))
        """
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    result = run_script(script, cwd=tmp_path, timeout=60, env=env, returncode=2)
    assert result.stderr.strip().splitlines() == [
        'elmo-keras beam-embed: error: apache-beam is not installed: pip install "elmo-keras[beam]"'
    ]


def test_a_failed_overwrite_keeps_the_old_output_and_leaves_nothing(
    onnx_model, corpus, tmp_path, capsys
):
    """Issue 30, point 1: `--overwrite` deleted every `emb-*-of-*` match (here the user's
    `emb-summary-of-results.txt`) before the run, then a bad model lost the old shards and
    left an empty `beam-temp-emb-*` folder."""
    out, bad = tmp_path / "out", tmp_path / "bad.onnx"
    out.mkdir()
    bad.write_bytes(b"not an ONNX model")
    argv = ["beam-embed", "--input", str(corpus / "short.txt"), "--output", str(out / "emb")]
    argv += ["--num-shards", "2", "--direct_num_workers=1"]
    assert main([*argv, "--model", str(onnx_model)]) == 0
    (out / "emb-summary-of-results.txt").write_text("the user's own file")
    before = _contents(out)
    capsys.readouterr()
    assert main([*argv, "--model", str(bad), "--overwrite"]) == 1
    assert _contents(out) == before  # the old code: shards and summary gone, beam-temp-emb-*
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "is left as it was" in err, err
    # A good run replaces its own shards (two by one) and nothing else.
    argv[argv.index("2")] = "1"
    assert main([*argv, "--model", str(onnx_model), "--overwrite"]) == 0
    names = sorted(path.name for path in out.iterdir())
    assert names == ["emb-00000-of-00001", "emb-summary-of-results.txt"]
    mode = (out / "emb-00000-of-00001").stat().st_mode & 0o777  # as the umask allows
    assert mode == 0o666 & ~current_umask()


def test_a_second_run_to_one_output_ends_with_one_line(onnx_model, corpus, tmp_path, capsys):
    """Two runs to one prefix ran side by side (both wrote, the shards mixed); now the second
    ends before its pipeline, naming the run that holds the output."""
    prefix = tmp_path / "emb"
    first = start_writer(prefix, tmp_path / "marker")  # holds the output's lock while it writes
    try:
        argv = ["beam-embed", "--model", str(onnx_model), "--input", str(corpus / "short.txt")]
        assert main([*argv, "--output", str(prefix), "--direct_num_workers=1"]) == 1
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert f"{prefix} is being written by another run (process {first.pid} on " in line
        first.finish()
    finally:
        first.kill()
        first.wait(timeout=60)
    assert not list(tmp_path.glob("emb-*"))


def _contents(folder):
    return {p.name: p.read_bytes() if p.is_file() else "a folder" for p in folder.iterdir()}
