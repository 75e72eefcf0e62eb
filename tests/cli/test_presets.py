"""`elmo-keras presets`, and `--preset` / URLs in `elmo-keras export`'s source arguments."""

import argparse

import pytest

from elmo_keras.cli import CommandError, main
from elmo_keras.cli.export import resolve_source
from elmo_keras.presets import PRESETS
from tests.test_download import FIXTURES, FileServer, serve_presets


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
    args = {"options": None, "weights": None, "run_dir": None, "preset": None}
    return argparse.Namespace(**{**args, **given})


def test_export_sources_take_a_preset_or_urls(mirror):
    assert resolve_source(_export_args(preset="tiny"))[1].name == "lm_weights.hdf5"
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
