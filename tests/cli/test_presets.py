"""`elmo-keras presets`, and `--preset` / URLs in `elmo-keras export`'s source arguments."""

import argparse

import pytest

from elmo_keras.cli import CommandError, main
from elmo_keras.cli.export import resolve_source
from elmo_keras.presets import PRESETS
from tests.file_io.test_download import FIXTURES, FileServer, serve_presets


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    server = serve_presets(FileServer(), monkeypatch, tmp_path)
    yield server
    server.stop()


def test_presets_lists_names_sizes_corpus_and_urls(mirror, capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    header, *rows = out.splitlines()[: len(PRESETS) + 1]
    assert header.split()[:6] == ["name", "cell", "proj", "layers", "highway", "params"]
    assert [row.split()[0] for row in rows] == list(PRESETS)
    assert rows[2].split()[:7] == ["original", "4096", "512", "2", "2", "93.6M", "no"]
    assert "1B Word Benchmark" in rows[2] and "WMT 2008-2012" in rows[3]
    assert mirror.url("/elmo/2x1024_128_2048cnn_1xhighway/elmo_2x1024_") in out
    assert "ELMO_KERAS_MIRROR" in out


def test_presets_name_fetches_and_prints_the_two_local_paths(mirror, capsys, tmp_path):
    assert main(["presets", "small"]) == 0
    options, weights = capsys.readouterr().out.splitlines()
    assert options.startswith(str(tmp_path / "cache")) and options.endswith("_options.json")
    assert open(weights, "rb").read() == (FIXTURES / "lm_weights.hdf5").read_bytes()
    assert main(["presets"]) == 0
    small = capsys.readouterr().out.splitlines()[1].split()
    assert small[0] == "small" and small[6] == "yes"  # now cached


def test_presets_errors_are_one_line(mirror, capsys):
    assert main(["presets", "large"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("elmo-keras presets: error: `preset` must be one of")
    mirror.files.clear()  # every download now answers 404
    assert main(["presets", "medium"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "HTTP 404" in err[0] and mirror.url("/elmo/2x2048_256") in err[0]


def _export_args(**given):
    args = {"options": None, "weights": None, "run_dir": None, "preset": None, "model": None}
    return argparse.Namespace(**{**args, **given})


def test_export_sources_take_a_preset_or_urls(mirror):
    assert resolve_source(_export_args(preset="tiny")) == "tiny"  # loaded by `from_preset`
    options, weights = resolve_source(
        _export_args(
            options=mirror.url(
                "/elmo/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_options.json"
            ),
            weights=str(FIXTURES / "lm_weights.hdf5"),
        )
    )
    assert options.read_bytes() == (FIXTURES / "options.json").read_bytes()
    assert weights == str(FIXTURES / "lm_weights.hdf5")
    with pytest.raises(CommandError, match="either --preset or"):
        resolve_source(_export_args(preset="tiny", run_dir="x"))
    with pytest.raises(CommandError, match=r"--preset: `preset` must be one of"):
        resolve_source(_export_args(preset="large"))


def _datasets(path):
    import h5py

    with h5py.File(path) as handle:
        return {name: handle[name][()] for name in handle}


@pytest.mark.parametrize("command", ["embed", "dump-token-embeddings"])
def test_model_takes_a_preset_name_as_preset_does(command, tmp_path, monkeypatch, capsys):
    """`--model tiny` is `--preset tiny` (it was refused as not a folder), run from a folder
    without a `tiny/` in it; a folder named like a preset is `./tiny`."""
    import numpy as np

    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("The bank raised its rates .\nHi\n", encoding="utf-8")
    (tmp_path / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nbank\n", encoding="utf-8")
    given = {"embed": ["--input", "in.txt"], "dump-token-embeddings": ["--vocab", "vocab.txt"]}
    outputs = {}
    for flag in ("--model", "--preset"):
        output = f"{flag[2:]}.hdf5"
        assert main([command, flag, "tiny", *given[command], "--output", output]) == 0, (
            capsys.readouterr().err
        )
        outputs[flag] = _datasets(tmp_path / output)
    assert sorted(outputs["--model"]) == sorted(outputs["--preset"]) != []
    for name, array in outputs["--preset"].items():
        np.testing.assert_array_equal(outputs["--model"][name], array)


def test_evaluate_takes_a_packaged_preset_name(tmp_path, monkeypatch, capsys):
    """`evaluate --model mini_en` (refused as "folder not found" before) scores as the
    packaged folder does; a preset without vocabulary and softmax is one line saying so."""
    from elmo_keras.presets import model_folder

    monkeypatch.chdir(tmp_path)
    (tmp_path / "test.txt").write_text("the bank raised its rates .\n", encoding="utf-8")
    assert main(["evaluate", "--model", "mini_en", "--data", "test.txt"]) == 0
    by_name = capsys.readouterr().out
    folder = str(model_folder("mini_en"))
    assert main(["evaluate", "--model", folder, "--data", "test.txt"]) == 0
    assert by_name == capsys.readouterr().out and "average perplexity" in by_name
    for name, says in (
        ("tiny", "vocab.txt and softmax.hdf5, which this preset does not ship"),
        ("small", "the preset 'small' is published as two files"),
    ):
        assert main(["evaluate", "--model", name, "--data", "test.txt"]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ["beam-embed", "--model", "tiny", "--input", "in.txt", "--output", "out"],
            "export the preset once with `elmo-keras export --preset tiny --format onnx",
        ),
        (
            [
                "embed",
                "--backend",
                "onnx",
                "--model",
                "tiny",
                "--input",
                "in.txt",
                "--output",
                "out.hdf5",
            ],
            "`elmo-keras export --preset tiny --format onnx`",
        ),
        (["export", "--run-dir", "tiny", "--output", "out"], "(for the preset: --preset tiny)"),
    ],
)
def test_a_preset_name_where_a_file_is_needed_says_what_to_give(
    args, says, tmp_path, monkeypatch, capsys
):
    """Where the model must be an ONNX file or a run folder, a preset name gets one line
    naming the command that makes one (or the flag that takes the name)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "in.txt").write_text("Hi\n", encoding="utf-8")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]
