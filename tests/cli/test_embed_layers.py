"""`elmo-keras embed --layers all|top|average` and `--sentence-index` (AllenNLP's `elmo`
command's output formats and `sentence_to_index` dataset); references: the `--layers all`
output, NumPy float64."""

import json

import h5py
import numpy as np
import pytest

from elmo_keras.cli import main

SENTENCES = ["The bank raised its rates .", "", "Hello  world", "The bank raised its rates ."]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, allennlp_fixture):
    """The three formats of one input (`--sentence-index` with `average`), each run once."""
    folder = tmp_path_factory.mktemp("layers")
    source = folder / "in.txt"
    source.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    model = ["--options", str(allennlp_fixture / "options.json")]
    model += ["--weights", str(allennlp_fixture / "lm_weights.hdf5")]
    results = {}
    for layers, extra in (("all", []), ("top", []), ("average", ["--sentence-index"])):
        out = folder / f"{layers}.hdf5"
        argv = ["embed", *model, "--input", str(source), "--output", str(out)]
        assert main([*argv, "--layers", layers, *extra]) == 0
        with h5py.File(out, "r") as f:
            results[layers] = {k: f[k][...] for k in f}
    return results


def test_top_and_average_are_the_layers_of_all(outputs):
    every, top, average = outputs["all"], outputs["top"], dict(outputs["average"])
    average.pop("sentence_to_index")
    assert sorted(every, key=int) == sorted(top, key=int) == ["0", "1", "2", "3"]
    for key, layers in every.items():
        assert layers.shape[0] == 3 and top[key].shape == layers.shape[1:]
        np.testing.assert_array_equal(top[key], layers[-1])
        want = layers.astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(average[key], want, atol=1e-6, rtol=0)
        assert average[key].dtype == np.float32


def test_sentence_index_maps_each_sentence_to_its_dataset(outputs):
    index = json.loads(outputs["average"]["sentence_to_index"][0])
    # AllenNLP's mapping: text -> key; a repeated sentence keeps its last line.
    assert index == {"The bank raised its rates .": "3", "": "1", "Hello world": "2"}
    assert "sentence_to_index" not in outputs["all"]  # off by default: names are line numbers
